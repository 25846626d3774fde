"""``tracekit sequences``: the kernel sequences a trace repeats, the candidates for fusing into one kernel.

Every run of ``length`` consecutive kernels on one stream: a window slid one op at a time over each
(GPU, stream)'s ops in start order; a window holding a memory copy or set does not count. Windows with
the same kernel names (base names, or ``name`` "demangled") are one sequence, whatever stream ran them.
Per sequence: Count (its windows; those of a repeating pattern overlap, "a a a a" holds "a a a" twice),
Kernel Time (ns: its kernels' time summed over its windows, a kernel in two windows counting in each),
Gaps (ns: the time between its kernels, first start to last end less Kernel Time, summed: launch
overhead and waits a fused kernel would not pay), Streams, and From: the range or operator its windows
most often came from (the innermost range of the launching thread that covers every launch call of
the window, else the first kernel's, marked; step numbers dropped, "ProfilerStep#N") with the share of
windows it holds. The most
frequent first. With ``operator`` the sequences are HolisticTraceAnalysis's instead
(``operator_sequences``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import pandas as pd

from tracekit.analysis.kernels.sequences_command import SequencesOptions
from tracekit.analysis.primitives.covering import covering_range
from tracekit.analysis.primitives.joins import op_launches
from tracekit.analysis.primitives.keyed_times import stream_keys
from tracekit.analysis.primitives.op_selection import kernel_mask
from tracekit.analysis.primitives.sequence_keys import fixed_keys
from tracekit.analysis.primitives.step_window import launched_before_last_step
from tracekit.errors import NoGpuDataError
from tracekit.model.range_specs import shown_op_name
from tracekit.model.result import Result, Table
from tracekit.model.trace import Trace

SEPARATOR = " -> "
NO_CALL = "(launching call not in trace)"
NO_RANGE = "(no range)"
FIRST_ONLY = "(first kernel's)"  # no one range launched the whole window: the first kernel's
STEP_NUMBER = re.compile(r"#\d+$")  # ProfilerStep#12 -> ProfilerStep#N: one origin for every step


@dataclass
class Windows:
    """The windows of ``length`` consecutive kernels on a stream that a trace holds."""

    order: np.ndarray  # GPU-op rows by (device, stream, start)
    at: np.ndarray  # per window: the position in ``order`` of its first op
    sequence: np.ndarray  # per window: its sequence id
    texts: np.ndarray  # per sequence id: its kernel names joined by SEPARATOR
    length: int

    def rows(self, windows: np.ndarray, offset: int) -> np.ndarray:
        """The GPU-op rows at ``offset`` (0: first kernel, length - 1: last) of the windows ``windows``."""
        return self.order[self.at[windows] + offset]


def kernel_windows(trace: Trace, length: int, name: str = "short", drop_last_step: bool = False) -> Windows:
    """Every window of ``length`` consecutive kernels on one stream, and its sequence; ``drop_last_step``:
    ops outside HTA's step window break windows as copies do."""
    ops = trace.gpu_ops
    names = ops["short_name" if name == "short" else "name"]
    order = np.lexsort((ops["start"].to_numpy(), ops["stream"].to_numpy(), ops["device"].to_numpy()))
    codes = names.cat.codes.to_numpy().astype(np.int64)[order]
    other = (ops["kind"] != "kernel").to_numpy()
    window = launched_before_last_step(trace)[0] if drop_last_step else None
    codes[(other | ~window if window is not None else other)[order]] = -1
    count = len(order) - length + 1
    if count <= 0:
        empty = np.zeros(0, dtype=np.int64)
        return Windows(order, empty, empty, np.zeros(0, dtype=object), length)
    stream = stream_keys(ops)[order]
    others = np.concatenate([[0], np.cumsum(codes < 0)])  # copies and sets before each position
    at = np.flatnonzero((stream[:count] == stream[length - 1 :]) & (others[length:] == others[:count]))
    windows = np.lib.stride_tricks.sliding_window_view(codes, length)[at]
    sequence, first = fixed_keys(windows, len(names.cat.categories))
    labels = np.asarray([str(label) for label in names.cat.categories], dtype=object)
    texts = np.asarray([SEPARATOR.join(labels[windows[row]]) for row in first.tolist()], dtype=object)
    return Windows(order, at, sequence, texts, length)


