"""Option fields several commands declare alike, each a function that makes a new field (a dataclass field
belongs to one class), and ``ManyOptions``: how many inputs are read, the tail of every command over many.

A command's own options dataclass (in its command module, beside its analysis) uses these for the
options it shares with others, so ``--same-thread`` says the same thing on every command. The standard
library only (the command line reads these before pandas).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tracekit.model.options import Options, choice, flag, specs, text, whole

DEFAULT_PHASES = ("forward", "backward", "optimizer")
DEFAULT_EXACT_LIMIT = 10_000

TOP_HELP = "only the N rows with the most total time"
STEP_RANGE_HELP = "the range that is one training step (default: ProfilerStep#N, else 'step')"
PHASES_HELP = (
    "the phases: comma-separated range specs (names, paths, globs); default: forward, backward and optimizer, "
    "found by the range names traces use (a phase's word given, as in forward,backward, is found the same way)"
)
KERNEL_NAME_HELP = "group by the full templated name or the base name"
SHORT_NAME_HELP = (
    "kernels by their base name (templated variants together) or the full templated name (as HolisticTraceAnalysis)"
)


def top(default: int | None = None, help: str = TOP_HELP, one_input: bool = False) -> Any:
    """How many rows a table keeps (None: all)."""
    return whole(default, help, one_input=one_input)


def kernel_name(default: str = "demangled", help: str = KERNEL_NAME_HELP) -> Any:
    """Kernels by their full templated name or their base name."""
    return choice(default, ("demangled", "short"), help)


def ops() -> Any:
    """Kernels only, or memory copies and sets too."""
    return choice("kernels", ("kernels", "all"), "kernels only (as nsys gpukernsum), or memcpy/memset too")


def domain() -> Any:
    """Only the ranges of one NVTX domain."""
    return text(
        "only ranges of this NVTX domain ('default' for the default one); specs then match names without the "
        "'NAME:' prefix"
    )


def same_thread() -> Any:
    """Ranges count the GPU ops of their own thread only."""
    return flag(
        "count only ops launched on the range's own thread (nsys nvtx_gpu_proj); default: any thread of the "
        "process, so backward gets autograd's kernels"
    )


def drop_last_step() -> Any:
    """GPU work after the last profiler step starts left out, as HolisticTraceAnalysis does."""
    return flag(
        "leave out GPU work launched after the last ProfilerStep#N starts (HolisticTraceAnalysis's default: "
        "a profiler schedule's last step is often cut short)"
    )


def step_range(help: str = STEP_RANGE_HELP) -> Any:
    """The range that is one training step."""
    return text(help)


def phases(help: str = PHASES_HELP) -> Any:
    """The phases: range specs, forward, backward and optimizer by default."""
    return specs(DEFAULT_PHASES, help)


def as_hta(help: str = "round times to whole microseconds as HolisticTraceAnalysis 0.5 reads a trace (to compare)"):
    """Times rounded as HolisticTraceAnalysis reads them, to compare with it."""
    return flag(help)


@dataclass(frozen=True)
class ManyOptions(Options):
    """How many inputs are read: on local processes or Dask, and how exact medians across them are."""

    workers: int | None = whole(
        None,
        "processes reading files at once (default and at most: one per CPU this "
        "process may use; with {use_dask}, the LocalCluster's)",
    )
    use_dask: bool = flag("read the files on Dask (a LocalCluster for this command)")
    scheduler: str | None = text(
        "read the files on this running Dask scheduler (tcp://host:8786); workers must "
        "see the same paths; the connection and handshake must complete within 20 s",
        metavar="ADDRESS",
        blank=True,
    )
    strict: bool = flag("stop at the first input that cannot be read (default: report it, go on)")
    exact_median_limit: int = whole(
        DEFAULT_EXACT_LIMIT,
        "across inputs, a group's median is exact up to this many instances, else from a sketch",
        minimum=0,
    )
