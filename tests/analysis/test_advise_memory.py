"""``advise`` with a memory snapshot: out-of-memory errors first, activations dominating the peak,
reserved memory far above allocated; a run folder's own snapshot is read without being named."""

import pytest
from helpers.nsys_builder import ExportBuilder
from helpers.paths import SHARED_MEMORY
from helpers.snapshot_builder import MIB, SnapshotBuilder, stack

import tracekit

MS = 1_000_000


def healthy_trace(tmp_path):
    b = ExportBuilder("2026.2")
    for index in range(50):
        start = index * (MS + 10_000)
        b.kernel(start, start + MS, "ampere_s16816gemm_bf16_128x64", launch_at=max(start - 500_000, 0) - 1)
    return b.write(tmp_path / "t.sqlite")


def test_memory_findings_from_a_built_snapshot(tmp_path):
    b = SnapshotBuilder()
    b.segment_event("segment_alloc", 0, 4096 * MIB, 1)
    b.alloc(0, 1024 * MIB, 10, stack("model.py:12 forward"))  # activations: 80 % of the peak
    b.alloc(1024 * MIB, 256 * MIB, 20, stack("train.py:5 <module>"))
    b._event(0, "oom", 0, 8192 * MIB, 30, stack("model.py:20 forward"))
    snapshot = b.dump(tmp_path / "snap.pickle")
    result = tracekit.advise(healthy_trace(tmp_path), memory=str(snapshot))
    table = result["findings"]
    assert table[["Finding", "Severity", "Recoverable (MiB)"]].values.tolist() == [
        ["out of memory", "critical", 8192.0],  # first: the run failed
        ["activations dominate the peak", "critical", 512.0],  # half of 1,024 MiB, an estimate
        ["reserved far above allocated", "warning", 2816.0],  # 4,096 reserved, 1,280 allocated
    ]
    evidence = result["evidence"]
    assert evidence["Evidence"].iloc[0] == "cuda:0 asked for 8,192.0 MiB at event 3: forward (model.py:20)"
    assert f"memory findings from {snapshot}" in result.notes


def test_no_memory_finding_below_the_thresholds(tmp_path):
    b = SnapshotBuilder()
    b.segment_event("segment_alloc", 0, 1600 * MIB, 1)  # 320 MiB unused: under 1 GiB
    b.alloc(0, 256 * MIB, 10, stack("model.py:12 forward"))  # activations 20 %
    b.alloc(256 * MIB, 1024 * MIB, 20, stack("train.py:5 <module>"))
    result = tracekit.advise(healthy_trace(tmp_path), memory=str(b.dump(tmp_path / "small.pickle")))
    assert result["findings"].empty


def test_a_run_folders_own_snapshot_is_read(tmp_path):
    import shutil

    run = tmp_path / "run"
    run.mkdir()
    shutil.copy(healthy_trace(tmp_path), run / "trace.sqlite")
    b = SnapshotBuilder()
    b._event(0, "oom", 0, 64 * MIB, 30, stack("model.py:20 forward"))
    b.dump(run / "memory.pickle")
    table = tracekit.advise(run)["findings"]
    assert table["Finding"].tolist() == ["out of memory"]
    (run / "memory.pickle").write_bytes(b"\x80\x04 truncated")
    result = tracekit.advise(run)
    assert result["findings"].empty
    assert any(note.startswith("no memory findings: the run's snapshot could not be read") for note in result.notes)
    with pytest.raises(tracekit.TracekitError):  # named by the caller: an unreadable snapshot is an error
        tracekit.advise(run / "trace.sqlite", memory=str(run / "memory.pickle"))


@pytest.mark.parametrize(
    "name, expected",
    [
        ("gnn_4gpu_oom_expandable_segments", ["out of memory", "activations dominate the peak"]),
        ("finetune_no_timestamps", ["activations dominate the peak"]),
        ("cs336_medium_ctx128_train_step", []),
    ],
)
def test_real_snapshots(tmp_path, name, expected):
    path = SHARED_MEMORY / f"{name}.pickle"
    if not path.exists():
        pytest.skip(f"{path} is absent")
    table = tracekit.advise(healthy_trace(tmp_path), memory=str(path))["findings"]
    assert table["Finding"].tolist() == expected


def test_optimizer_temporaries_at_the_peak_name_the_fused_fix(tmp_path):
    """The peak comes in the optimizer step: 1,024 MiB of parameters and state, then
    _multi_tensor_adam's _foreach_sqrt temporaries of 2 x 256 MiB: 512 MiB of the 1,536 MiB peak (33 %)."""
    b = SnapshotBuilder()
    b.segment_event("segment_alloc", 0, 2048 * MIB, 1)
    b.alloc(0, 1024 * MIB, 10, stack("model.py:3 __init__"))
    adam = stack(
        "torch/optim/adam.py:600 _foreach_sqrt",
        "torch/optim/adam.py:560 _multi_tensor_adam",
        "torch/optim/adam.py:200 step",
        "train.py:40 <module>",
    )
    b.alloc(1024 * MIB, 256 * MIB, 20, adam)
    b.alloc(1280 * MIB, 256 * MIB, 30, adam)
    b.free(1024 * MIB, 256 * MIB, 40)
    b.free(1280 * MIB, 256 * MIB, 50)
    snapshot = b.dump(tmp_path / "snap.pickle")
    table = tracekit.advise(healthy_trace(tmp_path), memory=str(snapshot))["findings"].set_index("Finding")
    row = table.loc["optimizer temporaries at the peak"]
    assert row["Recoverable (MiB)"] == 512.0 and row["Severity"] == "warning"
    assert "most from _multi_tensor_adam -> _foreach_sqrt" in row["What"] and "fused=True" in row["Fix"]
