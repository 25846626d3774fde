"""nsys's string ids (``StringIds``: kernel, API and range names) looked up for the ids a table uses.

Exports intern every name once and refer to it by id from millions of rows; these helpers find the
distinct ids in use, their positions, and fetch only those strings. An id resolves to nothing when it is
negative (none, or an unusable value its reader read as -1) or when StringIds has no such id (a damaged
or hand-edited export); every reader names such rows by its own "unreadable" label and counts them
(``resolve_ids``, ``categorical_from_ids``), however many rows, up to all of them, have one.
"""

from __future__ import annotations

from contextlib import closing
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from tracekit.sources.nsys.sqlite_columns import connect_readonly

if TYPE_CHECKING:
    import pandas as pd

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


def resolve_ids(ids: np.ndarray, strings: dict[int, str]) -> tuple[np.ndarray, list[str]]:
    """Each row's position in the returned texts (those of the distinct ids ``strings`` holds, in id
    order), or -1 where its id resolves to nothing: negative, or absent from ``strings``. A Python step
    per distinct id, none per row."""
    present = present_ids(ids)
    if not len(present):
        return np.full(len(ids), -1, dtype=np.int64), []
    found = np.fromiter((int(i) in strings for i in present.tolist()), dtype=bool, count=len(present))
    texts = [strings[int(i)] for i in present[found].tolist()]
    position_of_present = np.where(found, np.cumsum(found) - 1, -1)
    positions = index_of_ids(ids, present)
    return np.where(positions >= 0, position_of_present[np.maximum(positions, 0)], -1), texts


def categorical_from_ids(
    ids: np.ndarray,
    strings: dict[int, str],
    unknown: str,
    extra: list[str] | None = None,
    extra_codes: np.ndarray | None = None,
) -> tuple[pd.Categorical, int]:
    """StringIds ids -> a Categorical of their texts, without a Python object per row, and how many rows
    have an id that is not negative yet absent from StringIds (negative ids are their reader's to count:
    it made them, from values it could not use). Every row whose id resolves to nothing reads as
    ``unknown``.

    ``extra`` categories (e.g. memcpy labels) with their own codes are appended after the rows of
    ``ids``, so kernels and other GPU operations share one Categorical without recoding either.
    """
    import pandas as pd

    positions, texts = resolve_ids(ids, strings)
    unresolved = positions < 0
    absent = int(np.count_nonzero(unresolved & (ids >= 0)))
    without = [unknown] if unresolved.any() else []
    # Two ids may hold the same text, and categories must be unique: map ids to text codes.
    value_codes, categories = pd.factorize(pd.Series(texts + without + (extra or []), dtype=object))
    text_codes = value_codes[: len(texts)].astype(np.int32)
    codes = np.full(len(ids), int(value_codes[len(texts)]) if without else -1, dtype=np.int32)
    codes[~unresolved] = text_codes[positions[~unresolved]]
    if extra:
        codes = np.concatenate([codes, value_codes[len(texts) + len(without) :].astype(np.int32)[extra_codes]])
    return pd.Categorical.from_codes(codes, categories=pd.Index(categories, dtype=object)), absent
