"""Many inputs on built traces with exact numbers: the merge of statistics, inputs that cannot be read,
`ranks`, `compare`, errors (which files a folder or a glob names: ``sources/test_input_paths``)."""

from __future__ import annotations

import json
import multiprocessing
import pickle
import sys
import threading
import time
from concurrent.futures import ProcessPoolExecutor

import numpy as np
import pandas as pd
import pytest
from helpers.kineto_builder import KinetoBuilder
from helpers.nsys_builder import ExportBuilder

import tracekit
from tracekit.analysis import stats
from tracekit.analysis.kernels.kernels_command import KernelsOptions
from tracekit.analysis.many import merge_stats
from tracekit.analysis.many.inputs import Part
from tracekit.analysis.many.pool import _stop_pool, read_part
from tracekit.commands import COMMANDS
from tracekit.session import Settings

KERNELS_PART = COMMANDS["kernels"].part or ""

# --- the merge of statistics ---------------------------------------------------------------------------


def partial(values_by_group: dict[str, list[int]], limit: int) -> merge_stats.StatsPartial:
    names = list(values_by_group)
    codes = np.concatenate([np.full(len(values), index) for index, values in enumerate(values_by_group.values())])
    durations = np.concatenate([np.asarray(values, dtype=np.int64) for values in values_by_group.values()])
    table = stats.grouped_stats(codes, durations)
    described = pd.DataFrame({"Name": np.asarray(names, dtype=object)[table.index.to_numpy()]})
    return merge_stats.partial_of(codes, durations, table, described, ["Name"], limit)


def merged_statistics(parts: list[dict[str, list[int]]], limit: int) -> dict[str, dict]:
    folded = None
    for values in parts:  # one at a time, as the client folds parts
        new = partial(values, limit)
        folded = new if folded is None else merge_stats.merge([folded, new], limit)
    assert folded is not None
    table = merge_stats.statistics(folded)
    return {name: row for name, row in zip(folded.groups["Name"], table.to_dict("records"))}


@pytest.mark.parametrize("seed", range(6))
def test_merged_statistics_equal_one_file_holding_every_sample(seed):
    rng = np.random.default_rng(seed)
    parts = []
    for _ in range(int(rng.integers(1, 6))):
        parts.append(
            {
                name: list(rng.integers(0, 10 ** int(rng.integers(1, 12)), size=int(rng.integers(1, 60))))
                for name in rng.choice(list("abcdefg"), size=int(rng.integers(1, 6)), replace=False)
            }
        )
    merged = merged_statistics(parts, limit=10**6)
    every = {}
    for part in parts:
        for name, values in part.items():
            every.setdefault(name, []).extend(values)
    assert set(merged) == set(every)
    for name, values in every.items():
        values = np.asarray(values, dtype=np.int64)
        row = merged[name]
        assert row[stats.INSTANCES] == len(values) and row[stats.TOTAL] == values.sum()
        assert row[stats.MIN] == values.min() and row[stats.MAX] == values.max()
        assert row[stats.AVG] == pytest.approx(values.mean(), rel=1e-12)
        assert row[stats.MED] == np.median(values) and row[merge_stats.MED_EXACT]
        std = values.std(ddof=1) if len(values) > 1 else 0.0
        assert row[stats.STDDEV] == pytest.approx(std, rel=1e-9, abs=1e-6)


def test_past_the_limit_the_median_is_the_sketch_within_its_bound():
    rng = np.random.default_rng(7)
    parts = [{"k": list(rng.lognormal(10, 1.5, size=5000).astype(np.int64))} for _ in range(4)]
    merged = merged_statistics(parts, limit=1000)["k"]
    every = np.concatenate([np.asarray(part["k"]) for part in parts])
    assert not merged[merge_stats.MED_EXACT]
    assert merged[stats.MED] == pytest.approx(np.median(every), rel=merge_stats.ALPHA)
    assert merged[stats.TOTAL] == every.sum()  # only the median is estimated


def test_zero_durations_and_single_instances():
    merged = merged_statistics([{"z": [0, 0, 0]}, {"z": [0], "one": [5]}], limit=0)
    assert merged["z"][stats.MED] == 0 and merged["z"][stats.STDDEV] == 0
    assert merged["one"][stats.MED] == pytest.approx(5, rel=merge_stats.ALPHA) and merged["one"][stats.STDDEV] == 0


# --- inputs and labels ---------------------------------------------------------------------------------


