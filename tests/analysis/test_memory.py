"""Memory snapshots: safe loading, replay against an independent one, peaks, holders, pictures."""

import json
import os
import pickle

import numpy as np
import pytest
from helpers.snapshot_builder import SnapshotBuilder, stack

import tracekit
from tracekit.analysis.memory.replay import replay
from tracekit.analysis.memory.tables import compare, holders_at_peak, largest_at_peak, memory_summary, phases
from tracekit.commands.command_line import flag_name
from tracekit.errors import SnapshotError
from tracekit.render.tables import table_text
from tracekit.session import Session
from tracekit.sources.snapshot.reader import load_snapshot

MIB = 2**20
WEIGHTS = stack("model/init.py:10 build")
ACTIVATION = stack("model/layers.py:39 forward", "train.py:5 main")
SCORES = stack("model/attention.py:12 softmax", "model/layers.py:41 forward")


def independent_replay(path):
    """A few lines, separate from tracekit: what was live before the trace, the peak with it, the peak
    of traced allocations alone, and the largest allocation live at the peak."""

    class Data(pickle.Unpickler):
        def find_class(self, module, name):
            raise pickle.UnpicklingError(name)

    data = Data(open(path, "rb")).load()
    events = data["device_traces"][0]
    open_at_end = {}  # traced allocations never freed: their blocks count at the traced (requested) size
    for e in events:
        if e["action"] == "alloc":
            open_at_end[e["addr"]] = e["size"]
        elif e["action"] == "free_completed":
            open_at_end.pop(e["addr"], None)
    active_end = sum(
        open_at_end.get(b["address"], b["size"])
        for s in data["segments"]
        for b in s["blocks"]
        if b["state"].startswith("active")
    )
    net = sum(
        e["size"] if e["action"] == "alloc" else -e["size"]
        for e in events
        if e["action"] in ("alloc", "free_completed")
    )
    current = peak = start = active_end - net
    traced, traced_total, traced_peak, peak_at = {}, 0, 0, -1
    for index, e in enumerate(events):
        if e["action"] == "alloc":
            current += e["size"]
            traced[e["addr"]] = e["size"]
            traced_total += e["size"]
        elif e["action"] == "free_completed":
            current -= e["size"]
            traced_total -= traced.pop(e["addr"], 0)
        traced_peak = max(traced_peak, traced_total)
        if current > peak:
            peak, peak_at = current, index
    live = {}
    for e in events[: peak_at + 1]:  # replay to the peak: traced allocations live then
        if e["action"] == "alloc":
            live[e["addr"]] = e["size"]
        elif e["action"] == "free_completed":
            live.pop(e["addr"], None)
    later_frees, allocated_in_trace = [], set()  # frees after the peak of allocations made before the trace
    for index, e in enumerate(events):
        if e["action"] == "alloc":
            allocated_in_trace.add(e["addr"])
        elif e["action"] == "free_completed" and e["addr"] not in allocated_in_trace and index > peak_at:
            later_frees.append(e["size"])
    throughout = [
        b["size"]
        for s in data["segments"]
        for b in s["blocks"]  # active before and after the trace
        if b["state"].startswith("active") and b["address"] not in open_at_end
    ]
    largest = max(list(live.values()) + later_frees + throughout + [0])
    return start, peak, traced_peak, largest


@pytest.mark.parametrize(
    "name", ["cs336_medium_ctx128_train_step", "cs336_medium_ctx512_train_step", "cs336_medium_ctx512_forward"]
)
def test_real_snapshots_match_an_independent_replay(shared_memory, name):
    path = shared_memory / f"{name}.pickle"
    start, peak, traced_peak, largest = independent_replay(path)
    trace = load_snapshot(path)
    memory = replay(trace)
    assert memory.timeline["allocated"].iloc[0] == start > 0
    assert memory.peak_allocated == peak
    assert memory.timeline["allocated_in_trace"].max() == traced_peak
    assert memory.live_at_peak["size"].sum() == peak  # what is live at the peak adds up to it
    assert largest_at_peak(trace, memory, 1)["Size (MiB)"].iloc[0] * MIB == largest


def test_train_step_holders_and_phases(shared_memory):
    trace = load_snapshot(shared_memory / "cs336_medium_ctx512_train_step.pickle")
    memory = replay(trace)
    holders = holders_at_peak(trace, memory).set_index("Frame")
    assert holders.index[0] == "(allocated before the trace began)"
    assert "cs336_basics/nn_utils.py:6 softmax" in holders.index  # attention's softmax holds memory at the peak
    assert holders["Total (MiB)"].sum() * MIB == pytest.approx(memory.peak_allocated)
    assert phases(trace, memory)["Phase"].tolist() == ["Optimizer.step#AdamW.step"]
    table = largest_at_peak(trace, memory, None)
    assert (table["Frame"] != "(no stack recorded)").all()


