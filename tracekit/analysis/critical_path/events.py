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

``as_hta``: times rounded as HTA 0.5 reads them (``primitives.hta``), so a result can be compared with
HTA's exactly. Otherwise times stay exact ns.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from tracekit.analysis.primitives.hta import API_VERSION, QUEUED_CALLS, hta_rounded
from tracekit.analysis.primitives.joins import CallIndex
from tracekit.analysis.primitives.kernel_types import TYPES, op_types
from tracekit.model.derived import per_trace
from tracekit.model.range_specs import EMIT_NVTX_SUFFIX, shown_op_name
from tracekit.model.schema import GPU_SYNCS, SYNC_KINDS
from tracekit.model.trace import Trace

OPERATOR, ANNOTATION, CALL, GPU, SYNC = range(5)
# the graph's edge kinds (``graph``): an event's own time, CPU idle, launch delay, kernel-kernel gap, sync,
# and (tracekit's definition only, ``definition``) a stream's gap that was a wait
OP, DEPENDENCY, LAUNCH, KERNEL_KERNEL, SYNC_DEPENDENCY, WAIT = range(6)
RECORDED = re.compile(r"#")
# Calls whose own time is waiting on the GPU (HTA's list): the CPU time inside them is not on the path.
BLOCKING_CALLS = frozenset(
    {
        "cudaDeviceSynchronize",
        "cudaStreamSynchronize",
        "cudaEventQuery",
        "cudaEventSynchronize",
        "cudaMemcpy",
        "cudaMemcpyAsync",
    }
)
RECORD_CALL = "cudaEventRecord"
OP_COLUMNS = ("start", "end", "kind", "name", "short_name", "device", "stream", "correlation_id", "pid")
RANGE_COLUMNS = ("start", "end", "name", "domain", "pid", "tid")  # of the ranges' (their nesting is the walk's)


@dataclass
class Events:
    """Every event of a trace as arrays of equal length (``role`` says which fields mean something).

    start/end: ns (end may precede start by under 1 µs with ``as_hta``); name: index into ``names`` (as
    shown: operators without domain or emit_nvtx's suffix, calls without version, kernels by base name);
    pid/tid: CPU side (GPU side: the launching process, tid -1); device/stream: GPU side (-1 on the CPU
    side); partner: row of the other side of a call/GPU op/sync pair, -1 for none; queued: a CALL that
    feeds a stream's launch queue; blocking: a CALL in ``BLOCKING_CALLS``; communication: a GPU op that
    is an NCCL kernel; sync_kind (index into ``schema.SYNC_KINDS``, -1 on other rows), event_stream,
    event_correlation: SYNC rows (``schema.GPU_SYNCS``); correlation: CALL rows' correlation id. Rows
    and names are held as int32 (a trace that fits in memory has far fewer than 2^30 events); tid, device,
    correlation and event_correlation in the narrowest integer type that holds their values."""

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
    links: Any = None  # ``gpu_edges.event_links``: found once per trace, on the first window that needs them
    cpu_rows: Any = None  # ``graph.window_rows``: the CPU events lasting longer than 0 (by start when needed)

    def __len__(self) -> int:
        return len(self.role)


def trace_events(trace: Trace, as_hta: bool = False) -> Events:
    """The trace's events (computed once per trace and rounding; their arrays read-only)."""
    return _events(trace, as_hta)


