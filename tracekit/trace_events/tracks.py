"""The events of one input, track by track, as columns (``events``) a slice of rows at a time, so what is
in memory stays bounded whatever the trace's size; each file format encodes the same columns.

Where events go (``Place``): each GPU is a process with a track per stream, plus a track of its idle
gaps coloured by cause; host processes keep their ids, each thread a track of its NVTX /
record_function ranges, CUDA API calls and (torch.profiler with_stack) Python calls; steps are a process of their own. Several inputs (ranks)
each get their own process ids (``Place.index``), named "rank N · ...". GPU ops carry the
torch.profiler fields (``args.device``, ``stream``, ``correlation``, ``grid``, ``block``) so that
torch.profiler readers, tracekit's own included, read the file back: correlation ids are renumbered
to the launching call's row, unique in the file, so a call and its op pair up whatever process they
came from.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from tracekit.analysis.waits.idle import gap_devices
from tracekit.model.trace import Trace
from tracekit.trace_events.events import Arg, Counters, JsonValues, Labels, Metadata, Slices, Track
from tracekit.trace_events.track_lanes import TrackLanes

ROWS = 200_000  # rows encoded at a time: ~60 MB of JSON text for GPU ops
HOST_STRIDE = 1 << 23  # host process ids of input i: pid + i * HOST_STRIDE (Linux pids stay below 2^22)
GPU_BASE = 0x7F000000  # GPU process ids: GPU_BASE + input * 256 + device
STEPS_BASE = 0x7E000000  # the steps process of input i
# Correlation ids of input i: CORRELATION_BASE + i * CORRELATION_STRIDE + the launch call's row. Past
# 2^32 (HolisticTraceAnalysis narrows small ids to int16, then cannot hold event indices beside them),
# below 2^53 (JavaScript viewers read numbers as doubles) for 8,191 inputs.
CORRELATION_BASE = 1 << 32
CORRELATION_STRIDE = 1 << 40
# an operator's recorded inputs (``op_shapes``) by the names torch.profiler gives them in its args
INPUT_ARGS = {"dims": "Input Dims", "types": "Input type", "concrete": "Concrete Inputs"}
PYTHON_ARGS = {"python_id": "Python id", "parent_id": "Python parent id", "module_id": "Python module id"}
IDLE_TID = 2**31 - 1  # the idle-gap track of a GPU
NOT_RECORDED = -1  # an integer column's value where the trace has none
GPU_CATEGORY = {"kernel": "kernel", "memcpy": "gpu_memcpy", "memset": "gpu_memset"}
# torch.profiler's range categories by tracekit domain; every other (NVTX) domain is an annotation
RANGE_CATEGORY = {"cpu_op": "cpu_op", "gpu": "gpu_user_annotation"}
# chrome://tracing's reserved colour names (Perfetto colours by name instead)
CAUSE_COLOUR = {
    "sync": "terrible",
    "host not launching": "bad",
    "launch overhead": "yellow",
    "other stream or device": "grey",
    "dependency not in trace": "olive",
    "other": "generic_work",
}


@dataclass(frozen=True)
class Place:
    """Where one input's events go: ``index`` (0 for a single input), ``label`` ("" or "rank 2") and
    ``offset``."""

    index: int = 0
    label: str = ""
    offset: int = 0  # ns added to every time: the input's place on the file's common clock

    def time(self, ns: np.ndarray) -> np.ndarray:
        return np.asarray(ns, dtype=np.int64) + self.offset

    def host_pid(self, pid: np.ndarray) -> np.ndarray:
        return np.asarray(pid, dtype=np.int64) + self.index * HOST_STRIDE

    def gpu_pid(self, device: np.ndarray) -> np.ndarray:
        return GPU_BASE + self.index * 256 + (np.asarray(device, dtype=np.int64) & 0xFF)

    @property
    def steps_pid(self) -> int:
        return STEPS_BASE + self.index

    def name(self, what: str) -> str:
        return f"{self.label} · {what}" if self.label else what


def slices(count: int) -> Iterator[slice]:
    for start in range(0, count, ROWS):
        yield slice(start, min(start + ROWS, count))


def gpu_op_events(
    ops: pd.DataFrame,
    categories: pd.Categorical,
    correlation: np.ndarray,
    flow_in: np.ndarray,
    place: Place,
    extra: Sequence[Arg] = (),
    tids: np.ndarray | None = None,
) -> Iterator[Slices]:
    """Kernels, copies and sets on their GPU's stream track (``tids``: each op's track, where not its stream:
    ``stream_lanes``), with the torch.profiler args: a kernel's grid,
    block, registers and shared memory, a copy's or set's bytes (a correlation, registers or shared memory
    not recorded, -1, is left out: torch.profiler readers read an absent one as -1);
    ``flow_in``: the arrow reaching each op (-1: none); ``extra``: arguments some ops have (occupancy,
    bandwidth)."""
    kind_codes, kinds = pd.factorize(ops["kind"])  # (a categorical's codes: no million strings)
    kinds = [str(value) for value in kinds]
    is_kernel = np.asarray([value == "kernel" for value in kinds])[kind_codes] if kinds else np.zeros(0, dtype=bool)
    kind = Labels.of_codes(kind_codes, [GPU_CATEGORY.get(str(value), "kernel") for value in kinds])
    names, category = Labels.of(ops["name"]), Labels.of(categories)
    device, stream = ops["device"].to_numpy(), ops["stream"].to_numpy()
    dims = tuple(ops[f"{axis}_{dim}"].to_numpy() for axis in ("grid", "block") for dim in "xyz")
    registers, shared = ops["registers_per_thread"].to_numpy(), ops["shared_memory"].to_numpy()
    args = (
        Arg("device", device),
        Arg("stream", stream),
        Arg("correlation", correlation, correlation != NOT_RECORDED, per_row=True),
        Arg("grid", dims[:3], is_kernel),
        Arg("block", dims[3:], is_kernel),
        Arg("registers per thread", registers, is_kernel & (registers != NOT_RECORDED)),
        Arg("shared memory", shared, is_kernel & (shared != NOT_RECORDED)),
        Arg("bytes", ops["bytes"].to_numpy(), ~is_kernel, per_row=True),
        *extra,
        Arg("category", category),
    )
    pid, start, duration = place.gpu_pid(device), place.time(ops["start"].to_numpy()), ops["duration"].to_numpy()
    track = stream if tids is None else tids
    for rows in slices(len(ops)):
        yield Slices(
            kind[rows],
            names[rows],
            pid[rows],
            track[rows],
            start[rows],
            duration[rows],
            tuple(arg[rows] for arg in args),
            flow_in=flow_in[rows],
        )


def op_args(trace: Trace, op_rows: np.ndarray) -> list[Arg]:
    """The arguments only some GPU ops have, as torch.profiler names them: a kernel's estimated occupancy,
    a copy's bandwidth (thousandths, written with three decimals)."""
    args = []
    for table, column, name in (
        ("occupancy_estimates", "percent", "est. achieved occupancy %"),
        ("copy_rates", "bandwidth", "memory bandwidth (GB/s)"),
    ):
        frame = trace.optional(table)
        if frame is None or frame.empty:
            continue
        values = np.zeros(len(trace.gpu_ops), dtype=np.int64)
        present = np.zeros(len(trace.gpu_ops), dtype=bool)
        values[frame["op"].to_numpy()] = np.round(frame[column].to_numpy(np.float64) * 1000).astype(np.int64)
        present[frame["op"].to_numpy()] = True
        args.append(Arg(name, values[op_rows], present[op_rows], decimals=3, per_row=table == "copy_rates"))
    return args


