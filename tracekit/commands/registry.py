"""Every analysis command, declared once: its options (a dataclass of ``analysis.options``), what it takes
as input, the function that runs it on one input, and, for commands over many inputs, the function
that maps one input to a Part and the merger that folds Parts into the aggregate.

The command line (one input or many), ``tracekit report``, the Python API, the process pool and Dask
workers all find commands here; the command line's commands, the many-input commands and the API's
functions are derived from ``COMMANDS``. Functions are named "module:attribute" and imported on first
use, so reading the registry (the command line's start) loads neither pandas nor the analyses.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tracekit.analysis.options import (
    AdviseOptions,
    BandwidthOptions,
    BreakdownOptions,
    CompareOptions,
    CriticalPathOptions,
    DiffOptions,
    IdleOptions,
    KernelsOptions,
    LaunchesOptions,
    MemoryOptions,
    OpsOptions,
    OverlapOptions,
    QueuesOptions,
    RangesOptions,
    RanksOptions,
    SequencesOptions,
    StepsOptions,
    SyncsOptions,
)
from tracekit.model.options import Options

# What a command takes: one trace or many ("traces"), exactly one ("trace"), two ("pair"), one or more
# always merged ("many": even one input is a comparison of one), one or two memory snapshots ("snapshots").
INPUT_KINDS = ("traces", "trace", "pair", "many", "snapshots")


def resolve(name: str) -> Any:
    """The attribute a "module:attribute" name points at (imported now)."""
    module, _, attribute = name.partition(":")
    return getattr(importlib.import_module(module), attribute)


@dataclass(frozen=True)
class Picture:
    """A chart of the result that the command line draws to a file: ``--<flag> FILE``.

    ``charts``: the chart names to draw, the first present; ``needs``: an option set to True when a
    picture is asked (the analysis then computes the chart); ``missing``: why there is nothing to draw.
    """

    flag: str
    help: str
    charts: tuple[str, ...]
    missing: str
    needs: str | None = None


@dataclass(frozen=True)
class Command:
    """One command. ``run``: "module:function" of (input, options) -> Result (a pair: (a, b, options,
    snapshots, labels); snapshots: (snapshots, options, configs)). ``part`` and ``merger`` (many
    inputs): "module:function" of (trace, Part, options, limit) -> Part and "module:Class" of
    (options, limit). ``title``: what the aggregate over many inputs is. ``unit``: the time unit the
    command line prints by default. ``prepare``: "module:function" of (path, options) started before the
    input opens (a read ahead)."""

    name: str
    help: str
    options: type[Options]
    inputs: str
    run: str | None = None
    part: str | None = None
    merger: str | None = None
    title: str = ""
    unit: str = "ns"
    picture: Picture | None = None
    prepare: str | None = None

    def __post_init__(self) -> None:
        assert self.inputs in INPUT_KINDS, self.inputs
        assert (self.part is None) == (self.merger is None), f"{self.name}: part and merger come together"

    @property
    def summary(self) -> str:
        """The first line of the help."""
        return self.help.split("\n", 1)[0]

    @property
    def api_name(self) -> str:
        """The Python API's function: the command's name as an identifier ("critical-path" -> critical_path)."""
        return self.name.replace("-", "_")

    @property
    def takes_many(self) -> bool:
        return self.part is not None

    def function(self, which: str) -> Callable[..., Any]:
        """The command's ``run``, ``part``, ``merger`` or ``prepare``, imported."""
        name = getattr(self, which)
        if name is None:
            raise LookupError(f"{self.name} has no {which}")
        return resolve(name)


_KERNELS = "tracekit.analysis.kernels.summary"
_MANY = "tracekit.analysis.many.tables"

