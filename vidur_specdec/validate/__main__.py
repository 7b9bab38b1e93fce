"""``python -m vidur_specdec.validate``: see :mod:`vidur_specdec.validate.cli`."""

import sys

from vidur_specdec.validate.cli import main

if __name__ == "__main__":
    sys.exit(main())
