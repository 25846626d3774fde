"""The events a critical path is made of, from a trace's tables, as flat arrays (one row per event).

Roles (HolisticTraceAnalysis's, stated for tracekit's tables):
- OPERATOR: a CPU operator. torch.profiler's ``cpu_op`` ranges (not its own annotations "ProfilerStep#5",
  "Optimizer.step#SGD.step", which torch 1.8 files as cpu_op too), and in nsys exports the ranges ``torch.autograd.profiler.emit_nvtx`` writes
  ("aten::mm, seq = 3, op_id = 7"). Graph nodes.
- ANNOTATION: every other CPU-side range (record_function, NVTX ranges): not nodes, but a parent in the
  call stack (an operator's time can be attributed to it).
- CALL: a CUDA runtime or driver call. Graph nodes.
- GPU: a kernel, memcpy or memset. Graph nodes.
- SYNC: the GPU side of a synchronization (``schema.GPU_SYNCS``), joined to its call.
Each GPU op and sync is joined to its call by (process, correlation id): ``partner`` holds the row of
the other side (-1 when the trace lacks it). A call recorded twice with one correlation id (nsys 2022.4
writes a runtime call as cudaX and cudaX_v3020, one inside the other) keeps its outermost row.

``as_hta``: times rounded as HTA 0.5 reads them (each event shrunk inward to whole µs of its float64
timestamp: start ceil(ts), end floor(ts + dur); a sub-µs event can end up with a duration of 0 or
-1 µs), so a result can be compared with HTA's exactly. Otherwise times stay exact ns.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from tracekit.analysis.kernels.types import TYPES, op_types
from tracekit.model.range_specs import EMIT_NVTX_SUFFIX, shown_op_name
from tracekit.model.schema import SYNC_KINDS
from tracekit.model.trace import Trace

OPERATOR, ANNOTATION, CALL, GPU, SYNC = range(5)
RECORDED = re.compile(r"#")
API_VERSION = re.compile(r"_v\d+$")  # nsys names runtime calls with their version: cudaLaunchKernel_v7000
# The calls whose ops join a stream's launch queue (HTA's list, as its queue length counts them).
QUEUED_CALLS = frozenset({
    "cudaLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernel", "cudaMemcpyAsync", "cudaMemsetAsync",
    "runFunction - job_prep_and_submit_for_execution", "hipLaunchKernel", "hipExtModuleLaunchKernel",
    "hipMemcpyAsync", "hipMemsetAsync", "hipMemcpyWithStream",
})  # fmt: skip
# Calls whose own time is waiting on the GPU (HTA's list): the CPU time inside them is not on the path.
BLOCKING_CALLS = frozenset({
    "cudaDeviceSynchronize", "cudaStreamSynchronize", "cudaEventQuery", "cudaEventSynchronize", "cudaMemcpy",
    "cudaMemcpyAsync",
})  # fmt: skip
RECORD_CALL = "cudaEventRecord"


@dataclass
class Events:
    """Every event of a trace as arrays of equal length (``role`` says which fields mean something).

    start/end: ns (end may precede start by under 1 µs with ``as_hta``); name: index into ``names`` (as
    shown: operators without domain or emit_nvtx's suffix, calls without version, kernels by base name);
    pid/tid: CPU side (GPU side: the launching process, tid -1); device/stream: GPU side (-1 on the CPU
    side); partner: row of the other side of a call/GPU op/sync pair, -1 for none; queued: a CALL that
    feeds a stream's launch queue; blocking: a CALL in ``BLOCKING_CALLS``; communication: a GPU op that
    is an NCCL kernel; sync_kind, event_stream, event_correlation: SYNC rows (``schema.GPU_SYNCS``);
    correlation: CALL rows' correlation id."""

    role: np.ndarray
    start: np.ndarray
    end: np.ndarray
    name: np.ndarray
    names: list[str]
    pid: np.ndarray
    tid: np.ndarray
    device: np.ndarray
    stream: np.ndarray
    partner: np.ndarray
    correlation: np.ndarray
    queued: np.ndarray
    blocking: np.ndarray
    communication: np.ndarray
    sync_kind: np.ndarray
    event_stream: np.ndarray
    event_correlation: np.ndarray
    record_call: np.ndarray  # CALL rows that are cudaEventRecord
    queue: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))  # ``queue_lengths``
    links: Any = None  # ``graph.event_links``: found once per trace, on the first window that needs them

    def __len__(self) -> int:
        return len(self.role)


def trace_events(trace: Trace, as_hta: bool = False) -> Events:
    """The trace's events (computed once per trace and rounding)."""
    return trace.derived(f"critical_path_events:{as_hta}", lambda: _events(trace, as_hta))