def export(path, kernels: list[tuple[int, int, str]], ranges: tuple[tuple[int, int, str], ...] | list = ()):
    b = ExportBuilder("2026.2")
    for start, end, name in kernels:
        b.kernel(start, end, name, launch_at=start - 10)
    for start, end, name in ranges:
        b.push_pop(start, end, name)
    return b.write(path)


def test_inputs_that_name_nothing_are_one_line_errors(cli, tmp_path):
    for argument, message in (
        (tmp_path / "none*.sqlite", "no file matches"),
        (tmp_path, "holds no traces or run folders"),
    ):
        result = cli("kernels", argument)
        assert result.exit_code == 1 and message in result.output and "Traceback" not in result.output
    export(tmp_path / "a.sqlite", [(100, 200, "k")])
    export(tmp_path / "b.sqlite", [(100, 200, "k")])
    for options in (["ranges", "--tree"], ["kernels", "--range", "x", "--per-instance"]):
        result = cli(options[0], tmp_path, *options[1:])
        assert result.exit_code == 2 and "take" in result.output


def test_dask_missing_is_one_line(cli, tmp_path, monkeypatch):
    export(tmp_path / "a.sqlite", [(100, 200, "k")])
    export(tmp_path / "b.sqlite", [(100, 200, "k")])
    monkeypatch.setitem(sys.modules, "dask.distributed", None)  # import fails as when Dask is not installed
    result = cli("kernels", tmp_path, "--dask")
    assert result.exit_code == 1 and "pip install 'tracekit[dask]'" in result.output


def test_one_input_that_cannot_be_read_is_named_once(cli, tmp_path):
    """compare of one CPU capture said "none of the 1 input could be read (...)"; its reason alone says it."""
    b = ExportBuilder("2022.4")
    b.push_pop(0, 100, "step")
    path = b.write(tmp_path / "cpu.sqlite")
    result = cli("compare", path)
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert result.output.startswith(f"Error: {path} has no CUDA GPU operations: the capture traced no CUDA activity")
    assert "none of" not in result.output
    b.write(tmp_path / "cpu2.sqlite")
    two = cli("compare", path, tmp_path / "cpu2.sqlite")  # two inputs, none readable: counted
    assert two.exit_code == 1 and "none of the 2 inputs could be read" in two.output


def test_ranks_of_one_cpu_capture_do_not_speak_of_a_gpu(tmp_path):
    """make demo's CPU trace: ranks said "one input with one GPU" of a trace without GPU work."""
    b = ExportBuilder("2022.4")
    for step in range(3):
        b.push_pop(step * 1_000, step * 1_000 + 900, "step")
    result = tracekit.ranks(b.write(tmp_path / "cpu.sqlite"))
    assert result["ranks"]["Steps"].tolist() == [3] and result["ranks"]["GPU Span (ns)"].tolist() == [0]
    said = "\n".join(result.notes)
    assert "one GPU" not in said and "one input, without GPU work: nothing to compare it with" in said


def test_a_part_is_small_and_carries_no_trace(tmp_path):
    export(tmp_path / "a.sqlite", [(1000 * i, 1000 * i + 500 + i % 7, f"k{i % 5}") for i in range(1, 5001)])
    part = read_part(str(tmp_path / "a.sqlite"), "a", KERNELS_PART, KernelsOptions(), 0, Settings())
    assert isinstance(part, Part)
    assert len(pickle.dumps(part)) < 20_000  # 5,000 kernels: a few KB of tables and buckets
    with_samples = read_part(str(tmp_path / "a.sqlite"), "a", KERNELS_PART, KernelsOptions(), 10**6, Settings())
    assert isinstance(with_samples, Part) and len(with_samples.pieces["kernels"].sample_values) == 5000


# --- ranks ---------------------------------------------------------------------------------------------


def dist_rank(path, rank: int, allreduce_us: int, compute_us: int, steps: list[tuple[int, int]]):
    """A torch.profiler trace of one rank: per step one compute kernel and one AllReduce (µs)."""
    b = KinetoBuilder(rank=rank, world_size=3)
    correlation = 1
    for number, (start, duration) in enumerate(steps):
        b.annotation(f"ProfilerStep#{number}", start, duration)
        b.launch("cudaLaunchKernel", start + 1, 2, correlation)
        b.kernel("volta_sgemm_128x64_nn", start + 5, compute_us, correlation)
        b.launch("cudaLaunchKernel", start + 3, 2, correlation + 1)
        b.kernel(
            "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)",
            start + 5 + compute_us,
            allreduce_us,
            correlation + 1,
        )
        correlation += 2
    return b.write(path)


def records(result, name: str) -> list[dict]:
    return result[name].to_dict("records")


