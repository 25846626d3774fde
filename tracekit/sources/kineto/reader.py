"""torch.profiler (Kineto) Chrome-trace JSON -> normalized ``Trace``.

Reads ``.json`` and ``.json.gz`` as ``export_chrome_trace`` and ``tensorboard_trace_handler`` write
them, torch 1.8 to 2.x, CUDA and ROCm. The document is streamed (``json_stream``) and decoded by type
(``kineto_events``), so a trace of a million kernels never becomes a million dicts; the first table a
command asks for parses the file once and every table comes from that pass.

Into the column contract (``model.schema``): kernels, memcpy and memset events are ``gpu_ops``
(device and stream from their args; the launching process from the launch call with the same
``correlation``, never from flow events, which changed category between versions and are absent
from sampled traces); ``cuda_runtime``/``cuda_driver`` calls are ``launches``; record_function
annotations, CPU operators and the annotations' GPU-side spans are ``ranges``, in the domains "",
"cpu_op" and "gpu" (the trace has no NVTX domains; the note says so); with_stack's ``python_function``
events are ``python_calls``, an optional table apart from the ranges (no analysis counts them). Times are
integer nanoseconds exactly as the text says (``decimal_text``), on the trace's own clock.
"""

from __future__ import annotations

import json
import threading
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path

import msgspec
import numpy as np
import pandas as pd

from tracekit.model.nesting import nest_ranges
from tracekit.model.schema import (
    COLLECTIVE_ARGS,
    COPY_RATES,
    GPU_OP_KINDS,
    GPU_OPS,
    OCCUPANCY_ESTIMATES,
    OP_SHAPES,
    PYTHON_CALLS,
    RANGE_STYLES,
    THREAD_NAMES,
)
from tracekit.model.trace import TORCH_PROFILER, Trace, TraceMeta
from tracekit.sources.kineto.comms import collective_frame
from tracekit.sources.kineto.events import DOMAINS, PYTHON_IDS, SHAPE_COLUMNS, EventColumns
from tracekit.sources.kineto.gpu_columns import bytes_from_calls, fits_in, gpu_syncs, launching_pid, time_columns
from tracekit.sources.kineto.header import facts as header_facts
from tracekit.sources.kineto.header import read_header, whole_header
from tracekit.sources.kineto.json_stream import (
    Skeleton,
    decoded_chunks,
)
from tracekit.sources.kineto.parallel import Refused, parallel_columns, worker_count
from tracekit.sources.short_names import short_name_column

TOOL = TORCH_PROFILER
DOMAIN_NOTE = (
    "torch.profiler traces have no NVTX domains: record_function annotations are the default domain, "
    "CPU operators domain cpu_op, the annotations' GPU-side spans domain gpu (their GPU columns stay empty: "
    "GPU work counts for the annotation whose thread launched it)"
)
OLD_OPERATOR_NOTE = (
    "this trace (torch 1.8 era) does not tell record_function annotations from operators: both are domain cpu_op"
)


def read_kineto_trace(path: Path) -> Trace:
    """The trace of a torch.profiler JSON file: metadata now from the text before the events, completed
    from the text after them when the tables load (one pass over the file for all of them)."""
    path = Path(path)
    meta = TraceMeta(source=str(path), tool=TOOL)
    meta.complete(header_facts(read_header(path)))

    tables = _Tables(path)
    return Trace(
        meta,
        {
            table: (lambda table=table: tables.get(table))
            for table in (
                "gpu_ops",
                "launches",
                "ranges",
                "gpu_syncs",
                "copy_rates",
                "occupancy_estimates",
                "op_shapes",
                "collective_args",
                "thread_names",
                "python_calls",
            )
        },
    )


