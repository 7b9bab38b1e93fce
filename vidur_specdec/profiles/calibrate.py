"""``python -m vidur_specdec.profiles calibrate [--shared DIR] [--write] [--per-op]``: fit, write, report.

With ``--write`` the builder's parameters are fitted
(:func:`vidur_specdec.costs.profiles.calibrate.fit`) and written into
``params.py``'s generated block (:mod:`vidur_specdec.costs.profiles.params_block`);
then, always, the error report of the parameters in force
(:mod:`vidur_specdec.costs.profiles.calibration_report`) is returned for printing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

from vidur_specdec.costs.profiles import params as P
from vidur_specdec.costs.profiles.calibrate import PARAMS_FILE, fit, load_measured
from vidur_specdec.costs.profiles.calibration_report import error_table, format_report, layer_table
from vidur_specdec.costs.profiles.params_block import render_block, write_params


def run(shared: Optional[Path] = None, write: bool = False, per_op: bool = False) -> str:
    """The ``calibrate`` command: optionally fit and write, then return the printed report."""
    measured = load_measured(shared)
    eff = P.EFFICIENCY
    head = []
    if write:
        eff, rows = fit(measured)
        write_params(render_block(eff, rows, measured["fit"].files))
        head.append(f"wrote fitted parameters to {PARAMS_FILE}; "
                    "regenerate the shipped profiles with `python -m vidur_specdec.profiles build-shipped`")
        P.EFFICIENCY = eff  # the report below (and a build in the same process) uses the new values
    report = format_report(error_table(measured, eff, per_op=per_op), layer_table(measured, eff))
    return "\n".join(head + [report])
