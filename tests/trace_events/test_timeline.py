"""`tracekit timeline`: a Chrome trace-event file with exact times, every track, windows and several
inputs; read back by tracekit's own torch.profiler reader it gives the source's kernel and range tables
(every real trace in ../shared), and HolisticTraceAnalysis loads it."""

from __future__ import annotations

import gzip
import json
import os
from collections import Counter
from pathlib import Path

import pandas as pd
import pytest
from helpers.nsys_builder import ExportBuilder
from helpers.paths import SHARED
from helpers.snapshot_builder import SnapshotBuilder, stack

import tracekit
from tracekit.analysis.waits.idle import idle_gaps
from tracekit.trace_events.tracks import GPU_BASE, IDLE_TID
from tracekit.trace_events.writer import Written
from tracekit.trace_events.writer import timeline as write_timeline

GEMM = "ampere_sgemm_128x64_tn"
ADD = "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>()"


def two_steps(path, pid: int = 100):
    """Two steps of 10 µs; each launches a GEMM of 1,234 ns (start at an odd ns) and an add, and copies
    4 KiB; a range "forward" in each; one kernel with no launching call."""
    b = ExportBuilder("2026.2")
    for base in (1_000_000, 1_010_000):
        b.push_pop(base, base + 10_000, "step", pid=pid, tid=pid)
        b.push_pop(base + 100, base + 5_000, "forward", pid=pid, tid=pid)
        b.kernel(base + 1_001, base + 2_235, GEMM, launch_at=base + 200, pid=pid, tid=pid)
        b.kernel(base + 3_000, base + 3_500, ADD, launch_at=base + 300, pid=pid, tid=pid)
        b.memcpy(base + 6_000, base + 6_400, copy_kind=1, size=4096, launch_at=base + 5_900, pid=pid)
    b.kernel(1_030_000, 1_030_100, ADD, pid=pid)  # no launching call
    return b.write(path)


def events_of(path) -> list[dict]:
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt") as handle:
        return json.load(handle)["traceEvents"]


@pytest.fixture
def export(tmp_path):
    return two_steps(tmp_path / "steps.sqlite")


def test_every_track_with_exact_times(export, tmp_path):
    out = tracekit.timeline(export, tmp_path / "t.json")
    text = out.read_text()
    assert '"ts":1001.001,"dur":1.234' in text  # 1,001,001 ns and 1,234 ns, written from the integers
    events = events_of(out)
    by_cat = Counter(event.get("cat", event["ph"]) for event in events)
    assert by_cat["kernel"] == 5 and by_cat["gpu_memcpy"] == 2 and by_cat["cuda_runtime"] == 6
    assert by_cat["user_annotation"] == 4 and by_cat["tracekit_step"] == 2
    gemm = next(event for event in events if event.get("name") == GEMM)
    assert gemm["pid"] == GPU_BASE and gemm["tid"] == 7 and gemm["args"]["category"] == "matmul"
    assert gemm["args"]["device"] == 0 and gemm["args"]["stream"] == 7
    call = next(
        e for e in events if e.get("cat") == "cuda_runtime" and e["args"]["correlation"] == gemm["args"]["correlation"]
    )
    assert (call["pid"], call["tid"], call["ts"]) == (100, 100, 1000.2)
    # an arrow from the call to the op: flow start on the call's thread at its start, end on the stream
    flows = {
        event["ph"]: event
        for event in events
        if event.get("cat") == "ac2g" and event["id"] == gemm["args"]["correlation"]
    }
    assert (flows["s"]["pid"], flows["s"]["tid"], flows["s"]["ts"]) == (100, 100, 1000.2)
    assert (flows["f"]["pid"], flows["f"]["tid"], flows["f"]["ts"], flows["f"]["bp"]) == (GPU_BASE, 7, 1001.001, "e")
    assert by_cat["ac2g"] == 2 * 6  # every op with its call: not the one launched from nowhere
    # an op launched from nowhere has no correlation: absent, never -1 (readers read absent as not recorded)
    orphan = [e for e in events if e.get("cat") == "kernel" and "correlation" not in e["args"]]
    assert len(orphan) == 1 and orphan[0]["ts"] == 1030.0
    assert not [e for e in events if e["ph"] == "X" and -1 in e.get("args", {}).values()]
    # idle gaps: idle's, one event each, on the GPU's idle track
    gaps = [event for event in events if event.get("cat") == "tracekit_idle"]
    expected = idle_gaps(tracekit.open_trace(export))
    assert [(g["ts"], g["dur"], g["name"]) for g in gaps] == [
        (start / 1000, idle / 1000, cause)
        for start, idle, cause in zip(expected["Start (ns)"], expected["Idle (ns)"], expected["Cause"])
    ]
    assert {(g["pid"], g["tid"]) for g in gaps} == {(GPU_BASE, IDLE_TID)}
    names = {(e["pid"], e.get("tid"), e["args"]["name"]) for e in events if e["ph"] == "M" and "name" in e["args"]}
    assert (GPU_BASE, None, "GPU 0") in names and (GPU_BASE, 7, "stream 7") in names
    assert (100, None, "process 100") in names and (GPU_BASE, IDLE_TID, "idle (by cause)") in names


