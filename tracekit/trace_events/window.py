"""Which stretch of a trace a timeline holds: all of it, ``start_ms``..``end_ms`` from the trace's first
event, the N-th training step, or the K-th instance of a range. Events that overlap the window are
written whole (a kernel that starts before it is not cut)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from tracekit.errors import UsageError
from tracekit.model.options import OptionError, longest_time_error, named
from tracekit.model.trace import Trace

MAX_SEQUENCE_TRACKS = 20


@dataclass(frozen=True)
class WindowOptions:
    """``start_ms``/``end_ms``: ms from the trace's first event; ``step``: the N-th step (1-based) of
    ``steps``; ``range``: a range spec, its ``instance``-th match (0-based in time order, as ``ranges
    --instance``)."""

    start_ms: float | None = None
    end_ms: float | None = None
    step: int | None = None
    range: str | None = None
    instance: int = 0
    sequences: int = 0  # not a window: tracks of the most frequent kernel sequences (``sequence_track``)

    def __post_init__(self) -> None:
        if not _whole(self.sequences) or not 0 <= self.sequences <= MAX_SEQUENCE_TRACKS:
            raise OptionError(
                f"{named('sequences')} is how many kernel sequences get a track, 0 to "
                f"{MAX_SEQUENCE_TRACKS}, not {self.sequences!r}"
            )
        for name in ("start_ms", "end_ms"):
            value = getattr(self, name)
            number = isinstance(value, (int, float)) and not isinstance(value, bool)
            if value is not None and not (number and np.isfinite(value) and value >= 0):
                raise OptionError(
                    f"{named(name)} is a time in ms from the trace's first event (0 or more), not {value!r}"
                )
            too_long = longest_time_error(name, value, "ms") if value is not None else None
            if too_long is not None:
                raise too_long
        if self.start_ms is not None and self.end_ms is not None and self.end_ms <= self.start_ms:
            raise OptionError(
                f"{named('end_ms')} ({self.end_ms}) must come after {named('start_ms')} ({self.start_ms})"
            )
        if self.step is not None and (not _whole(self.step) or self.step < 1):
            raise OptionError(f"{named('step')} counts steps from 1, not {self.step!r}")
        if not _whole(self.instance) or self.instance < 0:
            raise OptionError(f"{named('instance')} counts instances from 0, not {self.instance!r}")
        if self.instance != 0 and self.range is None:
            raise OptionError(f"{named('instance')} picks an instance of {named('range')}: give {named('range')} too")
        if self.range is not None and (not isinstance(self.range, str) or not self.range.strip()):
            raise OptionError(f"{named('range')} is one range spec (text), not {self.range!r}")
        chosen = [name for name in ("step", "range") if getattr(self, name) is not None]
        if (self.start_ms is not None or self.end_ms is not None) and chosen or len(chosen) > 1:
            raise OptionError(
                f"give one window: {named('start_ms')}/{named('end_ms')}, {named('step')} or {named('range')}"
            )


def _whole(value: object) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


@dataclass(frozen=True)
class Window:
    """A stretch of trace time in ns (None: unbounded on that side)."""

    start: int | None = None
    end: int | None = None

    def overlapping(self, start: np.ndarray, end: np.ndarray) -> np.ndarray | None:
        """Which intervals overlap the window (None: all of them)."""
        if self.start is None and self.end is None:
            return None
        low = np.iinfo(np.int64).min if self.start is None else self.start
        high = np.iinfo(np.int64).max if self.end is None else self.end
        # overlapping it for some time, or starting inside it (an instant at its start, say); merely
        # touching it (the step before ends as this one starts) is not enough
        return ((start < high) & (end > low)) | ((start >= low) & (start <= high))

    def cut(self, frame: pd.DataFrame, start: str = "start", end: str = "end") -> pd.DataFrame:
        keep = self.overlapping(frame[start].to_numpy(), frame[end].to_numpy())
        return frame if keep is None else frame.loc[keep]


def first_event(trace: Trace) -> int:
    """The trace's earliest time, ns: its first GPU op, API call or range."""
    starts = [int(table["start"].min()) for table in (trace.gpu_ops, trace.launches, trace.ranges) if len(table)]
    return min(starts) if starts else 0


def window_of(trace: Trace, options: WindowOptions) -> Window:
    if options.start_ms is not None or options.end_ms is not None:
        origin = first_event(trace)
        at = lambda ms: None if ms is None else origin + int(round(ms * 1_000_000))
        return Window(at(options.start_ms), at(options.end_ms))
    if options.step is not None:
        from tracekit.analysis.primitives.step_window import step_rows

        steps = step_rows(trace).sort_values("start", kind="stable")
        if len(steps) < options.step:
            raise UsageError(
                f"{trace.name} has {len(steps)} training steps (ProfilerStep#N or step ranges), "
                f"not a step {options.step}"
            )
        return _with_its_work(trace, steps.iloc[[options.step - 1]])
    if options.range is not None:
        from tracekit.analysis.primitives.selection import select_ranges

        matches = select_ranges(trace, [options.range]).sort_values("start", kind="stable")
        if len(matches) <= options.instance:
            raise UsageError(
                f"{options.range} has {len(matches)} instances in {trace.name} (0 to {len(matches) - 1}), "
                f"not an instance {options.instance}"
            )
        return _with_its_work(trace, matches.iloc[[options.instance]])
    return Window()


def _with_its_work(trace: Trace, chosen: pd.DataFrame) -> Window:
    """A range's window: from its start to its end or the end of the last GPU op launched inside it,
    whichever is later (a kernel launched in a range often runs after the range has closed)."""
    from tracekit.analysis.primitives.attribution import GPU_END, range_gpu_stats

    row = chosen.iloc[0]
    gpu_end = int(range_gpu_stats(trace, chosen)[GPU_END].iloc[0]) if not trace.gpu_ops.empty else -1
    return Window(int(row["start"]), max(int(row["end"]), gpu_end))
