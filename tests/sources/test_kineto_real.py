"""The torch.profiler reader on every real trace in ../shared/kineto, checked against an independent
reading of the same JSON (Python's json with exact decimals), and against HolisticTraceAnalysis."""

from __future__ import annotations

import gzip
import json
import re
from collections import Counter
from decimal import Decimal
from pathlib import Path

import numpy as np
import pytest
from helpers.api_tables import records
from helpers.hta_loaded import hta_analysis
from helpers.paths import SHARED

import tracekit
from tracekit.analysis.primitives.kernel_types import OTHER, op_types, type_label, type_segments
from tracekit.analysis.primitives.step_window import launched_before_last_step
from tracekit.sources import open_trace

# HolisticTraceAnalysis uses pandas features pandas 3 deprecates: its warnings are not ours.
pytestmark = pytest.mark.filterwarnings("ignore:::hta")
SHARED_KINETO = SHARED / "kineto"
GPU = {"kernel", "Kernel", "gpu_memcpy", "Memcpy", "gpu_memset", "Memset"}
LAUNCH = {"cuda_runtime", "cuda_driver", "Runtime"}
RANGE = {"user_annotation", "gpu_user_annotation", "cpu_op", "Operator"}
RANKS = "v100_dlrm_8ranks"


def kineto_paths() -> list[Path]:
    if not SHARED_KINETO.is_dir():
        return []
    return sorted(SHARED_KINETO.glob("*.json.gz")) + sorted((SHARED_KINETO / RANKS).glob("*.json"))


needs_shared = pytest.mark.skipif(not SHARED_KINETO.is_dir(), reason=f"real traces not available: {SHARED_KINETO}")
every_trace = pytest.mark.parametrize("path", kineto_paths(), ids=lambda path: path.name)


def document(path: Path) -> dict:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as handle:
        return json.loads(handle.read(), parse_float=Decimal)  # exact: Decimal keeps every digit


def ns(value) -> int:
    return int(Decimal(value) * 1000)


@needs_shared
@every_trace
def test_tables_equal_an_independent_reading(path):
    data = document(path)
    events = [event for event in data["traceEvents"] if event.get("ph") == "X" and "ts" in event and "dur" in event]
    trace = open_trace(path)
    gpu = [event for event in events if event.get("cat") in GPU]
    ops = trace.gpu_ops
    assert len(ops) == len(gpu) > 0
    assert int(ops["duration"].sum()) == sum(ns(event["dur"]) for event in gpu)
    assert int(ops["start"].min()) == min(ns(event["ts"]) for event in gpu)
    assert Counter(ops["name"].astype(str)) == Counter(event["name"] for event in gpu)
    assert Counter(ops["correlation_id"].tolist()) == Counter(event["args"]["correlation"] for event in gpu)
    # a copy that records no bytes (ROCm) takes its call's size: the call with its correlation id
    sizes = {
        event["args"].get("correlation"): int(event["args"].get("size", 0))
        for event in events
        if event.get("cat") in LAUNCH and str(event.get("args", {}).get("size", "")).isdigit()
    }
    expected_bytes = sum(
        int(event["args"].get("bytes", 0))
        or (sizes.get(event["args"]["correlation"], 0) if event.get("cat") != "kernel" else 0)
        for event in gpu
    )
    assert int(ops["bytes"].sum()) == expected_bytes
    launches = [event for event in events if event.get("cat") in LAUNCH]
    assert len(trace.launches) == len(launches)
    assert int(trace.launches["duration"].sum()) == sum(ns(event["dur"]) for event in launches)
    ranges = [event for event in events if event.get("cat") in RANGE]
    assert len(trace.ranges) == len(ranges)
    assert int(trace.ranges["duration"].sum()) == sum(ns(event["dur"]) for event in ranges)
    assert (trace.ranges["depth"] >= 0).all() and (trace.ranges["parent"] < len(trace.ranges)).all()
    assert trace.meta.rank == data.get("distributedInfo", {}).get("rank")
    described = [device["id"] for device in data.get("deviceProperties", [])]
    assert trace.meta.gpus["id"].tolist() == (described or sorted({event["args"]["device"] for event in gpu}))
    assert trace.dropped("gpu_ops") == 0