def launch_events(
    calls: pd.DataFrame,
    correlation: np.ndarray,
    flow_counts: np.ndarray,
    flow_ids: np.ndarray,
    place: Place,
    tids: np.ndarray | None = None,
) -> Iterator[Slices]:
    """CUDA API calls on their host thread (torch.profiler's cuda_runtime); ``flow_counts``: arrows leaving
    each call, ``flow_ids`` their ids in call order; ``tids``: each call's track where not its thread's
    (``track_lanes``)."""
    names = Labels.of(calls["name"])
    category = Labels.constant("cuda_runtime", len(calls))
    pid, tid = place.host_pid(calls["pid"].to_numpy()), calls["tid"].to_numpy() if tids is None else tids
    start, duration = place.time(calls["start"].to_numpy()), calls["duration"].to_numpy()
    first_flow = np.concatenate([[0], np.cumsum(flow_counts)])
    for rows in slices(len(calls)):
        yield Slices(
            category[rows],
            names[rows],
            pid[rows],
            tid[rows],
            start[rows],
            duration[rows],
            (Arg("correlation", correlation[rows], per_row=True),),
            flow_out=(flow_counts[rows], flow_ids[first_flow[rows.start] : first_flow[rows.stop]]),
        )


def range_events(
    ranges: pd.DataFrame,
    torch_source: bool,
    place: Place,
    args: Sequence[Arg] = (),
    tids: np.ndarray | None = None,
) -> Iterator[Slices]:
    """NVTX / record_function ranges on their thread's track. From a torch.profiler trace the domains
    map back to its categories (the name without its "domain:" prefix); NVTX ranges of any domain are
    annotations named as tracekit shows them ("NCCL:allreduce"). ``args``: what some ranges carry (an
    operator's inputs, ``input_args``); ``tids``: each range's track where not its thread's or stream's
    (``track_lanes``)."""
    domain = ranges["domain"].astype(str).to_numpy(dtype=object)
    category = np.full(len(ranges), "user_annotation", dtype=object)
    name = ranges["name"].array
    assert isinstance(name, pd.Categorical)
    texts = [str(label) for label in name.categories]
    if torch_source:
        for source_domain, source_category in RANGE_CATEGORY.items():
            category[domain == source_domain] = source_category
        # the reader adds "domain:" back: a label's text is what follows its domain's prefix
        texts = [text.split(":", 1)[1] if text.split(":", 1)[0] in RANGE_CATEGORY else text for text in texts]
    labels = Labels.of_codes(np.asarray(name.codes), texts)
    categories = Labels.of(category)
    on_gpu = category == "gpu_user_annotation"  # a GPU-side span: its pid/tid are the device and stream
    pid = np.where(on_gpu, place.gpu_pid(ranges["pid"].to_numpy()), place.host_pid(ranges["pid"].to_numpy()))
    tid = ranges["tid"].to_numpy() if tids is None else tids
    start, duration = place.time(ranges["start"].to_numpy()), ranges["duration"].to_numpy()
    for rows in slices(len(ranges)):
        chunk_args = tuple(arg[rows] for arg in args)
        yield Slices(categories[rows], labels[rows], pid[rows], tid[rows], start[rows], duration[rows], chunk_args)


