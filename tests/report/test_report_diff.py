"""`tracekit diff` and `tracekit report` (traces, run folders, a benchmark database)."""

import io
import re
import shutil

import matplotlib.image
import pandas as pd
import pytest

from tracekit import runs

A = "h100_videogen_2gpu_a_nsys2026.2.sqlite"
B = "h100_videogen_2gpu_b_nsys2026.2.sqlite"


def read_csv(text):
    return pd.read_csv(io.StringIO(text), keep_default_na=False)


def test_diff_categories_equal_the_difference_of_category_tables(cli, shared_traces):
    a, b = shared_traces / A, shared_traces / B
    diff = read_csv(cli("diff", a, b, "--by", "category", "--format", "csv").stdout)
    whole = diff[diff["Phase"] == "(whole trace)"].set_index("Category")
    table_a = read_csv(cli("kernels", a, "--by", "category", "--format", "csv").stdout).set_index("Category")
    table_b = read_csv(cli("kernels", b, "--by", "category", "--format", "csv").stdout).set_index("Category")
    # the category tables list the categories with kernels only: one absent from A is 0 there
    expected = table_b["Total Time (ns)"].sub(table_a["Total Time (ns)"], fill_value=0) / 1e6
    assert set(whole.index) == set(expected.index) and len(whole) >= 5
    for category, delta in expected.items():
        assert whole.loc[category, "Delta (ms)"] == pytest.approx(delta, abs=1e-9)
        before = table_a["Total Time (ns)"].to_dict().get(category, 0)
        assert whole.loc[category, "A (ms)"] == pytest.approx(before / 1e6)
    kernels = read_csv(cli("diff", a, b, "--by", "kernel", "--top", "3", "--format", "csv").stdout)
    assert kernels["Name"].tolist()[0] == "flash_fwd_kernel" and kernels["A (ms)"].tolist()[0] == 0


def markdown_table_after(text: str, marker: str) -> str:
    block = text[text.index(marker) :]
    lines = block.splitlines()
    start = next(index for index, line in enumerate(lines) if line.startswith("|"))
    end = next(index for index in range(start, len(lines)) if not lines[index].startswith("|"))
    return "\n".join(lines[start:end])


def test_report_of_real_traces_has_the_kernels_tables(cli, shared_traces, tmp_path):
    a = shared_traces / A
    result = cli("report", a, shared_traces / B, "-o", tmp_path / "report")
    assert result.exit_code == 0, result.output
    text = (tmp_path / "report" / "report.md").read_text()
    printed = cli("kernels", a, "--top", "10", "--name", "short", "--unit", "ms", "--format", "md").output
    expected = "\n".join(line for line in printed.splitlines() if line.startswith("|"))
    assert markdown_table_after(text, "### Top kernels") == expected
    assert "## Comparison: B against A" in text
    check_pictures(tmp_path / "report", text)


def check_pictures(folder, text):
    links = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", text)
    assert links, "the report links pictures"
    for link in links:
        assert link.endswith(".png") and "/" not in link
        pixels = matplotlib.image.imread(folder / link)
        assert pixels.shape[0] > 200 and pixels.shape[1] > 400 and pixels.std() > 0.02


@pytest.mark.nsys
@pytest.mark.slow
def test_capture_then_report(cli, nsys, tmp_path):
    """The CI test: capture tiny on the CPU, then report it."""
    pytest.importorskip("torch")
    pytest.importorskip("nvtx")
    traces = tmp_path / "traces"
    capture = cli("capture", "tiny", "--ctx", "32", "--warmup", "2", "--steps", "3", "--out", traces, "--name", "tiny")
    assert capture.exit_code == 0, capture.output
    result = cli("report", traces / "latest", "-o", tmp_path / "report")
    assert result.exit_code == 0, result.output
    text = (tmp_path / "report" / "report.md").read_text()
    table = markdown_table_after(text, "### NVTX ranges")
    step = next(line for line in table.splitlines() if line.startswith("| step |"))
    assert step.split("|")[2].strip() == "3"  # Instances
    assert "No CUDA kernels in this trace" in text and "### Step phases (harness)" in text
    assert "### Inside attention" in text and "| softmax |" in text
    check_pictures(tmp_path / "report", text)
    # a run folder for diff and export too
    assert cli("export", traces / "tiny", "--parquet", tmp_path / "tables").exit_code == 0
    assert len(pd.read_parquet(tmp_path / "tables" / "ranges.parquet")) > 0


