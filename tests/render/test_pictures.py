"""Pictures people can read: every run named under its bar, no label over another label or the title."""

from __future__ import annotations

import pandas as pd

from tracekit.render import plots


def test_compare_bars_name_each_run_clear_of_the_title():
    runs = ["a-very-long-run-name-with-a-context-of-4096", "short", "mid-sized-run"]
    table = pd.DataFrame(
        {
            "Run": [run for run in runs for _ in range(2)],
            "Phase": ["forward", "backward"] * 3,
            "Per Instance (ns)": [4e6, 8e6, 1e6, 2e6, 3e6, 5e6],
            "matmul (%)": [70.0] * 6,
            "elementwise (%)": [30.0] * 6,
        }
    )
    figure = plots.compare_bars(
        "Kernel time per phase instance", {"table": table, "label": "Run", "categories": ["matmul", "elementwise"]}
    )
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = FigureCanvasAgg(figure)
    canvas.draw()
    renderer = canvas.get_renderer()
    (axes,) = [axes for axes in figure.axes if axes.get_title()]
    names = [label for label in axes.get_xticklabels(minor=True) if label.get_text()]
    assert sorted(label.get_text() for label in names) == sorted(runs * 2)  # each bar named, centre ones too
    boxes = [label.get_window_extent(renderer) for label in names + axes.get_xticklabels()]
    title = axes.title.get_window_extent(renderer)
    assert not any(box.overlaps(title) for box in boxes)
    for index, box in enumerate(boxes):  # no two labels on top of each other
        assert not any(box.overlaps(other) for other in boxes[index + 1 :]), index
