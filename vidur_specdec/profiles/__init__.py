"""``python -m vidur_specdec.profiles {build, compare, calibrate}``: the profile command.

The builder itself is :mod:`vidur_specdec.costs.profiles`; its public names are
re-exported here so ``from vidur_specdec.profiles import build_profile`` keeps working.
"""

from vidur_specdec.costs.profiles import *  # noqa: F401,F403 (re-exported)
from vidur_specdec.costs.profiles import __all__  # noqa: F401
