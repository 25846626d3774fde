"""The picture of ``tracekit collectives``: per rank, its collective time as waiting for the last peer and
transfer, each split into the part computation hid and the exposed part."""

from __future__ import annotations

from typing import Any

import numpy as np
from matplotlib.figure import Figure

from tracekit.render.safe_text import printable

PARTS = (
    ("exposed wait", "#d62728"),
    ("hidden wait", "#f4a6a6"),
    ("exposed transfer", "#1f77b4"),
    ("hidden transfer", "#9ecae1"),
)


def wait_transfer(title: str, data: dict[str, Any]) -> Figure:
    """``data["rows"]``: per rank, [label, exposed wait, hidden wait, exposed transfer, hidden transfer] in ms."""
    rows = data.get("rows") or []
    figure = Figure(figsize=(10, 0.45 * len(rows) + 2), layout="constrained")
    axes = figure.add_subplot()
    labels = [printable(str(row[0])) for row in rows]
    left = np.zeros(len(rows))
    for index, (name, colour) in enumerate(PARTS):
        values = np.asarray([float(row[index + 1]) for row in rows])
        axes.barh(labels, values, left=left, label=name, color=colour)
        left += values
    axes.invert_yaxis()
    axes.set_xlabel("collective time (ms)")
    axes.set_title(title)
    axes.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8)
    return figure
