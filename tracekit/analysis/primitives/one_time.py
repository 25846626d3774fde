"""What a trace does once: the costs of starting up that a steady state never pays again.

Each found on the host, as an interval (ns) with its kind (what names say: ``one_time_names``):
- setup ranges: CPU ranges whose name says setup (``init_model``, ``setup``, ``warmup``, ``load_weights`` ...);
- context creation: a process's first CUDA API call when it takes 50 ms or more (the driver creates the
  context inside whichever call comes first: a ``cudaMalloc``, a ``cudaFree(0)``);
- module loading: the driver's module and library loads and unloads (``cuModuleLoad*``, ``cuLibraryLoad*``,
  ``cuLibraryUnload`` ...), and the first launch of a kernel when it takes 1 ms or more and 20 times the
  median of the launches that were not a kernel's first (CUDA's lazy loading loads the module then);
- library setup: ``cudnnCreate``, ``cublasCreate``, ``ncclCommInitRank`` and the like, as API calls or
  ranges of any domain ("NCCL:ncclCommInitRank");
- autotuning: cuDNN's algorithm search and torch.compile's Triton autotuning, by name (API calls or
  ranges); and cuDNN's benchmark mode where no name says it: a convolution operator
  (``aten::cudnn_convolution``, ``ConvolutionBackward0`` ...) inside which its thread waited for the GPU
  3 times or more (cuDNN runs each candidate algorithm, its trial kernels, and waits for each to time it;
  a convolution that knows its algorithm never waits);
- compilation: torch.compile's compile-time ranges (``_compile.compile_inner (dynamo_timed)`` ...);
- first collective: a process's first call of an NCCL collective (``nccl:all_reduce``, "NCCL:ncclAllReduce")
  when it takes 1 ms or more and 20 times the median of its later calls (its communicator is made, or its
  peers connected, in it).
Of the ranges, one inside another found here on its thread is counted with it: the outermost only.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import numpy as np
import pandas as pd

from tracekit.analysis.primitives.joins import op_launches
from tracekit.analysis.primitives.one_time_names import name_kind
from tracekit.model.derived import per_trace
from tracekit.model.range_specs import shown_op_name
from tracekit.model.trace import Trace

CONTEXT_NS = 50_000_000  # a first call this long created the context
FIRST_LAUNCH_NS = 1_000_000  # a first launch or first collective at least this long ...
FIRST_LAUNCH_FACTOR = 20  # ... and this many times the usual one paid a one-time cost
TRIAL_WAITS = 3  # a convolution whose thread waited this often inside it was timing algorithms
WAIT_CALLS = re.compile(r"^cu(da)?(Event|Stream|Device|Ctx)Synchronize")
CONVOLUTION = re.compile(
    r"\b(cudnn|miopen)_convolution|aten::_?convolution\b|aten::conv(_transpose)?[123]d\b|ConvolutionBackward"
)
COLLECTIVE = re.compile(
    r"nccl:(?!new_group)|(NCCL:)?nccl(AllReduce|Broadcast|Bcast|Reduce|AllGather|ReduceScatter|Send|Recv|"
    r"AllToAll|Gather|Scatter|GroupEnd)"
)
KINDS = (
    "setup range",
    "context creation",
    "module loading",
    "library setup",
    "autotuning",
    "compilation",
    "first collective",
)
COLUMNS = ["kind", "what", "start", "end", "pid", "tid"]


@per_trace
def one_time_costs(trace: Trace) -> pd.DataFrame:
    """The one-time costs of ``trace`` (``COLUMNS``; start and end in ns), by start."""
    in_ranges = [_named_ranges(trace), _convolution_trials(trace), _first_collectives(trace)]
    parts = [_outermost(_joined(in_ranges)), _calls(trace), _first_launches(trace)]
    return _joined(parts).sort_values("start", kind="stable").reset_index(drop=True)


def _joined(parts: list[pd.DataFrame]) -> pd.DataFrame:
    found = [part for part in parts if len(part)]
    return pd.concat(found, ignore_index=True) if found else pd.DataFrame({column: [] for column in COLUMNS})


def _costs(kind, what, frame: pd.DataFrame, rows: np.ndarray) -> pd.DataFrame:
    """The rows ``rows`` of ``frame`` (a table with start, end, pid and tid) as one-time costs."""
    return pd.DataFrame(
        {
            "kind": kind,
            "what": what,
            **{column: frame[column].to_numpy()[rows] for column in ("start", "end", "pid", "tid")},
        }
    )


def _per_name(names: pd.Series, decide: Callable[[str], object]) -> np.ndarray:
    """Per row of a categorical name column: ``decide(name)``, asked once per distinct name ("" for a
    missing one)."""
    decided = [decide(str(name)) for name in names.cat.categories]
    return np.asarray([*decided, decide("")], dtype=object)[names.cat.codes.to_numpy()]


def _host_side(ranges: pd.DataFrame) -> np.ndarray:
    return ranges["domain"].astype(str).to_numpy() != "gpu"


def _named_ranges(trace: Trace) -> pd.DataFrame:
    ranges = trace.ranges
    if ranges.empty:
        return pd.DataFrame()
    kind = _per_name(ranges["name"], lambda name: name_kind(name) or "")
    rows = np.flatnonzero((kind != "") & _host_side(ranges))
    return _costs(kind[rows], ranges["name"].astype(str).to_numpy()[rows], ranges, rows)


def _calls(trace: Trace) -> pd.DataFrame:
    calls = trace.launches
    if calls.empty:
        return pd.DataFrame()
    kind = _per_name(calls["name"].astype("category"), lambda name: name_kind(name, call=True) or "")
    start, end = calls["start"].to_numpy(), calls["end"].to_numpy()
    first = np.zeros(len(calls), dtype=bool)
    first[calls.groupby("pid", sort=False)["start"].idxmin().to_numpy()] = True  # each process's first call
    context = first & (end - start >= CONTEXT_NS)
    kind = np.where(context, "context creation", kind)
    rows = np.flatnonzero(kind != "")
    names = calls["name"].astype(str).to_numpy()[rows]
    what = np.where(
        context[rows],
        [f"{name} (the process's first CUDA call: the context was created in it)" for name in names],
        names,
    )
    return _costs(kind[rows], what, calls, rows)


def _first_launches(trace: Trace) -> pd.DataFrame:
    """The first launch of each kernel name when it is long (lazy module loading)."""
    ops = trace.gpu_ops
    launches = op_launches(trace)
    kernel = (ops["kind"] == "kernel").to_numpy() & launches.found
    if not kernel.any():
        return pd.DataFrame()
    rows = np.flatnonzero(kernel)
    took = launches.end[rows] - launches.start[rows]
    codes = ops["name"].cat.codes.to_numpy()[rows]
    order = np.lexsort((launches.start[rows], codes))
    first = np.ones(len(order), dtype=bool)
    first[1:] = codes[order][1:] != codes[order][:-1]
    firsts = order[first]
    # the usual launch: of the launches that were not a kernel's first (all of them when every one was)
    later = took[order[~first]]
    median = float(np.median(later if len(later) else took))
    long = took[firsts] >= max(FIRST_LAUNCH_NS, FIRST_LAUNCH_FACTOR * median)
    picked = rows[firsts[long]]
    names = (ops["short_name"] if "short_name" in ops else ops["name"]).astype("category")
    labels = np.append(np.asarray(names.cat.categories, dtype=object), "?")[names.cat.codes.to_numpy()[picked]]
    return pd.DataFrame(
        {
            "kind": "module loading",
            "what": [f"first launch of {name}" for name in labels],
            "start": launches.start[picked],
            "end": launches.end[picked],
            "pid": launches.pid[picked],
            "tid": launches.tid[picked],
        }
    ).drop_duplicates(["start", "tid"])  # a call launching several kernels is one


def _convolution_trials(trace: Trace) -> pd.DataFrame:
    """Convolution operators inside which their thread waited for the GPU ``TRIAL_WAITS`` times or more: cuDNN's
    benchmark mode timing candidate algorithms (see the module)."""
    ranges, calls = trace.ranges, trace.launches
    if ranges.empty or calls.empty:
        return pd.DataFrame()
    # every convolution name holds "onv": a substring test spares the regex most names (millions, with emit_nvtx)
    convolution = _per_name(ranges["name"], lambda name: "onv" in name and CONVOLUTION.search(name) is not None)
    convolution = convolution.astype(bool)
    rows = np.flatnonzero(convolution & _host_side(ranges))
    waits = np.flatnonzero(
        _per_name(calls["name"].astype("category"), lambda name: WAIT_CALLS.match(name) is not None).astype(bool)
    )
    if not len(rows) or not len(waits):
        return pd.DataFrame()
    held = _calls_inside(ranges.iloc[rows], calls.iloc[waits])
    rows, held = rows[held >= TRIAL_WAITS], held[held >= TRIAL_WAITS]
    names = ranges["name"].astype(str).to_numpy()[rows]
    what = [
        f"{shown_op_name(name)}: waited for the GPU {count} times inside (cuDNN benchmark mode timing algorithms)"
        for name, count in zip(names, held.tolist())
    ]
    return _costs("autotuning", what, ranges, rows)


def _calls_inside(ranges: pd.DataFrame, calls: pd.DataFrame) -> np.ndarray:
    """Per range: how many of ``calls`` its own thread began inside it, [start, end)."""
    held = np.zeros(len(ranges), dtype=np.int64)
    pid, tid = ranges["pid"].to_numpy(), ranges["tid"].to_numpy()
    start, end = ranges["start"].to_numpy(), ranges["end"].to_numpy()
    call_pid, call_tid, call_start = (calls[column].to_numpy() for column in ("pid", "tid", "start"))
    for thread_pid, thread_tid in np.unique(np.column_stack([call_pid, call_tid]), axis=0).tolist():  # few
        mine = (pid == thread_pid) & (tid == thread_tid)
        if mine.any():
            began = np.sort(call_start[(call_pid == thread_pid) & (call_tid == thread_tid)])
            held[mine] = np.searchsorted(began, end[mine]) - np.searchsorted(began, start[mine])
    return held


def _first_collectives(trace: Trace) -> pd.DataFrame:
    """Each process's first call of an NCCL collective when it is long (see the module)."""
    ranges = trace.ranges
    if ranges.empty:
        return pd.DataFrame()
    wanted = _per_name(ranges["name"], lambda name: COLLECTIVE.match(name) is not None and name_kind(name) is None)
    rows = np.flatnonzero(wanted.astype(bool) & _host_side(ranges))
    if not len(rows):
        return pd.DataFrame()
    calls = pd.DataFrame(
        {
            "row": rows,
            "name": ranges["name"].cat.codes.to_numpy()[rows],
            "pid": ranges["pid"].to_numpy()[rows],
            "start": ranges["start"].to_numpy()[rows],
            "took": (ranges["end"] - ranges["start"]).to_numpy()[rows],
        }
    ).sort_values(["pid", "name", "start"], kind="stable")
    first = ~calls.duplicated(["pid", "name"]).to_numpy()
    later = calls.loc[~first].groupby(["pid", "name"])["took"].median().rename("later")
    firsts = calls.loc[first].join(later, on=["pid", "name"])  # a name called once: no later median, not judged
    usual = firsts["later"].to_numpy(np.float64)
    long = firsts["took"].to_numpy() >= np.maximum(FIRST_LAUNCH_NS, FIRST_LAUNCH_FACTOR * usual)  # NaN: False
    picked = firsts["row"].to_numpy()[long]
    names = ranges["name"].astype(str).to_numpy()[picked]
    what = [f"first {name} of the process (its communicator set up or connected in it)" for name in names]
    return _costs("first collective", what, ranges, picked)


def _outermost(table: pd.DataFrame) -> pd.DataFrame:
    """The rows not inside another row of the same thread."""
    if table.empty:
        return table
    table = table.sort_values(["pid", "tid", "start", "end"], ascending=[True, True, True, False], kind="stable")
    same = (table["pid"].to_numpy()[1:] == table["pid"].to_numpy()[:-1]) & (
        table["tid"].to_numpy()[1:] == table["tid"].to_numpy()[:-1]
    )
    reach = table.groupby(["pid", "tid"], sort=False)["end"].cummax().to_numpy()
    inside = np.zeros(len(table), dtype=bool)
    inside[1:] = same & (table["end"].to_numpy()[1:] <= reach[:-1])
    return table.loc[~inside].reset_index(drop=True)