@per_trace
def _events(trace: Trace, as_hta: bool) -> Events:
    ranges = trace.columns("ranges", RANGE_COLUMNS)
    domains = [str(domain) for domain in ranges["domain"].cat.categories]
    domain_codes = ranges["domain"].cat.codes.to_numpy()
    kept = np.flatnonzero(domain_codes != domains.index("gpu")) if "gpu" in domains else slice(None)
    ops = trace.columns("gpu_ops", OP_COLUMNS)
    syncs = trace.optional("gpu_syncs")
    if syncs is None:
        syncs = GPU_SYNCS.empty()
    calls = trace.launches
    sides = [(part["pid"].to_numpy(), part["correlation_id"].to_numpy()) for part in (ops, syncs)]
    index = CallIndex(calls, sides)
    if index.repeated():  # nsys 2022.4's pairs: the outer call only
        calls = _outermost(calls)
        index = CallIndex(calls, sides)
    sizes = [len(domain_codes[kept]), len(calls), len(ops), len(syncs)]
    offsets = np.cumsum([0, *sizes])
    total = int(offsets[-1])

    def column(values: list[np.ndarray | int], dtype: type | None = np.int64) -> np.ndarray:
        """One array over the four parts (ranges, calls, GPU ops, syncs): each part's values or a constant;
        ``dtype`` None: the narrowest integer type holding them (half the memory of int64 or less)."""
        if dtype is None:
            bounds = [
                int(bound)
                for value in values
                for bound in (
                    (value.min(), value.max())
                    if isinstance(value, np.ndarray) and len(value)
                    else (value, value)
                    if not isinstance(value, np.ndarray)
                    else ()
                )
            ]
            dtype = next(
                kind
                for kind in (np.int16, np.int32, np.int64)
                if np.iinfo(kind).min <= min(bounds) and max(bounds) <= np.iinfo(kind).max
            )
        joined = np.empty(total, dtype=dtype)
        for low, high, value in zip(offsets[:-1], offsets[1:], values, strict=True):
            joined[low:high] = value
        return joined

    # decided once per distinct name (a trace has millions of ranges and calls, thousands of names)
    distinct = [str(name) for name in ranges["name"].cat.categories]
    codes = ranges["name"].cat.codes.to_numpy()[kept]
    # torch 1.8 files record_function annotations as cpu_op too; PyTorch's own are named "what#which"
    # (ProfilerStep#5, Optimizer.step#SGD.step, enumerate(DataLoader)#...), which no operator's name holds
    emit_nvtx = np.asarray([EMIT_NVTX_SUFFIX.search(name) is not None for name in distinct], dtype=bool)
    recorded = np.asarray([RECORDED.search(name) is not None for name in distinct], dtype=bool)
    cpu_op = np.asarray([domain == "cpu_op" for domain in domains], dtype=bool)[domain_codes[kept]]
    operator = (cpu_op | emit_nvtx[codes]) & ~recorded[codes]
    role = column([np.where(operator, np.int8(OPERATOR), np.int8(ANNOTATION)), CALL, GPU, SYNC], np.int8)

    # what the tables show: operators without their domain, calls without their version, kernels by base name
    shown_ranges = [shown_op_name(name) for name in distinct]
    call_names = [API_VERSION.sub("", str(name)) for name in calls["name"].cat.categories]
    op_names = [str(name) for name in ops["short_name"].cat.categories]
    sync_kind_codes = syncs["kind"].cat.codes.to_numpy().astype(np.int8)  # its categories are SYNC_KINDS
    labels = [*shown_ranges, *call_names, *op_names, *SYNC_KINDS]
    unique_labels, label_index = np.unique(np.asarray(labels, dtype=object), return_inverse=True)
    label_index = label_index.reshape(-1).astype(np.int32)
    first_label = np.cumsum([0, len(shown_ranges), len(call_names), len(op_names)])
    call_codes = calls["name"].cat.codes.to_numpy()
    name = column(
        [
            label_index[codes],
            label_index[first_label[1] + call_codes],
            label_index[first_label[2] + ops["short_name"].cat.codes.to_numpy()],
            label_index[first_label[3] + sync_kind_codes],
        ],
        np.int32,
    )

    def calls_named(names: frozenset[str]) -> np.ndarray:
        return column(
            [False, np.asarray([name in names for name in call_names], dtype=bool)[call_codes], False, False], bool
        )

    start = column(
        [
            part["start"].to_numpy()[kept] if part is ranges else part["start"].to_numpy()
            for part in (ranges, calls, ops, syncs)
        ]
    )
    end = column(
        [
            part["end"].to_numpy()[kept] if part is ranges else part["end"].to_numpy()
            for part in (ranges, calls, ops, syncs)
        ]
    )
    if as_hta:
        start, end = hta_rounded(start, end)
    partner = np.full(total, -1, dtype=np.int32)
    for side, offset in enumerate((offsets[2], offsets[3])):
        call = index.match(side)
        mine = np.flatnonzero(call >= 0)
        partner[offset + mine] = offsets[1] + call[mine]
        np.maximum.at(partner, offsets[1] + call[mine], offset + mine)  # a call with several: its last (as HTA)
    communication = column([False, False, op_types(ops) == TYPES.index("communication"), False], bool)
    found = Events(
        role=role,
        start=start,
        end=end,
        name=name,
        names=[str(label) for label in unique_labels],
        pid=column(
            [ranges["pid"].to_numpy()[kept], calls["pid"].to_numpy(), ops["pid"].to_numpy(), syncs["pid"].to_numpy()]
        ),
        tid=column([ranges["tid"].to_numpy()[kept], calls["tid"].to_numpy(), -1, -1], None),
        device=column([-1, -1, ops["device"].to_numpy(), syncs["device"].to_numpy()], None),
        stream=column([-1, -1, ops["stream"].to_numpy(), syncs["stream"].to_numpy()], np.int32),
        partner=partner,
        correlation=column([-1, calls["correlation_id"].to_numpy(), -1, -1], None),
        queued=calls_named(QUEUED_CALLS),
        blocking=calls_named(BLOCKING_CALLS),
        communication=communication,
        sync_kind=column([-1, -1, -1, sync_kind_codes], np.int8),
        event_stream=column([-1, -1, -1, syncs["event_stream"].to_numpy()], np.int32),
        event_correlation=column([-1, -1, -1, syncs["event_correlation_id"].to_numpy()], None),
        record_call=calls_named(frozenset({RECORD_CALL})),
    )
    found.queue = queue_lengths(found)
    return found


