"""``python -m vidur_specdec {run, sweep, report, tune, profiles, validate} ...``: see :mod:`vidur_specdec.cli`."""

from vidur_specdec.cli import entry

if __name__ == "__main__":
    entry()
