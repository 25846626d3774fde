"""Sequences of names told apart without a Python loop per sequence: a trace holds hundreds of thousands.

``fixed_keys``: windows of one length (rows of codes), an exact integer key each. ``group_sequences``:
groups of any length (an operator's kernels), two 64-bit polynomial hashes of their codes and their
length; each distinct sequence's text is written once.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd


def fixed_keys(windows: np.ndarray, distinct: int) -> tuple[np.ndarray, np.ndarray]:
    """Per row of ``windows`` (codes 0..``distinct``-1, one column per position): its sequence id, and
    per id the row of its first window. Exact: the codes as digits of one int64 when they fit, else
    rows compared whole."""
    count, length = windows.shape
    if not count:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    if length * np.log2(max(distinct, 2)) < 62:
        key = np.zeros(count, dtype=np.int64)
        for column in range(length):
            key = key * max(distinct, 1) + windows[:, column].astype(np.int64)
        ids, _ = pd.factorize(key)
    else:
        _, ids = np.unique(windows, axis=0, return_inverse=True)
        ids = pd.factorize(ids.ravel())[0]  # numbered in order of first appearance, as factorize does
    first = np.full(int(ids.max()) + 1, count, dtype=np.int64)
    np.minimum.at(first, ids, np.arange(count))
    return ids.astype(np.int64), first


def group_sequences(
    group: np.ndarray, codes: np.ndarray, names: Sequence[str], separator: str = " -> "
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Groups of items (``group``: each item's group, items of a group in the order given, groups in any
    order; ``codes``: each item's name in ``names``). Returns the groups (ascending), each group's
    sequence id, and per sequence id its text (names joined by ``separator``)."""
    if not len(group):
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), np.zeros(0, dtype=object)
    order = np.argsort(group, kind="stable")  # each group's items together, in the order given
    rows, values = group[order], codes[order].astype(np.uint64) + np.uint64(1)
    first = np.flatnonzero(np.concatenate([[True], rows[1:] != rows[:-1]]))
    lengths = np.diff(np.append(first, len(rows)))
    position = np.arange(len(rows)) - np.repeat(first, lengths)
    hashes = []
    with np.errstate(over="ignore"):
        for base in (np.uint64(1_000_003), np.uint64(0x9E3779B97F4A7C15)):
            powers = np.empty(int(position.max()) + 1, dtype=np.uint64)  # base^k modulo 2^64
            powers[0] = np.uint64(1)
            powers[1:] = np.cumprod(np.full(len(powers) - 1, base, dtype=np.uint64))
            hashes.append(np.add.reduceat(values * powers[position], first))
    sequence_id, distinct = pd.factorize(pd.MultiIndex.from_arrays([lengths, hashes[0], hashes[1]]))
    texts = np.empty(len(distinct), dtype=object)
    example = np.zeros(len(distinct), dtype=np.int64)
    example[sequence_id[::-1]] = np.arange(len(first))[::-1]  # the first group of each sequence
    sorted_codes = codes[order]
    for index, instance in enumerate(example.tolist()):
        low = first[instance]
        texts[index] = separator.join(str(names[code]) for code in sorted_codes[low : low + lengths[instance]])
    return rows[first], sequence_id.astype(np.int64), texts
