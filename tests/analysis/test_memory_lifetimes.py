"""Roles that follow lifetimes: memory from before the trace read by when and where it was freed
(gradients ``zero_grad`` freed, a retained previous iteration), on built snapshots with known contents."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from helpers.snapshot_builder import MIB, SnapshotBuilder, stack

import tracekit
from tracekit.analysis.memory.lifetimes import gradients_by_count

ZERO_GRAD = stack("torch/optim/optimizer.py:950 zero_grad", "train.py:30 train_step")
FORWARD = stack("model.py:10 forward", "train.py:31 train_step")
ACCUMULATE = stack("??:0 torch::autograd::AccumulateGrad::apply", "??:0 autograd engine")
PARAMETERS = {8 * MIB: 3, 2 * MIB: 5}  # size: how many parameters of that size (34 MiB)


def _adamw_step(path: Path, zero_grad_frames: list | None) -> Path:
    """Before the trace: each parameter, its gradient and two AdamW states (4 copies). The trace:
    zero_grad frees the 8 gradients (where it happened recorded or not), a 6 MiB activation, then
    backward's AccumulateGrad makes new gradients; the peak is at the end: 34 + 68 + 6 + 34 MiB."""
    built = SnapshotBuilder()
    blocks, address, gradients = [], 1 << 30, []
    for size, count in PARAMETERS.items():
        for _ in range(count):
            for copy in ("parameter", "gradient", "state", "state"):
                if copy == "gradient":
                    gradients.append((address, size))
                else:
                    blocks.append((address, size, "active_allocated"))
                address += size
    time = 1
    for where, size in gradients:
        built.free(where, size, time, frames=zero_grad_frames)
        time += 1
    built.alloc(address, 6 * MIB, 20, FORWARD)
    blocks.append((address, 6 * MIB, "active_allocated", FORWARD))
    address += 6 * MIB
    for size, count in PARAMETERS.items():
        for _ in range(count):
            built.alloc(address, size, 30, ACCUMULATE)
            blocks.append((address, size, "active_allocated", ACCUMULATE))
            address += size
    built.segment(1 << 30, address - (1 << 30), blocks)
    built.annotate("Optimizer.step#AdamW.step", 40, 50)
    return built.dump(path)


@pytest.mark.parametrize("frames", [ZERO_GRAD, None], ids=["zero_grad frames", "frees without frames"])
def test_gradients_zero_grad_freed_are_not_read_as_live_copies(tmp_path, frames):
    """It read parameters 25.5 and optimizer state 51 MiB (the live 3 copies split by 4); the truth is 34 and 68."""
    result = tracekit.memory(_adamw_step(tmp_path / "step.pickle", frames), by="role")
    roles = dict(zip(result["roles"]["Role"], result["roles"]["Size (MiB)"]))
    assert roles == pytest.approx({"parameters": 34, "optimizer state": 68, "gradients": 34, "activations": 6})
    assert any("34.0 MiB freed by zero_grad" in note for note in result.notes) == (frames is not None)


def test_gradients_by_count_takes_one_freed_copy_per_parameter_as_its_gradient():
    rounded = np.array([8] * 8 + [2] * 4)
    freed = np.array([True, False, True, False, False, False, False, False, True, False, False, False])
    ends = np.array([5, 99, 3, 99, 99, 99, 99, 99, 7, 99, 99, 99])
    shares = gradients_by_count(rounded, freed, ends, copies=4, states=2)
    # size 8: 2 parameters (8 / 4), both freed copies are gradients; the 6 others: 2 params, 4 states
    assert shares[[0, 2]].tolist() == [[0, 0, 1, 0]] * 2
    assert np.allclose(shares[1], [2 / 6, 4 / 6, 0, 0])
    # size 2: 1 parameter, 1 freed gradient; the 3 others: 1 parameter, 2 states
    assert shares[8].tolist() == [0, 0, 1, 0] and np.allclose(shares[9], [1 / 3, 2 / 3, 0, 0])


def _inference(path: Path, retained: bool) -> Path:
    """Before the trace: 100 MiB of weights (10 x 10 MiB) and, with ``retained``, the previous
    iteration's outputs and graph (4 x 6 + 2 x 3 MiB), freed once the new forward has made its own:
    the peak holds 100 + 30 + 30 MiB."""
    built = SnapshotBuilder()
    blocks, address = [], 1 << 30
    for _ in range(10):
        blocks.append((address, 10 * MIB, "active_allocated"))
        address += 10 * MIB
    previous = []
    if retained:
        for size in (6, 6, 6, 6, 3, 3):
            previous.append((address, size * MIB))
            address += size * MIB
    time = 10
    for size in (6, 6, 6, 6, 3, 3):
        built.alloc(address, size * MIB, time, FORWARD)
        blocks.append((address, size * MIB, "active_allocated", FORWARD))
        address += size * MIB
        time += 10
    for where, size in previous:
        built.free(where, size, time, frames=stack("infer.py:20 <module>"))
    built.segment(1 << 30, address - (1 << 30), blocks)
    return built.dump(path)


def test_a_retained_previous_iteration_is_its_own_role_and_a_finding(tmp_path, cli):
    """It read 130 MiB of parameters: the previous iteration's 30 MiB counted as weights."""
    path = _inference(tmp_path / "infer.pickle", retained=True)
    roles = tracekit.memory(path, by="role")["roles"]
    assert dict(zip(roles["Role"], roles["Size (MiB)"])) == pytest.approx(
        {"parameters": 100, "previous iteration (retained)": 30, "activations": 30}
    )
    findings = tracekit.advise(path)["findings"]
    assert findings["Finding"].tolist() == ["retained previous iteration"]
    row = findings.iloc[0]
    assert "30.0 MiB" in row["What"] and "inference_mode" in row["Fix"]
    result = cli("advise", path)
    assert result.exit_code == 0 and "retained previous iteration" in result.stdout
    # without a previous iteration: the weights alone, and nothing to say
    clean = _inference(tmp_path / "clean.pickle", retained=False)
    roles = tracekit.memory(clean, by="role")["roles"]
    assert dict(zip(roles["Role"], roles["Size (MiB)"])) == pytest.approx({"parameters": 100, "activations": 30})
    assert tracekit.advise(clean)["findings"].empty


def test_activations_from_before_the_trace_freed_in_backward_are_not_a_retained_iteration(tmp_path):
    """A trace begun mid-forward: this step's own earlier activations are freed by backward, not retained."""
    built = SnapshotBuilder()
    base = 1 << 30
    blocks: list[tuple] = [(base, 10 * MIB, "active_allocated")]
    built.alloc(base + 30 * MIB, 6 * MIB, 10, FORWARD)
    blocks.append((base + 30 * MIB, 6 * MIB, "active_allocated", FORWARD))
    built.alloc(base + 40 * MIB, 6 * MIB, 20, stack("??:0 MulBackward0", "??:0 autograd engine"))
    built.free(base + 10 * MIB, 6 * MIB, 30, frames=stack("??:0 MulBackward0"))
    built.segment(base, 50 * MIB, blocks + [(base + 40 * MIB, 6 * MIB, "active_allocated")])
    roles = tracekit.memory(built.dump(tmp_path / "mid.pickle"), by="role")["roles"]
    assert "previous iteration (retained)" not in set(roles["Role"])


def test_advise_on_a_snapshot_alone_refuses_the_options_about_a_trace(tmp_path, cli):
    path = _inference(tmp_path / "infer.pickle", retained=True)
    result = cli("advise", path, "--window", "1:2")
    assert result.exit_code != 0 and "--window: about a trace" in result.stderr
    assert "Traceback" not in result.stderr
