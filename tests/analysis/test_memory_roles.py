"""`tracekit memory --by role`: the split of memory allocated before the trace into parameters and
optimizer state, on built sizes and on a real snapshot of a model with a known parameter count."""

from __future__ import annotations

import json

import numpy as np
import pytest
from helpers.paths import SHARED

import tracekit
from tracekit.analysis.memory.roles import Optimizer, allocator_size, split_before_trace

MIB = 2**20


ADAMW = Optimizer("AdamW", (2,))


def test_sizes_in_threes_are_a_parameter_and_two_adam_states():
    sizes = np.array([4 * MIB] * 3 + [16 * MIB] * 6 + [4096] * 3 + [40_960_000] * 2 + [41_943_040] + [777] * 2)
    split = split_before_trace(sizes, ADAMW)
    assert (split.states, split.gradients, split.ambiguous) == (2, 0, False)
    assert np.allclose(split.shares[:15], [1 / 3, 2 / 3, 0, 0]) and np.isnan(split.shares[15:]).all()  # 777 B: twice
    assert allocator_size(np.array([40_960_000, 1000, 512])).tolist() == [41_943_040, 1024, 512]


def test_sizes_in_pairs_with_sgd_are_ambiguous_and_no_optimizer_means_parameters():
    """SGD's frames do not say whether it keeps momentum: pairs are a parameter and its momentum buffer,
    or a parameter and its gradient; the split says so instead of picking one."""
    sizes = np.array([4 * MIB] * 2 + [8 * MIB] * 4)
    split = split_before_trace(sizes, Optimizer("SGD", (1, 0)))
    assert split.ambiguous and sorted(split.readings) == [(0, 1), (1, 0)]
    assert np.allclose(split.shares, [0.5, 0, 0, 0.5])
    split = split_before_trace(sizes, None)
    assert split.states == 0 and np.allclose(split.shares, [1, 0, 0, 0])


def test_four_copies_with_adamw_are_parameters_gradients_and_two_states():
    """A snapshot taken after warm-up steps whose zero_grad kept the gradients: every size repeats 4 times.
    It was read as "1 + 1 copies, SGD with momentum" (parameters = optimizer state) while the snapshot
    showed AdamW: it is a parameter, its gradient and two states (4P, 4P, 8P bytes)."""
    sizes = np.array([4 * MIB] * 4 + [16 * MIB] * 8 + [4096] * 4)
    split = split_before_trace(sizes, ADAMW)
    assert (split.states, split.gradients, split.ambiguous) == (2, 1, False)
    assert np.allclose(split.shares, [1 / 4, 2 / 4, 1 / 4, 0])
    # An optimizer of unknown kind: 3 copies are Adam without gradients or SGD with momentum with them.
    split = split_before_trace(np.array([4 * MIB] * 3 + [16 * MIB] * 6), Optimizer("", (2, 1)))
    assert split.ambiguous and sorted(split.readings) == [(1, 1), (2, 0)]
    assert np.allclose(split.shares, [1 / 3, 0, 0, 2 / 3])


def test_a_snapshot_after_warm_up_with_gradients_kept(tmp_path):
    """Built: two parameter sizes made before the trace with their gradient and two AdamW states each,
    an annotation Optimizer.step#AdamW.step; the table and the note say what they are."""
    from helpers.snapshot_builder import SnapshotBuilder, stack

    built = SnapshotBuilder()
    blocks, address = [], 1 << 30
    for size, count in ((8 * MIB, 4 * 3), (2 * MIB, 4 * 5)):  # 3 and 5 parameters of each size, 4 copies each
        for _ in range(count):
            blocks.append((address, size, "active_allocated"))
            address += size
    built.alloc(address, 6 * MIB, 10, stack("train.py:20 forward"))  # an activation made in the trace
    blocks.append((address, 6 * MIB, "active_allocated", stack("train.py:20 forward")))
    built.segment(1 << 30, address + 6 * MIB - (1 << 30), blocks)
    built.annotate("Optimizer.step#AdamW.step", 20, 30)
    result = tracekit.memory(built.dump(tmp_path / "kept.pickle"), by="role")
    roles = dict(zip(result["roles"]["Role"], result["roles"]["Size (MiB)"]))
    parameters = 3 * 8 + 5 * 2
    assert roles == {
        "parameters": parameters,
        "optimizer state": 2 * parameters,
        "gradients": parameters,
        "activations": 6,
    }
    said = "shows AdamW; their sizes repeat 4 times (a parameter, its gradient and 2 optimizer states"
    assert any(said in note for note in result.notes)


