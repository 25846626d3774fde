"""The Python API: one function per analysis command, with the command's name and its options as keyword
arguments, returning a ``Result`` of DataFrames with raw values (ns as integers, full-precision floats).

Each function takes an open ``Trace`` (``open_trace``), a path (an nsys export or report, a torch.profiler
trace, a run folder), or several (a list, a glob, a folder): read and merged exactly as the command line
merges many inputs. Options are checked before any file is read (``OptionError`` names the option). The options are those of ``tracekit.analysis.options``:
a test keeps each function's keywords equal to its options dataclass.

    >>> import tracekit
    >>> result = tracekit.kernels("trace.sqlite", top=5, by="category")
    >>> result["categories"]          # a pandas DataFrame
    >>> result.notes                  # what the numbers need said beside them

Nothing heavy is imported until a function runs.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from tracekit.analysis.options import DEFAULT_EXACT_LIMIT, DEFAULT_PHASES, ManyOptions
from tracekit.model.result import Result as _Result

if TYPE_CHECKING:
    from typing import TypeAlias

    from tracekit.model.memory import MemoryTrace
    from tracekit.model.trace import Trace

    Source: TypeAlias = str | os.PathLike | Trace  # a path, or a trace already open
    Sources: TypeAlias = Source | Sequence[Source]  # one, or several to merge
    SnapshotSource: TypeAlias = str | os.PathLike | MemoryTrace
    Specs: TypeAlias = str | Sequence[str]  # range specs: "forward,backward" or ["forward", "backward"]


def open_trace(path: str | os.PathLike, nsys: str | None = None) -> Trace:
    """The trace at ``path``: an nsys SQLite export, an Nsight Systems report (exported with ``nsys``, the
    executable given or found, the export kept beside it), a torch.profiler trace (.json, .json.gz) or a
    tracekit run folder. Its tables (``gpu_ops``, ``launches``, ``ranges``) load when first used.

    Examples:
        >>> trace = tracekit.open_trace("trace.sqlite")
        >>> trace.gpu_ops.groupby("device")["duration"].sum()   # ns of GPU work per device
    """
    from tracekit.sources import open_trace as open_any

    return open_any(os.fspath(path), nsys)  # this call's nsys: the session's settings stay as they were


def open_snapshot(path: str | os.PathLike) -> MemoryTrace:
    """The CUDA memory snapshot at ``path`` (``torch.cuda.memory._dump_snapshot``'s pickle, read without
    executing anything from it) or a run folder's: its ``events``, ``segments`` and ``frames`` tables.

    Examples:
        >>> snapshot = tracekit.open_snapshot("memory.pickle")
        >>> snapshot.events["action"].value_counts()
    """
    from tracekit.sources import open_snapshot as open_any

    return open_any(os.fspath(path))


class Result(_Result):
    """What every analysis returns: named tables of raw values (``result["kernels"]``, ``to_pandas()``),
    the column units (``units()``), notes that the figures need beside them (``notes``) and charts
    (``charts``). ``print(result)`` shows it as the command line does; a notebook shows it as HTML."""

    @classmethod
    def of_result(cls, result: _Result) -> Result:
        return cls(result.tables, result.notes, result.charts)

    def __str__(self) -> str:
        from tracekit.render.tables import render_text

        return render_text(self, "table")

    def __repr__(self) -> str:
        shapes = ", ".join(f"{table.name} ({len(table.frame):,} rows)" for table in self.tables) or "no tables"
        return f"<tracekit.Result: {shapes}; {len(self.notes)} note{'s' if len(self.notes) != 1 else ''}>"

    def _repr_html_(self) -> str:
        from tracekit.render.notebook import result_html

        return result_html(self)


def _run(name: str, inputs: Sources | SnapshotSource | Sequence[SnapshotSource], arguments: dict) -> Result:
    """Command ``name`` on ``inputs``. ``arguments``: the calling function's ``locals()``, split here into
    the command's options and (commands over many inputs) how the inputs are read; the rest are the
    inputs themselves. The functions below only declare their keywords: a test keeps them equal to the
    options' fields, with the same defaults."""
    from dataclasses import fields

    from tracekit.commands.execute import run_command
    from tracekit.commands.registry import command

    spec = command(name)
    own = {field.name for field in fields(spec.options)}
    options = spec.options(**{key: value for key, value in arguments.items() if key in own})
    how = {field.name for field in fields(ManyOptions)}
    many = ManyOptions(**{key: value for key, value in arguments.items() if key in how}) if spec.takes_many else None
    return Result.of_result(run_command(spec, inputs, options, many))


