"""diff's verdict: faster, slower or the same within the noise of the steps' spread, and --fail-slower as a CI
gate that step-to-step noise does not trip; built runs with known step times."""

from __future__ import annotations

import numpy as np
import pytest
from helpers.nsys_builder import ExportBuilder

import tracekit
from tracekit.analysis.many.verdict import RegressionError

MS = 1_000_000


def run(tmp_path, name: str, step_ms: list[float]):
    """Steps of the given lengths (ms), each one kernel filling 90 % of it."""
    b = ExportBuilder("2026.2")
    t = 0
    for length in step_ms:
        ns = round(length * MS)
        b.push_pop(t, t + ns, "step")
        b.kernel(t + ns // 20, t + ns // 20 + ns * 9 // 10, "k", launch_at=t + 1000)
        t += ns
    return b.write(tmp_path / f"{name}.sqlite")


def test_slower_beyond_the_noise_and_the_gate(tmp_path, cli):
    """A: ten steps of 100 +- 1 ms; B: ten of 110 +- 1 ms: 10 % slower, noise band 2 x sqrt(2 x var / 10) / 100."""
    wiggle = [-1, 1] * 5
    a = run(tmp_path, "a", [100 + w for w in wiggle])
    b = run(tmp_path, "b", [110 + w for w in wiggle])
    verdict = tracekit.diff(a, b)["verdict"].iloc[0]
    sd = np.std(np.asarray(wiggle, dtype=float), ddof=1)
    assert verdict["Verdict"] == "slower" and verdict["Change (%)"] == pytest.approx(10.0)
    assert verdict["Noise Band (%)"] == pytest.approx(100 * 2 * np.sqrt(2 * sd**2 / 10) / 100)
    result = cli("diff", a, b, "--fail-slower", "5")
    assert result.exit_code == 1
    line = result.stderr.strip()
    assert line.startswith("Error: B is 10.0 % slower than A in mean step time") and "\n" not in line
    assert cli("diff", a, b, "--fail-slower", "15").exit_code == 0  # 10 % is within what the gate allows


def test_noise_is_not_a_regression(tmp_path, cli):
    """B's mean is 1 % above A's, but its steps vary by +-10 ms: the same within noise, and the gate holds."""
    a = run(tmp_path, "a", [100, 100, 100, 100, 100, 100])
    b = run(tmp_path, "b", [91, 111, 91, 111, 91, 111])
    verdict = tracekit.diff(a, b)["verdict"].iloc[0]
    assert verdict["Verdict"] == "the same within noise" and verdict["Change (%)"] == pytest.approx(1.0)
    assert cli("diff", a, b, "--fail-slower", "0").exit_code == 0
    with pytest.raises(RegressionError):
        tracekit.diff(b, run(tmp_path, "c", [150] * 6), fail_slower=0)
