"""tracekit's own workload recorded on an H100 (issue 32: GPU truth), held on the CPU forever.

tests/data/gpu/ holds what `benchmarks/gpu_truth.sh` captured on an NVIDIA H100 80GB HBM3 with torch
2.11.0+cu130: `tracekit capture small --ctx 256 --batch 4 --profiler torch --memory` (fp32, AdamW,
5 warm-up steps, 3 captured), its torch.profiler trace, memory snapshot (gzip) and run.json. Each
figure is checked against an independent computation from the raw files where one exists (the JSON
events, the model's parameter count, the activation formula), else against the figure
benchmarks/GPU_RESULTS.md states.
"""

from __future__ import annotations

import gzip
import json
import shutil
from collections import defaultdict
from pathlib import Path

import pytest

DATA = Path(__file__).resolve().parents[1] / "data" / "gpu"
TRACE = DATA / "h100_small_ctx256_train.pt.trace.json.gz"
MIB = 2**20


@pytest.fixture(scope="module")
def run_folder(tmp_path_factory) -> Path:
    """The run folder as the capture wrote it (the snapshot is kept gzip-compressed in the repository)."""
    folder = tmp_path_factory.mktemp("h100") / "small"
    folder.mkdir()
    shutil.copyfile(TRACE, folder / "trace.pt.trace.json.gz")
    shutil.copyfile(DATA / "h100_small_ctx256_train_run.json", folder / "run.json")
    with gzip.open(DATA / "h100_small_ctx256_train_memory.pickle.gz") as packed:
        (folder / "memory.pickle").write_bytes(packed.read())
    return folder


@pytest.fixture(scope="module")
def gpu_events() -> list[dict]:
    """The trace's GPU operations as the JSON has them (kernels, copies, sets), times in integer ns."""
    with gzip.open(TRACE, "rt") as handle:
        events = json.load(handle)["traceEvents"]
    return [
        {
            "name": event["name"],
            "kind": event["cat"],
            "start": round(event["ts"] * 1000),
            "duration": round(event["dur"] * 1000),
        }
        for event in events
        if event.get("ph") == "X" and event.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")
    ]


