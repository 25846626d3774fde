"""The events of one input, track by track, as Chrome trace-event text (``text``), a slice of rows at a
time so the text in memory stays bounded whatever the trace's size.

Where events go (``Place``): each GPU is a process with a track per stream, plus a track of its idle
gaps coloured by cause; host processes keep their ids, each thread a track of its NVTX /
record_function ranges and CUDA API calls; steps are a process of their own. Several inputs (ranks)
each get their own process ids (``Place.index``), named "rank N · ...". GPU ops carry the
torch.profiler fields (``args.device``, ``stream``, ``correlation``, ``grid``, ``block``) so that
torch.profiler readers, tracekit's own included, read the file back: correlation ids are renumbered
to the launching call's row, unique in the file, so a call and its op pair up whatever process they
came from.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import pyarrow as pa

from tracekit.analysis.waits.idle import gap_devices
from tracekit.trace_events.text import SEPARATOR, Quoted, integers, join, microseconds

SEPARATOR_TEXT = SEPARATOR

ROWS = 200_000  # rows turned into text at a time: ~60 MB of text for GPU ops
HOST_STRIDE = 1 << 23  # host process ids of input i: pid + i * HOST_STRIDE (Linux pids stay below 2^22)
GPU_BASE = 0x7F000000  # GPU process ids: GPU_BASE + input * 256 + device
STEPS_BASE = 0x7E000000  # the steps process of input i
# Correlation ids of input i: CORRELATION_BASE + i * CORRELATION_STRIDE + the launch call's row. Past
# 2^32 (HolisticTraceAnalysis narrows small ids to int16, then cannot hold event indices beside them),
# below 2^53 (JavaScript viewers read numbers as doubles) for 8,191 inputs.
CORRELATION_BASE = 1 << 32
CORRELATION_STRIDE = 1 << 40
IDLE_TID = 2**31 - 1  # the idle-gap track of a GPU
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
    """Where one input's events go: ``index`` (0 for a single input) and ``label`` ("" or "rank 2")."""

    index: int = 0
    label: str = ""

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
    ops: pd.DataFrame, categories: pd.Categorical, correlation: np.ndarray, place: Place
) -> Iterator[pa.Array]:
    """Kernels, copies and sets on their GPU's stream track, with the torch.profiler args: a kernel's grid,
    block, registers and shared memory (-1: not recorded, read back as such), a copy's or set's bytes."""
    kind_codes, kinds = pd.factorize(ops["kind"].astype(str))
    is_kernel = np.asarray(kinds == "kernel")[kind_codes] if len(kinds) else np.zeros(0, dtype=bool)
    kind = Quoted.of_codes(kind_codes, [GPU_CATEGORY.get(str(value), "kernel") for value in kinds])
    names, category = Quoted(ops["name"]), Quoted(categories)
    for rows in slices(len(ops)):
        for mine in (np.flatnonzero(is_kernel[rows]) + rows.start, np.flatnonzero(~is_kernel[rows]) + rows.start):
            if len(mine):
                yield _gpu_ops_text(ops, mine, bool(is_kernel[mine[0]]), kind, names, category, correlation, place)


def _gpu_ops_text(
    ops, rows: np.ndarray, kernels: bool, kind: Quoted, names: Quoted, category: Quoted, correlation, place: Place
) -> pa.Array:
    device, stream = ops["device"].to_numpy()[rows], ops["stream"].to_numpy()[rows]
    head = (
        '{"ph":"X","cat":',
        kind[rows],
        ',"name":',
        names[rows],
        ',"pid":',
        integers(place.gpu_pid(device)),
        ',"tid":',
        integers(stream),
        ',"ts":',
        microseconds(ops["start"].to_numpy()[rows]),
        ',"dur":',
        microseconds(ops["duration"].to_numpy()[rows]),
        ',"args":{"device":',
        integers(device),
        ',"stream":',
        integers(stream),
        ',"correlation":',
        integers(correlation[rows]),
    )
    if kernels:
        dims = [integers(ops[f"{axis}_{dim}"].to_numpy()[rows]) for axis in ("grid", "block") for dim in "xyz"]
        size = (
            ',"grid":[',
            dims[0],
            ",",
            dims[1],
            ",",
            dims[2],
            '],"block":[',
            dims[3],
            ",",
            dims[4],
            ",",
            dims[5],
            '],"registers per thread":',
            integers(ops["registers_per_thread"].to_numpy()[rows]),
            ',"shared memory":',
            integers(ops["shared_memory"].to_numpy()[rows]),
        )
    else:
        size = (',"bytes":', integers(ops["bytes"].to_numpy()[rows]))
    return join(*head, *size, ',"category":', category[rows], "}}")


