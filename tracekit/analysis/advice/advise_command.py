"""The ``advise`` command, declared once: its options and ``COMMAND``; the analysis lives apart (one input:
``commands.advice``, many: ``analysis.advice.many``).
"""

from __future__ import annotations

from dataclasses import dataclass

from tracekit.model import option_fields as shared
from tracekit.model.command import Command
from tracekit.model.options import OptionError, Options, flag, named, number, specs, text, whole

# the options that each say what to judge instead of the steady state found: at most one of them
JUDGED = ("whole_trace", "window", "ranges", "steps")


@dataclass(frozen=True)
class AdviseOptions(Options):
    """``advise``: findings ranked by the time they could recover, and nsys's expert rules."""

    gap_ms: float = number(
        500, "gpu-starv: list GPU gaps longer than this (ms; nsys's gap option)", unit="ms", metavar="MS"
    )
    threshold: float = number(
        50,
        "gpu-low-util: list chunks of a GPU's span used less than this (%; nsys's threshold option)",
        metavar="PERCENT",
    )
    chunks: int = whole(30, "gpu-low-util: chunks a GPU's span is cut into (1 to 1000; nsys's chunks option)")
    rows: int = whole(50, "rows of each nsys rule's table (nsys's rows option)")
    step_range: str | None = shared.step_range()
    whole_trace: bool = flag(
        "judge the whole trace: no steady state is looked for, so one-time costs (setup, warm-up, context "
        "creation, module loading) rank with the rest"
    )
    window: str | None = text(
        "judge only START:END, in ms from the first GPU op (either side may be left out: 200: or :1500)",
        metavar="START:END",
    )
    ranges: tuple[str, ...] = specs(
        (),
        "judge only the time of these ranges' instances, from the first one's start to the last one's end (a "
        "name such as train_step, a path or a glob; repeatable)",
        repeat=True,
    )
    steps: str | None = text(
        "judge only steps A to B (inclusive), numbered as their labels are in `tracekit steps` (ProfilerStep#5 "
        "is 5; repeated names count from 1: step #1); A:, :B and N also work",
        metavar="A:B",
    )
    memory: str | None = text(
        "a CUDA memory snapshot (pickle) to read out-of-memory errors, activations and "
        "fragmentation from (default: a run folder's own)",
        metavar="SNAPSHOT",
        one_input=True,
    )

    def check(self) -> None:
        if not 1 <= self.chunks <= 1000:
            raise OptionError(f"{named('chunks')} must be between 1 and 1000 (nsys's bounds), not {self.chunks}")
        if self.window is not None:
            window_ms(self.window)  # a clear error now, not after the trace is read
        if self.steps is not None:
            step_numbers(self.steps)
        given = [name for name in JUDGED if self.changed().get(name) is not None]
        if len(given) > 1:
            raise OptionError(f"{' and '.join(named(name) for name in given)} each say what to judge: give one of them")
        if self.step_range is not None and given and given[0] != "steps":
            raise OptionError(
                f"{named('step_range')} names the steps, which {named(given[0])} does not judge: give "
                f"{named('step_range')} alone or with {named('steps')}"
            )

    @property
    def window_bounds(self) -> tuple[float | None, float | None] | None:
        """The window's (start, end) in ms from the first GPU op (None: a side left open); None: no window."""
        return None if self.window is None else window_ms(self.window)

    @property
    def step_bounds(self) -> tuple[int | None, int | None] | None:
        """The first and last step numbers to judge (None: a side left open); None: no ``steps``."""
        return None if self.steps is None else step_numbers(self.steps)


def step_numbers(text_value: str) -> tuple[int | None, int | None]:
    """ "3:7" -> (3, 7); "3:" -> (3, None); ":7" -> (None, 7); "5" -> (5, 5); an OptionError for anything else."""
    start, colon, end = text_value.partition(":")
    sides = (start.strip(), end.strip()) if colon else (start.strip(), start.strip())
    if not all((side.isascii() and side.isdigit()) or not side for side in sides) or sides == ("", ""):
        raise OptionError(
            f"{named('steps')} takes A:B, the first and last step numbers (3:7, 3:, :7 or 5), not {text_value!r}"
        )
    low, high = (int(side) if side else None for side in sides)
    if low is not None and high is not None and high < low:
        raise OptionError(f"{named('steps')}'s last step must not come before its first, not {text_value!r}")
    return low, high


def window_ms(text_value: str) -> tuple[float | None, float | None]:
    """ "200:1500" -> (200.0, 1500.0); "200:" -> (200.0, None); an OptionError for anything else."""
    start, colon, end = text_value.partition(":")
    try:
        bounds = tuple(float(side) if side.strip() else None for side in (start, end))
    except ValueError:
        bounds = None
    if (
        not colon
        or bounds is None
        or bounds == (None, None)
        or any(b is not None and (b != b or b < 0) for b in bounds)
    ):
        raise OptionError(
            f"{named('window')} takes START:END in ms from the first GPU op (200:1500, 200: or :1500), not {text_value!r}"
        )
    low, high = bounds
    if low is not None and high is not None and high <= low:
        raise OptionError(f"{named('window')}'s end must come after its start, not {text_value!r}")
    return low, high


COMMAND = Command(
    "advise",
    "What to fix first in TRACE: findings ranked by the time a fix could give back (blocking syncs, "
    "launch-bound stretches, host stalls, pageable and synchronous copies, copies on compute streams, "
    "FP32 matmul, unfused optimizer steps, unfused attention, elementwise chains, exposed communication; "
    "with a memory snapshot, out-of-memory errors, activations dominating the peak, optimizer temporaries, a "
    "retained previous iteration, fragmentation), each with its evidence and the usual fix; "
    "then nsys's expert "
    "rules (gpu-starv, gpu-low-util, cuda-sync-api, cuda-sync-memcpy, cuda-sync-memset, cuda-async-memcpy) "
    "as nsys analyze reports them. Several traces (the ranks of a job): their findings together, the "
    "straggler rank, and a row per rank. A memory snapshot alone (a .pickle): its memory findings.",
    AdviseOptions,
    "traces",
    run="tracekit.commands.advice:advise_with_snapshot",
    on_snapshot="tracekit.commands.advice:advise_snapshot",
    part="tracekit.analysis.advice.many:advise_part",
    merger="tracekit.analysis.advice.many:AdviseMerger",
    title="advice",
    unit="ms",
    doc="""What to fix first: "findings" ranked by the time a fix could give back, with their "evidence", then
nsys's expert rules, a table each where they found something (``gap_ms``, ``threshold``, ``chunks``,
``rows``: nsys's options). ``memory``: a snapshot to read memory findings from (default: a run's own).
Several traces (a job's ranks): their findings together, the straggler, and a row per rank ("ranks").""",
    examples=('tracekit.advise("trace.sqlite")["findings"]',),
)