def test_known_snapshot(tmp_path):
    b = SnapshotBuilder()
    b.alloc(0x2000, 4 * MIB, 100, ACTIVATION)  # index 0
    b.segment_event("segment_alloc", 0x9000, 20 * MIB, 150)
    b.alloc(0x3000, 8 * MIB, 200, SCORES)  # index 2: peak here (1 + 4 + 8 MiB + 2 MiB early)
    b.free(0x3000, 8 * MIB, 300)  # 3, 4
    b.free(0x1000, 2 * MIB, 400)  # 5, 6: allocated before the trace began
    b.alloc(0x4000, 1 * MIB, 500, ACTIVATION)  # 7
    b.segment(
        0x0,
        20 * MIB,
        [
            (0x0, MIB, "active_allocated", WEIGHTS),
            (0x2000, 4 * MIB, "active_allocated"),
            (0x4000, MIB, "active_pending_free"),
            (0x5000, 6 * MIB, "inactive"),
        ],
    )
    b.segment(0x9000, 20 * MIB, [(0x9000, 20 * MIB, "inactive")])
    b.annotate("Optimizer.step#AdamW.step", 350, 450)
    trace = load_snapshot(b.dump(tmp_path / "s.pickle"))
    memory = replay(trace)
    timeline = memory.timeline.set_index("index")
    # active at snapshot: 1 + 4 + 1 = 6 MiB; trace net: +4 +8 -8 -2 +1 = +3 MiB; so 3 MiB before the trace
    assert timeline.loc[-1, "allocated"] == 3 * MIB
    assert memory.peak_allocated == 15 * MIB and memory.peak_index == 2
    assert timeline["allocated_in_trace"].max() == 12 * MIB
    assert timeline.loc[-1, "reserved"] == 20 * MIB and timeline["reserved"].max() == 40 * MIB
    assert timeline.loc[2, "x"] == pytest.approx(0.1)  # ms after the first event
    table = largest_at_peak(trace, memory, None)
    assert table["Size (MiB)"].tolist() == [8, 4, 2, 1]
    assert table["Frame"].tolist() == [
        "model/attention.py:12 softmax",
        "model/layers.py:39 forward",
        "(allocated before the trace began)",
        "model/init.py:10 build",
    ]
    assert table["Freed At (ms)"].tolist()[0] == pytest.approx(0.2)
    holders = holders_at_peak(trace, memory)
    assert holders["Share (%)"].tolist() == pytest.approx([800 / 15, 400 / 15, 200 / 15, 100 / 15])
    assert phases(trace, memory).values.tolist() == [["Optimizer.step#AdamW.step", 0.25, 0.35]]


def test_the_two_before_trace_figures_say_what_they_are(tmp_path):
    """The summary said "allocated before the trace began" 52,129.6 MiB and the holders table 39,133.65
    under the same label: one is all of it when the trace began, the other what was still live at the
    peak. Built: 3 MiB from before the trace, 2 of it freed before the peak."""
    b = SnapshotBuilder()
    b.free(0x1000, 2 * MIB, 50)  # made before the trace, freed in it
    b.alloc(0x3000, 8 * MIB, 100, SCORES)  # the peak: 1 + 8 MiB
    b.segment(0x0, 20 * MIB, [(0x0, MIB, "active_allocated"), (0x3000, 8 * MIB, "active_allocated")])
    summary = memory_summary(load_snapshot(b.dump(tmp_path / "s.pickle")), by="frame", timeline=False)
    facts = dict(zip(summary.table("summary")["Quantity"], summary.table("summary")["Value"]))
    assert facts["allocated when the trace began (MiB)"] == 3 and facts["of it still live at the peak (MiB)"] == 1
    holders = summary.table("holders").set_index("Frame")
    assert (
        holders.loc["(allocated before the trace began)", "Total (MiB)"] == facts["of it still live at the peak (MiB)"]
    )