def json_of(cli, *args):
    result = cli(*args, "--format", "json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_the_kernel_table_equals_the_raw_events(cli, run_folder, gpu_events):
    kernels = defaultdict(list)
    for event in gpu_events:
        if event["kind"] == "kernel":
            kernels[event["name"]].append(event["duration"])
    rows = json_of(cli, "kernels", run_folder)
    assert len(rows) == len(kernels) and sum(row["Instances"] for row in rows) == 4917 == sum(
        map(len, kernels.values())
    )
    for row in rows:
        durations = kernels[row["Name"]]
        assert (row["Instances"], row["Total Time (ns)"]) == (len(durations), sum(durations))
        assert (row["Min (ns)"], row["Max (ns)"]) == (min(durations), max(durations))


def test_matmul_share_of_the_forward_and_of_the_step(cli, run_folder):
    """fp32 without TF32 runs cuBLAS's FFMA GEMMs (sm80_xmma_*_ffma_*, Kernel2): GPU_RESULTS.md sets
    these shares beside the A100 fp32 figures of the same course report (85 % and 68 %)."""
    whole = {row["Category"]: row for row in json_of(cli, "kernels", run_folder, "--by", "category")}
    forward = {
        row["Category"]: row for row in json_of(cli, "kernels", run_folder, "--by", "category", "--range", "forward")
    }
    assert round(whole["matmul"]["Time (%)"], 1) == 70.7 and round(forward["matmul"]["Time (%)"], 1) == 80.6
    assert whole["matmul"]["Total Time (ns)"] == 62_116_258 and whole["matmul"]["Instances"] == 984
    assert whole["optimizer"]["Instances"] == 168  # foreach AdamW: multi_tensor_apply, 56 a step
    kernel_time = sum(row["Total Time (ns)"] for row in whole.values())
    assert kernel_time == sum(row["Total Time (ns)"] for row in json_of(cli, "kernels", run_folder))


def test_three_steps_of_the_same_kernels(cli, run_folder):
    steps = json_of(cli, "steps", run_folder)
    assert [row["Step"] for row in steps] == ["step #1", "step #2", "step #3"]
    assert [row["Kernels"] for row in steps] == [1639] * 3  # 4,917 kernels: every one inside a step
    assert steps[0]["Flag"] == "outlier (first)" and not steps[1]["Flag"]


def test_idle_adds_up_to_the_span_less_the_busy_union(cli, run_folder, gpu_events):
    """The GPU's idle time from the raw events (first op start to last op end, less the union of every
    op's interval), against the sum over tracekit's causes; the eager small model at batch 4 is
    launch-bound: the host not launching in time explains almost all of it."""
    intervals = sorted((event["start"], event["start"] + event["duration"]) for event in gpu_events)
    busy, end = 0, intervals[0][0]
    for start, stop in intervals:
        if stop > end:
            busy += stop - max(start, end)
            end = stop
    idle_ns = intervals[-1][1] - intervals[0][0] - busy
    causes = {row["Cause"]: row for row in json_of(cli, "idle", run_folder)["idle"]}
    assert sum(row["Idle (ms)"] for row in causes.values()) == pytest.approx(idle_ns / 1e6, abs=1e-5)
    assert causes["host not launching"]["Share (%)"] > 90


def test_memory_by_role_is_4p_parameters_and_8p_adamw_state(cli, run_folder):
    """fp32 parameters are 4P bytes and AdamW's two states 8P, exactly (the bytes asked for: the
    allocator's rounding is its own role); the activations are the formula of `bench activations`
    to the byte, less the token ids (made before the trace, with the batch)."""
    pytest.importorskip("torch", reason="the model's size and activation formula live in workloads")
    from workloads.activations import activation_terms
    from workloads.models import model_config, parameter_count

    parameters = parameter_count(model_config("small", 256))
    assert parameters == 128_625_408
    result = cli("memory", run_folder, "--by", "role", "--format", "json")
    roles = {row["Role"]: row["Size (MiB)"] * MIB for row in json.loads(result.stdout)["roles"]}
    assert roles["parameters"] == pytest.approx(4 * parameters, abs=1) and roles["optimizer state"] == pytest.approx(
        8 * parameters, abs=1
    )
    activations = sum(size for name, size, _ in activation_terms("small", 256, 4) if not name.startswith("token"))
    assert roles["activations"] == pytest.approx(activations, abs=1)
    # Before the trace, besides the parameters and their states: cuBLAS's and cuBLASLt's 32 MiB
    # workspaces, the 24 RoPE tables (a size that comes in threes, but no gradient or optimizer tensor
    # has it: not parameters) and the batch's token ids (4 x 257 int64).
    assert roles["other (before the trace)"] == pytest.approx(64 * MIB + 24 * 128 * 1024 + 8224, abs=1)
    assert "Adam/AdamW" in result.stderr


def test_efficiency_of_an_fp32_run_without_shapes(cli, run_folder):
    """The run is FP32 without TF32 and recorded no shapes (it predates shape recording): every GEMM kernel
    ran in FP32 on the CUDA cores (CUTLASS SIMT and xmma ffma sgemms; cuBLASLt's split-K reduce has no
    precision of its own), the device is taken for an
    H100 SXM, and no kernel gets a roofline (FLOPs unknown), which each row says."""
    from tracekit.analysis.primitives.categories import categorize_name

    table = json_of(cli, "efficiency", run_folder, "--by", "kernel", "--top", "1000", "--name", "demangled")
    matmuls = [row for row in table["efficiency"] if categorize_name(row["Kernel"]) == "matmul"]
    gemms = [row for row in matmuls if "splitKreduce" not in row["Kernel"]]  # a reduce: no precision of its own
    assert gemms and {(row["Precision"], row["Unit"]) for row in gemms} == {("FP32", "CUDA cores")}
    assert all(row["Precision"] is None for row in matmuls if row not in gemms)
    assert table["peaks"][0]["Taken For"] == "H100 SXM"
    assert all(row["Roofline (%)"] is None and row["GFLOP"] is None for row in matmuls)
    assert all(row["Not Known"].startswith("no shapes recorded (torch.profiler record_shapes=True") for row in gemms)
