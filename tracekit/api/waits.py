"""The API's functions for why the GPU waits and what to fix first: one per command, as ``core``'s."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from tracekit.analysis.options import DEFAULT_EXACT_LIMIT
from tracekit.api.core import Result, _run

if TYPE_CHECKING:
    from tracekit.api.core import Source, Sources


def launches(
    trace: Source,
    *,
    top: int | None = None,
    name: Literal["demangled", "short"] = "demangled",
    drop_last_step: bool = False,
) -> Result:
    """Launch delays as nsys's kernexecsum (table "launches"): per launching thread, device, API and kernel,
    the launch call's time, the queue wait from the call's end to the kernel's start, and the kernel's.

    Examples:
        >>> tracekit.launches("trace.sqlite", name="short", top=10)["launches"]
    """
    return _run("launches", trace, locals())


def idle(
    trace: Source,
    *,
    top: int = 15,
    per_stream: bool = False,
    overhead_max_us: float = 30.0,
    drop_last_step: bool = False,
) -> Result:
    """Why each GPU sat idle: every gap between its busy intervals gets one cause (table "idle": gaps, idle
    ns and share per GPU and cause; "gaps": the ``top`` longest).

    Examples:
        >>> tracekit.idle("trace.sqlite", per_stream=True)["idle"]
    """
    return _run("idle", trace, locals())


def overlap(
    trace: Source, *, per_step: bool = False, step_range: str | None = None, drop_last_step: bool = False
) -> Result:
    """Per GPU (table "overlap"): communication (NCCL) time, the part computation hid, the exposed rest.

    Examples:
        >>> tracekit.overlap("rank0.sqlite", per_step=True)["overlap"]
    """
    return _run("overlap", trace, locals())


def advise(trace: Sources, *, gap_ms: float = 500, threshold: float = 50, chunks: int = 30, rows: int = 50,
           memory: str | None = None, workers: int | None = None, use_dask: bool = False, scheduler: str | None = None,
           strict: bool = False, exact_median_limit: int = DEFAULT_EXACT_LIMIT) -> Result:  # fmt: skip
    """What to fix first: "findings" ranked by the time a fix could give back, with their "evidence", then
    nsys's expert rules, a table each where they found something (``gap_ms``, ``threshold``, ``chunks``,
    ``rows``: nsys's options). ``memory``: a snapshot to read memory findings from (default: a run's own).
    Several traces (a job's ranks): their findings together, the straggler, and a row per rank ("ranks").

    Examples:
        >>> tracekit.advise("trace.sqlite")["findings"]
    """
    return _run("advise", trace, locals())


def queues(trace: Source, *, max_queue: int = 1024, series: bool = False, drop_last_step: bool = False,
           as_hta: bool = False) -> Result:  # fmt: skip
    """Each stream's launch queue, as HolisticTraceAnalysis measures it ("queues": statistics per stream, time
    at ``max_queue``; "series" with ``series``).

    Examples:
        >>> tracekit.queues("trace.json.gz")["queues"]
    """
    return _run("queues", trace, locals())


def ops(trace: Source, *, top: int = 15, name: Literal["demangled", "short"] = "short",
        drop_last_step: bool = False) -> Result:  # fmt: skip
    """Per CPU operator ("ops"): its kernels, their time and the delays to its first kernel; "sequences": the
    kernel sequences per operator (HolisticTraceAnalysis's get_aten_op_kernels_and_delay).

    Examples:
        >>> tracekit.ops("trace.json.gz")["ops"]
    """
    return _run("ops", trace, locals())


def sequences(trace: Source, *, length: int = 3, min_count: int = 2, top: int = 15, operator: str | None = None,
              name: Literal["demangled", "short"] = "short", drop_last_step: bool = False,
              as_hta: bool = False) -> Result:  # fmt: skip
    """The kernel sequences a trace repeats ("sequences": runs of ``length`` consecutive kernels on a stream,
    their count, time, gaps and origin); with ``operator``, HolisticTraceAnalysis's
    get_frequent_cuda_kernel_sequences (per instance of that operator, the GPU ops it launched).

    Examples:
        >>> tracekit.sequences("trace.json.gz", length=4)["sequences"]
    """
    return _run("sequences", trace, locals())


def bandwidth(trace: Source, *, series: bool = False, drop_last_step: bool = False, as_hta: bool = False) -> Result:
    """Memory copies' and sets' bandwidth per direction ("bandwidth": bytes, time, achieved GB/s,
    HolisticTraceAnalysis's statistics of the summed bandwidth; "series" with ``series``).

    Examples:
        >>> tracekit.bandwidth("trace.json.gz")["bandwidth"]
    """
    return _run("bandwidth", trace, locals())


def critical_path(trace: Source, *, step: str | None = None, step_range: str | None = None, top: int = 15,
                  as_hta: bool = False) -> Result:  # fmt: skip
    """The critical path of each step, as HolisticTraceAnalysis 0.5 defines it: "steps" (its time by bound),
    "ops" (most time on it), "path" (one step: in order). ``step``: ProfilerStep#5 or 5.

    Examples:
        >>> tracekit.critical_path("rank0.json.gz", step="5")["path"]
    """
    return _run("critical-path", trace, locals())


def syncs(trace: Source, *, top: int = 15) -> Result:
    """Blocking host calls (table "syncs": per API and range, calls, CPU wait, GPU idle after; "longest").

    Examples:
        >>> tracekit.syncs("trace.sqlite")["syncs"]
    """
    return _run("syncs", trace, locals())
