"""torch.profiler events, decoded by type a chunk at a time, into growing columns.

Each chunk of events (``json_stream``) is decoded by msgspec into small structs that hold only the
fields tracekit reads (every other field is skipped by the decoder without building it), sorted into
GPU operations, host launch calls, ranges and Python calls by their category, and turned into numpy columns at
once; the structs die with the chunk, so memory follows the columns, not the events. Times are read
from their text (``decimal_text``). Category names changed across torch versions (``Kernel`` and
``kernel``, ``Runtime`` and ``cuda_runtime``, ``Operator`` and ``cpu_op``); both spellings are read.
"""

from __future__ import annotations

import zlib
from collections import Counter, defaultdict
from typing import Any

import msgspec
import numpy as np
import pandas as pd

from tracekit.sources.kineto.comms import SPARSE, SPARSE_COLUMNS, TEXT_COLUMNS, add_comms
from tracekit.sources.kineto.decimal_text import microseconds_to_ns
from tracekit.sources.kineto.json_stream import event_spans
from tracekit.sources.kineto.ours import LANE_OF

ABSENT = msgspec.Raw()
GPU_KINDS = {"kernel": 0, "Kernel": 0, "gpu_memcpy": 1, "Memcpy": 1, "gpu_memset": 2, "Memset": 2}
LAUNCH_CATEGORIES = frozenset({"cuda_runtime", "cuda_driver", "Runtime"})
# Ranges by category: record_function annotations, CPU operators (torch 1.8 wrote both as
# "Operator"), and the annotations' spans on the GPU.
RANGE_DOMAINS = {"user_annotation": "", "cpu_op": "cpu_op", "Operator": "cpu_op", "gpu_user_annotation": "gpu"}
DOMAINS = ("", "cpu_op", "gpu")
ROLES = {
    **dict.fromkeys(GPU_KINDS, "gpu"),
    **dict.fromkeys(LAUNCH_CATEGORIES, "launch"),
    **dict.fromkeys(RANGE_DOMAINS, "range"),
    "cuda_sync": "sync",  # the GPU side of synchronizations (torch 2.1+ with CUDA sync events recorded)
    "python_function": "python",  # with_stack=True: the Python calls (``python_calls``, apart from ranges)
}
ROLE_NAMES = ("gpu", "launch", "range", "sync", "python")
PYTHON_IDS = ("python_id", "parent_id", "module_id")  # a Python call's columns besides its times, name and thread
# metadata events that name a host process or thread (the tid of a process's own name: -1)
NAME_EVENTS = frozenset({"process_name", "thread_name"})
# columns holding codes into ``EventColumns.names["shapes"]`` (the text args' vocabulary): recorded shapes, and
# the collectives' texts
SHAPE_COLUMNS = ("dims", "types", "concrete")
TEXT_CODE_COLUMNS = (*SHAPE_COLUMNS, *TEXT_COLUMNS)


Number = int | float | str | bool | None  # what a numeric arg may hold in a file (``_int`` reads it)