def test_without_timestamps_several_devices_and_empty_trace(tmp_path):
    b = SnapshotBuilder(with_time=False, devices=2)
    b.alloc(0x10, 2 * MIB, 0, ACTIVATION, device=0)
    b.alloc(0x20, 5 * MIB, 0, SCORES, device=1)
    b.free(0x20, 5 * MIB, 0, device=1)
    b.segment(0x10, 2 * MIB, [(0x10, 2 * MIB, "active_allocated")], device=0)
    trace = load_snapshot(b.dump(tmp_path / "devices.pickle"))
    memory = replay(trace)
    assert memory.device == 1 and memory.peak_allocated == 5 * MIB and not memory.has_time
    assert memory.timeline["x"].tolist() == [-1.0, 0.0, 1.0, 2.0]  # event index stands in for time
    assert replay(trace, device=0).peak_allocated == 2 * MIB
    events = largest_at_peak(trace, replay(trace, device=0))  # the 2 MiB block, allocated at event 0, live
    assert events["Allocated At (event)"].tolist() == [0] and str(events["Allocated At (event)"].dtype) == "Int64"
    assert events["Freed At (event)"].isna().all()  # whole numbers, blank where none: not 0.0 / NaN
    empty = SnapshotBuilder()
    empty.traces = [[]]
    empty.segment(0x0, 4 * MIB, [(0x0, 3 * MIB, "active_allocated", WEIGHTS)])
    state_only = load_snapshot(empty.dump(tmp_path / "empty.pickle"))
    memory = replay(state_only)
    assert memory.peak_allocated == 3 * MIB and len(memory.timeline) == 1
    assert holders_at_peak(state_only, memory)["Frame"].tolist() == ["model/init.py:10 build"]


class Exploit:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_malicious_pickle_runs_nothing(tmp_path, cli):
    marker = tmp_path / "pwned"
    path = tmp_path / "evil.pickle"
    path.write_bytes(pickle.dumps({"segments": [], "device_traces": [[Exploit(marker)]]}))
    with pytest.raises(SnapshotError, match=r"asks to load the Python object (posix|os)\.system"):
        load_snapshot(path)
    result = cli("memory", path)
    assert result.exit_code == 1 and "refused without running anything" in result.output
    assert not marker.exists()


@pytest.mark.parametrize(
    "content,message",
    [
        (pickle.dumps({"segments": [], "device_traces": [[]]})[:-5], "truncated"),
        (pickle.dumps([{"address": 0}]), "pickle of a list"),
        (pickle.dumps({"segments": []}), "no allocation history"),
        (pickle.dumps({"hello": 1}), "without 'segments'"),
        (b"not a pickle at all", "not a readable pickle"),
        (b"\x8d" + (2**63).to_bytes(8, "little"), "not a readable pickle"),  # a string longer than memory can be
    ],
)
def test_bad_files(tmp_path, cli, content, message):
    path = tmp_path / "bad.pickle"
    path.write_bytes(content)
    with pytest.raises(SnapshotError, match=message):
        load_snapshot(path)
    result = cli("memory", path)
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert result.exit_code == 1 and len(lines) == 1 and message in lines[0]


def test_cli_plot_compare_and_run_folder(cli, tmp_path, shared_memory):
    import matplotlib.image

    forward = shared_memory / "cs336_medium_ctx512_forward.pickle"
    picture = tmp_path / "timeline.png"
    result = cli("memory", forward, "--plot", picture, "--top", "3", "--format", "json")
    assert result.exit_code == 0, result.output
    tables = json.loads(result.output[: result.output.rindex("}") + 1])
    rows = tables["allocations"]
    assert len(rows) == 3 and rows[0]["Size (MiB)"] == 64.0
    summary = {row["Quantity"]: row["Value"] for row in tables["summary"]}  # json keeps the summary too
    assert summary["device"] == "cuda:0" and summary["peak allocated (MiB)"] == pytest.approx(1860.9, abs=0.05)
    pixels = matplotlib.image.imread(picture)
    assert pixels.shape[0] >= 500 and pixels.shape[1] >= 1000 and pixels.std() > 0.05
    run = tmp_path / "run"
    run.mkdir()
    (run / "memory.pickle").write_bytes(forward.read_bytes())
    by_frame = cli("memory", run, "--by", "frame", "--format", "csv")
    assert "(allocated before the trace began)" in by_frame.output
    empty_run = tmp_path / "cpu-run"
    empty_run.mkdir()
    not_a_run = cli("memory", empty_run)
    assert not_a_run.exit_code == 1 and "not a tracekit run folder" in not_a_run.output
    (empty_run / "run.json").write_text('{"status": "complete"}')
    missing = cli("memory", empty_run)
    assert missing.exit_code == 1 and "snapshots need CUDA" in missing.output
    table = compare(load_snapshot(forward), load_snapshot(shared_memory / "cs336_medium_ctx512_train_step.pickle"))
    peak = table.set_index("Holder").loc["(peak allocated)"]
    assert peak["Delta (MiB)"] == pytest.approx(peak["B (MiB)"] - peak["A (MiB)"]) and peak["Delta (MiB)"] > 9000
    assert np.isfinite(peak["Ratio"])


