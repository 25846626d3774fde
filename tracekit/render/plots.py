"""Pictures: a ``Chart`` (what an analysis wants shown) drawn as a matplotlib Figure, and saved.

No browser and no network: matplotlib's Agg backend renders files directly. Each drawing function
takes the chart's title and data; ``draw`` picks it by the chart's kind.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # files only: no display needed, none opened

import numpy as np
from matplotlib.colors import LinearSegmentedColormap
from matplotlib.figure import Figure
from matplotlib.text import Text
from matplotlib.ticker import MaxNLocator

from tracekit.errors import UsageError
from tracekit.files import check_target, write_whole
from tracekit.model.command import import_attribute
from tracekit.model.result import Chart
from tracekit.render.collective_plot import wait_transfer
from tracekit.render.colours import category_colour, phase_colour
from tracekit.render.roofline_plot import roofline
from tracekit.render.safe_text import printable


def memory_timeline(title: str, data: dict[str, Any]) -> Figure:
    """Active memory over time, stacked (see ``analysis.memory.tables.timeline_chart`` for the data):
    before-the-trace and other allocations in greys, the largest allocations in colour, reserved
    memory dashed, the peak marked, annotated phases shaded."""
    x = data["x"]
    figure = Figure(figsize=(12, 6), layout="constrained")
    axes = figure.add_subplot()
    colors = matplotlib.colormaps["tab20"].colors  # type: ignore[attr-defined]
    bands = data["bands"]
    axes.stackplot(
        x,
        data["before"],
        data["rest"],
        *bands,
        step="post",
        labels=["allocated before the trace began", "all other allocations", *data["labels"]],
        colors=["#8c8c8c", "#c8c8c8"] + [colors[i % len(colors)] for i in range(len(bands))],
        linewidth=0,
    )
    axes.step(
        x, data["reserved"], where="post", color="black", linestyle="--", linewidth=1, label="reserved (segments)"
    )
    axes.axvline(data["peak_x"], color="crimson", linewidth=1)
    axes.annotate(
        f"peak {data['peak']:,.2f} {data['unit']}",
        (data["peak_x"], data["peak"]),
        xytext=(6, 6),
        textcoords="offset points",
        color="crimson",
        fontsize=10,
        fontweight="bold",
        bbox={"boxstyle": "round,pad=0.2", "facecolor": "white", "edgecolor": "none", "alpha": 0.8},
    )
    for number, (name, start, end) in enumerate(data["phases"]):
        axes.axvspan(start, end, color="tab:blue", alpha=0.08, label=name if number == 0 else None)
        axes.text(
            start, 0.01, f" {name}", va="bottom", fontsize=8, color="tab:blue", transform=axes.get_xaxis_transform()
        )
    axes.set_xlabel(data["x_label"])
    axes.set_ylabel(f"active memory ({data['unit']})")
    axes.set_title(title)
    axes.set_xlim(x.min(), x.max() if x.max() > x.min() else x.min() + 1)
    axes.set_ylim(bottom=0)
    axes.grid(alpha=0.3)
    axes.legend(
        loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, title=f"largest at peak (of {data['live_count']:,})"
    )
    return figure


def category_bars(title: str, data: dict[str, Any]) -> Figure:
    """Stacked horizontal bars: per phase, the share (%) of kernel time by category (``data["table"]``
    is breakdown's table); each category has its one colour (``colours``), so pictures compare at a
    glance."""
    table = data["table"]
    shares = [column for column in table.columns if column.endswith(" (%)")]
    figure = Figure(figsize=(10, 0.7 * len(table) + 2), layout="constrained")
    axes = figure.add_subplot()
    left = np.zeros(len(table))
    for column in shares:
        values = table[column].to_numpy(float)
        category = column.replace(" (%)", "")
        color = category_colour(category)  # the same in every picture
        axes.barh([printable(str(phase)) for phase in table["Phase"]], values, left=left, label=category, color=color)
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


def step_times(title: str, data: dict[str, Any]) -> Figure:
    """Per measured step, the time of each phase (ms; ``data["samples_ms"]``): drift, outliers and
    warm-up left-overs show up."""
    figure = Figure(figsize=(9, 4), layout="constrained")
    axes = figure.add_subplot()
    for phase in ("step", "forward", "backward", "optimizer"):
        values = data["samples_ms"].get(phase)
        if values:
            axes.plot(
                range(1, len(values) + 1),
                values,
                marker="o",
                label=phase,
                linewidth=2 if phase == "step" else 1,
                color=phase_colour(phase),
            )
    axes.set_xlabel("measured step")
    axes.xaxis.set_major_locator(MaxNLocator(integer=True))
    axes.set_ylabel("time (ms)")
    axes.set_ylim(bottom=0)
    axes.set_title(title)
    axes.grid(alpha=0.3)
    if axes.get_legend_handles_labels()[1]:  # a run.json may hold no usable samples
        axes.legend(fontsize=8)
    return figure


def bench_scaling(title: str, data: dict[str, Any]) -> Figure:
    """Step time (ms) against context length, one line per model and variant (``data["table"]`` has
    Model, Ctx, Variant, Step Mean (ms), Step Std (ms)), error bars one std; log-log."""
    figure = Figure(figsize=(9, 5), layout="constrained")
    axes = figure.add_subplot()
    for (model, variant), group in data["table"].groupby(["Model", "Variant"], sort=False):
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


def compare_bars(title: str, data: dict[str, Any]) -> Figure:
    """Grouped bars: per phase a group, per run a bar of its kernel time per phase instance (ms),
    stacked by category (``data["table"]``: the label column, Phase, Per Instance (ns), "<cat> (%)")."""
    table, label, categories = data["table"], data["label"], list(data["categories"])
    phases = list(dict.fromkeys(table["Phase"]))
    runs = list(dict.fromkeys(table[label]))
    width = 0.8 / max(len(runs), 1)
    figure = Figure(figsize=(max(8, 1.2 * len(phases) * max(len(runs), 1) ** 0.5 + 4), 5), layout="constrained")
    axes = figure.add_subplot()
    bars, names = [], []
    for position, run in enumerate(runs):
        rows = table.loc[table[label] == run].set_index("Phase").reindex(phases)
        x = np.arange(len(phases)) + (position - (len(runs) - 1) / 2) * width
        bottom = np.zeros(len(phases))
        total_ms = rows["Per Instance (ns)"].fillna(0).to_numpy(float) / 1e6
        for category in categories:
            height = total_ms * rows[f"{category} (%)"].fillna(0).to_numpy(float) / 100
            axes.bar(
                x,
                height,
                width,
                bottom=bottom,
                color=category_colour(category),
                label=category if position == 0 else None,
            )
            bottom += height
        bars += x.tolist()
        names += [printable(str(run))] * len(x)
    # Each bar is named below it (minor ticks), the phases below those: labels sit in the layout, never
    # over a bar, another label or the title (they were written above the bars, into the title).
    axes.xaxis.remove_overlapping_locs = False  # a bar at a group's centre keeps its name
    axes.set_xticks(bars, names, minor=True, rotation=90, fontsize=7)
    axes.set_xticks(np.arange(len(phases)), [printable(str(phase)) for phase in phases])
    longest = max((len(name) for name in names), default=0)
    axes.tick_params(axis="x", which="major", length=0, pad=7 * 0.62 * longest + 8)
    axes.set_ylabel("kernel time per instance (ms)")
    axes.set_title(title)
    axes.grid(alpha=0.3, axis="y")
    if categories:
        axes.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8)
    return figure


def step_timeline(title: str, data: dict[str, Any]) -> Figure:
    """The steps' CPU ranges (``data["rows"]``: name -> (starts, widths) in ms), alternating in two
    shades, then one row per GPU (``data["busy"]``: the busy share of each of equal columns across
    ``data["span_ms"]``): a column is as green as the GPU was busy in it, white when idle, so a gap
    narrower than a pixel still pales its pixel in proportion to the idle time."""
    rows, busy, span = data["rows"], data.get("busy", {}), data.get("span_ms", 0.0)
    names = list(rows) + list(busy)
    figure = Figure(figsize=(12, 0.6 * len(names) + 1.5), layout="constrained")
    axes = figure.add_subplot()
    for position, (starts, widths) in enumerate(rows.values()):
        colors = ["#4c72b0" if index % 2 == 0 else "#8fa8d8" for index in range(len(starts))]
        axes.broken_barh(list(zip(starts, widths)), (position - 0.4, 0.8), facecolors=colors)
    shades = LinearSegmentedColormap.from_list("busy", ["#ffffff", "#2e7d32"])
    for offset, shares in enumerate(busy.values()):
        position = len(rows) + offset
        axes.imshow(
            np.asarray(shares)[None, :],
            extent=(0, span, position + 0.4, position - 0.4),
            aspect="auto",
            cmap=shades,
            vmin=0.0,
            vmax=1.0,
            interpolation="nearest",
        )
    axes.set_ylim(len(names) - 0.5, -0.5)  # first row on top
    axes.set_xlim(0, max(span, max((float(np.max(s + w)) for s, w in rows.values() if len(s)), default=0.0)))
    axes.set_yticks(range(len(names)), [printable(name) for name in names])
    axes.set_xlabel("time from the first step (ms)")
    axes.set_title(title)
    axes.grid(alpha=0.3, axis="x")
    return figure


def role_timeline(title: str, data: dict[str, Any]) -> Figure:
    """Live memory (MiB) by role over time, stacked (``analysis.memory.roles.role_timeline``)."""
    figure = Figure(figsize=(11, 5), layout="constrained")
    axes = figure.add_subplot()
    if data["bands"]:
        axes.stackplot(data["x"], *data["bands"], labels=[printable(label) for label in data["labels"]], alpha=0.85)
        axes.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8)
    axes.set_xlabel(data["x_label"])
    axes.set_ylabel("live memory (MiB)")
    axes.set_title(title)
    axes.grid(alpha=0.3)
    return figure


def queue_lengths(title: str, data: dict[str, Any], ylabel: str = "ops launched, not yet started") -> Figure:
    """Each stream's launch queue length over time (``analysis.waits.queues``: the largest length in each
    column of time, so a short peak still shows); the same lines of another figure with ``ylabel``."""
    figure = Figure(figsize=(11, 4.5), layout="constrained")
    axes = figure.add_subplot()
    for label, values in data["lines"].items():
        axes.step(data["x_ms"], values, where="post", label=printable(label), linewidth=1)
    if data["lines"]:
        axes.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8)
    axes.set_xlabel("time from the first event drawn (ms)")
    axes.set_ylabel(ylabel)
    axes.set_title(title)
    axes.grid(alpha=0.3)
    return figure


def bandwidth_lines(title: str, data: dict[str, Any]) -> Figure:
    """Each direction's summed copy bandwidth over time (``analysis.kernels.bandwidth``)."""
    return queue_lengths(title, data, ylabel="bandwidth (GB/s)")


