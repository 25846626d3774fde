"""Each collective one rank ran: its NCCL (or RCCL, MSCCL, ...) kernel, and what it was.

The kernel's name says the operation (``hardware.collective_names``); torch.profiler's record of the call
(``record_param_comms``: ``collective_args``) says its dtype, message sizes, process group and sequence
number, carried by the kernel itself in newer torch, else by the record_param_comms range that covers the
kernel's launch on its thread. What neither says (sizes in an nsys export, a group in an old trace) stays
unknown, and the bandwidth with it: never guessed.

Bytes are nccl-tests' "size" of the operation: the buffer every rank sends or receives in full: an
all-reduce's, a broadcast's or a reduce's message; an all-gather's output (every rank's part); a
reduce-scatter's or an all-to-all's input.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from tracekit.analysis.hardware.collective_names import DTYPE_BYTES, collective_kernels
from tracekit.analysis.primitives.covering import covering_range
from tracekit.analysis.primitives.joins import op_launches
from tracekit.model.derived import per_trace
from tracekit.model.trace import Trace

# torch's dtype names (c10::toString, as record_param_comms writes them) as collective_names' dtypes
TORCH_DTYPES = {
    "Float": "float32",
    "Double": "float64",
    "Half": "float16",
    "BFloat16": "bfloat16",
    "Byte": "uint8",
    "Char": "int8",
    "Int": "int32",
    "Long": "int64",
    "Bool": "uint8",
    "Float8_e4m3fn": "float8_e4m3",
    "Float8_e5m2": "float8_e5m2",
}
# which message is the operation's size (nccl-tests): the output for gathers, else the input
# what each kernel takes of torch's record (collective_args' columns)
TEXTS = ("collective", "dtype", "group_name", "group_ranks", "in_split")
NUMBERS = ("in_elements", "out_elements", "group_size", "seq")
OUTPUT_SIZED = {"allgather", "all_gather", "_allgather_base", "allgather_into_tensor_coalesced", "AllGather"}


@per_trace
def collective_instances(trace: Trace) -> pd.DataFrame:
    """One row per collective kernel (``gpu_ops`` order): op (its row), start, duration (ns), device, stream,
    operation (from the name, else torch's record), dtype, bytes (-1 unknown), group (name), ranks (group
    size, -1 unknown), group_ranks (text), seq (-1), sizes (where torch's record came from: "kernel",
    "record_param_comms", "nccl range" (the call's name alone, no sizes) or "" none), and torch's record as written: recorded (its collective name),
    in_elements (-1) and in_split (its input split sizes, text)."""
    ops = trace.gpu_ops
    names = collective_kernels(ops["name"])
    # the categorical compared by its codes, not a million names turned to text
    rows = np.flatnonzero((ops["kind"] == "kernel").to_numpy() & (names["library"] != "").to_numpy())
    args = _args_of(trace, rows)
    operation = names["operation"].iloc[rows].astype(object).to_numpy()  # (the rows first: a few of a million)
    recorded = args["collective"].to_numpy(object)
    operation = np.where(pd.isna(operation), recorded, operation)
    # per row by mapping (a few distinct values), not a Python loop over the collectives
    dtype = pd.Series(args["dtype"].to_numpy(object)).map(TORCH_DTYPES).to_numpy(object)
    dtype = np.where(pd.isna(dtype), names["dtype"].iloc[rows].astype(object).to_numpy(), dtype)
    size = pd.Series(dtype).map(DTYPE_BYTES).fillna(0).to_numpy(np.int64)
    gathers = pd.Series(recorded).isin(OUTPUT_SIZED).to_numpy() | (operation == "AllGather")
    elements = np.where(gathers, args["out_elements"].to_numpy(), args["in_elements"].to_numpy())
    # a count whose bytes pass int64 is no real message (and would wrap): unknown
    known = (elements >= 0) & (size > 0) & (elements <= np.iinfo(np.int64).max // np.maximum(size, 1))
    return pd.DataFrame(
        {
            "op": rows,
            "start": ops["start"].to_numpy()[rows],
            "duration": ops["duration"].to_numpy()[rows],
            "device": ops["device"].to_numpy()[rows],
            "stream": ops["stream"].to_numpy()[rows],
            "operation": pd.Series(operation, dtype=object),
            "dtype": pd.Series(dtype, dtype=object),
            "bytes": np.where(known, elements * size, -1),
            "group": args["group_name"].to_numpy(object),
            "ranks": args["group_size"].to_numpy(),
            "group_ranks": args["group_ranks"].to_numpy(object),
            "seq": args["seq"].to_numpy(),
            "recorded": args["collective"].to_numpy(object),
            "in_elements": args["in_elements"].to_numpy(),
            "in_split": args["in_split"].to_numpy(object),
            "sizes": args["source"].to_numpy(object),
        }
    )


def _args_of(trace: Trace, rows: np.ndarray) -> pd.DataFrame:
    """torch.profiler's record of each collective kernel at ``rows``: its own args where it carries them,
    else those of the record_param_comms range covering its launch on the launching thread, else the name of the
    "nccl:" range covering it (source "nccl range": the call's name, no sizes)."""
    found = pd.DataFrame(
        {
            **{name: np.full(len(rows), None, dtype=object) for name in TEXTS},
            **{name: np.full(len(rows), -1, dtype=np.int64) for name in NUMBERS},
            "source": np.full(len(rows), "", dtype=object),
        }
    )
    if not len(rows):
        return found
    if len(trace.ranges):  # the "nccl:" range around the launch names the call (no sizes)
        found["collective"] = _nccl_ranges(trace, rows)
        found.loc[pd.notna(found["collective"]).to_numpy(), "source"] = "nccl range"
    table = trace.optional("collective_args")
    if table is None or table.empty:
        return found
    calls = table.loc[(table["collective"].astype(str) != "wait").to_numpy()]  # a wait on work moves nothing
    on_kernel = calls.loc[(calls["source"] == "gpu_op").to_numpy()].drop_duplicates("row").set_index("row")
    at = on_kernel.index.get_indexer(rows)
    _fill(found, on_kernel, at, "kernel")
    ranges = calls.loc[(calls["source"] == "range").to_numpy()].drop_duplicates("row").set_index("row")
    missing = np.flatnonzero(at < 0)
    if len(ranges) and len(missing):
        ids = trace.ranges["range_id"].to_numpy()
        covering = _covering_rows(trace, rows[missing], np.isin(ids, ranges.index.to_numpy()))
        position = np.full(len(rows), -1, dtype=np.int64)
        position[missing] = ranges.index.get_indexer(np.where(covering >= 0, ids[np.maximum(covering, 0)], -1))
        _fill(found, ranges, position, "record_param_comms")
    return found


def _fill(found: pd.DataFrame, records: pd.DataFrame, at: np.ndarray, source: str) -> None:
    """Copy the records at ``at`` (-1: none) into ``found``, in place."""
    have = at >= 0
    if not have.any():
        return
    picked = records.iloc[at[have]]
    for name in TEXTS:
        found.loc[have, name] = picked[name].astype(object).to_numpy()
    for name in NUMBERS:
        found.loc[have, name] = picked[name].to_numpy()
    found.loc[have, "source"] = source


def _covering_rows(trace: Trace, op_rows: np.ndarray, eligible: np.ndarray) -> np.ndarray:
    """Per GPU op, the row in ``trace.ranges`` of the innermost ``eligible`` range covering its launch call on
    its thread (-1: none, or no launch recorded)."""
    launches = op_launches(trace)
    result = np.full(len(op_rows), -1, dtype=np.int64)
    launched = launches.found[op_rows]
    if not launched.any() or not eligible.any():
        return result
    calls = trace.launches
    call_rows = launches.row[op_rows[launched]]
    pick = lambda column: calls[column].to_numpy()[call_rows]
    result[launched] = covering_range(trace.ranges, pick("pid"), pick("tid"), pick("start"), pick("end"), eligible)
    return result


def _nccl_ranges(trace: Trace, rows: np.ndarray) -> np.ndarray:
    """Per collective kernel: the collective torch named in the "nccl:<name>" range around its launch (emit_nvtx
    and record_function write ``nccl:all_to_all, op_id = 12``), or None."""
    names = trace.ranges["name"]
    categories = np.asarray([str(name) for name in names.cat.categories], dtype=object)
    collective = np.asarray(
        [text[5:].split(",")[0].strip() if text.startswith("nccl:") else "" for text in categories], dtype=object
    )
    codes = names.cat.codes.to_numpy()
    named = np.append(collective, "")[codes]  # code -1 (no name): ""
    eligible = (named != "") & (trace.ranges["domain"].astype(str).to_numpy() != "gpu")
    found = _covering_rows(trace, rows, eligible)
    return np.where(found >= 0, named[np.maximum(found, 0)], np.full(len(found), None, dtype=object))