def kernels(
    trace: Sources,
    *,
    top: int | None = None,
    name: Literal["demangled", "short"] = "demangled",
    by_launch_config: bool = False,
    by: Literal["kernel", "category", "type"] = "kernel",
    ops: Literal["kernels", "all"] = "kernels",
    ranges: Specs = (),
    domain: str | None = None,
    per_instance: bool = False,
    same_thread: bool = False,
    drop_last_step: bool = False,
    workers: int | None = None,
    use_dask: bool = False,
    scheduler: str | None = None,
    strict: bool = False,
    exact_median_limit: int = DEFAULT_EXACT_LIMIT,
) -> Result:
    """Top GPU kernels: nsys's kernel summary (table "kernels": Total Time, Instances, Avg, Med, Min, Max,
    StdDev in ns, Time (%), Name), or the time per category ("categories") or per kernel type and
    overlap ("types"). ``ranges``: only GPU ops launched inside these range specs. Several traces: the
    summary over all of them, then "kernels_by_rank" (or "_by_run") with each one's rows.

    Examples:
        >>> tracekit.kernels("trace.sqlite", top=5)["kernels"]
        >>> tracekit.kernels("trace.sqlite", by="category", ranges="forward")["categories"]
    """
    return _run("kernels", trace, locals())


def ranges(
    trace: Sources,
    *,
    top: int | None = None,
    tree: bool = False,
    root: str | None = None,
    instance: int | None = None,
    max_depth: int | None = None,
    within: str | None = None,
    raw_names: bool = False,
    domain: str | None = None,
    same_thread: bool = False,
    gpu_side: bool = False,
    workers: int | None = None,
    use_dask: bool = False,
    scheduler: str | None = None,
    strict: bool = False,
    exact_median_limit: int = DEFAULT_EXACT_LIMIT,
) -> Result:
    """NVTX ranges: nsys's range summary (table "ranges") plus the GPU work launched inside each (``gpu_side``:
    also measured on the GPU side, GPU Busy and torch.profiler's GPU-side spans); or one instance as a tree
    (``tree``: table "tree"), or the children of the ranges ``within`` matches ("within").

    Examples:
        >>> tracekit.ranges("trace.sqlite", top=10)["ranges"]
        >>> tracekit.ranges("trace.sqlite", within="attention")["within"]
    """
    return _run("ranges", trace, locals())


def breakdown(
    trace: Sources,
    *,
    phases: Specs = DEFAULT_PHASES,
    domain: str | None = None,
    ops: Literal["kernels", "all"] = "kernels",
    same_thread: bool = False,
    drop_last_step: bool = False,
    workers: int | None = None,
    use_dask: bool = False,
    scheduler: str | None = None,
    strict: bool = False,
    exact_median_limit: int = DEFAULT_EXACT_LIMIT,
) -> Result:
    """Kernel time by category per phase (table "breakdown"), each GPU's busy and idle time per phase
    ("gpus") and the memory copies and sets ("copies", when there are any).

    Examples:
        >>> tracekit.breakdown("trace.sqlite", phases="forward,backward")["breakdown"]
    """
    return _run("breakdown", trace, locals())


def steps(trace: Source, *, step_range: str | None = None, phases: Specs = DEFAULT_PHASES) -> Result:
    """One row per training step (table "steps"): wall time, kernels, each GPU's busy and idle time, the
    time of each phase, outliers flagged; the "timeline" chart of steps and GPU busy time.

    Examples:
        >>> tracekit.steps("trace.sqlite", step_range="train_step")["steps"]
    """
    return _run("steps", trace, locals())


