"""nsys's string ids (``StringIds``: kernel, API and range names) looked up for the ids a table uses.

Exports intern every name once and refer to it by id from millions of rows; these helpers find the
distinct ids in use, their positions, and fetch only those strings.
"""

from __future__ import annotations

from contextlib import closing
from pathlib import Path

import numpy as np

from tracekit.sources.nsys.sqlite_columns import connect_readonly

# Ids up to this bound are handled with tables indexed by id (fast); beyond it, a hostile or odd export
# could make such a table gigabytes, so sorting takes over.
DENSE_ID_LIMIT = 2**22


def present_ids(*id_arrays: np.ndarray) -> np.ndarray:
    """Distinct non-negative ids used in the arrays, sorted (small ids: a bincount, not a sort)."""
    valid = [ids[ids >= 0] if (ids < 0).any() else ids for ids in id_arrays]
    valid = [ids for ids in valid if len(ids)]
    if not valid:
        return np.zeros(0, dtype=np.int64)
    if max(int(ids.max()) for ids in valid) >= DENSE_ID_LIMIT:
        return np.unique(np.concatenate(valid)).astype(np.int64)
    seen = np.zeros(DENSE_ID_LIMIT, dtype=bool)
    for ids in valid:
        seen[ids] = True
    return np.flatnonzero(seen)


def index_of_ids(ids: np.ndarray, present: np.ndarray) -> np.ndarray:
    """Position in ``present`` (sorted, from ``present_ids``) of each non-negative id; -1 for negative ids.
    A table indexed by id when ids are small, a binary search otherwise."""
    if not len(ids) or not len(present):
        return np.full(len(ids), -1, dtype=np.int64)
    if int(present[-1]) < DENSE_ID_LIMIT:
        table = np.full(int(present[-1]) + 1, -1, dtype=np.int64)
        table[present] = np.arange(len(present))
        positions = table[np.maximum(ids, 0)]
    else:
        positions = np.searchsorted(present, ids)
    return np.where(ids >= 0, positions, -1)


def read_strings(path: str | Path, *id_arrays: np.ndarray) -> dict[int, str]:
    """Look up ``StringIds`` values for the ids used in the arrays (not the whole table)."""
    wanted = present_ids(*id_arrays).tolist()
    strings: dict[int, str] = {}
    with closing(connect_readonly(path)) as connection:
        for start in range(0, len(wanted), 900):  # SQLite caps bound parameters per statement
            batch = wanted[start : start + 900]
            marks = ",".join("?" * len(batch))
            strings.update(
                connection.execute(
                    # CAST: a BLOB reads as text (bytes that are not UTF-8 as U+FFFD), NULL as ""
                    f"SELECT id, ifnull(CAST(value AS TEXT), '') FROM StringIds WHERE id IN ({marks})",
                    batch,
                ).fetchall()
            )
    return strings
