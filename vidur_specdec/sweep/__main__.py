"""``python -m vidur_specdec.sweep --config SWEEP.yaml ...``"""

import sys

from vidur_specdec.sweep.cli import _parse, main

sys.exit(main(_parse(None)))