def test_read_back_it_is_the_same_trace(export, tmp_path):
    out = tracekit.timeline(export, tmp_path / "t.json.gz")
    assert_same_tables(tracekit.open_trace(export), tracekit.open_trace(out))


@pytest.mark.parametrize(
    ("window", "gemms"),
    [
        ({"step": 2}, [1_011_001]),
        ({"start_ms": 0, "end_ms": 0.005}, [1_001_001]),
        ({"range": "forward", "instance": 1}, [1_011_001]),
        ({}, [1_001_001, 1_011_001]),
    ],
)
def test_a_window_keeps_what_overlaps_it(export, tmp_path, window, gemms):
    events = events_of(tracekit.timeline(export, tmp_path / "w.json", **window))
    assert [round(e["ts"] * 1000) for e in events if e.get("name") == GEMM] == gemms
    steps = [e for e in events if e.get("cat") == "tracekit_step"]
    assert len(steps) == (1 if window.get("step") or window.get("range") else 2 if not window else 1)


def test_several_ranks_are_process_groups(tmp_path):
    paths = [two_steps(tmp_path / f"job_rank{rank}.sqlite") for rank in (0, 1)]
    events = events_of(tracekit.timeline(paths, tmp_path / "job.json"))
    processes = {e["pid"]: e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "process_name"}
    assert "rank 0 · GPU 0" in processes.values() and "rank 1 · GPU 0" in processes.values()
    assert "rank 0 · process 100" in processes.values() and "rank 1 · process 100" in processes.values()
    kernels = [e for e in events if e.get("cat") == "kernel"]
    assert len(kernels) == 10 and len({e["pid"] for e in kernels}) == 2
    ids = [e["args"]["correlation"] for e in kernels if "correlation" in e["args"]]
    assert len(ids) == len(set(ids)) == 8  # unique across ranks: each op pairs with its own rank's call


def test_gzip_holds_the_same_events(export, tmp_path):
    assert events_of(tracekit.timeline(export, tmp_path / "t.json.gz")) == events_of(
        tracekit.timeline(export, tmp_path / "t.json")
    )


def test_bad_requests_are_one_line_and_write_nothing(cli, export, tmp_path):
    for args, message in (
        (["-o", tmp_path / "t.txt"], "must end in .pftrace, .perfetto-trace, .json or .json.gz"),
        (["-o", tmp_path / "t.json", "--step", "3"], "has 2 training steps"),
        (["-o", tmp_path / "t.json", "--range", "backward"], "no NVTX range matches backward"),
        (["-o", tmp_path / "t.json", "--start", "2", "--end", "1"], "--end (1.0) must come after --start (2.0)"),
        (["-o", tmp_path / "t.json", "--step", "1", "--range", "forward"], "give one window"),
    ):
        result = cli("timeline", export, *args)
        assert result.exit_code in (1, 2) and message in result.output, (args, result.output)
        assert "Traceback" not in result.output
    assert sorted(os.listdir(tmp_path)) == ["steps.sqlite"]  # nothing written, not even a temporary file
    onto_input = cli("timeline", export, "-o", export.with_suffix(".json"))
    assert onto_input.exit_code == 0
    again = cli("timeline", export.with_suffix(".json"), "-o", export.with_suffix(".json"))
    assert again.exit_code == 1 and "is an input of this command" in again.output


