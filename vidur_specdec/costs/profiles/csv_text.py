"""Built profile tables as CSV text, byte for byte what pandas writes (:func:`to_csv_text`)."""

from __future__ import annotations

import pandas as pd

from vidur_specdec.costs.profiles import params as P


def to_csv_text(df: pd.DataFrame) -> str:
    """Deterministic CSV text: fixed decimals, empty cells for NaN, '\\n' line ends.

    The text pandas' ``to_csv(index=False, float_format="%.6f", lineterminator="\\n")`` writes, formatted here
    column by column (a built profile has tens of thousands of rows; pandas formats each float through its own
    per-value checks, about three times slower): floats with the same ``%`` format, NaN as an empty cell,
    integers and booleans as ``str`` does. A table this does not cover (a text cell or name that CSV would
    quote, another column type) is written by pandas itself."""
    fmt = f"%.{P.TIME_DECIMALS}f"
    cols = []
    for name in df.columns:
        v = df[name]
        kind = v.dtype.kind
        if kind == "f":
            cols.append([fmt % x if x == x else "" for x in v.tolist()])
        elif kind in "iub":
            cols.append([str(x) for x in v.tolist()])
        elif kind == "O" and all(type(x) is str and not _QUOTED.intersection(x) for x in v.tolist()):
            cols.append(v.tolist())
        else:
            return df.to_csv(index=False, float_format=fmt, lineterminator="\n")
    names = [str(c) for c in df.columns]
    if any(_QUOTED.intersection(c) for c in names):
        return df.to_csv(index=False, float_format=fmt, lineterminator="\n")
    return ",".join(names) + "\n" + "".join([",".join(row) + "\n" for row in zip(*cols)])


_QUOTED = frozenset(',"\n\r')  # characters that make CSV quote a cell