COMMANDS: dict[str, Command] = {
    command.name: command
    for command in (
        Command(
            "kernels",
            "Top GPU kernels of TRACES: nsys's kernel summary (gpukernsum), or time per category.\n\n"
            "Several traces (paths, globs, a folder): each one's table with a Rank or Run column, and the "
            "summary over all of them.",
            KernelsOptions,
            "traces",
            run=f"{_KERNELS}:kernel_summary",
            part=f"{_MANY}:kernels_part",
            merger=f"{_MANY}:KernelsMerger",
            title="by {by}",
            prepare="tracekit.commands.read_ahead:kernels_ahead",
        ),
        Command(
            "ranges",
            "NVTX ranges of TRACES: nsys's range summary (nvtxsum) plus the GPU work launched inside each.\n\n"
            "Several traces: each one's table with a Rank or Run column, and the summary over all of them.",
            RangesOptions,
            "traces",
            run="tracekit.analysis.ranges.summary:range_summary",
            part=f"{_MANY}:ranges_part",
            merger=f"{_MANY}:RangesMerger",
            title="range summary",
        ),
        Command(
            "breakdown",
            "Kernel time by category (matmul, elementwise, softmax, ...) per phase, copies beside it, and each "
            "GPU's busy and idle time. Several traces: each one's tables and the sums over all of them.",
            BreakdownOptions,
            "traces",
            run="tracekit.analysis.ranges.breakdown:phase_breakdown",
            part=f"{_MANY}:breakdown_part",
            merger=f"{_MANY}:BreakdownMerger",
            title="breakdown",
        ),
        Command(
            "steps",
            "One row per training step of TRACE: wall time, kernels, each GPU's busy and idle time, the time "
            "of each phase, outliers flagged.",
            StepsOptions,
            "trace",
            run="tracekit.analysis.ranges.steps:step_table",
            unit="ms",
            picture=Picture(
                "--picture",
                "also draw the steps and each GPU's busy time on one time axis (PNG)",
                ("timeline",),
                "nothing to draw: no GPU work with its launching call in the trace",
            ),  # fmt: skip
        ),
        Command(
            "launches",
            "Launch delays of TRACE's kernels, as nsys's kernexecsum: per launching thread, device, API and "
            "kernel, the launch call's time (API), the wait from the call's end to the kernel's start (queue), "
            "the kernel's time, and the total.",
            LaunchesOptions,
            "trace",
            run="tracekit.analysis.waits.launches:launch_delays",
        ),
        Command(
            "idle",
            "Why each GPU of TRACE sat idle: every gap between its busy intervals gets one cause (sync, host "
            "not launching, launch overhead, other stream or device, dependency not in trace, other).",
            IdleOptions,
            "trace",
            run="tracekit.analysis.waits.idle:idle_by_cause",
            unit="ms",
        ),
        Command(
            "overlap",
            "Per GPU: communication (NCCL) time, the part computation hid, and the exposed rest.",
            OverlapOptions,
            "trace",
            run="tracekit.analysis.waits.overlap:overlap_table",
            unit="ms",
        ),
        Command(
            "advise",
            "What to fix first in TRACE: findings ranked by the time a fix could give back (blocking syncs, "
            "launch-bound stretches, host stalls, pageable and synchronous copies, copies on compute streams, "
            "FP32 matmul, unfused optimizer steps, exposed communication; with a memory snapshot, out-of-memory "
            "errors, activations dominating the peak, fragmentation), each with its evidence and the usual fix; "
            "then nsys's expert "
            "rules (gpu-starv, gpu-low-util, cuda-sync-api, cuda-sync-memcpy, cuda-sync-memset, cuda-async-memcpy) "
            "as nsys analyze reports them. Several traces (the ranks of a job): their findings together, the "
            "straggler rank, and a row per rank.",
            AdviseOptions,
            "traces",
            run="tracekit.commands.advice:advise",
            part="tracekit.analysis.advice.many:advise_part",
            merger="tracekit.analysis.advice.many:AdviseMerger",
            title="advice",
            unit="ms",
        ),
        Command(
            "queues",
            "How deep each stream's launch queue of TRACE ran (ops launched, not yet started), as "
            "HolisticTraceAnalysis measures it: its statistics per stream, its mean over time, and the time it "
            "was full (--max-queue).",
            QueuesOptions,
            "trace",
            run="tracekit.analysis.waits.queues:queue_table",
            picture=Picture(
                "--picture",
                "also draw each stream's queue length over time (PNG)",
                ("queues",),
                "nothing to draw",
            ),  # fmt: skip
        ),
        Command(
            "ops",
            "Per CPU operator of TRACE (aten::, from torch.profiler or emit_nvtx): the kernels it launched, their "
            "time, and the delay from its start to its first kernel (launch call, then the GPU), as "
            "HolisticTraceAnalysis measures it; and the kernel sequences each operator launches.",
            OpsOptions,
            "trace",
            run="tracekit.analysis.waits.ops:ops_table",
            unit="us",
        ),
        Command(
            "sequences",
            "The kernel sequences TRACE repeats, the candidates for fusing: runs of --length consecutive kernels "
            "on a stream seen --min-count times or more, their time, the gaps between their kernels and the range "
            "they come from. With --operator NAME, HolisticTraceAnalysis's: the GPU ops each operator named NAME "
            "launched, as a pattern.",
            SequencesOptions,
            "trace",
            run="tracekit.analysis.kernels.sequences:sequences_table",
            unit="us",
        ),
        Command(
            "bandwidth",
            "The bandwidth TRACE's memory copies and sets achieved per direction (HtoD, DtoH, DtoD, peer, "
            "memset): bytes, time, busy time and achieved GB/s, and the summed bandwidth over time with "
            "HolisticTraceAnalysis's statistics.",
            BandwidthOptions,
            "trace",
            run="tracekit.analysis.kernels.bandwidth:bandwidth_table",
            picture=Picture(
                "--picture",
                "also draw each direction's bandwidth over time (PNG)",
                ("bandwidth",),
                "nothing to draw",
            ),  # fmt: skip
        ),
        Command(
            "critical-path",
            "The critical path of each step of TRACE, as HolisticTraceAnalysis defines it: the chain of dependent "
            "CPU operators, launches, GPU ops and synchronizations that decides the step's time, split into CPU, "
            "GPU compute, communication, kernel-to-kernel and launch overhead; the operators and kernels with most "
            "time on it; and, for one step (--step), the path in order.",
            CriticalPathOptions,
            "trace",
            run="tracekit.analysis.critical_path.analysis:critical_path",
            unit="ms",
        ),
        Command(
            "syncs",
            "Blocking host calls of TRACE (synchronize, synchronous memcpy): where they sat, how long the CPU "
            "waited, and the GPU idle that followed.",
            SyncsOptions,
            "trace",
            run="tracekit.analysis.waits.syncs:sync_summary",
            unit="ms",
        ),
        Command(
            "ranks",
            "Per rank of a distributed job (or per run): step time, GPU busy/idle, compute vs communication, "
            "NCCL collectives; the slowest and fastest rank, and the kernels that differ most between ranks.\n\n"
            "INPUTS: the ranks' traces (files, globs, or a folder of them).",
            RanksOptions,
            "many",
            part="tracekit.analysis.many.ranks:ranks_part",
            merger="tracekit.analysis.many.ranks:RanksMerger",
            title="ranks compared",
        ),
        Command(
            "compare",
            "Many runs side by side: per run and phase, kernel time (total and per instance) and its split by "
            "category, ordered by a configuration field; optionally as grouped bars.\n\n"
            "INPUTS: run folders or traces (files, globs, or a folder of runs such as traces/).",
            CompareOptions,
            "many",
            part="tracekit.analysis.many.compare:compare_part",
            merger="tracekit.analysis.many.compare:CompareMerger",
            title="runs compared",
            unit="ms",
            picture=Picture(
                "--picture",
                "also draw the grouped bars to this PNG",
                ("compare",),
                "nothing to draw: no run has kernel time",
            ),  # fmt: skip
        ),
        Command(
            "diff",
            "Where GPU time moved from A to B (runs or traces): per phase and category, the kernels that "
            "changed most, and the memory peak when both runs have a snapshot.",
            DiffOptions,
            "pair",
            run="tracekit.analysis.many.diff:trace_diff",
            unit="ms",
        ),
        Command(
            "memory",
            "Peak memory of a CUDA memory snapshot (torch.cuda.memory._dump_snapshot pickle, or a run folder's "
            "memory.pickle): when it happened, what was live, which code allocated it.",
            MemoryOptions,
            "snapshots",
            run="tracekit.analysis.memory.tables:memory_result",
            picture=Picture(
                "--plot",
                "write the active-memory timeline picture here (.png or .svg); with "
                "--by role, live memory by role over time",
                ("roles", "timeline"),
                "nothing to draw",
                needs="timeline",
            ),  # fmt: skip
        ),
    )
}


def command(name: str) -> Command:
    """The command called ``name``; LookupError listing the commands otherwise."""
    try:
        return COMMANDS[name]
    except KeyError:
        raise LookupError(f"no command {name!r}; the commands are {', '.join(COMMANDS)}") from None
