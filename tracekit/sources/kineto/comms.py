"""torch.profiler's record of each collective: the args ``record_param_comms`` (and, in newer torch, the
NCCL kernels themselves) carry: its name, dtype, message sizes, process group and sequence number.

Few events carry them, so they are kept sparse: per chunk, the positions of the events that have a
"Collective name" and their values (texts as codes into the chunk's text vocabulary, which ``EventColumns``
merges across chunks and worker processes as it does recorded shapes).
"""

from __future__ import annotations

from typing import Any

import msgspec
import numpy as np

# (column, the arg's name in the trace); texts first, then numbers (-1: not recorded)
TEXT_FIELDS = (
    ("comm_name", "Collective name"),
    ("comm_dtype", "dtype"),
    ("comm_in_split", "In split size"),
    ("comm_out_split", "Out split size"),
    ("comm_group_name", "Process Group Name"),
    ("comm_group_desc", "Process Group Description"),
    ("comm_group_ranks", "Process Group Ranks"),
)
NUMBER_FIELDS = (
    ("comm_in_elements", "In msg nelems"),
    ("comm_out_elements", "Out msg nelems"),
    ("comm_group_size", "Group size"),
    ("comm_rank", "Rank"),
    ("comm_src_rank", "Src Rank"),
    ("comm_dst_rank", "Dst Rank"),
    ("comm_seq", "Seq"),
)
TEXT_COLUMNS = tuple(column for column, _ in TEXT_FIELDS)
NUMBER_COLUMNS = tuple(column for column, _ in NUMBER_FIELDS)
SPARSE = "comm_at"  # the positions, in its chunk, of each event that describes a collective
SPARSE_COLUMNS = (SPARSE, *TEXT_COLUMNS, *NUMBER_COLUMNS)
# COLLECTIVE_ARGS's columns, in the order of the fields above
TEXT_NAMES = ("collective", "dtype", "in_split", "out_split", "group_name", "group_desc", "group_ranks")
NUMBER_NAMES = ("in_elements", "out_elements", "group_size", "rank", "src_rank", "dst_rank", "seq")


# ``Args``'s fields, in the order of TEXT_FIELDS and NUMBER_FIELDS
ATTRIBUTES = TEXT_COLUMNS
NUMBERS = NUMBER_COLUMNS


def add_comms(out: dict, described: list[tuple[int, Any]], codes, to_ints) -> None:
    """Append one chunk's collectives (``described``: position in the chunk's kept rows, args) to ``out``;
    ``codes(texts)`` turns texts into vocabulary codes, ``to_ints(values, missing)`` numbers into int64."""
    out[SPARSE].append(np.asarray([at for at, _ in described], dtype=np.int64))
    for (column, _), attribute in zip(TEXT_FIELDS, ATTRIBUTES):
        out[column].append(codes([_text(getattr(args, attribute)) for _, args in described]))
    for (column, _), attribute in zip(NUMBER_FIELDS, NUMBERS):
        values = [_number(getattr(args, attribute)) for _, args in described]
        out[column].append(to_ints(values, -1) if values else np.zeros(0, dtype=np.int64))


def _text(value) -> str:
    """A text as written; a list or number as its JSON text ("[0, 1]"); absent as ""."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return msgspec.json.encode(value).decode()


def _number(value):
    return None if isinstance(value, (list, dict)) else value


def collective_frame(parts: list[tuple[str, dict[str, np.ndarray], np.ndarray | None]], texts: list[str]):
    """The collective_args table (``schema.COLLECTIVE_ARGS``) of the sources' sparse columns: per source
    ("range", "gpu_op") its ``sparse`` columns and, for GPU ops, the new row of each row (-1: left out)."""
    import pandas as pd

    frames = []
    vocabulary = np.asarray(texts, dtype=object)
    for source, sparse, new_rows in parts:
        rows = sparse[SPARSE]
        keep = np.ones(len(rows), dtype=bool) if new_rows is None else new_rows[rows] >= 0
        frames.append(
            pd.DataFrame(
                {
                    "source": pd.Categorical([source] * int(keep.sum()), categories=["range", "gpu_op"]),
                    "row": (rows if new_rows is None else new_rows[rows])[keep].astype(np.int64),
                    **{name: vocabulary[sparse[column][keep]] for name, column in zip(TEXT_NAMES, TEXT_COLUMNS)},
                    **{
                        name: sparse[column][keep].astype(np.int64)
                        for name, column in zip(NUMBER_NAMES, NUMBER_COLUMNS)
                    },
                }
            )
        )
    frame = pd.concat(frames, ignore_index=True)
    for name in TEXT_NAMES:  # few distinct texts: categories, one vocabulary across the sources
        frame[name] = pd.Categorical(frame[name].to_numpy(object))
    return frame
