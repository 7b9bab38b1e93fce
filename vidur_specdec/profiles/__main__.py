"""``python -m vidur_specdec.profiles ...``: the same as ``python -m vidur_specdec profiles ...``

(see :mod:`vidur_specdec.profiles.cli`).
"""

import sys
from typing import List, Optional


def main(argv: Optional[List[str]] = None) -> int:
    from vidur_specdec import cli

    return cli.main(["profiles", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    sys.exit(main())
