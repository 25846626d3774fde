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


def value_of_ids(ids: np.ndarray, present: np.ndarray, values: np.ndarray, fill: int) -> np.ndarray:
    """``values[i]`` for each id equal to ``present[i]`` (``present`` sorted, from ``present_ids``, so it
    holds every non-negative id), ``fill`` for negative ids. A table indexed by id when ids are small, a
    binary search otherwise."""
    if not len(ids) or not len(present):
        return np.full(len(ids), fill, dtype=values.dtype)
    if int(present[-1]) < DENSE_ID_LIMIT:
        table = np.full(int(present[-1]) + 1, fill, dtype=values.dtype)
        table[present] = values
        found = table[np.maximum(ids, 0)]
    else:
        found = values[np.minimum(np.searchsorted(present, ids), len(present) - 1)]
    return np.where(ids >= 0, found, fill)


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
    present, found, texts = _found(ids, strings)
    return value_of_ids(ids, present, np.where(found, np.cumsum(found) - 1, -1), -1), texts


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

    present, found, texts = _found(ids, strings)
    missing = not found.all()
    without = [unknown] if missing or (ids < 0).any() else []
    # Two ids may hold the same text, and categories must be unique: map ids to text codes.
    value_codes, categories = pd.factorize(pd.Series(texts + without + (extra or []), dtype=object))
    unknown_code = int(value_codes[len(texts)]) if without else -1
    code_of_present = np.full(len(present), unknown_code, dtype=np.int32)
    code_of_present[found] = value_codes[: len(texts)]
    codes = value_of_ids(ids, present, code_of_present, unknown_code)
    if extra:
        codes = np.concatenate([codes, value_codes[len(texts) + len(without) :].astype(np.int32)[extra_codes]])
    absent = int(np.count_nonzero(np.isin(ids, present[~found]))) if missing else 0  # (damaged files only)
    return pd.Categorical.from_codes(codes, categories=pd.Index(categories, dtype=object)), absent


def _found(ids: np.ndarray, strings: dict[int, str]) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """The distinct non-negative ids (``present_ids``), whether ``strings`` holds each, and the texts of
    those it holds, in id order."""
    present = present_ids(ids)
    found = np.fromiter((int(i) in strings for i in present.tolist()), dtype=bool, count=len(present))
    return present, found, [strings[int(i)] for i in present[found].tolist()]