def test_ranks_of_a_built_job(tmp_path):
    job = tmp_path / "job"
    job.mkdir()
    for rank, (allreduce, compute, step) in enumerate([(100, 50, 300), (400, 50, 600), (100, 80, 330)]):
        dist_rank(job / f"worker{rank}.json", rank, allreduce, compute, [(0, step), (1000, step)])
    result = tracekit.ranks(job, workers=1)
    rows = {row["Rank"]: row for row in records(result, "ranks")}
    assert rows[1]["Communication (ns)"] == 800_000 and rows[1]["Computation (ns)"] == 100_000
    assert rows[2]["Computation (ns)"] == 160_000 and rows[0]["Steps"] == 2
    assert [rows[rank]["Step Time (ns)"] for rank in range(3)] == [300_000, 600_000, 330_000]
    assert rows[1]["GPU Busy (ns)"] == 2 * 450_000 and rows[1]["GPU Idle (ns)"] == 1_000_000 + 450_000 - 900_000
    spread = {row["Figure"]: row for row in records(result, "spread")}
    assert spread["Step Time"]["Max Rank"] == 1 and spread["Step Time"]["Min Rank"] == 0
    assert spread["Communication"]["Spread (ns)"] == 600_000
    collectives = records(result, "collectives")
    assert {(row["Rank"], row["Collective"], row["Instances"], row["Time (ns)"]) for row in collectives} == {
        (0, "AllReduce", 2, 200_000),
        (1, "AllReduce", 2, 800_000),
        (2, "AllReduce", 2, 200_000),
    }
    kernels = {row["Name"].split("(")[0]: row for row in records(result, "kernels")}
    nccl = kernels["ncclKernel_AllReduce_RING_LL_Sum_float"]
    assert (nccl["Slowest Rank"], nccl["Slowest Avg (ns)"], nccl["Fastest Avg (ns)"]) == (1, 400_000, 100_000)
    assert nccl["Lost (ns)"] == 600_000 and nccl["Spread (%)"] == 300.0
    said = "\n".join(result.notes)
    assert "slowest rank by step time: 1" in said
    assert "waited" not in said  # no rank's communication is under half the median


def test_ranks_without_rank_metadata_are_runs(tmp_path):
    export(tmp_path / "first.sqlite", [(100, 200, "k")])
    export(tmp_path / "second.sqlite", [(100, 400, "k")])
    result = tracekit.ranks(tmp_path, workers=1)
    rows = records(result, "ranks")
    assert [(row["Run"], row["Computation (ns)"]) for row in rows] == [("first", 100), ("second", 300)]
    assert any("no step ranges" in note for note in result.notes)


# --- compare -------------------------------------------------------------------------------------------


def run_folder(folder, ctx: int, matmul_ns: int, steps: int = 2):
    """A run folder: run.json with its context length, an export with `steps` forward ranges, each
    holding one matmul kernel of ``matmul_ns`` and one elementwise kernel of 100 ns."""
    folder.mkdir()
    (folder / "run.json").write_text(json.dumps({"config": {"ctx": ctx, "model": "tiny"}}))
    kernels, ranges = [], []
    for step in range(steps):
        base = 10_000 * (step + 1)
        ranges.append((base, base + 5000, "forward"))
        kernels += [
            (base + 100, base + 100 + matmul_ns, "ampere_sgemm_128x64_nn"),
            (base + 3000, base + 3100, "vectorized_elementwise_kernel"),
        ]
    return export(folder / "trace.sqlite", kernels, ranges)


def test_compare_orders_runs_by_a_config_field(cli, tmp_path):
    runs = tmp_path / "traces"
    runs.mkdir()
    run_folder(runs / "big", 256, 900)
    run_folder(runs / "small", 64, 300, steps=3)
    run_folder(runs / "mid", 128, 400)
    rows = tracekit.compare(runs, order_by="ctx", phases="forward", workers=1).frame.to_dict("records")
    forward = [row for row in rows if row["Phase"] == "forward"]
    assert [(row["Run"], row["ctx"], row["Instances"]) for row in forward] == [
        ("small", 64, 3),
        ("mid", 128, 2),
        ("big", 256, 2),
    ]
    assert [row["Per Instance (ns)"] for row in forward] == [400, 500, 1000]
    assert forward[2]["matmul (%)"] == 90.0 and forward[2]["elementwise (%)"] == 10.0
    picture = tmp_path / "compare.png"
    drawn = cli("compare", runs, "--order-by", "ctx", "--phases", "forward", "--picture", picture, "--format", "json")
    assert drawn.exit_code == 0, drawn.output
    assert len(json.loads(drawn.stdout)) == len(rows)  # the command line's table is the API's
    assert picture.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_report_of_several_runs_has_the_compare_table(cli, tmp_path):
    run_folder(tmp_path / "one", 64, 300)
    run_folder(tmp_path / "two", 128, 600)
    result = cli("report", tmp_path / "one", tmp_path / "two", "-o", tmp_path / "report")
    assert result.exit_code == 0, result.output
    text = (tmp_path / "report" / "report.md").read_text()
    assert "tracekit compare" in text and "compare.png" in text
    assert (tmp_path / "report" / "compare.png").is_file()


