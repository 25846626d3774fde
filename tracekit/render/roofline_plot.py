"""The roofline picture of ``tracekit efficiency``: each group as a point (arithmetic intensity, achieved
TFLOP/s) sized by its GPU time, under the roofs of the GPU's precisions (min(peak, bandwidth x intensity))."""

from __future__ import annotations

from typing import Any

import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, NullFormatter

ROOF_COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b")


def roofline(title: str, data: dict[str, Any]) -> Figure:
    """``data``: "points" (rows of label, FLOP/byte, TFLOP/s, GPU time in ms) and "roofs" (rows of label,
    peak TFLOP/s, memory TB/s)."""
    figure = Figure(figsize=(9, 5.5))
    axes = figure.add_subplot()
    points = data.get("points") or []
    roofs = data.get("roofs") or []
    intensities = [point[1] for point in points if point[1] > 0]
    low = min([*intensities, 0.1]) / 2
    high = max([*intensities, *(peak / bandwidth for _, peak, bandwidth in roofs if bandwidth > 0), 10.0]) * 4
    span = np.geomspace(low, high, 200)
    for index, (label, peak, bandwidth) in enumerate(roofs):
        axes.plot(
            span,
            np.minimum(peak, bandwidth * span),
            color=ROOF_COLOURS[index % len(ROOF_COLOURS)],
            linewidth=1.5,
            label=label,
        )
    times = np.asarray([point[3] for point in points], dtype=float)
    sizes = 30 + 600 * times / times.max() if len(times) and times.max() > 0 else 30
    axes.scatter(
        [point[1] for point in points],
        [point[2] for point in points],
        s=sizes,
        alpha=0.55,
        color="#444444",
        edgecolors="black",
        linewidths=0.5,
        zorder=3,
    )
    for point in points[:8]:  # the most time first: their names
        axes.annotate(str(point[0])[:40], (point[1], point[2]), fontsize=7, xytext=(4, 4), textcoords="offset points")
    if not points and not roofs:  # nothing to place: an empty frame rather than log axes over no data
        axes.set_xlim(0.1, 1000)
        axes.set_ylim(0.001, 1000)
    axes.set_xscale("log")
    axes.set_yscale("log")
    # plain numbers: the figure's texts are made printable, which mathtext's "$10^{3}$" labels would not survive
    for axis in (axes.xaxis, axes.yaxis):
        axis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
        axis.set_minor_formatter(NullFormatter())
    axes.set_xlabel("arithmetic intensity (FLOP/byte)")
    axes.set_ylabel("achieved TFLOP/s")
    axes.set_title(title)
    if roofs:
        axes.legend(loc="lower right", fontsize=8)
    axes.grid(True, which="both", alpha=0.25)
    figure.tight_layout()
    return figure