class _Tables:
    """One file's tables: the file is parsed once, each table built from the columns when first asked
    for (``kernels`` never pays for nesting millions of CPU-op ranges)."""

    def __init__(self, path: Path):
        self.path = path
        self.lock = threading.RLock()  # a command loads tables on threads; gpu_ops asks for launches
        self.parsed: tuple[EventColumns, Skeleton] | None = None
        self.built: dict[str, pd.DataFrame] = {}

    def get(self, table: str) -> pd.DataFrame:
        with self.lock:
            if table not in self.built:
                if self.parsed is None:
                    self.parsed = _parse(self.path)
                self.built[table] = getattr(self, f"_build_{table}")(*self.parsed)
            return self.built[table]

    def _build_launches(self, columns: EventColumns, skeleton: Skeleton) -> pd.DataFrame:
        frame = _launches(columns.gathered("launch"), columns.names["launch"])
        frame.attrs["dropped"] = columns.unusable["launch"]
        return frame

    def _build_gpu_ops(self, columns: EventColumns, skeleton: Skeleton) -> pd.DataFrame:
        gpu = columns.gathered("gpu")
        if gpu:
            gpu["bytes"] = bytes_from_calls(gpu, columns.gathered("launch"))
        frame = _gpu_ops(gpu, columns.names["gpu"], self.get("launches")) if gpu else GPU_OPS.empty()
        frame.attrs.setdefault("dropped", 0)
        frame.attrs["dropped"] += columns.unusable["gpu"]
        notes = []
        if columns.malformed:
            count = columns.malformed
            notes.append(
                f"{count:,} event{'s' if count != 1 else ''} could not be read (fields of the wrong type, "
                "text that is not UTF-8, or nesting too deep) and were left out"
            )
        if not _readable_tail(skeleton):
            notes.append("the text after the events is damaged or cut short: the metadata there was not read")
        if notes:
            frame.attrs["notes"] = "\n".join(notes)
        facts = header_facts(whole_header(skeleton))
        described = {gpu["id"] for gpu in facts["gpus"]}
        facts["gpus"] += [  # devices the events use that deviceProperties does not describe (torch 1.8 has none)
            {"id": device} for device in np.unique(frame["device"].to_numpy()).tolist() if device not in described
        ]
        frame.attrs["meta"] = json.dumps(facts)  # kept by the table cache too
        return frame

    def _build_copy_rates(self, columns: EventColumns, skeleton: Skeleton) -> pd.DataFrame:
        """The profiler's bandwidth of each copy and set, by its row in gpu_ops (the same rows left out)."""
        gpu = columns.gathered("gpu")
        if not gpu or "rate" not in gpu:
            return COPY_RATES.empty()
        fits = fits_in(gpu["device"], np.int16) & fits_in(gpu["stream"], np.int32)
        kind, rate = gpu["kind"][fits], gpu["rate"][fits]
        rows = np.flatnonzero((kind != 0) & np.isfinite(rate))
        return pd.DataFrame({"op": rows.astype(np.int64), "bandwidth": rate[rows]})

    def _build_occupancy_estimates(self, columns: EventColumns, skeleton: Skeleton) -> pd.DataFrame:
        """The profiler's estimated occupancy of each kernel that has one, by its row in gpu_ops."""
        gpu = columns.gathered("gpu")
        if not gpu or "occupancy" not in gpu:
            return OCCUPANCY_ESTIMATES.empty()
        fits = fits_in(gpu["device"], np.int16) & fits_in(gpu["stream"], np.int32)
        kind, percent = gpu["kind"][fits], gpu["occupancy"][fits]
        rows = np.flatnonzero((kind == 0) & np.isfinite(percent))
        return pd.DataFrame({"op": rows.astype(np.int64), "percent": percent[rows]})

    def _build_thread_names(self, columns: EventColumns, skeleton: Skeleton) -> pd.DataFrame:
        """The processes' and threads' names the metadata events recorded (a thread renamed: its last name)."""
        if not columns.names_recorded:
            return THREAD_NAMES.empty()
        frame = pd.DataFrame(columns.names_recorded, columns=["pid", "tid", "name"])
        frame = frame.drop_duplicates(["pid", "tid"], keep="last").reset_index(drop=True)
        return frame.astype({"pid": "int64", "tid": "int64", "name": "category"})

    def _build_python_calls(self, columns: EventColumns, skeleton: Skeleton) -> pd.DataFrame:
        """The Python calls with_stack recorded, in file order (a call's ids as recorded; -1: none)."""
        calls = columns.gathered("python")
        if not calls:
            return PYTHON_CALLS.empty()
        return pd.DataFrame(
            {
                **time_columns(calls),
                "name": _names(calls["name"], columns.names["python"]),
                **{column: calls[column] for column in ("pid", "tid", *PYTHON_IDS)},
            }
        )

    def _build_op_shapes(self, columns: EventColumns, skeleton: Skeleton) -> pd.DataFrame:
        """The recorded inputs of the operators that have them, by range_id (the ranges' row order)."""
        ranges = columns.gathered("range")
        if not ranges or "dims" not in ranges:
            return OP_SHAPES.empty()
        rows = np.flatnonzero((ranges["dims"] != 0) | np.isfinite(ranges["flops"]))
        texts = list(columns.names["shapes"])
        return pd.DataFrame(
            {
                "range_id": rows.astype(np.int64),
                **{column: _categorical(ranges[column][rows], texts) for column in SHAPE_COLUMNS},
                "flops": ranges["flops"][rows],
            }
        )

    def _build_collective_args(self, columns: EventColumns, skeleton: Skeleton) -> pd.DataFrame:
        """Each collective's recorded args: from its record_param_comms range (by range_id: the ranges' row
        order) and from GPU ops that carry them (by their row in gpu_ops; the ops left out, out)."""
        parts = []
        ranges, gpu = columns.sparse("range"), columns.sparse("gpu")
        if ranges:
            parts.append(("range", ranges, None))
        if gpu:
            dense = columns.gathered("gpu")
            fits = fits_in(dense["device"], np.int16) & fits_in(dense["stream"], np.int32)
            parts.append(("gpu_op", gpu, np.where(fits, np.cumsum(fits) - 1, -1)))
        return collective_frame(parts, list(columns.names["shapes"])) if parts else COLLECTIVE_ARGS.empty()

    def _build_gpu_syncs(self, columns: EventColumns, skeleton: Skeleton) -> pd.DataFrame:
        return gpu_syncs(columns.gathered("sync"), columns.names["sync"], self.get("launches"))

    def _build_ranges(self, columns: EventColumns, skeleton: Skeleton) -> pd.DataFrame:
        frame = _ranges(columns.gathered("range"), columns.names["range"])
        frame.attrs["dropped"] = columns.unusable["range"]
        # what the domains of these ranges mean: said where domains are shown or chosen (Trace.range_notes)
        frame.attrs["range_notes"] = DOMAIN_NOTE + (f"\n{OLD_OPERATOR_NOTE}" if columns.old_operators else "")
        return frame