def launch_events(calls: pd.DataFrame, correlation: np.ndarray, place: Place) -> Iterator[pa.Array]:
    """CUDA API calls on their host thread (torch.profiler's cuda_runtime)."""
    names = Quoted(calls["name"])
    for rows in slices(len(calls)):
        part = calls.iloc[rows]
        yield join(
            '{"ph":"X","cat":"cuda_runtime","name":',
            names[rows],
            ',"pid":',
            integers(place.host_pid(part["pid"].to_numpy())),
            ',"tid":',
            integers(part["tid"].to_numpy()),
            ',"ts":',
            microseconds(part["start"].to_numpy()),
            ',"dur":',
            microseconds(part["duration"].to_numpy()),
            ',"args":{"correlation":',
            integers(correlation[rows]),
            "}}",
        )


def flow_events(
    launch_start: np.ndarray,
    launch_pid: np.ndarray,
    launch_tid: np.ndarray,
    op_start: np.ndarray,
    device: np.ndarray,
    stream: np.ndarray,
    correlation: np.ndarray,
    place: Place,
) -> Iterator[pa.Array]:
    """An arrow from each launching call to the GPU op it launched (flow start and end, torch.profiler's
    "ac2g" events)."""
    for rows in slices(len(correlation)):
        flow = integers(correlation[rows])
        yield join(
            '{"ph":"s","cat":"ac2g","name":"launch","id":',
            flow,
            ',"pid":',
            integers(place.host_pid(launch_pid[rows])),
            ',"tid":',
            integers(launch_tid[rows]),
            ',"ts":',
            microseconds(launch_start[rows]),
            "}",
        )
        yield join(
            '{"ph":"f","bp":"e","cat":"ac2g","name":"launch","id":',
            flow,
            ',"pid":',
            integers(place.gpu_pid(device[rows])),
            ',"tid":',
            integers(stream[rows]),
            ',"ts":',
            microseconds(op_start[rows]),
            "}",
        )


def range_events(ranges: pd.DataFrame, torch_source: bool, place: Place) -> Iterator[pa.Array]:
    """NVTX / record_function ranges on their thread's track. From a torch.profiler trace the domains
    map back to its categories (the name without its "domain:" prefix); NVTX ranges of any domain are
    annotations named as tracekit shows them ("NCCL:allreduce")."""
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
    labels = Quoted.of_codes(np.asarray(name.codes), texts)
    on_gpu = category == "gpu_user_annotation"  # a GPU-side span: its pid/tid are the device and stream
    pid = np.where(on_gpu, place.gpu_pid(ranges["pid"].to_numpy()), place.host_pid(ranges["pid"].to_numpy()))
    for rows in slices(len(ranges)):
        part = ranges.iloc[rows]
        yield join(
            '{"ph":"X","cat":"',
            pa.array(category[rows], type=pa.string()),
            '","name":',
            labels[rows],
            ',"pid":',
            integers(pid[rows]),
            ',"tid":',
            integers(part["tid"].to_numpy()),
            ',"ts":',
            microseconds(part["start"].to_numpy()),
            ',"dur":',
            microseconds(part["duration"].to_numpy()),
            "}",
        )


def gap_events(gaps: pd.DataFrame, place: Place) -> Iterator[pa.Array]:
    """Each GPU's idle gaps on a track of their own, named and coloured by cause (``idle``'s)."""
    device = gap_devices(gaps)
    cause_codes, causes = pd.factorize(gaps["Cause"])
    colours = np.array([CAUSE_COLOUR.get(str(cause), "generic_work") for cause in causes], dtype=object)
    colour = colours[cause_codes] if len(colours) else np.zeros(0, dtype=object)
    cause = Quoted.of_codes(cause_codes, [str(name) for name in causes])
    for rows in slices(len(gaps)):
        part = gaps.iloc[rows]
        yield join(
            '{"ph":"X","cat":"tracekit_idle","name":',
            cause[rows],
            ',"pid":',
            integers(place.gpu_pid(device[rows])),
            f',"tid":{IDLE_TID}',
            ',"ts":',
            microseconds(part["Start (ns)"].to_numpy()),
            ',"dur":',
            microseconds(part["Idle (ns)"].to_numpy()),
            ',"cname":"',
            pa.array(colour[rows], type=pa.string()),
            '"}',
        )