def input_args(ranges: pd.DataFrame, shapes: pd.DataFrame | None) -> list[Arg]:
    """The args torch.profiler writes of the operators among ``ranges`` that ``shapes`` (``op_shapes``) has:
    their inputs' "Input Dims", "Input type" and "Concrete Inputs" as JSON values (each distinct text made
    once), and the "flops" it counted (with_flops)."""
    if shapes is None or not len(shapes) or not len(ranges):
        return []
    ids, wanted = shapes["range_id"].to_numpy(), ranges["range_id"].to_numpy()
    order = np.argsort(ids, kind="stable")
    row = order[np.minimum(np.searchsorted(ids, wanted, sorter=order), len(ids) - 1)]
    found = ids[row] == wanted
    args = []
    for column, name in INPUT_ARGS.items():
        values = shapes[column].array
        assert isinstance(values, pd.Categorical)
        texts = [str(text) for text in values.categories]
        codes = np.where(found, np.asarray(values.codes)[row], -1)
        present = (codes >= 0) & (codes != (texts.index("") if "" in texts else -1))  # "": not recorded
        used, local = np.unique(codes[present], return_inverse=True)  # only the texts these ops use
        kept = np.full(len(codes), len(used), dtype=np.int64)
        kept[present] = local.reshape(-1)
        if present.any():
            args.append(Arg(name, Labels(kept, JsonValues([texts[code] for code in used.tolist()])), present))
    flops = np.where(found, shapes["flops"].to_numpy()[row], np.nan)
    counted = np.isfinite(flops)
    if counted.any():
        args.append(Arg("flops", np.round(np.where(counted, flops, 0)).astype(np.int64), counted))
    return args