def _readable_tail(skeleton: Skeleton) -> bool:
    """Whether the text around the events is well-formed JSON (a trace cut short after its events,
    or with junk after them, still reads: the note says what was lost)."""
    if skeleton.array_document:
        return not bytes(skeleton.tail[1:]).strip()
    try:
        msgspec.json.decode(skeleton.document())
    except (msgspec.DecodeError, UnicodeDecodeError, RecursionError):
        return False
    return True


def _parse(path: Path) -> tuple[EventColumns, Skeleton]:
    """Every event's columns and the rest of the document (a CPU-only trace has no GPU columns: its
    GPU table is empty, as an nsys export's without CUDA is, and the kernel commands say so)."""
    return _columns(path)


def _columns(path: Path) -> tuple[EventColumns, Skeleton]:
    """The events' columns and the rest of the document: on worker processes for a large file (see
    ``kineto_parallel``), else (or when a worker refused a chunk) here."""
    workers = worker_count(path)
    if workers:
        skeleton = Skeleton()
        try:
            return parallel_columns(path, skeleton, workers), skeleton
        except (Refused, BrokenProcessPool):  # a wrong quick cut, or a worker that died: one process, exactly
            pass
    columns, skeleton = EventColumns(), Skeleton()
    for _ in decoded_chunks(path, skeleton, columns.decode):
        pass
    return columns, skeleton


def _names(codes: np.ndarray, names: dict[str, int]) -> pd.Categorical:
    return _categorical(codes, list(names))