DRAW = {
    "queue_lengths": queue_lengths,
    "bandwidth_lines": bandwidth_lines,
    "memory_timeline": memory_timeline,
    "role_timeline": role_timeline,
    "step_timeline": step_timeline,
    "compare_bars": compare_bars,
    "category_bars": category_bars,
    "step_times": step_times,
    "bench_scaling": bench_scaling,
    "roofline": roofline,
    "wait_transfer": wait_transfer,
}


def draw(chart: Chart) -> Figure:
    """The figure of ``chart``: drawn by ``DRAW``'s function of its kind, or by the function a kind
    "module:function" names (a command of another package draws its own pictures)."""
    if chart.kind in DRAW:
        drawing = DRAW[chart.kind]
    elif ":" in chart.kind:
        drawing = import_attribute(chart.kind)
    else:
        raise UsageError(f"no drawing for a chart of kind {chart.kind!r}")
    figure = drawing(chart.title, chart.data)
    for text in figure.findobj(Text):  # names from the input: control characters shown as escapes
        text.set_text(printable(text.get_text()))
    return figure


def check_picture_path(path: str | Path) -> str:
    """The picture format a file name asks for (its suffix; png without one); UsageError for a suffix
    matplotlib cannot write, or a folder that does not exist, before anything is drawn."""
    suffix = Path(path).suffix.lstrip(".").lower() or "png"
    known = Figure().canvas.get_supported_filetypes()
    if suffix not in known:
        raise UsageError(f"{path}: pictures are written as {', '.join(sorted(known))}; pick one of these suffixes")
    check_target(path)
    return suffix


# Labels are names from the input: "$x$" in a frame or range name is text, not mathtext to typeset
# (and "$\\frac{$" would not parse). Text is laid out when the figure is saved, so both steps run under it.
PLAIN_TEXT: dict[Any, Any] = {"text.parse_math": False, "text.usetex": False}


def save(chart: Chart, path: str | Path, dpi: int = 110) -> Path:
    """Draw and write a chart, PNG or SVG (or anything matplotlib knows) by the file's suffix, whole."""
    suffix = check_picture_path(path)
    return write_whole(path, lambda temporary: _drawn_into(chart, temporary, suffix, dpi))


def png(chart: Chart, dpi: int = 110) -> bytes:
    """A chart drawn as PNG, in memory (``tracekit mcp`` sends it as an image; no file is written)."""
    buffer = io.BytesIO()
    _drawn_into(chart, buffer, "png", dpi)
    return buffer.getvalue()


def _drawn_into(chart: Chart, target: Any, suffix: str, dpi: int) -> None:
    with matplotlib.rc_context(PLAIN_TEXT):
        figure = draw(chart)
        figure.savefig(target, dpi=dpi, format=suffix)
