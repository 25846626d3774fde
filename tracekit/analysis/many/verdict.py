"""Faster, slower or the same: B against A, with a noise band from the steps' spread.

The figure is the mean step time (the steady steps: ``steady_state.steady_steps``, warm-up left out) where
both traces have two or more steps, else the GPU's kernel time (one measurement each: no noise band, said).
The change is (B - A) / A; the noise band is two standard errors of that difference (sqrt(sA^2/nA + sB^2/nB)
/ mean A, x 2: about 95 % if steps vary at random). Slower or faster when the change is beyond the band,
else the same within noise. ``fail_slower`` (%): a regression when B is slower by more than that beyond the
band (a CI gate that step-to-step noise does not trip, as nsys-ai's gate has it without the noise).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from tracekit.analysis.primitives.steady_state import steady_steps
from tracekit.errors import TracekitError
from tracekit.model.trace import Trace

BAND_SIGMAS = 2.0


class RegressionError(TracekitError):
    """B is slower than A by more than the threshold given, beyond the noise: a CI gate's failure."""


def verdict_table(a: Trace, b: Trace, step_range: str | None = None) -> tuple[pd.DataFrame, str]:
    """The verdict row (Metric, A (ns), B (ns), Change (%), Noise Band (%), Verdict, Steps A, Steps B) and the
    sentence that says it."""
    steps = [steady_steps(trace, step_range)["duration"].to_numpy(np.float64) for trace in (a, b)]
    if all(len(values) >= 2 for values in steps):
        metric = "mean step time"
        means = [float(values.mean()) for values in steps]
        error = np.sqrt(sum(float(values.std(ddof=1)) ** 2 / len(values) for values in steps))
        band = 100 * BAND_SIGMAS * error / means[0] if means[0] > 0 else np.nan
        counts = [len(values) for values in steps]
    else:
        metric = "kernel time"
        means = [
            float(trace.gpu_ops["duration"].to_numpy()[(trace.gpu_ops["kind"] == "kernel").to_numpy()].sum())
            for trace in (a, b)
        ]
        band, counts = 0.0, [len(values) for values in steps]
    change = 100 * (means[1] - means[0]) / means[0] if means[0] > 0 else np.nan
    if change != change:
        verdict = "unknown"
    elif change > band:
        verdict = "slower"
    elif change < -band:
        verdict = "faster"
    else:
        verdict = "the same within noise"
    table = pd.DataFrame(
        {
            "Metric": [metric],
            "A (ns)": [means[0]],
            "B (ns)": [means[1]],
            "Change (%)": [change],
            "Noise Band (%)": [band],
            "Verdict": [verdict],
            "Steps A": [counts[0]],
            "Steps B": [counts[1]],
        }
    )
    noise = (
        f"noise band +-{band:.1f} % from {counts[0]} and {counts[1]} steps"
        if metric == "mean step time"
        else "no noise band: fewer than two steps in a trace, one measurement each"
    )
    said = f"B is {verdict}: {metric} {change:+.1f} % against A ({noise})"
    return table, said


def gate(table: pd.DataFrame, fail_slower: float) -> None:
    """RegressionError when B is slower than A by more than ``fail_slower`` % beyond the noise band."""
    row = table.iloc[0]
    change, band = float(row["Change (%)"]), float(row["Noise Band (%)"])
    if change == change and change - band > fail_slower:
        raise RegressionError(
            f"B is {change:.1f} % slower than A in {row['Metric']} (noise band +-{band:.1f} %, over "
            f"{int(row['Steps A'])} and {int(row['Steps B'])} steps): more than the {fail_slower:g} % allowed"
        )