def _categorical(codes: np.ndarray, labels: list[str]) -> pd.Categorical:
    """Codes into ``labels``; labels that two codes share (a name in two domains cannot, but a short
    name can) are merged, as a categorical's categories must be unique."""
    categories, inverse = np.unique(np.asarray(labels, dtype=object), return_inverse=True)
    return pd.Categorical.from_codes(inverse.reshape(-1)[codes], categories=pd.Index(categories, dtype=object))


def _label(domain: str, text: str) -> str:
    return f"{domain}:{text}" if domain else text


def _launches(columns: dict[str, np.ndarray], names: dict[str, int]) -> pd.DataFrame:
    if not columns:
        from tracekit.model.schema import LAUNCHES

        return LAUNCHES.empty()
    return pd.DataFrame(
        {
            **time_columns(columns),
            "name": _names(columns["name"], names),
            "correlation_id": columns["correlation"],
            "pid": columns["pid"],
            "tid": columns["tid"],
        }
    )


def _gpu_ops(columns: dict[str, np.ndarray], names: dict[str, int], launches: pd.DataFrame) -> pd.DataFrame:
    """The GPU-op table; ops whose device or stream does not fit the contract's int16/int32 are left
    out and counted (``attrs["dropped"]``), not wrapped onto another device."""
    fits = fits_in(columns["device"], np.int16) & fits_in(columns["stream"], np.int32)
    if not fits.all():
        columns = {key: values[fits] for key, values in columns.items()}
    name = _names(columns["name"], names)
    frame = pd.DataFrame(
        {
            **time_columns(columns),
            "kind": pd.Categorical.from_codes(columns["kind"], categories=list(GPU_OP_KINDS)),
            "name": name,
            "short_name": short_name_column(name, columns["kind"] == GPU_OP_KINDS.index("kernel")),
            "device": columns["device"].astype(np.int16),
            "stream": columns["stream"].astype(np.int32),
            "correlation_id": columns["correlation"],
            "pid": launching_pid(columns["correlation"], launches).astype(np.int32),
            **{
                f"{axis}_{dim}": np.clip(columns[f"{axis}_{dim}"], 0, 2**31 - 1).astype(np.int32)
                for axis in ("grid", "block")
                for dim in "xyz"
            },
            # copies and sets have no kernel resources: 0, as the contract says
            **{
                column: np.where(columns["kind"] == GPU_OP_KINDS.index("kernel"), columns[source], 0).astype(dtype)
                for column, source, dtype in (
                    ("registers_per_thread", "registers", np.int32),
                    ("shared_memory", "shared_memory", np.int64),
                )
            },
            "bytes": columns["bytes"],
        }
    )
    frame.attrs["dropped"] = int((~fits).sum())
    return frame


def _ranges(columns: dict[str, np.ndarray], names: dict[str, int]) -> pd.DataFrame:
    from tracekit.model.schema import RANGES

    if not columns:
        return RANGES.empty()
    times = time_columns(columns)
    domain_codes = columns["domain"]
    # A range's name is "domain:text": one string per distinct (text, domain), not per range.
    pairs, pair_codes = np.unique(columns["name"] * len(DOMAINS) + domain_codes, return_inverse=True)
    texts = list(names)
    labels = [_label(DOMAINS[pair % len(DOMAINS)], texts[pair // len(DOMAINS)]) for pair in pairs.tolist()]
    pid, tid = columns["pid"], columns["tid"]
    thread = pd.DataFrame({"pid": pid, "tid": tid}).groupby(["pid", "tid"], sort=False).ngroup().to_numpy()
    parent, depth = nest_ranges(thread.astype(np.int64), times["start"], times["end"])
    frame = pd.DataFrame(
        {
            "range_id": np.arange(len(pid), dtype=np.int64),
            **times,
            "name": _categorical(pair_codes.reshape(-1), labels),
            "domain": pd.Categorical.from_codes(domain_codes, categories=pd.Index(list(DOMAINS), dtype=object)),
            "style": pd.Categorical.from_codes(np.zeros(len(pid), dtype=np.int8), categories=list(RANGE_STYLES)),
            "pid": pid,
            "tid": tid,
            "end_tid": tid,
            "depth": depth,
            "parent": parent,
        }
    )
    return frame