def _events(trace: Trace, as_hta: bool) -> Events:
    ranges = trace.ranges
    ranges = ranges.loc[(ranges["domain"].astype(str) != "gpu").to_numpy()]
    calls = _outermost(trace.launches)
    ops = trace.gpu_ops
    syncs = trace.optional("gpu_syncs")
    if syncs is None:
        from tracekit.model.schema import GPU_SYNCS

        syncs = GPU_SYNCS.empty()
    parts = [ranges, calls, ops, syncs]
    sizes = [len(part) for part in parts]
    offsets = np.cumsum([0, *sizes])
    total = int(offsets[-1])

    # decided once per distinct name (a trace has millions of ranges and calls, thousands of names)
    range_names = ranges["name"]
    distinct = [str(name) for name in range_names.cat.categories]
    codes = range_names.cat.codes.to_numpy()
    # torch 1.8 files record_function annotations as cpu_op too; PyTorch's own are named "what#which"
    # (ProfilerStep#5, Optimizer.step#SGD.step, enumerate(DataLoader)#...), which no operator's name holds
    emit_nvtx = np.asarray([EMIT_NVTX_SUFFIX.search(name) is not None for name in distinct], dtype=bool)
    recorded = np.asarray([RECORDED.search(name) is not None for name in distinct], dtype=bool)
    operator = ((ranges["domain"].astype(str) == "cpu_op").to_numpy() | emit_nvtx[codes]) & ~recorded[codes]
    role = np.concatenate([
        np.where(operator, OPERATOR, ANNOTATION), np.full(len(calls), CALL), np.full(len(ops), GPU),
        np.full(len(syncs), SYNC),
    ]).astype(np.int8)  # fmt: skip

    # what the tables show: operators without their domain, calls without their version, kernels by base name
    shown_ranges = [shown_op_name(name) for name in distinct]
    call_names = [API_VERSION.sub("", str(name)) for name in calls["name"].cat.categories]
    op_names = [str(name) for name in ops["short_name"].cat.categories]
    sync_names = syncs["kind"].astype(str).to_numpy(dtype=object)
    labels = [*shown_ranges, *call_names, *op_names]
    offsets_of_labels = np.cumsum([0, len(shown_ranges), len(call_names)])
    label_codes = np.concatenate([
        codes, offsets_of_labels[1] + calls["name"].cat.codes.to_numpy(),
        offsets_of_labels[2] + ops["short_name"].cat.codes.to_numpy(),
    ]).astype(np.int64)  # fmt: skip
    unique_labels, label_index = np.unique(np.asarray(labels + list(SYNC_KINDS), dtype=object), return_inverse=True)
    sync_codes = np.asarray([len(labels) + SYNC_KINDS.index(kind) for kind in sync_names.tolist()], dtype=np.int64)
    name = label_index.reshape(-1)[np.concatenate([label_codes, sync_codes])]
    call_codes = calls["name"].cat.codes.to_numpy()

    def calls_named(names: frozenset[str]) -> np.ndarray:
        return np.asarray([name in names for name in call_names], dtype=bool)[call_codes]

    start = np.concatenate([part["start"].to_numpy(np.int64) for part in parts])
    end = np.concatenate([part["end"].to_numpy(np.int64) for part in parts])
    if as_hta:
        start, end = hta_rounded(start, end)

    def column(values: list[np.ndarray | int]) -> np.ndarray:
        return np.concatenate([np.full(size, value) if np.isscalar(value) else np.asarray(value)
                               for size, value in zip(sizes, values, strict=True)]).astype(np.int64)  # fmt: skip

    pid = column([ranges["pid"].to_numpy(), calls["pid"].to_numpy(), ops["pid"].to_numpy(), syncs["pid"].to_numpy()])
    tid = column([ranges["tid"].to_numpy(), calls["tid"].to_numpy(), -1, -1])
    device = column([-1, -1, ops["device"].to_numpy(), syncs["device"].to_numpy()])
    stream = column([-1, -1, ops["stream"].to_numpy(), syncs["stream"].to_numpy()])
    correlation = column([-1, calls["correlation_id"].to_numpy(), -1, -1])
    partner = np.full(total, -1, dtype=np.int64)
    for part, offset in ((ops, offsets[2]), (syncs, offsets[3])):
        other, mine = _join(calls, part)
        partner[offset + mine] = offsets[1] + other
        partner[offsets[1] + other] = offset + mine
    on_calls = slice(offsets[1], offsets[2])
    queued = np.zeros(total, dtype=bool)
    queued[on_calls] = calls_named(QUEUED_CALLS)
    blocking = np.zeros(total, dtype=bool)
    blocking[on_calls] = calls_named(BLOCKING_CALLS)
    record_call = np.zeros(total, dtype=bool)
    record_call[on_calls] = calls_named(frozenset({RECORD_CALL}))
    communication = np.zeros(total, dtype=bool)
    if len(ops):
        communication[offsets[2] : offsets[3]] = op_types(ops) == TYPES.index("communication")
    sync_kind = np.full(total, "", dtype=object)
    sync_kind[offsets[3] :] = sync_names
    found = Events(
        role=role, start=start, end=end, name=name.astype(np.int64), names=[str(label) for label in unique_labels], pid=pid,
        tid=tid, device=device, stream=stream, partner=partner, correlation=correlation, queued=queued,
        blocking=blocking, communication=communication, sync_kind=sync_kind,
        event_stream=column([-1, -1, -1, syncs["event_stream"].to_numpy()]),
        event_correlation=column([-1, -1, -1, syncs["event_correlation_id"].to_numpy()]), record_call=record_call,
    )  # fmt: skip
    found.queue = queue_lengths(found)
    return found


