"""Workloads on the CPU with the tiny model: model sizes, the timing harness, sweeps, OOM rows,
the results database, the micro-benchmarks, and NVTX ranges recorded by nsys."""

import io
import json
import os
import sys

import pandas as pd
import pytest

torch = pytest.importorskip("torch")

from helpers.nsys_stats import profile_under_nsys  # noqa: E402

from tracekit import __version__  # noqa: E402
from tracekit.run_config import SIZES, model_config  # noqa: E402
from workloads import bench  # noqa: E402
from workloads.bench import result_record, summarize  # noqa: E402
from workloads.hardware import environment  # noqa: E402
from workloads.models import TransformerLM  # noqa: E402
from workloads.results_db import ResultsDB  # noqa: E402
from workloads.sweep import configurations, results_table, run_sweep  # noqa: E402


@pytest.mark.parametrize("name", list(SIZES))
def test_parameter_count_matches_closed_form(name):
    config = model_config(name)
    with torch.device("meta"):  # shapes only: the 2.7B model costs no memory
        model = TransformerLM(config)
    counted = sum(parameter.numel() for parameter in model.parameters())
    d, ff, layers, vocab = config.d_model, config.d_ff, config.num_layers, config.vocab_size
    embedding_and_head = 2 * vocab * d
    per_layer = 4 * d * d + 3 * d * ff + 2 * d  # q,k,v,o; gate, up, down; two RMSNorm weights
    assert counted == embedding_and_head + layers * per_layer + d
    expected_sizes = {
        "small": (768, 3072, 12, 12),
        "medium": (1024, 4096, 24, 16),
        "large": (1280, 5120, 36, 20),
        "xl": (1600, 6400, 48, 25),
        "2.7B": (2560, 10240, 32, 32),
    }
    if name in expected_sizes:
        assert (d, ff, layers, config.num_heads) == expected_sizes[name]


def test_modes_time_in_order_with_raw_samples():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # torch's own pool on a 2-core machine adds noise of the size being measured
    try:
        results = run_sweep(
            configurations(
                ["tiny"],
                [32],
                batches=[2],
                modes=["forward", "forward-backward", "train"],
                warmup=2,
                steps=8,
                device="cpu",
            )
        )
    finally:
        torch.set_num_threads(threads)
    table = results_table(results).set_index("Mode")
    assert len(table) == 3 and (table["Status"] == "ok").all()
    assert (table["Steps"] == 8).all()
    for result in results:
        assert all(len(samples) == 8 and min(samples) > 0 for samples in result.samples_ms.values())
    # Minimum step times: the mode's cost without the load spikes of a shared 2-core machine, which
    # move means by more than the optimizer step costs.
    step = table["Step Min (ms)"]
    assert step["forward"] < step["forward-backward"] < step["train"]
    assert pd.isna(table.loc["forward", "Backward Mean (ms)"]) and table.loc["train", "Optimizer Mean (ms)"] > 0
    # the step is the sum of its phases, sample by sample
    train = next(result for result in results if result.config.mode == "train").samples_ms
    assert train["step"] == pytest.approx(
        [f + b + o for f, b, o in zip(train["forward"], train["backward"], train["optimizer"])]
    )
    assert table.loc["train", "GFLOP/step"] == pytest.approx(3 * table.loc["forward", "GFLOP/step"])


def test_out_of_memory_becomes_a_row_and_the_sweep_goes_on(monkeypatch):
    real = bench.build_model

    def build(name, context, *args, **kwargs):
        if context == 64:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 20.00 GiB")
        return real(name, context, *args, **kwargs)

    monkeypatch.setattr(bench, "build_model", build)
    results = run_sweep(configurations(["tiny"], [32, 64, 16], warmup=1, steps=2, device="cpu"))
    table = results_table(results)
    assert table["Ctx"].tolist() == [32, 64, 16]
    assert table["Status"].tolist() == ["ok", "oom", "ok"]
    assert pd.isna(table.loc[1, "Step Mean (ms)"]) and "Tried to allocate" in table.loc[1, "Error"]