def test_the_summary_says_which_device_it_shows_and_the_out_of_memory_errors(tmp_path):
    b = SnapshotBuilder(with_time=False, devices=2)
    b.alloc(0x10, 2 * MIB, 0, ACTIVATION, device=0)
    b.alloc(0x20, 5 * MIB, 0, SCORES, device=1)
    b._event(1, "oom", 0, 64 * MIB, 0, [])  # the allocation that failed: never given memory
    trace = load_snapshot(b.dump(tmp_path / "oom.pickle"))
    notes = memory_summary(trace, timeline=False).notes
    # the library names the option by its parameter; the command line, by its flag
    assert (
        "the snapshot traces 2 devices: cuda:1 has the highest peak and is shown; device N shows another (cuda:0)"
        in notes
    )
    with Session(option_name=flag_name):
        assert any("; --device N shows another (cuda:0)" in note for note in memory_summary(trace).notes)
    oom = [note for note in notes if "out-of-memory" in note]
    assert oom == [
        "the snapshot records 1 out-of-memory error (cuda:1 at event 1, asking for 64.0 MiB); the failed "
        "allocation is in no table: it never got memory"
    ]
    asked = memory_summary(trace, device=0, timeline=False).notes  # a device asked for: nothing to explain
    assert not any("highest peak" in note for note in asked) and len([n for n in asked if "out-of-memory" in n]) == 1


def test_a_comparison_lists_what_changed_to_one_precision(tmp_path):
    traces = []
    for name, scores in (("a", 3 * MIB), ("b", 3 * MIB + 100 * 1024 + 7)):
        b = SnapshotBuilder()
        b.alloc(0x10, 2 * MIB, 0, ACTIVATION)  # the same in both: not listed
        b.alloc(0x900000, scores, 1, SCORES)  # 100 KiB and 7 bytes more in B
        traces.append(load_snapshot(b.dump(tmp_path / f"{name}.pickle")))
    table = compare(*traces)
    assert table["Holder"].tolist() == ["(peak allocated)", "model/attention.py:12 softmax"]
    delta = (100 * 1024 + 7) / MIB  # unrounded; the table output shows sizes to the KiB
    assert table["Delta (MiB)"].tolist() == pytest.approx([delta, delta]) and table["B (MiB)"].tolist()[1] == 3 + delta
    assert "0.098" in table_text(table, "table") and "3.098" in table_text(table, "table")


def test_a_comparison_shows_top_holders(tmp_path):
    """`memory A B --compare --top 5` printed every holder that changed (35 rows)."""
    paths = []
    for name, grow in (("a", 0), ("b", 1)):
        b = SnapshotBuilder()
        for index in range(12):  # 12 holders, each a different line, growing by index KiB in B
            b.alloc(
                0x100000 * (index + 1),
                MIB + grow * index * 1024,
                index,
                [{"filename": "model/net.py", "line": 10 + index, "name": "forward"}],
            )
        paths.append(b.dump(tmp_path / f"{name}.pickle"))
    result = tracekit.memory(paths, compare=True, top=5)
    assert result.frame["Holder"].tolist() == ["(peak allocated)"] + [
        f"model/net.py:{10 + i} forward" for i in (11, 10, 9, 8, 7)
    ]
    assert any("the 5 of 11 holders that changed most" in note for note in result.notes)


def test_a_frame_that_is_not_a_dict_reads_as_unknown(tmp_path, cli):
    """One flipped bit can make a frame a string: --by role ended in AttributeError ('str' has no .get)."""
    b = SnapshotBuilder()
    b.alloc(0x2000, 4 * MIB, 100, [*ACTIVATION[:1], "forward", 7])  # type: ignore[list-item]  # not frames
    b.alloc(0x3000, 2 * MIB, 200, ACTIVATION)
    b.segment(0x0, 20 * MIB, [(0x2000, 4 * MIB, "active_allocated"), (0x3000, 2 * MIB, "active_allocated")])
    path = b.dump(tmp_path / "flipped.pickle")
    for view in ("allocation", "frame", "role"):
        result = cli("memory", path, "--by", view)
        assert result.exit_code == 0 and "Traceback" not in result.output, (view, result.output)
    stacks = load_snapshot(path).stacks
    assert any(frame == {"filename": "?", "line": 0, "name": "?"} for stack in stacks for frame in stack)