def python_events(calls: pd.DataFrame, place: Place, tids: np.ndarray | None = None) -> Iterator[Slices]:
    """with_stack's Python calls (``python_calls``) on their thread's track as torch.profiler writes them:
    category python_function, with the call's "Python id", its caller's "Python parent id" and its
    nn.Module's "Python module id" where recorded; ``tids``: each call's track where not its thread's."""
    names, category = Labels.of(calls["name"]), Labels.constant("python_function", len(calls))
    pid, tid = place.host_pid(calls["pid"].to_numpy()), calls["tid"].to_numpy() if tids is None else tids
    start, duration = place.time(calls["start"].to_numpy()), calls["duration"].to_numpy()
    ids = {name: calls[column].to_numpy() for column, name in PYTHON_ARGS.items()}
    # each call's ids its own (the module id repeats, but rides along: a few per trace)
    args = tuple(Arg(name, values, values != NOT_RECORDED, per_row=True) for name, values in ids.items())
    for rows in slices(len(calls)):
        chunk_args = tuple(arg[rows] for arg in args)
        yield Slices(category[rows], names[rows], pid[rows], tid[rows], start[rows], duration[rows], chunk_args)


def gap_events(gaps: pd.DataFrame, place: Place) -> Iterator[Slices]:
    """Each GPU's idle gaps on a track of their own, named and coloured by cause (``idle``'s)."""
    device = gap_devices(gaps)
    cause_codes, causes = pd.factorize(gaps["Cause"])
    cause = Labels.of_codes(cause_codes, [str(name) for name in causes])
    colour = Labels.of_codes(cause_codes, [CAUSE_COLOUR.get(str(name), "generic_work") for name in causes])
    category = Labels.constant("tracekit_idle", len(gaps))
    pid, tid = place.gpu_pid(device), np.full(len(gaps), IDLE_TID, dtype=np.int64)
    start, duration = place.time(gaps["Start (ns)"].to_numpy()), gaps["Idle (ns)"].to_numpy()
    for rows in slices(len(gaps)):
        yield Slices(
            category[rows], cause[rows], pid[rows], tid[rows], start[rows], duration[rows], colour=colour[rows]
        )


def step_events(steps: pd.DataFrame, place: Place) -> Iterator[Slices]:
    """Training steps on the steps process, one track per process that ran them."""
    if len(steps):
        yield Slices(
            Labels.constant("tracekit_step", len(steps)),
            Labels.of_codes(np.arange(len(steps)), [f"step #{number}" for number in range(1, len(steps) + 1)]),
            np.full(len(steps), place.steps_pid, dtype=np.int64),
            place.host_pid(steps["pid"].to_numpy()),
            place.time(steps["start"].to_numpy()),
            steps["duration"].to_numpy(),
        )