def test_the_cli_default_limit_is_the_library_default():
    from tracekit.model import option_fields as many

    assert many.DEFAULT_EXACT_LIMIT == merge_stats.DEFAULT_EXACT_LIMIT


def test_the_rank_the_others_waited_for_is_named(tmp_path):
    """Every AllReduce ends at 355 µs into its step; rank 1 computed longest and joined last (at 335 µs),
    rank 2 next (at 75 µs): HTA's two candidates. Step 0 does not count (HTA counts steps above 0), the
    last step is left out."""
    for rank, (allreduce, compute) in enumerate([(300, 50), (20, 330), (280, 70)]):
        dist_rank(tmp_path / f"w{rank}.json", rank, allreduce, compute, [(0, 500), (1000, 500), (2000, 500)])
    result = tracekit.ranks(tmp_path, workers=1)
    assert "stragglers (HolisticTraceAnalysis's definition): 1, 2, " in " ".join(result.notes)
    assert result["ranks"]["Straggler"].tolist() == ["", "yes", "yes"]
    assert result["stragglers"]["Flagged Steps"].tolist() == [0, 1, 1]


def test_ranks_of_one_input_say_what_they_compared(cli, tmp_path):
    """One trace of one GPU with 3 steps printed "no step ranges ... no step times" above Steps = 3 and a
    min = max spread table; one export of a two-GPU job showed one row: its GPUs are the ranks."""
    single = ExportBuilder("2026.2")
    for step in range(3):
        single.push_pop(step * 1_000, step * 1_000 + 900, "step", pid=111, tid=111)
        single.kernel(step * 1_000 + 100, step * 1_000 + 400, "gemm_kernel", pid=111, launch_at=step * 1_000 + 10)
    result = tracekit.ranks(single.write(tmp_path / "one.sqlite"))
    assert result.names == ["ranks"] and result["ranks"]["Steps"].tolist() == [3]  # no spread table beside it
    said = "\n".join(result.notes)
    assert "no step ranges" not in said and "one input with one GPU: nothing to compare" in said

    job = ExportBuilder("2026.2")
    for device, (pid, steps, length) in enumerate(((111, 2, 900), (112, 3, 600))):
        for step in range(steps):
            job.push_pop(step * 1_000, step * 1_000 + length, "step", pid=pid, tid=pid)
            job.kernel(
                step * 1_000 + 100,
                step * 1_000 + 300 + device * 100,
                "gemm_kernel",
                device=device,
                pid=pid,
                launch_at=step * 1_000 + 10,
            )
    result = tracekit.ranks(job.write(tmp_path / "job.sqlite"))
    rows = {row["GPU"]: row for row in records(result, "ranks")}
    assert {gpu: (row["Steps"], row["Step Time (ns)"], row["GPU Busy (ns)"]) for gpu, row in rows.items()} == {
        "cuda:0": (2, 900, 400),
        "cuda:1": (3, 600, 900),
    }
    assert set(result["spread"]["Figure"]) == {"Step Time", "GPU Busy", "GPU Idle", "Computation"}
    said = "\n".join(result.notes)
    assert "one input holding 2 GPUs: compared GPU by GPU" in said and "slowest GPU by step time" in said
    assert "(ranks compared over 1 input)" in cli("ranks", tmp_path / "job.sqlite").output


def test_a_stopped_pool_has_its_manager_thread_joined():
    """The pool's manager thread ends before ``_stop_pool`` returns: left running, the interpreter's exit can
    wake it while it closes its pipe (Python 3.11: a "Bad file descriptor" traceback after SIGTERM). The
    thread is taken before ``shutdown``, which forgets it."""
    pool = ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn"))
    pool.submit(time.sleep, 60)
    manager = getattr(pool, "_executor_manager_thread", None)
    assert isinstance(manager, threading.Thread)
    joined = []
    join = manager.join
    manager.join = lambda timeout=None: (joined.append(timeout), join(timeout))[1]
    _stop_pool(pool)
    assert joined and not manager.is_alive()
