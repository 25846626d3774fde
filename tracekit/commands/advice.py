"""``advise`` with its memory snapshot: the one the caller names (``memory``), else the run folder's own
(when the trace is that run's export), opened here because analyses read no file."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from tracekit.errors import SnapshotError

if TYPE_CHECKING:
    from tracekit.analysis.advice.advise_command import AdviseOptions
    from tracekit.model.memory import MemoryTrace
    from tracekit.model.result import Result
    from tracekit.model.trace import Trace


def advise_with_snapshot(trace: Trace, options: AdviseOptions) -> Result:
    """``analysis.advice.advise.advise_trace`` on ``trace`` with the snapshot that goes with it, if any."""
    from tracekit.analysis.advice.advise import advise_trace

    snapshot, note = _snapshot(trace, options.memory)
    return advise_trace(trace, options, snapshot, note)


def advise_snapshot(snapshot: MemoryTrace, options: AdviseOptions) -> Result:
    """``advise SNAPSHOT``: a memory snapshot's findings alone; the options are about a trace: given, an
    OptionError names them."""
    from tracekit.analysis.advice.advise import advise_snapshot as findings_of
    from tracekit.model.options import OptionError, named

    given = [named(name) for name in options.changed()]
    if given:
        raise OptionError(f"{', '.join(given)}: about a trace, and {snapshot.source} is a memory snapshot")
    return findings_of(snapshot)


def _snapshot(trace: Trace, memory: str | None) -> tuple[MemoryTrace | None, str | None]:
    from tracekit.runs import Run
    from tracekit.sources import open_snapshot

    if memory is not None:
        return open_snapshot(memory), None  # named by the caller: an unreadable one is an error
    source = Path(str(trace.meta.source))
    run = Run.at(source.parent)
    if run is None or run.snapshot is None or run.export is None or run.export.resolve() != source.resolve():
        return None, None
    try:
        return open_snapshot(run.folder), None
    except SnapshotError as error:  # the run's own, damaged: the trace's findings still come
        return None, f"no memory findings: the run's snapshot could not be read ({error})"