class Args(msgspec.Struct, gc=False):
    """The ``args`` fields tracekit reads, with the value an absent one reads as. Any of them may be
    text: ROCm's HIP events write ``"stream": "0x0"`` and ``"bytes": "128"``; a decimal string reads as
    its number, other text, a fraction, true/false or null as the absent value (``_ints``), never as a
    reason to drop the event."""

    correlation: Number = -1
    device: Number = -1
    stream: Number = -1
    # Any: a value of another shape (a string, nested lists) reads as unknown, never drops its kernel
    grid: Any = None  # None, not []: msgspec would build an empty list for every event
    block: Any = None
    bytes: Number = 0
    # copies and sets: the profiler's own bandwidth (from the device's exact duration; the trace's dur may be
    # whole µs)
    bandwidth: Number = msgspec.field(default=None, name="memory bandwidth (GB/s)")
    size: Number = -1  # a copy call's bytes (ROCm's hipMemcpy*: its GPU-side copy records none)
    wait_on_stream: Number = -1  # cuda_sync "Stream Wait Event"/"Event Sync": the stream that recorded the event
    wait_on_cuda_event_record_corr_id: Number = -1  # ... and the correlation id of its cudaEventRecord call
    # kernels: the resources CUDA's occupancy calculator needs, and the profiler's own estimate
    registers: Any = msgspec.field(default=-1, name="registers per thread")
    shared_memory: Any = msgspec.field(default=-1, name="shared memory")
    occupancy: Any = msgspec.field(default=None, name="est. achieved occupancy %")
    # CPU operators recorded with record_shapes (kept as their JSON text: read per distinct value) and with_flops
    input_dims: msgspec.Raw = msgspec.field(default=msgspec.Raw(), name="Input Dims")
    input_types: msgspec.Raw = msgspec.field(default=msgspec.Raw(), name="Input type")
    concrete_inputs: msgspec.Raw = msgspec.field(default=msgspec.Raw(), name="Concrete Inputs")
    flops: Any = None
    # a collective's record (``comms``): record_param_comms, and newer torch's NCCL kernels
    comm_name: Any = msgspec.field(default=None, name="Collective name")
    comm_dtype: Any = msgspec.field(default=None, name="dtype")
    comm_in_split: Any = msgspec.field(default=None, name="In split size")
    comm_out_split: Any = msgspec.field(default=None, name="Out split size")
    comm_group_name: Any = msgspec.field(default=None, name="Process Group Name")
    comm_group_desc: Any = msgspec.field(default=None, name="Process Group Description")
    comm_group_ranks: Any = msgspec.field(default=None, name="Process Group Ranks")
    comm_in_elements: Any = msgspec.field(default=None, name="In msg nelems")
    comm_out_elements: Any = msgspec.field(default=None, name="Out msg nelems")
    comm_group_size: Any = msgspec.field(default=None, name="Group size")
    comm_rank: Any = msgspec.field(default=None, name="Rank")
    comm_src_rank: Any = msgspec.field(default=None, name="Src Rank")
    comm_dst_rank: Any = msgspec.field(default=None, name="Dst Rank")
    comm_seq: Any = msgspec.field(default=None, name="Seq")
    # a python_function event's ids: its own, its caller's (null: none) and its nn.Module's
    python_id: Number = msgspec.field(default=-1, name="Python id")
    python_parent: Number = msgspec.field(default=-1, name="Python parent id")
    python_module: Number = msgspec.field(default=-1, name="Python module id")
    # a process_name or thread_name metadata event's name, and a lane's thread or stream (tracekit's timelines;
    # its JSON text: in another file the arg may hold anything, even 1e400, which names no lane and drops nothing)
    name: Any = None
    lane_of: msgspec.Raw = msgspec.field(default=msgspec.Raw(), name=LANE_OF)


NO_ARGS = Args()
NO_DIMS = [0, 0, 0]


class Event(msgspec.Struct, gc=False):
    """One trace event; ``ts``/``dur`` stay text (µs), ``pid``/``tid`` are strings in old traces."""

    ph: str = ""
    cat: str = ""
    name: str = ""
    pid: int | str = -1
    tid: int | str = -1
    ts: msgspec.Raw = ABSENT
    dur: msgspec.Raw = ABSENT
    args: Args | None = None


EVENTS = msgspec.json.Decoder(list[Event])
RAW_EVENTS = msgspec.json.Decoder(list[msgspec.Raw])
LANE_DECODER = msgspec.json.Decoder(int)  # (strict: no bool, float or text)
ONE_EVENT = msgspec.json.Decoder(Event)