def test_results_database_accumulates(tmp_path):
    import sqlite_utils

    db = tmp_path / "results.db"
    results = run_sweep(configurations(["tiny"], [16, 32], warmup=0, steps=2, device="cpu"))
    for batch in (results, results[:1]):
        opened = ResultsDB.open(db)
        for result in batch:
            opened.add(summarize(result), result_record(result)["samples_ms"], environment("cpu"))
        opened.close()
    assert ResultsDB.open(db).rows == 3
    rows = list(sqlite_utils.Database(db)["runs"].rows)
    assert [row["ctx"] for row in rows] == [16, 32, 16]
    assert rows[0]["torch_version"] == str(torch.__version__) and rows[0]["time_utc"]
    assert rows[0]["tf32"] == "off" and rows[0]["cuda_version"] == torch.version.cuda and rows[0]["gpu_driver"] is None
    assert rows[0]["tracekit_version"] == __version__ and rows[0]["python_version"]
    assert len(json.loads(rows[0]["samples_ms"])["step"]) == 2
    assert rows[0]["step_mean_ms"] > 0


def test_cli_sweep(cli, tmp_path):
    db = tmp_path / "results.db"
    result = cli(
        "bench",
        "tiny",
        "--ctx",
        "16",
        "32",
        "--mode",
        "forward",
        "--warmup",
        "0",
        "--steps",
        "2",
        "--device",
        "cpu",
        "--format",
        "csv",
        "--db",
        db,
    )
    assert result.exit_code == 0, result.output
    table = pd.read_csv(io.StringIO(result.stdout))
    assert f"note: {db}: 2 rows" in result.stderr
    assert table["Ctx"].tolist() == [16, 32] and (table["Status"] == "ok").all()
    unknown = cli("bench", "tiny", "--mode", "sideways")
    assert unknown.exit_code == 2 and "choose from" in unknown.output


def test_cli_micro_benchmarks(cli):
    attention = cli(
        "bench",
        "attention",
        "--head-dim",
        "16",
        "--seq",
        "32",
        "64",
        "--passes",
        "2",
        "--warmup",
        "0",
        "--device",
        "cpu",
        "--format",
        "json",
    )
    rows = json.loads(attention.output[attention.output.index("[") :])
    assert [(row["Implementation"], row["Seq Len"]) for row in rows] == [
        ("naive", 32),
        ("naive", 64),
        ("sdpa", 32),
        ("sdpa", 64),
    ]
    assert all(row["Status"] == "ok" and row["Forward (ms)"] > 0 and row["Backward (ms)"] > 0 for row in rows)
    optimizer = cli(
        "bench",
        "optimizer",
        "--params",
        "1",
        "4",
        "--size",
        "1Ki",
        "--impl",
        "single-tensor,foreach",
        "--steps",
        "2",
        "--warmup",
        "1",
        "--device",
        "cpu",
        "--format",
        "json",
    )
    rows = json.loads(optimizer.output[optimizer.output.index("[") :])
    assert [(row["Params"], row["Elements Each"]) for row in rows] == [(1, 1024), (4, 1024)]
    assert all(row["single-tensor (ms)"] > 0 and row["foreach (ms)"] > 0 for row in rows)


def test_dtypes_under_bf16_autocast(cli):
    rows = json.loads(cli("bench", "dtypes", "tiny", "--dtype", "bf16", "--device", "cpu", "--format", "json").stdout)
    dtypes = {row["Tensor"]: row["Dtype"] for row in rows}
    assert dtypes["parameters"] == "torch.float32" and dtypes["gradients"] == "torch.float32"
    assert dtypes["layers.0.attention.qkv output"] == "torch.bfloat16"
    assert dtypes["layers.0.attention_norm output"] == "torch.float32"  # RMSNorm keeps its input's dtype
    assert dtypes["logits"] == "torch.bfloat16" and dtypes["loss"] == "torch.float32"


@pytest.mark.nsys
def test_ranges_recorded_under_nsys(nsys, tmp_path):
    """The tiny model under nsys 2022.4 on the CPU: every range, warm-up included (no capture range)."""
    pytest.importorskip("nvtx")
    from tracekit import nsys_tool
    from tracekit.sources.nsys.export import read_nsys_export

    warmup, steps, layers = 2, 3, model_config("tiny").num_layers
    report = profile_under_nsys(
        nsys,
        [
            sys.executable,
            "-m",
            "workloads",
            "tiny",
            "--ctx",
            "16",
            "--warmup",
            str(warmup),
            "--steps",
            str(steps),
            "--device",
            "cpu",
        ],
        tmp_path / "run",
    )
    counts = read_nsys_export(nsys_tool.export_sqlite(report, nsys)).ranges["name"].astype(str).value_counts()
    runs = warmup + steps
    for name in ("step", "forward", "backward", "optimizer", "layer.0", f"layer.{layers - 1}"):
        assert counts[name] == runs, name
    for name in ("attention", "attention scores", "softmax", "attention output"):
        assert counts[name] == runs * layers, name


