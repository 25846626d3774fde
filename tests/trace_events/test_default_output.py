"""`tracekit timeline TRACES` without -o: the first trace's name in the current folder, .pftrace past 100,000
GPU ops (the first trace's, times the traces), else .json.gz; an existing file is never written over."""

from __future__ import annotations

import gzip
import json

from tracekit.trace_events import output_names
from tracekit.trace_events.output_names import default_output

from .test_timeline import two_steps


def _export(tmp_path, name: str):
    (tmp_path / "in").mkdir()
    return two_steps(tmp_path / "in" / name)


def test_a_small_trace_becomes_gzip_json_beside_where_it_runs(cli, tmp_path, monkeypatch):
    export = _export(tmp_path, "steps_nsys2026.2.sqlite")
    monkeypatch.chdir(tmp_path)
    result = cli("timeline", export)
    assert result.exit_code == 0, result.output
    written = tmp_path / "steps_nsys2026.2.json.gz"
    assert f"timeline: {written.name} " in result.stderr
    events = json.loads(gzip.decompress(written.read_bytes()))["traceEvents"]
    assert sum(event.get("cat") == "kernel" for event in events) == 5


def test_past_the_threshold_it_is_the_protobuf_format(cli, tmp_path, monkeypatch):
    export = _export(tmp_path, "steps.sqlite")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(output_names, "PROTOBUF_ABOVE", 4)  # the export has 6 GPU ops
    result = cli("timeline", export)
    assert result.exit_code == 0, result.output
    assert (tmp_path / "steps.pftrace").read_bytes()[:1] == b"\n"  # a Trace's first packet (field 1)
    assert not (tmp_path / "steps.json.gz").exists()


def test_an_existing_file_is_not_written_over(cli, tmp_path, monkeypatch):
    export = _export(tmp_path, "steps.sqlite")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "steps.json.gz").write_text("mine")
    result = cli("timeline", export)
    assert result.exit_code != 0 and "steps.json.gz exists: name the timeline's file with -o" in result.output
    assert (tmp_path / "steps.json.gz").read_text() == "mine"


def test_the_name_drops_every_trace_suffix():
    assert default_output("rank3.pt.trace.json.gz", 10).name == "rank3.json.gz"
    assert default_output("job/run_1", 200_000).name == "run_1.pftrace"
    assert default_output("a.nsys-rep", 100_001).name == "a.pftrace"