MEMORY = SHARED / "memory"
PARAMETERS = 423_183_360  # the cs336 GPT-2-medium-sized model, fp32, AdamW


@pytest.mark.skipif(not MEMORY.is_dir(), reason=f"real snapshots not available: {MEMORY}")
def test_a_real_adamw_step_splits_into_4p_and_8p():
    result = tracekit.memory(MEMORY / "cs336_medium_ctx512_train_step.pickle", by="role")
    roles = dict(zip(result["roles"]["Role"], result["roles"]["Size (MiB)"]))
    assert roles["parameters"] == pytest.approx(4 * PARAMETERS / MIB, rel=0.02)
    assert roles["optimizer state"] == pytest.approx(8 * PARAMETERS / MIB, rel=0.02)
    assert roles["activations"] > roles["temporaries"] > 0
    assert any("the snapshot shows AdamW" in note for note in result.notes)


@pytest.mark.skipif(not MEMORY.is_dir(), reason=f"real snapshots not available: {MEMORY}")
def test_a_forward_only_snapshot_has_no_optimizer_state():
    result = tracekit.memory(MEMORY / "cs336_medium_ctx512_forward.pickle", by="role")
    roles = dict(zip(result["roles"]["Role"], result["roles"]["Size (MiB)"]))
    assert "optimizer state" not in roles and roles["parameters"] == pytest.approx(4 * PARAMETERS / MIB, rel=0.02)
    assert any("no optimizer in the snapshot" in note for note in result.notes)


@pytest.mark.skipif(not MEMORY.is_dir(), reason=f"real snapshots not available: {MEMORY}")
def test_a_run_folder_gets_the_activation_formula_beside_the_roles(cli, tmp_path):
    import shutil

    from tracekit.activation_formula import activation_terms  # tracekit's own: no torch

    run = tmp_path / "run"
    run.mkdir()
    shutil.copyfile(MEMORY / "cs336_medium_ctx512_forward.pickle", run / "memory.pickle")
    # A run captured before capture wrote the note: its config, whose context capture writes as "context"
    config = {"model": "tiny", "context": 64, "batch": 4, "mode": "train", "dtype": "fp32"}
    (run / "run.json").write_text(json.dumps({"config": config}))
    result = cli("memory", run, "--by", "role", "--format", "csv")
    formula = sum(size for _, size, _ in activation_terms("tiny", 64, 4)) / MIB
    assert f"gives {formula:,.1f} MiB saved for backward" in result.stderr
    # A run whose run.json carries the note (capture writes it): that note, as written; null: none applies
    (run / "run.json").write_text(json.dumps({"config": config, "activation_note": "the formula gives 1.0 MiB"}))
    assert "note: the formula gives 1.0 MiB" in cli("memory", run, "--by", "role", "--format", "csv").stderr
    (run / "run.json").write_text(json.dumps({"config": config, "activation_note": None}))
    assert "activation formula" not in cli("memory", run, "--by", "role", "--format", "csv").stderr


@pytest.mark.skipif(not MEMORY.is_dir(), reason=f"real snapshots not available: {MEMORY}")
def test_roles_over_time_add_up_and_keep_parameters_through_the_optimizer_step():
    from tracekit.analysis.memory.replay import replay
    from tracekit.analysis.memory.roles import role_timeline
    from tracekit.sources import open_snapshot

    trace = open_snapshot(MEMORY / "cs336_medium_ctx128_train_step.pickle")
    memory = replay(trace)
    chart = role_timeline(trace, memory)
    bands = dict(zip(chart.data["labels"], chart.data["bands"]))
    total = np.sum(chart.data["bands"], axis=0)
    assert total.max() == pytest.approx(memory.peak_allocated / MIB, rel=1e-9)  # the bands are the allocated memory
    # The step writes new parameter tensors and frees the old: still 4P and 8P at the end, not moved to "state".
    assert bands["parameters"][-1] == pytest.approx(4 * PARAMETERS / MIB, rel=0.02)
    assert bands["optimizer state"][-1] == pytest.approx(8 * PARAMETERS / MIB, rel=0.02)