@needs_shared
def test_nanosecond_digits_of_a_real_trace_are_kept():
    """v100_resnet_torch2.3_ns_precision writes absolute µs with three decimals: each kernel starts at
    the exact nanosecond its text says, which a float64 (0.25 µs apart at these values) cannot hold."""
    path = SHARED_KINETO / "v100_resnet_torch2.3_ns_precision.pt.trace.json.gz"
    text = gzip.decompress(path.read_bytes()).decode()
    found = re.findall(r'"cat": "kernel", .*\n\s*"ts": (\d+)\.(\d{3}), "dur": (\d+)\.(\d{3})', text)
    assert len(found) == 4350
    starts = [int(whole) * 1000 + int(fraction) for whole, fraction, _, _ in found]
    kernels = open_trace(path).gpu_ops.query("kind == 'kernel'")
    assert kernels["start"].tolist() == starts
    assert kernels["start"].iloc[0] == 1712195495505582988  # "ts": 1712195495505582.988
    assert any(
        round(float(f"{whole}.{fraction}") * 1000) != start
        for (whole, fraction, _, _), start in zip(found, starts, strict=True)
    )


@needs_shared
def test_commands_on_real_traces(cli, tmp_path):
    qwen = SHARED_KINETO / "h100_qwen0.5b_inference.json.gz"
    rows = records(tracekit.kernels(qwen))
    assert rows[0]["Name"].startswith("sm90_xmma_gemm_bf16bf16") and rows[0]["Instances"] == 241
    categories = {row["Category"]: row for row in records(tracekit.kernels(qwen, by="category"))}
    gemms = [row for row in rows if "gemm" in row["Name"].lower()]
    assert categories["matmul"]["Total Time (ns)"] == sum(row["Total Time (ns)"] for row in gemms) > 0
    assert categories["matmul"]["Instances"] == sum(row["Instances"] for row in gemms) == 242
    steps = SHARED_KINETO / "gp100_steps_gpu_user_annotation.json.gz"
    ranges = records(tracekit.ranges(steps))  # the annotations by default
    annotations = {row["Range"]: row["Instances"] for row in ranges}
    spans = records(tracekit.ranges(steps, domain="gpu"))
    twins = {row["Range"].removeprefix("gpu:"): row["Instances"] for row in spans}
    assert annotations == twins and sum(annotations.values()) == 10  # each annotation and its GPU-side span
    rank0, rank1 = (SHARED_KINETO / RANKS / f"rank{rank}.pt.trace.json" for rank in (0, 1))
    assert cli("diff", rank0, rank1).exit_code == 0
    result = cli("report", rank0, rank1, "-o", tmp_path / "report")
    assert result.exit_code == 0 and (tmp_path / "report" / "report.md").exists()


# --- parity with HolisticTraceAnalysis -----------------------------------------------------------------


@pytest.fixture(scope="module")
def hta_breakdowns(tmp_path_factory) -> dict[Path, tuple]:
    """HTA's kernel breakdown of every real trace, by file: (type table, kernel table of its rank)."""
    pytest.importorskip("hta", reason="HolisticTraceAnalysis is not installed (pip install -e '.[parity]')")
    if not SHARED_KINETO.is_dir():
        pytest.skip(f"real traces not available: {SHARED_KINETO}")

    def breakdown(group: list[Path]):
        folder = tmp_path_factory.mktemp("hta")
        for path in group:
            _without_syncs(path, folder / path.name)
        with pytest.MonkeyPatch.context() as patch:  # (for this reading only: other modules read HTA's default)
            patch.setenv("HTA_DISABLE_NS_ROUNDING", "1")  # HTA rounds ns-precision traces to whole µs otherwise
            return hta_analysis(folder).get_gpu_kernel_breakdown(
                visualize=False, num_kernels=10**9, duration_ratio=1.0, include_memory_kernels=True
            )

    # Every file alone (HTA adds the types of all ranks of a folder together), and the ranks of the
    # DLRM job as the folder HTA is made for: its kernel table is per rank.
    results = {path: breakdown([path]) for path in kineto_paths()}
    ranks = [path for path in kineto_paths() if path.parent.name == RANKS]
    _, kernels = breakdown(ranks)
    for path in ranks:
        results[path] = (results[path][0], kernels.loc[kernels["rank"] == open_trace(path).meta.rank])
    return results