def test_the_command_says_what_it_wrote(cli, export, tmp_path):
    result = cli("timeline", export, "-o", tmp_path / "t.json")
    assert result.exit_code == 0 and result.stdout == ""
    assert f"timeline: {tmp_path / 't.json'}" in result.stderr and "5 gpu ops" not in result.stderr
    assert "7 gpu ops" in result.stderr and "12 flows" in result.stderr
    size = (tmp_path / "t.json").stat().st_size
    assert size < 2**20 and f"({size / 2**10:,.1f} KiB; " in result.stderr  # it said "0.0 MiB"


def test_written_sizes_read_in_their_unit():
    texts = [Written(Path("t.json"), size=size).summary() for size in (512, 5 * 2**10, 3 * 2**20 + 2**19, 2**30)]
    assert [text.split("(")[1].split(";")[0] for text in texts] == ["512 B", "5.0 KiB", "3.5 MiB", "1,024.0 MiB"]


def assert_same_tables(source, back) -> None:
    """The kernel table and the range tables (every domain) of ``back`` equal ``source``'s."""
    pd.testing.assert_frame_equal(tracekit.kernels(source)["kernels"], tracekit.kernels(back)["kernels"])
    domains = [None] + (["cpu_op", "gpu"] if source.meta.tool == "torch.profiler" else [])
    for domain in domains:
        try:
            expected = tracekit.ranges(source, domain=domain)["ranges"]
        except tracekit.TracekitError:  # no ranges (of that domain): none back either
            with pytest.raises(tracekit.TracekitError):
                tracekit.ranges(back, domain=domain)
            continue
        got = tracekit.ranges(back, domain=domain)["ranges"]
        pd.testing.assert_frame_equal(_ordered(expected), _ordered(got), check_dtype=False)


def _ordered(frame: pd.DataFrame) -> pd.DataFrame:
    return frame.sort_values(["Range", "Style"], kind="stable").reset_index(drop=True)


REAL = (
    sorted((SHARED / "traces").glob("*.sqlite"))
    + sorted((SHARED / "kineto").glob("*.json.gz"))
    + [SHARED / "kineto" / "v100_dlrm_8ranks" / "rank0.pt.trace.json"]
)


@pytest.mark.shared
@pytest.mark.parametrize("path", REAL, ids=lambda path: path.name)
def test_every_real_trace_reads_back_the_same(path, tmp_path):
    if not path.exists():
        pytest.skip(f"{path} is absent")
    source = tracekit.open_trace(path)
    assert_same_tables(source, tracekit.open_trace(tracekit.timeline(source, tmp_path / "back.json.gz")))


@pytest.mark.shared
def test_holistic_trace_analysis_loads_it(tmp_path, monkeypatch):
    """HTA parses the file as a rank's trace: the same kernels, each duration within 1 ns."""
    pytest.importorskip("hta", reason="HolisticTraceAnalysis is not installed (pip install -e '.[parity]')")
    path = SHARED / "traces" / "h100_videogen_2gpu_a_nsys2026.2.sqlite"
    if not path.exists():
        pytest.skip(f"{path} is absent")
    monkeypatch.setenv("HTA_DISABLE_NS_ROUNDING", "1")
    from hta.trace_analysis import TraceAnalysis  # pyright: ignore[reportMissingImports]  (optional: parity extra)

    folder = tmp_path / "job"
    folder.mkdir()
    tracekit.timeline(path, folder / "rank0.json")
    analysis = TraceAnalysis(trace_dir=str(folder))
    frame = analysis.t.get_trace(0)
    symbols = analysis.t.symbol_table.get_sym_table()
    kernels = frame.loc[frame["cat"].map(lambda code: symbols[code]) == "kernel"]
    ours = tracekit.kernels(path)["kernels"]
    assert len(kernels) == ours["Instances"].sum()
    assert abs(int(kernels["dur"].sum()) - int(ours["Total Time (ns)"].sum()) / 1000) <= len(kernels) / 1000


EPOCH_US = 1_763_820_000_000_000  # the built exports' session start (TARGET_INFO_SESSION_START_TIME), in µs
MIB = 2**20


