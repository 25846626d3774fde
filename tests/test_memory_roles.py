"""`tracekit memory --by role`: the split of memory allocated before the trace into parameters and
optimizer state, on built sizes and on a real snapshot of a model with a known parameter count."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import SHARED

from tracekit.analysis.memory_roles import allocator_size, split_before_trace

MIB = 2**20


def test_sizes_in_threes_are_a_parameter_and_two_adam_states():
    sizes = np.array([4 * MIB] * 3 + [16 * MIB] * 6 + [4096] * 3 + [40_960_000] * 2 + [41_943_040] + [777] * 2)
    shares, states = split_before_trace(sizes)
    assert states == 2
    assert np.allclose(shares[:15], 1 / 3) and np.isnan(shares[15:]).all()  # 777 B comes twice: not a triple
    assert allocator_size(np.array([40_960_000, 1000, 512])).tolist() == [41_943_040, 1024, 512]


def test_sizes_in_pairs_are_sgd_with_momentum_and_no_optimizer_means_parameters():
    sizes = np.array([4 * MIB] * 2 + [8 * MIB] * 4)
    shares, states = split_before_trace(sizes)
    assert states == 1 and np.allclose(shares, 0.5)
    shares, states = split_before_trace(sizes, optimizer=False)
    assert states == 0 and np.allclose(shares, 1.0)


MEMORY = SHARED / "memory"
PARAMETERS = 423_183_360  # the cs336 GPT-2-medium-sized model, fp32, AdamW


@pytest.mark.skipif(not MEMORY.is_dir(), reason=f"real snapshots not available: {MEMORY}")
def test_a_real_adamw_step_splits_into_4p_and_8p(cli):
    result = cli("memory", MEMORY / "cs336_medium_ctx512_train_step.pickle", "--by", "role", "--format", "json")
    assert result.exit_code == 0, result.output
    roles = {row["Role"]: row["Size (MiB)"] for row in json.loads(result.stdout)["roles"]}
    assert roles["parameters"] == pytest.approx(4 * PARAMETERS / MIB, rel=0.02)
    assert roles["optimizer state"] == pytest.approx(8 * PARAMETERS / MIB, rel=0.02)
    assert roles["activations"] > roles["temporaries"] > 0
    assert "Adam/AdamW" in result.stderr


@pytest.mark.skipif(not MEMORY.is_dir(), reason=f"real snapshots not available: {MEMORY}")
def test_a_forward_only_snapshot_has_no_optimizer_state(cli):
    result = cli("memory", MEMORY / "cs336_medium_ctx512_forward.pickle", "--by", "role", "--format", "json")
    roles = {row["Role"]: row["Size (MiB)"] for row in json.loads(result.stdout)["roles"]}
    assert roles["optimizer state"] == 0 and roles["parameters"] == pytest.approx(4 * PARAMETERS / MIB, rel=0.02)
    assert "no optimizer in the snapshot" in result.stderr


@pytest.mark.skipif(not MEMORY.is_dir(), reason=f"real snapshots not available: {MEMORY}")
def test_a_run_folder_gets_the_activation_formula_beside_the_roles(cli, tmp_path):
    import shutil

    pytest.importorskip("torch", reason="the activation formula lives in workloads (torch)")
    from workloads.activations import activation_terms

    run = tmp_path / "run"
    run.mkdir()
    shutil.copyfile(MEMORY / "cs336_medium_ctx512_forward.pickle", run / "memory.pickle")
    (run / "run.json").write_text(json.dumps({"config": {"model": "tiny", "ctx": 64, "batch": 4, "mode": "train",
                                                         "dtype": "fp32"}}))  # fmt: skip
    result = cli("memory", run, "--by", "role", "--format", "csv")
    formula = sum(size for _, size, _ in activation_terms("tiny", 64, 4)) / MIB
    assert f"gives {formula:,.1f} MiB saved for backward" in result.stderr


@pytest.mark.skipif(not MEMORY.is_dir(), reason=f"real snapshots not available: {MEMORY}")
def test_roles_over_time_add_up_and_keep_parameters_through_the_optimizer_step():
    from tracekit.analysis.memory import replay
    from tracekit.analysis.memory_roles import role_timeline
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