def _without_syncs(path: Path, target: Path) -> None:
    """``path`` for HTA: as it is, or without its cuda_sync events. HTA's GPU kernels are all events
    with a stream and a correlation id, which takes in cuda_sync waits ("Stream Sync", "Stream Wait
    Event") as computation; tracekit counts GPU work only, so they are compared on the trace without them."""
    data = document(path)
    if not any(event.get("cat") == "cuda_sync" for event in data["traceEvents"]):
        target.symlink_to(path)
        return
    data["traceEvents"] = [event for event in data["traceEvents"] if event.get("cat") != "cuda_sync"]
    text = re.sub(rb'"(-?\d+\.\d+)"', rb"\1", json.dumps(data, default=str).encode())  # decimals: their text
    target.write_bytes(gzip.compress(text) if path.suffix == ".gz" else text)


@needs_shared
@every_trace
def test_kernels_equal_hta(path, hta_breakdowns):
    _, theirs = hta_breakdowns[path]
    ours = {row["Name"]: row for row in records(tracekit.kernels(path, ops="all", drop_last_step=True))}
    assert len(theirs) > 0
    for name, total_us, mean_us in zip(theirs["name"], theirs["sum (us)"], theirs["mean (us)"], strict=True):
        instances = round(total_us / mean_us) if mean_us else ours[name]["Instances"]
        assert ours[name]["Instances"] == instances, name
        assert abs(ours[name]["Total Time (ns)"] - total_us * 1000) <= instances, name  # 1 ns per instance
    # What HTA leaves out of its breakdown is its "other" type (names like *Memcpy*, *Sync), nothing else.
    ops = open_trace(path).gpu_ops
    others = set(ops["name"].astype(str)[op_types(ops) == OTHER])
    assert {name for name in ours if name not in set(theirs["name"])} == others


@needs_shared
@every_trace
def test_kernel_types_and_overlap_equal_hta(path, hta_breakdowns):
    types, _ = hta_breakdowns[path]
    trace = open_trace(path)
    window, _ = launched_before_last_step(trace)
    masks, durations = type_segments(trace.gpu_ops, window)
    # HTA cuts the timeline where the set of running types changes, as we do, and truncates each
    # segment to whole µs (astype(int)); applying its truncation to our exact segments gives its table.
    truncated = Counter()
    for mask, duration in zip(masks.tolist(), durations.tolist(), strict=True):
        truncated[type_label(mask)] += duration // 1000
    theirs = {kind.lower(): int(total) for kind, total in zip(types["kernel_type"], types["sum"], strict=True)}
    assert dict(truncated) == {kind: total for kind, total in theirs.items() if total}
    shown = records(tracekit.kernels(trace, by="type", ops="all", drop_last_step=True))
    exact = Counter()
    for mask, duration in zip(masks.tolist(), durations.tolist(), strict=True):
        exact[type_label(mask)] += duration
    assert {row["Type"]: row["Time (ns)"] for row in shown} == dict(exact)
    assert np.isclose(sum(row["Time (%)"] for row in shown), 100, atol=0.3)


@needs_shared
def test_rank_communication_equals_hta(hta_breakdowns):
    """`tracekit ranks` on the DLRM job: each rank's communication time is the sum of the COMMUNICATION
    kernels in HTA's kernel breakdown of that rank, within 1 ns per instance."""
    result = tracekit.ranks(SHARED_KINETO / RANKS, drop_last_step=True)
    ours = {row["Rank"]: row for row in records(result, "ranks")}
    paths = [path for path in kineto_paths() if path.parent.name == RANKS]
    assert sorted(ours) == list(range(8)) and len(paths) == 8
    for path in paths:
        _, theirs = hta_breakdowns[path]
        communication = theirs.loc[theirs["kernel_type"].astype(str).str.upper() == "COMMUNICATION"]
        assert len(communication) > 0
        instances = sum(
            round(total / mean) for total, mean in zip(communication["sum (us)"], communication["mean (us)"])
        )
        mine = ours[open_trace(path).meta.rank]["Communication (ns)"]
        assert abs(mine - float(communication["sum (us)"].sum()) * 1000) <= instances, path.name
