"""A Result as plain rows, for tests that check numbers through the Python API: each table's rows as
dicts of Python values (pandas boxes numpy scalars), and the notes as one text."""

from __future__ import annotations

from typing import Any

import pandas as pd


def records(result: Any, name: str | None = None) -> list[dict]:
    """The rows of table ``name`` (default: the first) as dicts of Python values, a missing value (NaN,
    NA) as None: what the command line's JSON holds, so rows compare with ``==``."""
    frame = result.frame if name is None else result[name]
    rows = frame.to_dict("records")
    for row in rows:
        for key, value in row.items():
            if value is pd.NA or (isinstance(value, float) and value != value):  # NA, NaN
                row[key] = None
    return rows


def said(result: Any) -> str:
    """Every note of ``result``, one per line (what the command line prints as "note: ..." lines)."""
    return "\n".join(result.notes)
