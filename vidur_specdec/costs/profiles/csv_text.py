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
    done = {}  # a column's (kind, bytes) -> its cells: a built table repeats columns (min = max = mean = median)
    for name in df.columns:
        v = df[name]
        kind = v.dtype.kind
        if kind in "fiub":
            a = v.to_numpy()
            key = (kind, a.dtype.str, a.tobytes())
            cells = done.get(key)
            if cells is None:
                cells = done[key] = _cells(a, kind, fmt)
            cols.append(cells)
        elif kind == "O" and _plain_text(cells := v.tolist()):
            cols.append(cells)
        else:
            return df.to_csv(index=False, float_format=fmt, lineterminator="\n")
    names = [str(c) for c in df.columns]
    if any(_QUOTED.intersection(c) for c in names):
        return df.to_csv(index=False, float_format=fmt, lineterminator="\n")
    return ",".join(names) + "\n" + "".join(["\n".join(map(",".join, zip(*cols))), "\n" if len(df) else ""])


def _cells(a, kind: str, fmt: str) -> list:
    """One numeric column's cells: floats with ``fmt`` (NaN empty), integers and booleans as ``str`` writes them; a
    column of one value (bit for bit: -0.0 is not 0.0) formatted once."""
    bits = a.view(f"u{a.itemsize}")
    if len(a) and (bits == bits[0]).all():
        x = a[0].item()
        cell = str(x) if kind != "f" else fmt % x if x == x else ""
        return [cell] * len(a)
    if kind == "f":
        return [fmt % x if x == x else "" for x in a.tolist()]
    return list(map(str, a.tolist()))


def _plain_text(cells: list) -> bool:
    """Every cell a string CSV writes unquoted (checked once per distinct value)."""
    try:
        distinct = set(cells)
    except TypeError:  # an unhashable cell: not text
        return False
    return all(type(x) is str and not _QUOTED.intersection(x) for x in distinct)


_QUOTED = frozenset(',"\n\r')  # characters that make CSV quote a cell