def test_a_snapshot_is_a_memory_counter_on_the_trace_clock(export, tmp_path):
    """A snapshot's events stamped with the wall clock land at the trace's times: allocated and reserved
    MiB after each event, on the GPU's process."""
    snapshot = SnapshotBuilder()
    snapshot.segment_event("segment_alloc", 0x0, 64 * MIB, EPOCH_US + 1_000)  # at 1,000,000 ns on the trace
    snapshot.alloc(0x1000, 3 * MIB, EPOCH_US + 1_005, stack("model.py:3 forward"))
    snapshot.free(0x1000, 3 * MIB, EPOCH_US + 1_020)
    snapshot.segment(0x0, 64 * MIB, [])
    path = snapshot.dump(tmp_path / "memory.pickle")
    events = events_of(tracekit.timeline(export, tmp_path / "t.json", memory=path))
    memory = [e for e in events if e["ph"] == "C" and e["name"] == "memory (MiB)"]
    counters = [(e["ts"], e["args"]["allocated"], e["args"]["reserved"]) for e in memory]
    assert {e["pid"] for e in memory} == {GPU_BASE}
    assert counters[0] == (1000.0, 0.0, 64.0) and (1005.0, 3.0, 64.0) in counters and counters[-1][:2] == (1020.0, 0.0)
    late = SnapshotBuilder()
    late.alloc(0x1000, MIB, EPOCH_US + 10**9, stack("model.py:3 forward"))  # 1,000 s later: another run's
    written = write_timeline([export], tmp_path / "late.json", memory=late.dump(tmp_path / "late.pickle"))
    assert written.events["memory counters"] == 0 and any("do not fall within" in n for n in written.notes)


def test_an_unreadable_input_among_several_is_left_out_and_said(cli, export, tmp_path):
    broken = tmp_path / "broken.sqlite"
    broken.write_bytes(b"SQLite format 3\x00" + b"\x00" * 50)
    result = cli("timeline", export, broken, "-o", tmp_path / "both.json")
    assert result.exit_code == 0, result.output
    assert "left out: broken" in result.stderr and "Traceback" not in result.output
    assert sum(e.get("cat") == "kernel" for e in events_of(tmp_path / "both.json")) == 5
    alone = cli("timeline", broken, "-o", tmp_path / "none.json")
    assert alone.exit_code == 1 and not (tmp_path / "none.json").exists()


def test_a_range_s_window_reaches_the_work_it_launched(tmp_path):
    """A kernel launched inside a range often runs after the range closed: the range's window keeps it
    (and its arrow), as `ranges` counts it for that range."""
    b = ExportBuilder("2026.2")
    b.push_pop(1_000, 2_000, "launch")
    b.kernel(1_500, 1_600, GEMM, launch_at=1_100)
    b.kernel(5_000, 6_000, ADD, launch_at=1_900)  # launched inside, runs 3 µs after the range ends
    b.kernel(9_000, 9_100, GEMM, launch_at=8_000)  # after both
    events = events_of(tracekit.timeline(b.write(tmp_path / "late.sqlite"), tmp_path / "w.json", range="launch"))
    assert sorted(e["name"] for e in events if e.get("cat") == "kernel") == sorted([GEMM, ADD])
    assert sum(e.get("cat") == "ac2g" for e in events) == 4


def test_a_timeline_in_a_folder_of_traces_is_not_read_as_one(cli, tmp_path):
    job = tmp_path / "job"
    job.mkdir()
    for rank in (0, 1):
        two_steps(job / f"rank{rank}.sqlite")
    assert cli("timeline", job, "-o", job / "all.json").exit_code == 0
    again = cli("kernels", job, "--format", "json", "--workers", "1")
    assert again.exit_code == 0, again.output
    assert sum(row["Instances"] for row in json.loads(again.stdout)["kernels"]) == 10  # 5 a rank, not 15
    assert "all.json (a tracekit timeline of other traces)" in again.stderr


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"traces": []}, "give one or more traces"),
        ({"range": 5}, "range is one range spec"),
        ({"instance": 1}, "give range too"),
        ({"start_ms": True}, "start_ms is a time in ms"),
        ({"step": 1.5}, "step counts steps from 1"),
        ({"output": 3}, "output is a file name"),
        ({"memory": 3}, "memory is a snapshot's path"),
    ],
)
def test_the_api_refuses_what_it_cannot_use(export, tmp_path, arguments, message):
    given = {"traces": export, "output": tmp_path / "t.json", **arguments}
    with pytest.raises(tracekit.UsageError, match=message):
        tracekit.timeline(given.pop("traces"), given.pop("output"), **given)
    assert not (tmp_path / "t.json").exists()