def test_ranges_stay_out_of_compiled_graphs(monkeypatch):
    from tracekit.annotate import STATE
    from workloads import annotate

    calls = []
    monkeypatch.setattr(STATE, "nvtx", True)  # as under nsys
    monkeypatch.setattr(STATE, "_backend", ("test", lambda name: calls.append(name), lambda: None))

    def layer(x):
        with annotate.nvtx_range("layer.0"):
            return x * 2 + 1

    compiled = torch.compile(layer, backend="eager", fullgraph=True)  # fullgraph: a range would break it
    assert torch.equal(compiled(torch.ones(3)), torch.full((3,), 3.0))
    assert calls == []
    layer(torch.ones(3))
    assert calls == ["layer.0"]  # eager code still gets its range


def test_bench_db_is_checked_before_anything_runs(cli, tmp_path):
    import hashlib
    import sqlite3

    foreign = tmp_path / "foreign.db"
    with sqlite3.connect(foreign) as connection:
        connection.execute("CREATE TABLE runs (id INTEGER PRIMARY KEY, customer TEXT)")
        connection.execute("INSERT INTO runs (customer) VALUES ('acme')")
    text = tmp_path / "notes.txt"
    text.write_text("my notes")
    legacy = "model TEXT, time_utc TEXT, tracekit_version TEXT, samples_ms TEXT"  # looks like ours: adopted
    shapes = {
        "view": "CREATE VIEW runs AS SELECT 'tiny' AS model, 'x' AS time_utc, 'v' AS tracekit_version, '' AS samples_ms",
        "notnull": f"CREATE TABLE runs ({legacy}, owner TEXT NOT NULL)",
        "trigger": f"CREATE TABLE runs ({legacy}); CREATE TRIGGER t BEFORE INSERT ON runs BEGIN SELECT RAISE(ABORT, 'no'); END",
    }
    for name, sql in shapes.items():
        with sqlite3.connect(tmp_path / f"{name}.db") as connection:
            connection.executescript(sql)
    os.mkfifo(tmp_path / "fifo.db")
    before = {
        path: hashlib.sha256(path.read_bytes()).hexdigest()
        for path in (foreign, text, *(tmp_path / f"{name}.db" for name in shapes))
    }
    cases = [
        (foreign, "another application's SQLite database"),
        (tmp_path / "view.db", "runs is a view"),
        (tmp_path / "notnull.db", "NOT NULL columns tracekit does not fill (owner)"),
        (tmp_path / "trigger.db", "it has triggers"),
        (tmp_path / "fifo.db", "is not a regular file"),
        (text, "not an SQLite database"),
        (tmp_path / "missing" / "r.db", "does not exist"),
    ]
    for db, message in cases:
        result = cli("bench", "tiny", "--ctx", "16", "--steps", "1", "--warmup", "0", "--device", "cpu", "--db", db)
        lines = [line for line in result.output.splitlines() if line.strip()]
        assert result.exit_code == 1 and len(lines) == 1 and message in lines[0], result.output
    folder = cli("bench", "tiny", "--ctx", "16", "--steps", "1", "--device", "cpu", "--db", tmp_path)
    assert folder.exit_code == 2 and "is a directory" in folder.output  # click's own check
    assert {path: hashlib.sha256(path.read_bytes()).hexdigest() for path in before} == before


def test_an_interrupted_sweep_keeps_every_finished_row(tmp_path):
    import signal
    import sqlite3
    import subprocess
    import time

    db = tmp_path / "results.db"
    contexts = [str(16 + i) for i in range(40)]
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tracekit.cli",
            "bench",
            "tiny",
            "--ctx",
            *contexts,
            "--warmup",
            "0",
            "--steps",
            "2",
            "--device",
            "cpu",
            "--db",
            str(db),
            "--format",
            "csv",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )

    def rows() -> int:
        try:
            with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as connection:
                return connection.execute("SELECT count(*) FROM runs").fetchone()[0]
        except sqlite3.Error:
            return 0

    deadline = time.monotonic() + 120
    while rows() < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=120)
    saved = rows()
    assert process.returncode == 1 and "Traceback" not in stderr
    assert saved >= 2 and f"interrupted (Ctrl-C); {saved} finished configurations are saved in {db}" in stderr
