"""Several inputs on one clock: each input's times moved onto a common time line, by its own absolute time
base where it has one (nsys: the session's start on the wall clock; torch.profiler: baseTimeNanoseconds, or
times on the wall clock already), else by its first step, put at the first input's first step (said)."""

from __future__ import annotations

from tracekit.model.trace import TORCH_PROFILER, Trace


class Clock:
    """The offsets of ``inputs`` inputs read one after another (one input keeps its own times)."""

    def __init__(self, inputs: int):
        self.inputs = inputs
        self.reference: int | None = None  # the first input's first step (or event), on the common clock

    def offset(self, trace: Trace, label: str, notes: list[str]) -> int:
        """ns to add to ``trace``'s times; a note when it has no absolute time base."""
        if self.inputs == 1:
            return 0
        base = absolute_base(trace)
        first = first_step(trace)
        if base is not None:
            offset = base
        elif self.reference is None:
            offset = 0
        else:
            offset = self.reference - first
        if base is None:
            notes.append(
                f"{label}: no absolute time base (when the capture started on the wall clock): "
                "aligned on its first step" + (" (the first input's)" if self.reference is not None else "")
            )
        if self.reference is None:
            self.reference = first + offset
        return offset


def absolute_base(trace: Trace) -> int | None:
    """The wall-clock time (ns since 1970) of the trace's time zero, or None when it does not say."""
    if trace.meta.session_start_utc_ns is not None:
        return int(trace.meta.session_start_utc_ns)
    return 0 if trace.meta.tool == TORCH_PROFILER else None  # torch.profiler's times are the wall clock's


def first_step(trace: Trace) -> int:
    """When the trace's first step starts (its first event without steps), on its own clock."""
    from tracekit.analysis.primitives.step_window import step_rows

    steps = step_rows(trace)
    if len(steps):
        return int(steps["start"].min())
    starts = [int(table["start"].min()) for table in (trace.gpu_ops, trace.launches, trace.ranges) if len(table)]
    return min(starts, default=0)
