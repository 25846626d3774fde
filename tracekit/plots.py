"""Pictures. Each function returns a matplotlib Figure; the caller saves it (PNG or SVG by suffix).

No browser and no network: matplotlib's Agg backend renders files directly.
"""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")  # files only: no display needed, none opened

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402

from tracekit.analysis.categories import CATEGORIES  # noqa: E402
from tracekit.analysis.memory import MIB, DeviceMemory, phases, user_frame  # noqa: E402
from tracekit.sources.snapshot import MemoryTrace  # noqa: E402

MAX_POINTS = 3000  # more points than a picture's width in pixels add time, not detail


def _bucket_extremes(values: np.ndarray, buckets: int) -> np.ndarray:
    """Indices of the smallest and the largest value in each of ``buckets`` equal runs, in order:
    thinned this way, a dense stretch still draws its whole min-max envelope and every spike survives."""
    if len(values) <= 2 * buckets:
        return np.arange(len(values))
    width = -(-len(values) // buckets)
    high = np.full(width * buckets, np.iinfo(np.int64).min, dtype=np.int64)
    low = np.full(width * buckets, np.iinfo(np.int64).max, dtype=np.int64)
    high[: len(values)] = values
    low[: len(values)] = values
    offsets = np.arange(buckets) * width
    picks = np.concatenate(
        (
            high.reshape(buckets, width).argmax(axis=1) + offsets,
            low.reshape(buckets, width).argmin(axis=1) + offsets,
            [0, len(values) - 1],
        )
    )
    return np.unique(picks[picks < len(values)])


def memory_timeline(trace: MemoryTrace, memory: DeviceMemory, top: int = 10, title: str | None = None) -> Figure:
    """Active memory over time, stacked: the ``top`` largest allocations live at the peak as bands of
    their own (each present from its alloc to its free), everything else as one band below; the
    peak marked, reserved memory dashed, annotated phases shaded. x in ms (event index without
    timestamps)."""
    timeline = memory.timeline
    allocated = timeline["allocated"].to_numpy(np.int64)
    grid = _bucket_extremes(allocated, MAX_POINTS // 2)
    peak_row = int(np.flatnonzero(timeline["index"].to_numpy() == memory.peak_index)[0])
    grid = np.unique(np.append(grid, peak_row))
    index = timeline["index"].to_numpy()[grid]
    x = timeline["x"].to_numpy()[grid]
    scale, unit = (2**30, "GiB") if allocated.max(initial=0) >= 4 * 2**30 else (MIB, "MiB")

    largest = memory.live_at_peak.head(top)
    bands, labels = [], []
    for allocation in largest.itertuples():
        alive = (index >= allocation.start) & (index < allocation.end)
        bands.append(np.where(alive, allocation.size, 0) / scale)
        who = (
            "(before the trace)"
            if allocation.before_trace and allocation.stack == 0
            else user_frame(trace.stacks[allocation.stack])
        )
        labels.append(f"{allocation.size / MIB:,.0f} MiB  {who[:60]}")
    before = _before_trace_bytes(memory, index, exclude=largest.index) / scale
    rest = allocated[grid] / scale - before - (np.sum(bands, axis=0) if bands else 0)

    figure = Figure(figsize=(12, 6), layout="constrained")
    axes = figure.add_subplot()
    colors = matplotlib.colormaps["tab20"].colors
    axes.stackplot(
        x,
        before,
        np.maximum(rest, 0),
        *bands,
        step="post",
        labels=["allocated before the trace began", "all other allocations"] + labels,
        colors=["#8c8c8c", "#c8c8c8"] + [colors[i % len(colors)] for i in range(len(bands))],
        linewidth=0,
    )
    axes.step(
        x,
        timeline["reserved"].to_numpy()[grid] / scale,
        where="post",
        color="black",
        linestyle="--",
        linewidth=1,
        label="reserved (segments)",
    )
    peak_x = timeline["x"].iloc[peak_row]
    peak_value = memory.peak_allocated / scale
    axes.axvline(peak_x, color="crimson", linewidth=1)
    axes.annotate(
        f"peak {peak_value:,.2f} {unit}",
        (peak_x, peak_value),
        xytext=(6, 6),
        textcoords="offset points",
        color="crimson",
        fontsize=10,
        fontweight="bold",
        bbox={"boxstyle": "round,pad=0.2", "facecolor": "white", "edgecolor": "none", "alpha": 0.8},
    )
    for number, phase in enumerate(phases(trace, memory).itertuples()):
        axes.axvspan(phase[2], phase[3], color="tab:blue", alpha=0.08, label=phase[1] if number == 0 else None)
        axes.text(
            phase[2],
            0.01,
            f" {phase[1]}",
            va="bottom",
            fontsize=8,
            color="tab:blue",
            transform=axes.get_xaxis_transform(),
        )
    axes.set_xlabel("time (ms)" if memory.has_time else "allocator event")
    axes.set_ylabel(f"active memory ({unit})")
    axes.set_title(title or f"Active memory timeline, cuda:{memory.device}")
    axes.set_xlim(x.min(), x.max() if x.max() > x.min() else x.min() + 1)
    axes.set_ylim(bottom=0)
    axes.grid(alpha=0.3)
    axes.legend(
        loc="upper left",
        bbox_to_anchor=(1.01, 1.0),
        fontsize=8,
        title=f"largest at peak (of {len(memory.live_at_peak):,})",
    )
    return figure


def _before_trace_bytes(memory: DeviceMemory, index: np.ndarray, exclude) -> np.ndarray:
    """Bytes of allocations made before the trace began still active at each event index (those
    drawn as their own band excluded): all of them minus those freed by then."""
    allocations = memory.allocations.drop(index=exclude)
    early = allocations[allocations["before_trace"].to_numpy()]
    ends = np.sort(early["end"].to_numpy())
    freed = np.concatenate(([0], np.cumsum(early["size"].to_numpy()[np.argsort(early["end"].to_numpy())])))
    return early["size"].sum() - freed[np.searchsorted(ends, index, side="right")]


def save(figure: Figure, path, dpi: int = 110) -> None:
    """Write a figure; PNG or SVG (or anything matplotlib knows) by the file's suffix."""
    figure.savefig(path, dpi=dpi)


def category_bars(table: pd.DataFrame, title: str) -> Figure:
    """Stacked horizontal bars: per phase, the share (%) of kernel time by category (``breakdown``'s table)."""
    shares = [column for column in table.columns if column.endswith(" (%)")]
    figure = Figure(figsize=(10, 0.7 * len(table) + 2), layout="constrained")
    axes = figure.add_subplot()
    left = np.zeros(len(table))
    colors = matplotlib.colormaps["tab10"].colors
    for column in shares:
        values = table[column].to_numpy(float)
        category = column.replace(" (%)", "")
        # a category keeps its colour in every picture, so two runs' bars compare at a glance
        color = colors[CATEGORIES.index(category) % 10] if category in CATEGORIES else "grey"
        axes.barh(table["Phase"], values, left=left, label=category, color=color)
        for row, (start, width) in enumerate(zip(left, values)):
            if width >= 6:
                axes.text(start + width / 2, row, f"{width:.0f}%", ha="center", va="center", fontsize=8, color="white")
        left += values
    axes.invert_yaxis()
    axes.set_xlim(0, 100)
    axes.set_xlabel("share of kernel time (%)")
    axes.set_title(title)
    axes.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8)
    return figure


def step_times(samples_ms: dict[str, list[float]], title: str) -> Figure:
    """Per measured step, the time of each phase (ms): drift, outliers and warm-up left-overs show up."""
    figure = Figure(figsize=(9, 4), layout="constrained")
    axes = figure.add_subplot()
    for phase in ("step", "forward", "backward", "optimizer"):
        values = samples_ms.get(phase)
        if values:
            axes.plot(range(1, len(values) + 1), values, marker="o", label=phase, linewidth=2 if phase == "step" else 1)
    axes.set_xlabel("measured step")
    axes.xaxis.set_major_locator(MaxNLocator(integer=True))
    axes.set_ylabel("time (ms)")
    axes.set_ylim(bottom=0)
    axes.set_title(title)
    axes.grid(alpha=0.3)
    axes.legend(fontsize=8)
    return figure


def bench_scaling(table: pd.DataFrame, title: str) -> Figure:
    """Step time (ms) against context length, one line per model and variant (columns Model, Ctx,
    Variant, Step Mean (ms), Step Std (ms)), error bars one std; log-log."""
    figure = Figure(figsize=(9, 5), layout="constrained")
    axes = figure.add_subplot()
    for (model, variant), group in table.groupby(["Model", "Variant"], sort=False):
        group = group.sort_values("Ctx")
        axes.errorbar(
            group["Ctx"],
            group["Step Mean (ms)"],
            yerr=group["Step Std (ms)"],
            marker="o",
            capsize=3,
            label=f"{model} {variant}",
        )
    axes.set_xscale("log", base=2)
    axes.set_yscale("log")
    axes.set_xlabel("context length (tokens)")
    axes.set_ylabel("step time (ms)")
    axes.set_title(title)
    axes.grid(alpha=0.3, which="both")
    axes.legend(fontsize=8)
    return figure