def step_events(steps: pd.DataFrame, place: Place) -> Iterator[pa.Array]:
    """Training steps on the steps process, one track per process that ran them."""
    names = pd.Categorical([f"step #{number}" for number in range(1, len(steps) + 1)])
    if len(steps):
        yield join(
            '{"ph":"X","cat":"tracekit_step","name":',
            Quoted(names)[0 : len(steps)],
            f',"pid":{place.steps_pid},"tid":',
            integers(place.host_pid(steps["pid"].to_numpy())),
            ',"ts":',
            microseconds(steps["start"].to_numpy()),
            ',"dur":',
            microseconds(steps["duration"].to_numpy()),
            "}",
        )


def metadata_events(
    place: Place,
    gpus: set[int],
    streams: pd.DataFrame,
    threads: pd.DataFrame,
    has_steps: bool,
    gpu_names: dict[int, str],
    named_tracks: Sequence[tuple[int, int, str]] = (),
) -> list[str]:
    """Names and order of the processes and tracks (few: one per GPU, stream, process and thread;
    ``named_tracks``: (pid, tid, name) of other tracks, below a GPU's streams)."""
    events: list[dict] = []

    def process(pid: int, name: str, order: int) -> None:
        events.append({"ph": "M", "name": "process_name", "pid": pid, "args": {"name": name}})
        events.append({"ph": "M", "name": "process_sort_index", "pid": pid, "args": {"sort_index": order}})

    def thread(pid: int, tid: int, name: str, order: int) -> None:
        events.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": name}})
        events.append({"ph": "M", "name": "thread_sort_index", "pid": pid, "tid": tid, "args": {"sort_index": order}})

    base = place.index * 1000
    if has_steps:
        process(place.steps_pid, place.name("steps"), base)
    for device in sorted(int(value) for value in gpus):
        pid = int(place.gpu_pid(np.array([device]))[0])
        known = f"GPU {device}" if device >= 0 else "GPU (unknown)"
        process(pid, place.name(f"{known} {gpu_names.get(device, '')}".rstrip()), base + 1 + max(device, 0))
        thread(pid, IDLE_TID, "idle (by cause)", -1)
    for device, stream in streams.itertuples(index=False):
        pid = int(place.gpu_pid(np.array([device]))[0])
        thread(pid, int(stream), f"stream {stream}", int(stream))
    for order, (pid, tid, name) in enumerate(named_tracks):
        thread(pid, tid, name, 2**30 + order)  # below the GPU's streams
    for pid in sorted(set(threads["pid"].tolist())):
        process(int(place.host_pid(np.array([pid]))[0]), place.name(f"process {pid}"), base + 500)
    for pid, tid in threads.itertuples(index=False):
        thread(int(place.host_pid(np.array([pid]))[0]), int(tid), f"thread {tid}", 0)
    return [json.dumps(event, ensure_ascii=False) for event in events]


def memory_events(
    times: np.ndarray, allocated: np.ndarray, reserved: np.ndarray, device: int, place: Place
) -> Iterator[pa.Array]:
    """A counter track of the GPU's allocated and reserved memory (MiB) at each change, on its process."""
    pid = int(place.gpu_pid(np.array([device]))[0])
    for rows in slices(len(times)):
        yield join(
            f'{{"ph":"C","name":"memory (MiB)","pid":{pid},"ts":',
            microseconds(times[rows]),
            ',"args":{"allocated":',
            _mib(allocated[rows]),
            ',"reserved":',
            _mib(reserved[rows]),
            "}}",
        )


def _mib(values: np.ndarray) -> pa.Array:
    """Bytes as MiB with three decimals, from the integers (a counter's text; KiB-exact)."""
    kib = np.asarray(values, dtype=np.int64) // 1024
    return microseconds(kib * 1000 // 1024)  # thousandths of a MiB, written as MiB.fff