def queue_lengths(events: Events) -> np.ndarray:
    """Per event: the number of ops queued on its op's stream right after it (a queued call: counting
    its own op; a GPU op: after it started), -1 where not counted. Launches count +1 at the call's start,
    ops -1 at theirs; at one time launches come first. Over the whole trace (once per trace)."""
    calls = np.flatnonzero(events.queued & (events.partner >= 0))
    ops = events.partner[calls]
    rows = np.concatenate([calls, ops])
    time = np.concatenate([events.start[calls], events.start[ops]])
    step = np.concatenate([np.ones(len(calls), dtype=np.int64), -np.ones(len(ops), dtype=np.int64)])
    stream = np.concatenate([ops, ops])
    key = events.device[stream] * (2**32) + events.stream[stream]
    order = np.lexsort((np.arange(len(rows)), time, key))
    running = np.cumsum(step[order])
    first = np.ones(len(order), dtype=bool)
    first[1:] = key[order][1:] != key[order][:-1]
    base = np.maximum.accumulate(np.where(first, np.arange(len(order)), 0))
    before = np.concatenate([[0], running])[base]  # the running sum before each stream's first row
    lengths = np.full(len(events), -1, dtype=np.int64)
    lengths[rows[order]] = running - before
    return lengths


def hta_rounded(start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(start, end) in ns as HTA 0.5 reads a torch.profiler trace: ts and dur parsed as float64 µs, then
    start = ceil(ts), end = floor(ts + dur) in whole µs. ``start``/``end`` are exact ns on the trace's
    clock (absolute µs ~1.7e15: float64 holds them to 0.25 µs, so the rounding depends on the clock)."""
    whole, rest = np.divmod(start, 1000)
    ts = whole.astype(np.float64) + rest / 1000.0  # the float64 nearest the decimal µs, as a JSON parser reads it
    duration = (end - start) / 1000.0
    return np.ceil(ts).astype(np.int64) * 1000, np.floor(ts + duration).astype(np.int64) * 1000


def _outermost(calls: pd.DataFrame) -> pd.DataFrame:
    """The calls less those recorded twice: of several rows with one (process, correlation id), the
    longest (the outer one of nsys 2022.4's pair)."""
    correlated = calls["correlation_id"].to_numpy() >= 0
    if not correlated.any():
        return calls
    keys = calls.loc[correlated, ["pid", "correlation_id"]]
    if not keys.duplicated().any():
        return calls
    order = np.lexsort((-calls["duration"].to_numpy(), calls["correlation_id"].to_numpy(), calls["pid"].to_numpy()))
    ordered = calls.iloc[order]
    repeated = ordered.duplicated(["pid", "correlation_id"]).to_numpy() & (ordered["correlation_id"].to_numpy() >= 0)
    return calls.iloc[np.sort(order[~repeated])]


def _join(calls: pd.DataFrame, part: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Row pairs (call, row of ``part``) with one process and correlation id (the GPU side's pid is its
    launching process, found by the reader the same way)."""
    if calls.empty or part.empty:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    left = pd.DataFrame({"pid": calls["pid"].to_numpy(np.int64), "correlation": calls["correlation_id"].to_numpy(),
                         "call": np.arange(len(calls))})  # fmt: skip
    left = left.loc[left["correlation"] >= 0]
    right = pd.DataFrame({"pid": part["pid"].to_numpy(np.int64), "correlation": part["correlation_id"].to_numpy(),
                          "row": np.arange(len(part))})  # fmt: skip
    joined = left.merge(right, on=["pid", "correlation"], how="inner")
    return joined["call"].to_numpy(np.int64), joined["row"].to_numpy(np.int64)
