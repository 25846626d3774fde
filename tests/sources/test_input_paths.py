"""Which files the inputs are: a folder's traces and runs, globs, each input once; labels and ranks
from names."""

from __future__ import annotations

from helpers.nsys_builder import ExportBuilder

from tracekit.sources.input_paths import expand_inputs, input_labels, rank_in_name


def export(path, kernels: list[tuple[int, int, str]]):
    b = ExportBuilder("2026.2")
    for start, end, name in kernels:
        b.kernel(start, end, name, launch_at=start - 10)
    return b.write(path)


def test_a_folder_names_its_traces_and_runs(tmp_path):
    export(tmp_path / "a.sqlite", [(100, 200, "k")])
    (tmp_path / "a.nsys-rep").write_bytes(b"report")  # its export is beside it: the same capture, once
    (tmp_path / "b.nsys-rep").write_bytes(b"report")  # no export beside it: an input (exported when read)
    (tmp_path / "a.sqlite.tracekit-cache").mkdir()  # tracekit's cache, not an input
    (tmp_path / "notes.txt").write_text("x")
    run = tmp_path / "run1"
    run.mkdir()
    export(run / "trace.sqlite", [(100, 300, "k")])
    (tmp_path / "other").mkdir()  # a folder that is not a run
    assert [path.name for path in expand_inputs([str(tmp_path)])] == ["a.sqlite", "b.nsys-rep", "run1"]
    assert [path.name for path in expand_inputs([str(tmp_path / "*.sqlite"), str(tmp_path / "a.sqlite")])] == [
        "a.sqlite"
    ]


def test_labels_and_ranks_from_names(tmp_path):
    paths = [
        tmp_path / "x" / "trace.pt.trace.json.gz",
        tmp_path / "y" / "trace.pt.trace.json.gz",
        tmp_path / "r.sqlite",
    ]
    assert input_labels(paths) == ["x/trace", "y/trace", "r"]
    assert [rank_in_name(name) for name in ("job_rank3", "rank-12", "RANK_0.x", "franky", "rank", "ranked7")] == [
        3,
        12,
        0,
        None,
        None,
        None,
    ]
