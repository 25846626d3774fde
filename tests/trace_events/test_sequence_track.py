"""The kernel sequences a trace repeats as timeline tracks (`tracekit timeline --sequences N`): a track per GPU
and sequence, a slice per occurrence (overlapping occurrences drawn once), named tracks, the window kept, and
the file still read back as the same trace."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers.sequence_trace import windows_trace

import tracekit
from tracekit.model.options import OptionError
from tracekit.trace_events.sequence_track import FIRST_TID
from tracekit.trace_events.tracks import GPU_BASE


def sequence_events(path):
    events = json.loads(Path(path).read_text())["traceEvents"]
    slices = [event for event in events if event.get("cat") == "tracekit_sequence"]
    names = {
        event["tid"]: event["args"]["name"]
        for event in events
        if event.get("ph") == "M" and event["name"] == "thread_name" and FIRST_TID - 20 <= event["tid"] <= FIRST_TID
    }
    return slices, names


def test_a_track_per_sequence_and_gpu(tmp_path):
    out = tmp_path / "timeline.json"
    tracekit.timeline(windows_trace(tmp_path), out, sequences=2)
    slices, names = sequence_events(out)
    # A B C: on stream 7 at 100, 145 and 200 µs, on stream 8 at 100: the same GPU, drawn where free
    assert [(event["ts"], event["dur"]) for event in slices] == [(100, 40), (145, 40), (200, 40)]
    assert {event["pid"] for event in slices} == {GPU_BASE} and {event["tid"] for event in slices} == {FIRST_TID}
    assert names[FIRST_TID] == "#1 A -> B -> C" and len(names) == 1  # the others are seen once
    assert "A -> B -> C" in slices[0]["name"]
    # the window keeps the occurrences it holds; the file reads back as the same trace
    tracekit.timeline(windows_trace(tmp_path), out, sequences=2, start_ms=0.19, end_ms=0.25)
    assert [event["ts"] for event in sequence_events(out)[0]] == [200]
    tracekit.timeline(windows_trace(tmp_path), out, sequences=2)
    again = tracekit.open_trace(out)
    assert len(again.gpu_ops) == len(tracekit.open_trace(windows_trace(tmp_path)).gpu_ops)


def test_without_the_option_no_track(tmp_path):
    out = tmp_path / "timeline.json"
    tracekit.timeline(windows_trace(tmp_path), out)
    assert sequence_events(out) == ([], {})


@pytest.mark.parametrize("count", [-1, 21, 1.5])
def test_a_bad_count_is_refused(tmp_path, count):
    with pytest.raises(OptionError, match="kernel sequences get a track"):
        tracekit.timeline(windows_trace(tmp_path), tmp_path / "t.json", sequences=count)
    assert not (tmp_path / "t.json").exists()


def test_no_repeating_sequence_and_no_launch_calls(tmp_path):
    from helpers.kineto_builder import KinetoBuilder

    b = KinetoBuilder()
    for correlation, (name, start) in enumerate((("A", 100), ("B", 120), ("C", 140)), start=1):
        b.kernel(name, start, 10, correlation=correlation)  # no launching call recorded
    out = tmp_path / "timeline.json"
    tracekit.timeline(b.write(tmp_path / "once.json"), out, sequences=3)
    assert sequence_events(out) == ([], {})
    assert len(tracekit.open_trace(out).gpu_ops) == 3