class EventColumns:
    """The columns of every chunk so far: ``gpu``, ``launch``, ``range``, ``sync`` and ``python`` each map a column name to a
    list of arrays (one per chunk); names are codes into ``names[role]``."""

    def __init__(self):
        self.columns: dict[str, defaultdict[str, list]] = {role: defaultdict(list) for role in ROLE_NAMES}
        self.names: dict[str, dict[str, int]] = {role: {} for role in self.columns}
        self.names["shapes"] = {"": 0}  # the JSON text of recorded inputs (``_add_shapes``); "" when none
        self.unusable: Counter[str] = Counter()  # role -> events left out for unusable values
        self.malformed = 0  # events that do not decode as an event object at all
        self.old_operators = False  # torch 1.8's "Operator" category: annotations and operators alike
        self.names_recorded: list[tuple[int, int, str]] = []  # (pid, tid, name) of process_name/thread_name
        self.lanes_recorded: list[tuple[int, int, int]] = []  # (pid, tid, the tid beside it) of tracekit's lanes

    def decode(self, chunk: bytes) -> bool | None:
        """Add a chunk ("[" + events + "]"); None when it is not well-formed JSON (the caller cuts again).
        Events that do not decode (fields of the wrong type, text that is not UTF-8, nesting deeper
        than the decoder goes) are left out one by one and counted."""
        try:
            events = EVENTS.decode(chunk)
        except (msgspec.ValidationError, UnicodeDecodeError, RecursionError):
            events = self._one_by_one(chunk)
            if events is None:
                return None
        except msgspec.DecodeError:
            return None
        self.add(events)
        return True

    def _one_by_one(self, chunk: bytes) -> list[Event] | None:
        try:
            raws = RAW_EVENTS.decode(chunk)  # skips each event's content: only the JSON syntax is checked
        except RecursionError:  # nesting deeper than the decoder goes: split by structure instead
            raws = [memoryview(chunk)[start:end] for start, end in event_spans(chunk)]
        except msgspec.DecodeError:
            return None
        events = []
        for raw in raws:
            try:
                events.append(ONE_EVENT.decode(raw))
            except (msgspec.ValidationError, msgspec.DecodeError, UnicodeDecodeError, RecursionError):
                self.malformed += 1
        return events

    def add(self, events: list[Event]) -> None:
        buckets: dict[str, list[Event]] = {role: [] for role in ROLE_NAMES}
        roles = ROLES
        for event in events:
            role = roles.get(event.cat)
            if role is not None and event.ph == "X":
                buckets[role].append(event)
            elif event.ph == "M" and event.name in NAME_EVENTS:
                self._add_name(event)
        for role, rows in buckets.items():
            if rows:
                self._add_rows(role, rows)

    def _add_rows(self, role: str, rows: list[Event]) -> None:
        start, start_ok = microseconds_to_ns([row.ts for row in rows])
        duration, duration_ok = microseconds_to_ns([row.dur for row in rows])
        usable = start_ok & duration_ok & (duration >= 0)
        usable &= start <= np.iinfo(np.int64).max - np.where(usable, duration, 0)
        if not usable.all():
            self.unusable[role] += int((~usable).sum())
            rows = [row for row, keep in zip(rows, usable.tolist(), strict=True) if keep]
            start, duration = start[usable], duration[usable]
        if not rows:
            return
        out = self.columns[role]
        out["start"].append(start)
        out["duration"].append(duration)
        out["name"].append(_codes([row.name for row in rows], self.names[role]))
        pid = self._ids([row.pid for row in rows])
        tid = self._ids([row.tid for row in rows])
        args = [row.args or NO_ARGS for row in rows]
        if role not in ("range", "python"):
            out["correlation"].append(_ints([arg.correlation for arg in args], -1))
        if role == "launch":
            out["size"].append(_ints([arg.size for arg in args], -1))
        if role == "gpu":
            self._add_gpu(out, rows, args, pid, tid)
        elif role == "sync":
            out["device"].append(_ints([arg.device for arg in args], -1))
            out["stream"].append(_ints([arg.stream for arg in args], -1))
            out["wait_stream"].append(_ints([arg.wait_on_stream for arg in args], -1))
            out["record_correlation"].append(_ints([arg.wait_on_cuda_event_record_corr_id for arg in args], -1))
        else:
            out["pid"].append(pid)
            out["tid"].append(tid)
        if role == "python":
            out["python_id"].append(_ints([arg.python_id for arg in args], -1))
            # a root's null parent as -1 here, so that _ints stays vectorised
            out["parent_id"].append(_ints([-1 if arg.python_parent is None else arg.python_parent for arg in args], -1))
            out["module_id"].append(_ints([arg.python_module for arg in args], -1))
        if role in ("range", "gpu"):
            described = [(at, arg) for at, arg in enumerate(args) if arg.comm_name is not None]
            add_comms(out, described, lambda texts: _codes(texts, self.names["shapes"]), _ints)
        if role == "range":
            self._add_shapes(out, args)
            domains = [RANGE_DOMAINS[row.cat] for row in rows]
            out["domain"].append(_codes(domains, dict(zip(DOMAINS, range(len(DOMAINS)), strict=True))).astype(np.int8))
            self.old_operators = self.old_operators or "Operator" in {row.cat for row in rows}

    def _add_gpu(self, out: dict, rows: list[Event], args: list[Args], pid: np.ndarray, tid: np.ndarray) -> None:
        out["kind"].append(np.asarray([GPU_KINDS[row.cat] for row in rows], dtype=np.int8))
        device = _ints([arg.device for arg in args], -1)
        out["device"].append(np.where(device >= 0, device, pid))  # old traces: the pid is the device
        stream = _ints([arg.stream for arg in args], -1)
        out["stream"].append(np.where(stream >= 0, stream, tid))
        out["bytes"].append(_ints([arg.bytes for arg in args], 0))
        out["rate"].append(_rates([arg.bandwidth for arg in args]))
        out["registers"].append(_ints([_scalar(arg.registers) for arg in args], -1))
        out["shared_memory"].append(_ints([_scalar(arg.shared_memory) for arg in args], -1))
        out["occupancy"].append(_rates([arg.occupancy for arg in args]))
        for axis in ("grid", "block"):
            dims = [_dims(getattr(arg, axis)) for arg in args]
            table = _ints(dims, 0).reshape(len(args), 3) if dims else np.zeros((0, 3), dtype=np.int64)
            for index, dim in enumerate("xyz"):
                out[f"{axis}_{dim}"].append(table[:, index])

    def _add_name(self, event: Event) -> None:
        """A process's or thread's name (few: one per process, thread and GPU stream), its ids read as events'."""
        name = event.args.name if event.args is not None else None
        if isinstance(name, str) and name:
            tid = -1 if event.name == "process_name" else _id(event.tid)
            self.names_recorded.append((_id(event.pid), tid, name))
            lane_of = _lane_of(event.args.lane_of) if event.args is not None and tid != -1 else None
            if lane_of is not None:
                self.lanes_recorded.append((_id(event.pid), tid, lane_of))

    def _add_shapes(self, out: dict, args: list[Args]) -> None:
        """The recorded inputs of CPU operators, as codes of their JSON text (``shapes`` names): a trace
        repeats few distinct shapes, so a million operators cost a million small ints."""
        codes = self.names["shapes"]
        for column, field in (("dims", "input_dims"), ("types", "input_types"), ("concrete", "concrete_inputs")):
            texts = [bytes(getattr(arg, field)).decode() for arg in args]
            out[column].append(_codes(texts, codes))
        out["flops"].append(_rates([arg.flops for arg in args]))

    def _ids(self, values: list) -> np.ndarray:
        """Process or thread ids: ints as they are; strings of up to 9 digits ("1890023232" in torch 1.8,
        with an optional "-") as their number; other strings ("stream 7", "python") and ints outside
        int32 as a negative id below -1 from a hash of their text, the same in every chunk and process
        (so the id of a value never depends on its neighbours)."""
        numbers = np.asarray(values)
        if numbers.dtype.kind == "i" and (len(numbers) == 0 or (numbers.min() >= -(2**31) and numbers.max() < 2**31)):
            return numbers.astype(np.int64)
        return np.asarray([_id(value) for value in values], dtype=np.int64)

    def merge(self, part: EventColumns) -> None:
        """Append the columns ``part`` decoded (another chunk, maybe in another process)."""
        shapes = self.names["shapes"]
        shape_mapping = np.fromiter((shapes.setdefault(text, len(shapes)) for text in part.names["shapes"]), np.int64)
        for role, columns in part.columns.items():
            if not columns:
                continue
            codes = self.names[role]
            mapping = np.fromiter((codes.setdefault(name, len(codes)) for name in part.names[role]), np.int64)
            for name, arrays in columns.items():
                remap = mapping if name == "name" else shape_mapping if name in TEXT_CODE_COLUMNS else None
                self.columns[role][name] += [remap[array] for array in arrays] if remap is not None else arrays
        self.unusable.update(part.unusable)
        self.malformed += part.malformed
        self.old_operators = self.old_operators or part.old_operators
        self.names_recorded += part.names_recorded
        self.lanes_recorded += part.lanes_recorded

    def gathered(self, role: str) -> dict[str, np.ndarray]:
        """The role's columns, every chunk joined (empty arrays when no event had the role); the collectives'
        sparse columns apart (``sparse``). Events on a lane tracekit's timeline made are back on the thread
        (or stream) it is beside."""
        out = {name: np.concatenate(parts) for name, parts in self.columns[role].items() if name not in SPARSE_COLUMNS}
        if self.lanes_recorded and "tid" in out and "pid" in out:
            lanes = np.asarray(self.lanes_recorded, dtype=np.int64)
            keys = (lanes[:, 0] << 32) ^ (lanes[:, 1] & 0xFFFFFFFF)
            order = np.argsort(keys, kind="stable")  # a thread named twice: its last name's lane, as its name
            found = (out["pid"].astype(np.int64) << 32) ^ (out["tid"].astype(np.int64) & 0xFFFFFFFF)
            at = np.maximum(np.searchsorted(keys[order], found, side="right") - 1, 0)
            on_lane = keys[order][at] == found
            out["tid"] = np.where(on_lane, lanes[order, 2][at], out["tid"])
        return out

    def sparse(self, role: str) -> dict[str, np.ndarray]:
        """The role's collectives (``comms``): their positions among all the role's rows (each chunk's shifted by
        the rows of the chunks before it) and their values; empty when none."""
        columns = self.columns[role]
        if not columns.get(SPARSE):
            return {}
        joined = {name: np.concatenate(columns[name]) for name in SPARSE_COLUMNS if name != SPARSE}
        offsets = np.cumsum([0, *(len(part) for part in columns["start"][:-1])])
        joined[SPARSE] = np.concatenate([part + offset for part, offset in zip(columns[SPARSE], offsets)])
        return joined