def ranks(
    traces: Sources,
    *,
    step_range: str | None = None,
    drop_last_step: bool = False,
    top: int | None = None,
    workers: int | None = None,
    use_dask: bool = False,
    scheduler: str | None = None,
    strict: bool = False,
    exact_median_limit: int = DEFAULT_EXACT_LIMIT,
) -> Result:
    """Per rank of a distributed job (or per run): step time, busy/idle, compute vs communication (table
    "ranks"), their spread, the collectives per rank and the kernels that differ most between ranks.

    Examples:
        >>> tracekit.ranks("job/rank*.sqlite")["ranks"]
    """
    return _run("ranks", traces, locals())


def compare(
    runs: Sources,
    *,
    phases: Specs = DEFAULT_PHASES,
    order_by: str | None = None,
    domain: str | None = None,
    ops: Literal["kernels", "all"] = "kernels",
    same_thread: bool = False,
    step_range: str | None = None,
    workers: int | None = None,
    use_dask: bool = False,
    scheduler: str | None = None,
    strict: bool = False,
    exact_median_limit: int = DEFAULT_EXACT_LIMIT,
) -> Result:
    """Many runs side by side (table "compare"): per run and phase, kernel time (total, per instance and,
    for runs with steps, per step) and its split by category, ordered by a run.json configuration field;
    the "compare" chart. Phases default to forward, backward and optimizer, found by their range names.

    Examples:
        >>> tracekit.compare("traces/", order_by="ctx")["compare"]
    """
    return _run("compare", runs, locals())


def diff(
    a: Source,
    b: Source,
    *,
    phases: Specs = DEFAULT_PHASES,
    by: Literal["category", "kernel", "step"] | None = None,
    top: int = 15,
    ops: Literal["kernels", "all"] = "kernels",
    domain: str | None = None,
    same_thread: bool = False,
    step_range: str | None = None,
) -> Result:
    """Where GPU time moved from A to B: per phase and category (table "categories"), the kernels that
    changed most ("kernels"), the memory peaks when both are run folders with a snapshot ("memory"); or
    (``by="step"``) step by step ("steps").

    Examples:
        >>> tracekit.diff("fp32.sqlite", "bf16.sqlite", by="kernel")["kernels"]
    """
    return _run("diff", [a, b], locals())


def memory(
    snapshot: SnapshotSource | Sequence[SnapshotSource],
    *,
    top: int = 20,
    by: Literal["allocation", "frame", "role", "all"] = "allocation",
    compare: bool = False,
    device: int | None = None,
    timeline: bool = False,
) -> Result:
    """The peak of a CUDA memory snapshot (table "summary"), then the largest allocations live at it
    ("allocations"), their total per allocating frame ("holders"), or what they are for ("roles"); two
    snapshots: the peaks compared ("compare"). ``timeline``: also the timeline charts.

    Examples:
        >>> tracekit.memory("memory.pickle", by="role")["roles"]
    """
    return _run("memory", snapshot, locals())


def timeline(
    traces: Sources,
    output: str | os.PathLike,
    *,
    start_ms: float | None = None,
    end_ms: float | None = None,
    step: int | None = None,
    range: str | None = None,
    instance: int = 0,
    memory: str | os.PathLike | None = None,
    sequences: int = 0,
) -> Path:
    """Write ``traces`` as one Chrome trace-event file (``.json``/``.json.gz``) for Perfetto UI, chrome://tracing
    and TensorBoard: GPU ops per stream, idle gaps by cause, ranges and API calls per thread, launch arrows,
    steps; ranks each a process group. A window: ``start_ms``/``end_ms`` from the first event, the
    ``step``-th step (from 1), or instance ``instance`` (from 0) of ``range``. ``memory``: a snapshot drawn
    as allocated and reserved MiB. ``sequences``: a track per GPU for each of that many kernel sequences seen
    most often (``sequences``'s windows of 3 kernels). Returns the file written, whole or not at all.

    Examples:
        >>> tracekit.timeline("trace.sqlite", "trace.json.gz", step=2)
    """
    from tracekit.trace_events.window import WindowOptions
    from tracekit.trace_events.writer import timeline as write

    options = WindowOptions(
        start_ms=start_ms, end_ms=end_ms, step=step, range=range, instance=instance, sequences=sequences
    )
    items = [traces] if isinstance(traces, (str, os.PathLike)) or not isinstance(traces, Sequence) else list(traces)
    return write(items, output, options, memory).path
