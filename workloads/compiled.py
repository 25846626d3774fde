"""torch.compile that says what it did, so that a row labelled "compiled" was compiled.

One process compiles many shapes in a sweep, and dynamo stops compiling a function after
``recompile_limit`` (8) recompilations: later calls run eager, silently. ``CompileWatch`` starts every
configuration from a clean compiler state with ``torch._dynamo.reset()`` rather than a fresh process
per configuration: measured here, a reset after a compile takes under a millisecond, a fresh process
1.3 s just to import torch and the workloads (and compiled kernels are not shared either way). It times the
first call apart (compile time), and reads dynamo's counters afterwards: graphs compiled, recompiles,
graph breaks, and whether it fell back to eager.

``TRACEKIT_COMPILE_BACKEND`` picks the backend (default ``inductor``; the tests use ``aot_eager``,
which compiles in a fraction of a second on a CPU).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch

from tracekit.run_config import COMPILE_MS, GRAPH_BREAKS, GRAPHS, RECOMPILES

BACKEND_VARIABLE = "TRACEKIT_COMPILE_BACKEND"
# Words of dynamo's "gave up" reasons (torch 2.1-2.13 say cache_size_limit or recompile_limit).
FALLBACK_MARKERS = ("recompile limit", "recompile_limit", "cache_size_limit", "cache size limit")


def compile_function(function: Callable) -> Callable:
    """``torch.compile(function)`` with the configured backend."""
    return torch.compile(function, backend=os.environ.get(BACKEND_VARIABLE, "inductor"))


@dataclass
class CompileReport:
    """What dynamo did for one configuration. ``compile_ms``: the first call (tracing, compiling and
    running once), ms. ``recompiles``: frames compiled after the first call. ``fell_back``: some call
    ran eager because dynamo gave up (or nothing was compiled at all)."""

    compile_ms: float | None = None
    graphs: int = 0
    recompiles: int = 0
    graph_breaks: int = 0
    fell_back: bool = False

    def columns(self) -> dict[str, float | int | None]:
        """The report as table cells, under the result columns' labels (``tracekit.run_config``)."""
        return {
            COMPILE_MS.label: self.compile_ms,
            GRAPHS.label: self.graphs,
            RECOMPILES.label: self.recompiles,
            GRAPH_BREAKS.label: self.graph_breaks,
        }

    @property
    def note(self) -> str | None:
        if self.fell_back:
            return "torch.compile fell back to eager (dynamo hit its recompile limit or compiled nothing)"
        return None


class CompileWatch:
    """Clean compiler state on creation; ``first_call`` times the compiling call; ``report`` reads
    dynamo's counters since creation."""

    def __init__(self) -> None:
        import torch._dynamo
        from torch._dynamo.utils import counters

        torch._dynamo.reset()
        counters.clear()
        self._counters = counters
        self._frames_after_first: int | None = None
        self.compile_ms: float | None = None

    def first_call(self, call: Callable[[], object], synchronize: Callable[[], None]) -> None:
        """Run ``call`` once (the compile), timed with ``synchronize`` after it."""
        started = time.perf_counter()
        call()
        synchronize()
        self.compile_ms = (time.perf_counter() - started) * 1e3
        self._frames_after_first = self._counters["frames"]["total"]

    def report(self) -> CompileReport:
        counters = self._counters
        frames = counters["frames"]["total"]
        graphs = counters["stats"]["unique_graphs"]
        gave_up = any(
            marker in str(reason).lower() for reason in counters["unimplemented"] for marker in FALLBACK_MARKERS
        )
        return CompileReport(
            compile_ms=self.compile_ms,
            graphs=graphs,
            recompiles=max(0, frames - (self._frames_after_first or frames)),
            graph_breaks=sum(counters["graph_break"].values()),
            fell_back=gave_up or graphs == 0,
        )