def test_report_with_memory_snapshot(cli, shared_traces, shared_memory, tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    shutil.copy(shared_traces / A, run / runs.EXPORT)
    shutil.copy(shared_memory / "cs336_medium_ctx128_train_step.pickle", run / runs.MEMORY)
    runs.Run(run).write_manifest(
        {
            "status": "complete",
            "config": {"model": "medium", "context": 128},
            "trace": "cuda,nvtx",
            "device": {"name": "NVIDIA H100", "type": "cuda"},
            "timings_ms": {"step": {"mean": 10.0, "std": 1.0}},
            "samples_ms": {"step": [9.0, 10.0, 11.0]},
        },
    )
    result = cli("report", run, "-o", tmp_path / "report")
    assert result.exit_code == 0, result.output
    text = (tmp_path / "report" / "report.md").read_text()
    assert "### Memory" in text and "peak allocated (MiB) | 6,690.3" in text
    assert "memory_timeline.png" in text
    check_pictures(tmp_path / "report", text)


def test_bench_report(cli, tmp_path):
    pytest.importorskip("torch")
    db = tmp_path / "results.db"
    assert (
        cli(
            "bench", "tiny", "--ctx", "16", "32", "--warmup", "0", "--steps", "2", "--device", "cpu", "--db", db
        ).exit_code
        == 0
    )
    result = cli("report", "--bench", db, "-o", tmp_path / "bench")
    assert result.exit_code == 0, result.output
    text = (tmp_path / "bench" / "report.md").read_text()
    rows = [line for line in text.splitlines() if line.startswith("| tiny |")]
    assert len(rows) == 2 and all("±" in row for row in rows)
    check_pictures(tmp_path / "bench", text)
    missing = cli("report", "--bench", tmp_path / "none.db")
    assert missing.exit_code == 1 and "no such results database" in missing.output
    named_like_the_report = tmp_path / "mine" / "report.md"  # the database where report.md would go
    named_like_the_report.parent.mkdir()
    named_like_the_report.write_bytes(db.read_bytes())
    clash = cli("report", "--bench", named_like_the_report, "-o", named_like_the_report.parent)
    assert clash.exit_code == 1 and "is an input of this command" in clash.output
    assert sorted(path.name for path in named_like_the_report.parent.iterdir()) == ["report.md"]  # no picture
    assert named_like_the_report.read_bytes() == db.read_bytes()


def test_diff_and_export_of_runs_with_snapshots(cli, shared_traces, shared_memory, tmp_path):
    folders = []
    for name, export, snapshot in (
        ("fwd", A, "cs336_medium_ctx512_forward"),
        ("train", B, "cs336_medium_ctx512_train_step"),
    ):
        folder = tmp_path / name
        folder.mkdir()
        shutil.copy(shared_traces / export, folder / runs.EXPORT)
        shutil.copy(shared_memory / f"{snapshot}.pickle", folder / runs.MEMORY)
        folders.append(folder)
    result = cli("diff", *folders)
    assert result.exit_code == 0, result.output
    memory = result.output[result.output.index("Memory at the peak") :]
    peak = next(line for line in memory.splitlines() if line.startswith("(peak allocated)")).split()
    assert peak[2:5] == ["1,860.9", "11,852.8", "9,991.9"]  # A, B, delta in MiB
    result = cli("export", folders[1], "--parquet", tmp_path / "tables")
    assert result.exit_code == 0, result.output
    events = pd.read_parquet(tmp_path / "tables" / "memory_events.parquet")
    assert len(events) == 22_332 and (tmp_path / "tables" / "memory_allocations.parquet").exists()


def test_report_compares_more_than_two_inputs(cli, shared_traces, tmp_path):
    a, b = shared_traces / A, shared_traces / B
    copy = tmp_path / "b-again.sqlite"
    shutil.copy(b, copy)
    result = cli("report", a, b, copy, "-o", tmp_path / "three")
    assert result.exit_code == 0, result.output
    text = (tmp_path / "three" / "report.md").read_text()
    assert "## A (" in text and "## C (b-again): " in text and "## Comparison: B, C against A" in text
    assert "C is `b-again`." in text  # the letters of the comparison's columns, named
    table = markdown_table_after(text, "## Comparison: B, C against A").splitlines()
    assert table[0] == "| Phase | Category | A (ms) | B (ms) | C (ms) | B - A (ms) | C - A (ms) |"
    for row in table[2:]:
        cells = [cell.strip() for cell in row.strip("|").split("|")]
        assert cells[3] == cells[4] and cells[5] == cells[6]  # C is a copy of B
    two = read_csv(cli("diff", a, b, "--by", "category", "--format", "csv").stdout)
    whole = two[two["Phase"] == "(whole trace)"].set_index("Category")["Delta (ms)"]
    first = table[2].strip("|").split("|")
    assert first[0].strip() == "(whole trace)"
    assert float(first[5].replace(",", "")) == pytest.approx(whole[first[1].strip()], abs=0.01)  # as diff says


def test_report_of_a_run_whose_phase_ran_no_gpu_work(cli, tmp_path):
    """A phase with ranges but no GPU op (an optimizer step on the CPU) is a row of zeros, not a crash."""
    from helpers.nsys_builder import ExportBuilder

    b = ExportBuilder("2026.2")
    b.push_pop(0, 1_000, "forward")
    b.kernel(100, 300, "ampere_sgemm_128x64_tn", launch_at=50)
    b.push_pop(1_000, 2_000, "optimizer")  # nothing launched inside it
    run = tmp_path / "run"
    run.mkdir()
    b.write(run / runs.EXPORT)
    runs.Run(run).write_manifest(
        {
            "status": "complete",
            "config": {"model": "tiny", "context": 16},
            "trace": "cuda,nvtx",
            "timings_ms": {"forward": {"mean": 1.0, "std": 0.1}, "optimizer": {"mean": 2.0, "std": 0.1}},
            "samples_ms": {"forward": [1.0], "optimizer": [2.0]},
        },
    )
    result = cli("report", run, "-o", tmp_path / "report")
    assert result.exit_code == 0, result.output
    text = (tmp_path / "report" / "report.md").read_text()
    harness = text[text.index("Harness wall time per phase") :]
    row = next(line for line in harness.splitlines() if line.startswith("| optimizer"))
    cells = [cell.strip() for cell in row.strip("|").split("|")]
    assert cells[0] == "optimizer" and [float(cell) for cell in cells[1:]] == [2.0, 0.0, 0.0]
    assert "#### Inside `forward`" in text and "#### Inside `optimizer`" not in text


def test_report_says_which_rows_it_left_out(cli, tmp_path):
    """Unusable rows are left out of a report's numbers and said once per table, with or without NVTX."""
    from helpers.nsys_builder import ExportBuilder

    for with_ranges in (True, False):
        b = ExportBuilder("2026.2")
        if with_ranges:
            b.push_pop(0, 1_000, "forward")
            b.push_pop(900, 800, "forward")  # ends before it starts
        b.kernel(100, 300, "ampere_sgemm_128x64_tn", launch_at=50)
        b.kernel(400, 350, "ampere_sgemm_128x64_tn", launch_at=60)  # ends before it starts
        path = b.write(tmp_path / f"bad-{with_ranges}.sqlite")
        out = tmp_path / f"report-{with_ranges}"
        result = cli("report", path, "-o", out)
        assert result.exit_code == 0, result.output
        text = (out / "report.md").read_text()
        assert text.count("note: 1 gpu_ops row of") == 1
        assert text.count("note: 1 ranges row of") == (1 if with_ranges else 0)


def test_report_says_which_phases_it_found(cli, tmp_path):
    """Phases found by name are said once, with how to name others; a trace without any says so; given
    phases and a step range are used as given."""
    from helpers.nsys_builder import ExportBuilder

    notes = {
        "forward pass": "note: phases found by their range names: forward = 'forward pass'; no backward, optimizer",
        "train_step": "note: no range of this trace names a phase (forward, backward, optimizer)",
    }
    for name, note in notes.items():
        b = ExportBuilder("2026.2")
        b.push_pop(0, 1_000, name)
        b.kernel(100, 300, "ampere_sgemm_128x64_tn", launch_at=50)
        path = b.write(tmp_path / f"{name.replace(' ', '_')}.sqlite")
        out = tmp_path / f"report-{name.replace(' ', '_')}"
        assert cli("report", path, "-o", out).exit_code == 0
        text = (out / "report.md").read_text()
        assert "; GPUs: not recorded (its GPU work ran on cuda:0)." in text  # the export has no GPU table
        assert text.count(note) == 1
        assert text.count(f"`tracekit breakdown {path} --phases ...`") == 1
        assert "### What to fix first" in text
    out = tmp_path / "report-given"
    assert cli("report", path, "-o", out, "--phases", "train_step", "--step-range", "train_step").exit_code == 0
    text = (out / "report.md").read_text()
    assert "| train_step " in text and "names a phase" not in text
    assert "Per step (`train_step` ranges):" in text
    assert f"tracekit steps {path} --step-range train_step" in text
    result = cli("report", path, "-o", tmp_path / "bad", "--phases", ",")
    assert result.exit_code == 2 and "phases" in result.output


def test_diff_notes_say_which_input_they_are_about(cli, tmp_path):
    from helpers.nsys_builder import ExportBuilder

    paths = []
    for name, bad in (("a", False), ("b", True)):
        b = ExportBuilder("2026.2")
        b.push_pop(0, 1_000, "forward")
        b.kernel(100, 300, "ampere_sgemm_128x64_tn", launch_at=50)
        b.kernel(400, 500, "ampere_sgemm_128x64_tn")  # launched by no recorded call
        if bad:
            b.kernel(600, 550, "ampere_sgemm_128x64_tn", launch_at=60)  # ends before it starts
        paths.append(b.write(tmp_path / f"{name}.sqlite"))
    result = cli("diff", *paths, "--format", "csv")
    assert result.exit_code == 0, result.output
    notes = [line for line in result.stderr.splitlines() if line.startswith("note: ")]
    # the verdict first; then the notes both give word for word once, for A and B; B's own is B's
    assert notes[0].startswith("note: B is ")
    assert notes[1] == (
        "note: A and B: phases found by their range names: forward = 'forward'; no backward, "
        "optimizer (name others with --phases)"
    )
    assert notes[2].startswith("note: A and B: 1 of 2 GPU operations have no recorded launching call")
    assert notes[3].startswith("note: B: 1 gpu_ops row of")
    assert len(notes) == 4
