"""``python -m vidur_specdec.report A.csv [B.csv ...] -o page.html``: the same as ``python -m vidur_specdec report ...``."""

import sys

from vidur_specdec.report.page import main

if __name__ == "__main__":
    sys.exit(main())
