"""Benchmarks a user can trust: compiled rows were compiled (issue: benchmarks a user can trust).

Inductor takes ~20 s per shape on a CPU, so these compile with ``aot_eager`` and a recompile limit of
2: the silent fallback users hit after 8 recompiles shows up after 2.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from tracekit.run_config import EAGER_FALLBACK  # noqa: E402


@pytest.fixture
def low_recompile_limit(monkeypatch):
    import torch._dynamo

    monkeypatch.setenv("TRACEKIT_COMPILE_BACKEND", "aot_eager")
    with torch._dynamo.config.patch(recompile_limit=2):  # dynamo's config takes no setattr from monkeypatch
        yield
    torch._dynamo.reset()


@pytest.fixture
def no_reset(monkeypatch):
    """The harness as it was: one compiler state for the whole sweep."""
    import torch._dynamo

    monkeypatch.setattr(torch._dynamo, "reset", lambda: None)


def optimizer_cells():
    from workloads.optimizers import optimizer_grid

    result = optimizer_grid(
        counts=(1, 2, 3, 4), sizes=(1024,), implementations=("compiled",), warmup=1, steps=2, device="cpu"
    )
    return result.tables[0].frame


def test_a_new_optimizer_per_cell_once_ran_eager_silently(low_recompile_limit, no_reset):
    """How users met it: past the limit, dynamo runs the step eager. Now such cells are labelled, and
    their eager time is not shown as the compiled one."""
    frame = optimizer_cells()
    fell_back = frame["Notes"].fillna("").str.contains("fell back to eager")
    assert fell_back.sum() >= 1 and not fell_back.iloc[0]  # the first cells compiled, later ones did not
    assert frame.loc[fell_back, "compiled (ms)"].isna().all()
    assert frame.loc[~fell_back, "compiled (ms)"].notna().all()


def test_every_compiled_optimizer_cell_is_compiled(low_recompile_limit):
    frame = optimizer_cells()
    assert frame["Notes"].isna().all(), frame["Notes"].tolist()
    assert frame["compiled (ms)"].notna().all() and (frame["Compile (ms)"] > 0).all()


def model_rows(contexts=(16, 24, 32)):
    from workloads.sweep import configurations, run_sweep

    configs = configurations(["tiny"], list(contexts), compiles=(True,), warmup=1, steps=2, device="cpu")
    return run_sweep(configs)


def test_a_model_sweep_of_more_shapes_than_the_limit_compiles_every_row(low_recompile_limit):
    from workloads.bench import summarize

    rows = [summarize(result) for result in model_rows()]
    assert [row["status"] for row in rows] == ["ok", "ok", "ok"]
    for row in rows:
        assert row["graphs"] >= 1 and row["compile_ms"] > 0 and row["recompiles"] == 0
        assert row["step_mean_ms"] > 0 and row["steps"] == 2  # the compiling step is in no sample


def test_a_model_that_ran_eager_is_labelled(low_recompile_limit, no_reset):
    import torch._dynamo

    # every context a new static shape, and no room for a second one: the second row runs eager
    with torch._dynamo.config.patch(recompile_limit=1, automatic_dynamic_shapes=False):
        results = model_rows((16, 24))
    assert results[0].status == "ok" and results[1].status == EAGER_FALLBACK
    assert "fell back to eager" in (results[1].error or "")


def test_graph_breaks_are_counted(low_recompile_limit):
    from workloads.compiled import CompileWatch, compile_function

    def with_break(x):
        x = x.sin()
        torch._dynamo.graph_break()
        return x.cos()

    watch = CompileWatch()
    compiled = compile_function(with_break)
    watch.first_call(lambda: compiled(torch.randn(4)), lambda: None)
    compiled(torch.randn(4))
    report = watch.report()
    assert report.graph_breaks == 1 and report.graphs == 2 and report.recompiles == 0 and not report.fell_back


def test_statistics_say_when_they_are_weak():
    from workloads.bench import describe, t_975

    # t quantiles: the table, and the expansion against values from standard tables (df 40, 60, 120)
    assert t_975(1) == 12.706 and t_975(30) == 2.042
    for degrees, exact in ((40, 2.021), (60, 2.000), (120, 1.980)):
        assert abs(t_975(degrees) - exact) < 0.001
    stats = describe([10.0, 12.0, 14.0])  # mean 12, std 2, n 3: 4.303 * 2 / sqrt(3)
    assert stats["mean"] == 12.0 and stats["std"] == 2.0 and stats["ci95"] == pytest.approx(4.303 * 2 / 3**0.5)
    assert describe([5.0])["ci95"] is None


def test_noisy_rows_are_flagged():
    from tracekit.run_config import RunConfig
    from workloads.bench import RunResult, summarize

    steady = RunResult(RunConfig("tiny"), samples_ms={"forward": [10.0, 10.1, 9.9], "step": [10.0, 10.1, 9.9]})
    noisy = RunResult(RunConfig("tiny"), samples_ms={"forward": [10.0, 12.0, 8.0], "step": [10.0, 12.0, 8.0]})
    assert summarize(steady)["noisy"] == "no" and summarize(steady)["step_cv_pct"] == pytest.approx(1.0)
    assert summarize(noisy)["noisy"] == "yes" and summarize(noisy)["step_cv_pct"] == pytest.approx(20.0)


def test_tf32_is_set_inside_a_run_and_restored_after():
    from workloads.bench import tf32_allowed

    before = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
    with tf32_allowed(True):
        assert torch.backends.cuda.matmul.allow_tf32 and torch.backends.cudnn.allow_tf32
    with tf32_allowed(False):
        assert not torch.backends.cuda.matmul.allow_tf32 and not torch.backends.cudnn.allow_tf32
    assert (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32) == before


def test_every_row_says_tf32_and_the_peak_it_is_measured_against(cli):
    import json

    from workloads.hardware import peak_flops

    rows = json.loads(
        cli(
            "bench",
            "tiny",
            "--ctx",
            "16",
            "--warmup",
            "0",
            "--steps",
            "2",
            "--device",
            "cpu",
            "--tf32",
            "on",
            "--format",
            "json",
        ).stdout
    )
    assert [row["TF32"] for row in rows] == ["on"]
    attention = json.loads(
        cli(
            "bench",
            "attention",
            "--head-dim",
            "16",
            "--seq",
            "32",
            "--passes",
            "1",
            "--device",
            "cpu",
            "--format",
            "json",
        ).stdout
    )
    assert [row["TF32"] for row in attention] == ["off", "off"]  # naive and sdpa
    # data-sheet peaks (dense), the TF32 rate apart from plain float32, most specific name first
    assert peak_flops("NVIDIA H100 80GB HBM3", "fp32") == 67.0e12
    assert peak_flops("NVIDIA H100 80GB HBM3", "fp32", tf32=True) == 494.7e12
    assert peak_flops("NVIDIA H100 PCIe", "bf16") == 756.5e12
    assert peak_flops("NVIDIA A10G", "bf16") == 125e12 and peak_flops("NVIDIA A100-SXM4-80GB", "bf16") == 312e12
    assert peak_flops("NVIDIA L40S", "fp16") == 362.05e12 and peak_flops("NVIDIA L4", "fp16") == 121e12
    assert peak_flops("Tesla V100-SXM2-16GB", "bf16") is None and peak_flops("Some Future GPU", "bf16") is None


def test_the_accumulation_demonstration_gives_exact_values(cli):
    import json

    rows = json.loads(cli("bench", "precision", "--format", "json").stdout)
    results = {(row["Accumulator"], row["Addend"]): float(row["Result"]) for row in rows}
    # exact binary results: fp32's rounding of 0.01, fp16's 8-bit stall, bf16 stopping at 4
    assert results[("fp32", "fp32")] == 10.000133514404297
    assert results[("fp16", "fp16")] == 9.953125
    assert results[("fp32", "fp16")] == 10.00213623046875 == 1000 * 0.01000213623046875
    assert results[("bf16", "bf16")] == 4.0
    assert results[("fp32", "bf16")] == 10.009765625
    assert all(row["Why"] for row in rows)


def test_warmup_counts_in_one_table(cli):
    import json

    tables = json.loads(
        cli(
            "bench", "tiny", "--ctx", "16", "--warmup", "0", "2", "--steps", "2", "--device", "cpu", "--format", "json"
        ).stdout
    )
    runs, warmup = tables["benchmark"], tables["warmup"]
    assert [row["Warm-up"] for row in runs] == [0, 2] and len(warmup) == 1
    for row in runs:  # each cell is that run's step mean ± std
        expected = f"{row['Step Mean (ms)']:,.2f} ± {row['Step Std (ms)']:,.2f}"
        assert warmup[0][f"Warm-up {row['Warm-up']}"] == expected
    single = json.loads(
        cli(
            "bench", "tiny", "--ctx", "16", "--warmup", "1", "--steps", "2", "--device", "cpu", "--format", "json"
        ).stdout
    )
    assert isinstance(single, list)  # one warm-up count: the one table, as before


def test_cpu_sized_defaults_and_a_first_line_that_says_how_many(cli):
    import json

    result = cli("bench", "attention", "--impl", "naive", "--device", "cpu", "--format", "json")
    rows = json.loads(result.stdout)
    assert [(row["Head Dim"], row["Seq Len"]) for row in rows] == [(16, 128), (16, 256), (64, 128), (64, 256)]
    assert "attention grid: 4 configurations to run" in result.stderr
    assert "a CPU-sized grid (the defaults are sized for a GPU): --head-dim 16 64, --seq 128 256, --passes 10" in (
        result.stderr
    )
    chosen = cli("bench", "attention", "--impl", "naive", "--seq", "64", "--device", "cpu", "--format", "json")
    assert [row["Seq Len"] for row in json.loads(chosen.stdout)] == [64, 64]  # given options are kept
    assert "--seq" not in chosen.stderr.split("CPU-sized grid")[-1]


def test_attention_flops_memory_and_backend(cli):
    import json

    from workloads.attention_probe import attention_flops

    assert attention_flops(1, 4, 2, causal=True) == (2 * 2 * 10 * 2, 2.5 * 2 * 2 * 10 * 2)  # 10 = 4 * 5 / 2 pairs
    assert attention_flops(1, 4, 2, causal=False) == (2 * 2 * 16 * 2, 2.5 * 2 * 2 * 16 * 2)
    rows = json.loads(
        cli(
            "bench",
            "attention",
            "--head-dim",
            "64",
            "--seq",
            "256",
            "--batch",
            "8",
            "--passes",
            "2",
            "--dtype",
            "fp32",
            "bf16",
            "--device",
            "cpu",
            "--format",
            "json",
        ).stdout
    )
    by = {(row["Implementation"], row["Dtype"]): row for row in rows}
    assert set(by) == {("naive", "fp32"), ("naive", "bf16"), ("sdpa", "fp32"), ("sdpa", "bf16")}
    for (name, _dtype), row in by.items():
        assert row["Status"] == "ok"
        forward_flops, backward_flops = attention_flops(8, 256, 64, causal=True)
        assert row["Forward TFLOP/s"] == pytest.approx(forward_flops / row["Forward (ms)"] / 1e9)
        assert row["Backward TFLOP/s"] == pytest.approx(backward_flops / row["Backward (ms)"] / 1e9)
        assert (row["SDPA Backend"] is None) == (name == "naive")
    # naive saves softmax's output (8 x 256 x 256 values) and the causal mask (256 x 256 bools) beyond q, k, v
    assert by[("naive", "fp32")]["Saved For Backward (MiB)"] * 2**20 == 8 * 256 * 256 * 4 + 256 * 256
    assert by[("naive", "bf16")]["Saved For Backward (MiB)"] * 2**20 == 8 * 256 * 256 * 2 + 256 * 256
    assert by[("sdpa", "fp32")]["SDPA Backend"] in ("flash", "memory-efficient", "cuDNN", "math")


def test_explicit_softmax_saves_what_the_published_tables_measured():
    """The softmax written out keeps the exponentials and the weights (two B L L tensors), the mask, the
    row maximum's int64 indices and the row sums: the terms of CS336's naive-attention memory column
    (benchmarks/GPU_RESULTS.md); torch.softmax keeps one B L L tensor. Both compute the same attention."""
    from workloads.attention import attention_grid, explicit, naive

    b, length = 8, 64
    rows = (
        attention_grid(
            head_dims=(16,), lengths=(length,), implementations=("naive", "explicit"), passes=1, warmup=0, device="cpu"
        )
        .tables[0]
        .frame.set_index("Implementation")
    )
    saved = rows["Saved For Backward (MiB)"] * 2**20
    assert saved["explicit"] == 2 * b * length * length * 4 + length * length + b * length * (8 + 4)
    assert saved["naive"] == b * length * length * 4 + length * length
    generator = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 5, 3, generator=generator) for _ in range(3))
    assert torch.allclose(explicit(q, k, v, True), naive(q, k, v, True), atol=1e-6)
    assert torch.allclose(explicit(q, k, v, False), naive(q, k, v, False), atol=1e-6)


def test_counting_saved_tensors_leaves_none_behind():
    """The saved-tensor probe held every tensor a node saved of its own output (softmax, exp) in a
    reference cycle Python cannot collect: on a GPU each attention point leaked its L x L tensors and
    the grid ran out of memory at L 16384. Three probes now leave the live tensors as they were."""
    import gc
    import warnings

    from workloads.attention import explicit, naive
    from workloads.attention_probe import saved_bytes

    def live_tensors() -> int:
        gc.collect()
        with warnings.catch_warnings():  # isinstance on torch's deprecated module attributes warns
            warnings.simplefilter("ignore", FutureWarning)
            return sum(isinstance(thing, torch.Tensor) for thing in gc.get_objects())

    q, k, v = (torch.randn(2, 64, 8, requires_grad=True) for _ in range(3))
    before = live_tensors()
    counted = [saved_bytes(function, q, k, v, True) for function in (naive, explicit, naive)]
    assert counted == [2 * 64 * 64 * 4 + 64 * 64, 2 * 2 * 64 * 64 * 4 + 64 * 64 + 2 * 64 * 12, counted[0]]
    assert live_tensors() == before


def test_the_model_benchmark_states_both_flops_conventions():
    from tracekit.run_config import RunConfig
    from workloads.bench import RunResult, summarize
    from workloads.models import flops_per_step, model_config

    spec = model_config("small", 1024)
    full, causal = (flops_per_step(spec, 1, 1024, backward=True, causal=c) for c in (False, True))
    layers, d = 12, 768
    assert full - causal == 3 * layers * 2 * 2 * (1024 * 1024 - 1024 * 1025 // 2) * d  # only attention differs
    row = summarize(RunResult(RunConfig("small", 1024, 1), samples_ms={"forward": [1000.0], "step": [1000.0]}))
    assert row["tflop_per_s"] == pytest.approx(full / 1e12) and row["tflop_per_s_causal"] == pytest.approx(
        causal / 1e12
    )


@pytest.mark.parametrize(
    "model, context, batch", [("tiny", 32, 2), ("tiny", 128, 4), ("small", 64, 1), ("small", 256, 1)]
)
def test_the_activation_formula_equals_what_autograd_saves(model, context, batch):
    from workloads.activations import activation_terms, measured_saved_bytes

    formula = sum(size for _, size, _ in activation_terms(model, context, batch))
    measured = measured_saved_bytes(model, context, batch)
    assert abs(formula - measured) <= 0.02 * measured, (formula, measured)
    assert abs(formula - measured) <= 0.001 * measured  # in fact within 0.02 % (a few small tensors)


def test_bench_activations_command(cli):
    import json

    rows = {
        row["Part"]: row["MiB"]
        for row in json.loads(cli("bench", "activations", "tiny", "--ctx", "32", "--format", "json").stdout)
    }
    assert rows["residual stream tensor"] == 32 * 64 * 4 / 2**20
    assert abs(rows["difference"]) < 0.01 and rows["formula total"] > 0
    bf16 = cli("bench", "activations", "tiny", "--ctx", "32", "--dtype", "bf16", "--format", "json")
    assert "the formula covers fp32" in bf16.stderr
    assert {row["Part"]: row["MiB"] for row in json.loads(bf16.stdout)}["measured (autograd saved)"] > 0


def test_activations_beside_a_runs_snapshot(cli, tmp_path):
    import json

    from helpers.snapshot_builder import SnapshotBuilder

    from tracekit import runs

    run = tmp_path / "run"
    run.mkdir()
    b = SnapshotBuilder()
    b.alloc(0x1000, 3 * 2**20, 100)
    b.alloc(0x9000000, 5 * 2**20, 200)
    b.free(0x1000, 3 * 2**20, 300)
    b.dump(run / runs.MEMORY)
    (run / runs.MANIFEST).write_text(json.dumps({"config": {"model": "tiny", "context": 64, "batch": 1}}))
    result = cli("bench", "activations", "tiny", "--ctx", "32", "--run", run, "--format", "json")
    rows = {row["Part"]: row["MiB"] for row in json.loads(result.stdout)}
    assert rows["snapshot: peak of allocations during the steps"] == 8.0  # both live at once
    assert "the run was captured with context 64" in result.stderr and "gradients" in result.stderr


def test_review_of_the_benchmarks(cli, tmp_path, monkeypatch):
    """What an independent review found: each now one line, a row, or a note."""
    import json

    for args, message in ((("--warmup", "-1"), "each must be at least 0"), (("--ctx", "0"), "each must be at least 1")):
        result = cli("bench", "tiny", *args, "--device", "cpu")
        assert result.exit_code == 2 and message in result.output
    noted = cli("bench", "tiny", "--ctx", "16", "--warmup", "0", "--steps", "2", "--tf32", "on", "--device", "cpu")
    assert "--tf32 on has no effect off CUDA" in noted.output
    monkeypatch.setenv("TRACEKIT_COMPILE_BACKEND", "no-such-backend")
    broken = cli(
        "bench",
        "attention",
        "--compile",
        "--head-dim",
        "16",
        "--seq",
        "32",
        "--impl",
        "naive",
        "--device",
        "cpu",
        "--format",
        "json",
    )
    assert broken.exit_code == 0 and json.loads(broken.stdout)[0]["Status"] == "error"  # a row, not a traceback
    bf16 = {
        row["Part"]
        for row in json.loads(
            cli("bench", "activations", "tiny", "--ctx", "16", "--dtype", "bf16", "--format", "json").stdout
        )
    }
    assert bf16 == {"measured (autograd saved)", "residual stream tensor"}  # no formula rows without a formula


def test_the_bench_report_keeps_every_setting_apart(cli, tmp_path):
    db, report = tmp_path / "w.db", tmp_path / "report"
    result = cli(
        "bench",
        "tiny",
        "--ctx",
        "16",
        "--batch",
        "1",
        "--warmup",
        "0",
        "1",
        "--attention",
        "naive",
        "sdpa",
        "--steps",
        "2",
        "--device",
        "cpu",
        "--db",
        db,
    )
    assert result.exit_code == 0, result.output
    assert cli("report", "--bench", db, "-o", report).exit_code == 0
    header = next(line for line in (report / "report.md").read_text().splitlines() if line.startswith("| Model"))
    for variant in (
        "fp32, naive, warm-up 0",
        "fp32, naive, warm-up 1",
        "fp32, sdpa, warm-up 0",
        "fp32, sdpa, warm-up 1",
    ):
        assert variant in header


def test_attention_rows_say_how_steady_they_were():
    from workloads.attention import attention_grid
    from workloads.bench import cv_pct

    assert cv_pct([10.0, 12.0, 8.0]) == pytest.approx(20.0) and cv_pct([5.0]) is None  # one definition for all
    rows = (
        attention_grid(head_dims=(16,), lengths=(32,), implementations=("naive",), passes=3, warmup=1, device="cpu")
        .tables[0]
        .frame
    )
    assert rows["CV (%)"].iloc[0] >= 0 and rows["Noisy"].iloc[0] == ("yes" if rows["CV (%)"].iloc[0] > 5 else "no")