def _scalar(value):
    """A value as ``_int`` reads it; a list or object (a damaged field) as absent."""
    return None if isinstance(value, (list, dict)) else value


def _dims(value) -> list:
    """A launch dimension's three values ([x, y, z] of scalars); anything else reads as not recorded (0s)."""
    if isinstance(value, list) and len(value) == 3 and not any(isinstance(item, (list, dict)) for item in value):
        return value
    return NO_DIMS


def _lane_of(text: msgspec.Raw) -> int | None:
    """The thread or stream a lane of tracekit's timeline is beside (its "lane of" arg): an int32, else None."""
    try:
        value = LANE_DECODER.decode(text) if len(text) else None
    except (msgspec.ValidationError, msgspec.DecodeError):
        return None
    return value if value is not None and -(2**31) <= value < 2**31 else None


def _id(value) -> int:
    if type(value) is int and -(2**31) <= value < 2**31:
        return value
    text = str(value)
    if text.lstrip("-").isdigit() and len(text) <= 10 and -(2**31) <= int(text) < 2**31:
        return int(text)
    return -2 - (zlib.crc32(text.encode()) & 0x3FFFFFFF)  # fits int32, as gpu_ops' launching pid


def _ints(values: list, missing: int) -> np.ndarray:
    """int64 of ints (or lists of ints), one value at a time by ``_int`` unless they are all ints within
    int64: so a value reads the same whatever its neighbours in the chunk."""
    array = np.asarray(values)
    if array.dtype.kind == "i" or (
        array.dtype.kind == "u" and (not array.size or array.max() <= np.iinfo(np.int64).max)
    ):
        return array.astype(np.int64)
    flat = np.asarray(values, dtype=object)
    return (
        np.vectorize(lambda value: _int(value, missing), otypes=[np.int64])(flat)
        if flat.size
        else flat.astype(np.int64)
    )


def _rates(values: list) -> np.ndarray:
    """float64 GB/s of numbers; NaN for anything else (absent, text, true/false)."""
    return np.asarray([float(value) if type(value) in (int, float) else np.nan for value in values], dtype=np.float64)


def _int(value, missing: int) -> int:
    """An int within int64 as it is; decimal ASCII text ("128") or a whole float (128.0) as its number;
    anything else (other text, a fraction, true/false, null, a number past int64) as ``missing``."""
    if type(value) is str:
        text = value.strip()
        value = int(text) if text.lstrip("+-").isdigit() and text.isascii() else missing
    elif type(value) is float:
        value = int(value) if value.is_integer() and abs(value) < 2**63 else missing
    return value if type(value) is int and -(2**63) <= value < 2**63 else missing


def _codes(values: list[str], codes: dict[str, int]) -> np.ndarray:
    """Codes of ``values`` in ``codes`` (new values get the next codes): hashed in C by pandas, so the
    Python dictionary sees only each chunk's distinct values."""
    local, uniques = pd.factorize(np.asarray(values, dtype=object), use_na_sentinel=False)
    mapping = np.fromiter((codes.setdefault(value, len(codes)) for value in uniques), np.int64, len(uniques))
    return mapping[local]