def metadata_events(
    place: Place,
    gpus: set[int],
    streams: pd.DataFrame,
    threads: pd.DataFrame,
    has_steps: bool,
    gpu_names: dict[int, str],
    named_tracks: Sequence[tuple[int, int, str]] = (),
    host_names: pd.DataFrame | None = None,
    lanes: TrackLanes | None = None,
) -> Metadata:
    """Names and order of the processes and tracks (few: one per GPU, stream, process and thread;
    ``named_tracks``: (pid, tid, name) of other tracks, below a GPU's streams; ``host_names``: the trace's
    ``thread_names``, the names its source recorded of host processes and threads, else "process N" and
    "thread N"; ``lanes``: the lanes of slices that cross on a stream or thread, each named after it)."""
    tracks: list[Track] = []
    base = place.index * 1000
    if has_steps:
        tracks.append(Track(place.steps_pid, None, place.name("steps"), base))
    for device in sorted(int(value) for value in gpus):
        pid = int(place.gpu_pid(np.array([device]))[0])
        known = f"GPU {device}" if device >= 0 else "GPU (unknown)"
        tracks.append(
            Track(pid, None, place.name(f"{known} {gpu_names.get(device, '')}".rstrip()), base + 1 + max(device, 0))
        )
        tracks.append(Track(pid, IDLE_TID, "idle (by cause)", -1))
    for device, stream in streams.itertuples(index=False):
        pid = int(place.gpu_pid(np.array([device]))[0])
        tracks.append(Track(pid, int(stream), f"stream {stream}", int(stream)))
    for order, (device, tid, stream, lane) in enumerate(lanes.gpu_lanes if lanes else []):
        pid = int(place.gpu_pid(np.array([device]))[0])
        tracks.append(Track(pid, tid, f"stream {stream} · overlapping {lane}", 2**29 + order, lane_of=stream))
    for order, (pid, tid, name) in enumerate(named_tracks):
        tracks.append(Track(pid, tid, name, 2**30 + order))  # below the GPU's streams
    recorded = _recorded_names(host_names)
    for pid in sorted(set(threads["pid"].tolist())):
        name = recorded.get((pid, -1), f"process {pid}")
        tracks.append(Track(int(place.host_pid(np.array([pid]))[0]), None, place.name(name), base + 500))
    for pid, tid in threads.itertuples(index=False):
        name = recorded.get((pid, tid), f"thread {tid}")
        tracks.append(Track(int(place.host_pid(np.array([pid]))[0]), int(tid), name, 0, thread=True))
    for pid, tid, thread, lane in lanes.host_lanes if lanes else []:
        name = f"{recorded.get((pid, thread), f'thread {thread}')} · overlapping {lane}"
        tracks.append(Track(int(place.host_pid(np.array([pid]))[0]), tid, name, lane, thread=True, lane_of=thread))
    return Metadata(tracks)


def _recorded_names(names: pd.DataFrame | None) -> dict[tuple[int, int], str]:
    """(pid, tid) -> name of a ``thread_names`` table (tid -1: the process's); a few hundred rows at most."""
    if names is None or not len(names):
        return {}
    keys = zip(names["pid"].tolist(), names["tid"].tolist(), strict=True)
    return dict(zip(keys, names["name"].astype(str).tolist(), strict=True))


def memory_events(
    times: np.ndarray, allocated: np.ndarray, reserved: np.ndarray, device: int, place: Place
) -> Iterator[Counters]:
    """A counter track of the GPU's allocated and reserved memory (MiB) at each change, on its process."""
    pid = int(place.gpu_pid(np.array([device]))[0])
    for rows in slices(len(times)):
        series = {"allocated": _mib(allocated[rows]), "reserved": _mib(reserved[rows])}
        yield Counters(pid, "memory (MiB)", place.time(times[rows]), series, decimals=3)


def _mib(values: np.ndarray) -> np.ndarray:
    """Bytes as thousandths of a MiB, from the integers (KiB-exact)."""
    kib = np.asarray(values, dtype=np.int64) // 1024
    return kib * 1000 // 1024