def queue_lengths(events: Events) -> np.ndarray:
    """Per event: the number of ops queued on its op's stream right after it (a queued call: counting
    its own op; a GPU op: after it started), -1 where not counted. Launches count +1 at the call's start,
    ops -1 at theirs; at one time launches come first. Over the whole trace (once per trace)."""
    calls = np.flatnonzero(events.queued & (events.partner >= 0))
    ops = events.partner[calls]
    streams, keys = pd.factorize(events.device[ops].astype(np.int64) * (2**32) + events.stream[ops], sort=True)
    # by stream, then time, then launches (listed first) before ops: a stable sort by time (the tables'
    # runs of time order), then a stable sort by stream (a radix sort of small codes)
    order = np.argsort(np.concatenate([events.start[calls], events.start[ops]]), kind="stable")
    stream = np.concatenate([streams, streams])[order]
    order = order[np.argsort(stream.astype(np.uint16) if len(keys) < 2**16 else stream, kind="stable")]
    # +1 per launch, -1 per op, summed over each stream's run (less the sum before it)
    running = np.cumsum(np.where(order < len(calls), np.int32(1), np.int32(-1)), dtype=np.int32)
    sizes = 2 * np.bincount(streams, minlength=len(keys))
    before = np.append(0, running[np.cumsum(sizes)[:-1] - 1])[: len(sizes)]  # the sum before each stream's run
    running -= np.repeat(before, sizes)
    lengths = np.full(len(events), -1, dtype=np.int32)
    lengths[np.concatenate([calls, ops])[order]] = running
    return lengths


def _outermost(calls: pd.DataFrame) -> pd.DataFrame:
    """The calls less those recorded twice: of several rows with one (process, correlation id), the
    longest (the outer one of nsys 2022.4's pair)."""
    order = np.lexsort((-calls["duration"].to_numpy(), calls["correlation_id"].to_numpy(), calls["pid"].to_numpy()))
    ordered = calls.iloc[order]
    repeated = ordered.duplicated(["pid", "correlation_id"]).to_numpy() & (ordered["correlation_id"].to_numpy() >= 0)
    return calls.iloc[np.sort(order[~repeated])]
