"""``python -m vidur_specdec.profiles ...``: the same as ``python -m vidur_specdec profiles ...``

(see :mod:`vidur_specdec.profiles.cli`).
"""

import sys
from typing import List, Optional
from vidur_specdec import console
from vidur_specdec.profiles import cli


def main(argv: Optional[List[str]] = None) -> int:
    return console.run_subcommand("profiles", cli, argv)


if __name__ == "__main__":
    sys.exit(main())