def ranked(trace: Trace, windows: Windows, min_count: int, top: int) -> pd.DataFrame:
    """Per sequence seen ``min_count`` times or more, the ``top`` most frequent (then most time): its id,
    text, count, kernel time and gaps (ns), and streams."""
    ops = trace.gpu_ops
    start, end, duration = (ops[column].to_numpy()[windows.order] for column in ("start", "end", "duration"))
    before = np.concatenate([[0], np.cumsum(duration)])  # kernel time up to each position
    low, high = windows.at, windows.at + windows.length
    sequence, distinct = windows.sequence, len(windows.texts)
    # sums per sequence with bincount (float64 holds these integer sums exactly below 2^53 ns: 104 days)
    count = np.bincount(sequence, minlength=distinct)
    window_time = before[high] - before[low]
    time = np.bincount(sequence, weights=window_time, minlength=distinct).astype(np.int64)
    # gaps per window, clipped there: kernels of one stream that overlap (clock noise) give no negative gap
    gaps = np.bincount(
        sequence, weights=np.maximum(end[high - 1] - start[low] - window_time, 0), minlength=distinct
    ).astype(np.int64)
    stream_codes = pd.factorize(stream_keys(ops)[windows.order[low]])[0]
    pairs = np.unique(sequence * (int(stream_codes.max(initial=0)) + 1) + stream_codes)
    streams = np.bincount(pairs // (int(stream_codes.max(initial=0)) + 1), minlength=distinct)
    per = pd.DataFrame(
        {
            "sequence": np.arange(distinct),
            "count": count,
            "time": time,
            "gaps": gaps,
            "streams": streams,
            "text": windows.texts,
        }
    )
    per = per.loc[per["count"].to_numpy() >= min_count]
    per = per.sort_values(["count", "time", "text"], ascending=[False, False, True], kind="stable").head(top)
    return per.reset_index(drop=True)


def window_origins(trace: Trace, windows: Windows, chosen: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per window of ``chosen`` (indices): a code into the labels returned, the name of the innermost range
    of its launching thread that covers all its launch calls (those of its first and last kernels, when
    one thread made both; else the first's); where no range covers them all, the first kernel's call's
    (marked FIRST_ONLY); NO_CALL without a recorded launching call, NO_RANGE outside every range."""
    launched = op_launches(trace)
    first, last = windows.rows(chosen, 0), windows.rows(chosen, windows.length - 1)
    found = launched.found[first]
    together = (
        found
        & launched.found[last]
        & (launched.pid[first] == launched.pid[last])
        & (launched.tid[first] == launched.tid[last])
    )
    stretch_end = np.where(together, launched.end[last], launched.end[first])
    ranges = trace.ranges
    pid, tid, start = launched.pid[first], launched.tid[first], launched.start[first]
    row = np.where(found, covering_range(ranges, pid, tid, start, stretch_end), -1)
    # no range holds every launch (kernels of two autograd nodes, say): the first kernel's, marked so
    alone = np.flatnonzero(found & (row < 0) & together)
    first_only = covering_range(ranges, pid[alone], tid[alone], start[alone], launched.end[first][alone])
    categories = ranges["name"].cat.categories if len(ranges) else pd.Index([])
    shown = [STEP_NUMBER.sub("#N", shown_op_name(str(label))) for label in categories]
    labels = np.asarray([*shown, *(f"{name} {FIRST_ONLY}" for name in shown), NO_RANGE, NO_CALL], dtype=object)
    name_codes = ranges["name"].cat.codes.to_numpy() if len(ranges) else np.zeros(1, dtype=np.int64)
    codes = np.where(
        row >= 0, name_codes[np.maximum(row, 0)], np.where(found, 2 * len(categories), 2 * len(categories) + 1)
    )
    codes[alone[first_only >= 0]] = len(categories) + name_codes[first_only[first_only >= 0]]
    return codes, labels


def sequences_table(trace: Trace, options: SequencesOptions | None = None) -> Result:
    """The kernel sequences ``trace`` repeats (see the module docstring); with ``operator``, per operator."""
    options = options or SequencesOptions()
    kernel_mask(trace, "all")  # a trace without GPU work (a CPU run): say so, and how to capture it
    if options.operator is not None:
        from tracekit.analysis.kernels.operator_sequences import operator_sequences

        return operator_sequences(trace, options)
    if not (trace.gpu_ops["kind"] == "kernel").any():
        raise NoGpuDataError(f"{trace.name}: no kernels, so no kernel sequences")
    windows = kernel_windows(trace, options.length, options.name, options.drop_last_step)
    table = ranked(trace, windows, options.min_count, options.top)
    chosen = np.flatnonzero(np.isin(windows.sequence, table["sequence"].to_numpy()))
    codes, labels = window_origins(trace, windows, chosen)
    # names label codes: steps' numbers dropped, several codes may share a name; counted by name
    name_codes, names = pd.factorize(labels)
    origin = pd.DataFrame({"sequence": windows.sequence[chosen], "origin": name_codes[codes]})
    counted = pd.DataFrame(origin.groupby(["sequence", "origin"], sort=False, as_index=False).size())
    counted = counted.rename(columns={"size": "windows"})
    counted["name"] = np.asarray(names, dtype=object)[counted["origin"].to_numpy()]
    counted = counted.sort_values(["sequence", "windows", "name"], ascending=[True, False, True], kind="stable")
    main = counted.drop_duplicates("sequence").set_index("sequence")
    # the kernels the windows could hold (with drop_last_step, those launched before the last step)
    counted = (trace.gpu_ops["kind"] == "kernel").to_numpy()
    if options.drop_last_step and (window := launched_before_last_step(trace)[0]) is not None:
        counted &= window
    kernel_time = int(trace.gpu_ops["duration"].to_numpy()[counted].sum())
    result = pd.DataFrame(
        {
            "Sequence": table["text"].to_numpy(),
            "Count": table["count"].to_numpy(np.int64),
            "Kernel Time (ns)": table["time"].to_numpy(np.int64),
            "Mean Time (ns)": (table["time"] / table["count"]).to_numpy(),
            "Gaps (ns)": table["gaps"].to_numpy(np.int64),
            "Kernel Share (%)": (
                100.0 * table["time"] / kernel_time if kernel_time else table["time"] * 0.0
            ).to_numpy(),
            "Streams": table["streams"].to_numpy(np.int64),
            "From": main["name"].reindex(table["sequence"]).to_numpy(),
            "From Share (%)": 100.0 * main["windows"].reindex(table["sequence"]).to_numpy() / table["count"].to_numpy(),
        }
    )
    notes = [launched_before_last_step(trace)[1]] if options.drop_last_step else []
    notes += [
        f"windows of {options.length} consecutive kernels on a stream (a copy or set between them breaks a "
        "window; windows of a repeating pattern overlap, each counted); Gaps: the time between a sequence's "
        "kernels, summed (what fusing them would save besides memory traffic); From: the innermost range covering "
        "the window's launch calls, the most common one and its share of the windows",
    ]
    if len(result) == 0:
        notes.append(f"no sequence of {options.length} kernels repeats {options.min_count} times or more")
    title = f"Kernel sequences of {options.length} seen {options.min_count}+ times: {trace.name}"
    return Result([Table("sequences", result, title)], notes + list(trace.warnings))
