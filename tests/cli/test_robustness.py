"""Hostile and careless use: nothing an input names is overwritten, nothing outside the output folder
is touched, and every failure is one line with a non-zero exit, never a traceback."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from pathlib import Path

import pytest
from helpers.nsys_builder import ExportBuilder, without_not_null
from helpers.snapshot_builder import SnapshotBuilder

from tracekit import runs

GEMM = "ampere_sgemm_128x64_tn"
MIB = 2**20


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def one_line_error(result, *fragments: str) -> str:
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert result.exit_code != 0 and len(lines) == 1 and "Traceback" not in result.output, result.output
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    return lines[0]


@pytest.fixture
def export(tmp_path) -> Path:
    b = ExportBuilder("2026.2")
    b.push_pop(0, 1_000, "step")
    b.kernel(100, 200, GEMM, launch_at=10)
    return b.write(tmp_path / "in.sqlite")


@pytest.mark.parametrize(
    "args",
    [
        ("kernels", "{export}", "-o", "{export}"),
        ("kernels", "{export}", "--format", "parquet", "-o", "{export}"),
        ("ranges", "{export}", "--format", "csv", "-o", "{link}"),  # through a link to it
        ("ranges", "{export}", "--format", "csv", "-o", "{hard}"),  # another name of the same file
        ("memory", "{snapshot}", "--plot", "{snapshot}"),
        ("memory", "{snapshot}", "--format", "json", "-o", "{snapshot}"),
    ],
)
def test_output_never_overwrites_an_input(cli, export, tmp_path, args):
    b = SnapshotBuilder()
    b.alloc(0x2000, 4 * MIB, 100)
    snapshot = b.dump(tmp_path / "snapshot.png")  # read by content: a .png name is still a snapshot
    link = tmp_path / "link.sqlite"
    link.symlink_to(export)
    hard = tmp_path / "hard.sqlite"
    hard.hardlink_to(export)
    before = {path: digest(path) for path in (export, snapshot)}
    filled = [arg.format(export=export, snapshot=snapshot, link=link, hard=hard) for arg in args]
    one_line_error(cli(*filled), "is an input of this command")
    assert {path: digest(path) for path in (export, snapshot)} == before


ESCAPE = "\x1b[2J\x1b[31mevil\x1b[0m"


@pytest.fixture
def hostile_names(tmp_path) -> Path:
    """Kernel and range names holding terminal escapes, a newline and spreadsheet formulas."""
    b = ExportBuilder("2026.2")
    b.push_pop(0, 1_000, ESCAPE + "_range")
    b.push_pop(2_000, 3_000, "@SUM(1+1)")
    b.kernel(100, 300, ESCAPE + "_kernel", launch_at=10)
    b.kernel(400, 500, '=HYPERLINK("http://evil","x")', launch_at=20)
    b.kernel(600, 650, "+cmd|' /C calc'!A0", launch_at=30)
    b.kernel(2_100, 2_150, "two\nlines", launch_at=2_010)
    return b.write(tmp_path / "hostile.sqlite")


@pytest.mark.parametrize("fmt", ["table", "md", "csv"])
def test_names_are_shown_not_obeyed(cli, hostile_names, tmp_path, fmt):
    """No control character reaches the terminal or a written file; CSV cells that a spreadsheet would
    run start with a quote; JSON and Parquet keep the raw names."""
    for command in ("kernels", "ranges"):
        printed = cli(command, hostile_names, "--format", fmt)
        written = tmp_path / f"{command}.{fmt}"
        assert cli(command, hostile_names, "--format", fmt, "-o", written).exit_code == 0
        for text in (printed.stdout, written.read_text()):
            # shown as an escape (in Markdown, its "[" escaped too: it renders as "\x1b[2J")
            assert "\x1b" not in text and ("\\x1b\\[2J" if fmt == "md" else "\\x1b[2J") in text
            if fmt == "csv":
                cells = [cell for line in text.splitlines() for cell in line.split(",")]
                assert not any(cell.lstrip('"').startswith(("=", "+", "@")) for cell in cells), text
                assert "'=HYPERLINK" in text or command == "ranges"
                assert "'@SUM(1+1)" in text or command == "kernels"
    raw = cli("kernels", hostile_names, "--format", "json").stdout
    import json

    names = {row["Name"] for row in json.loads(raw)}
    assert ESCAPE + "_kernel" in names and '=HYPERLINK("http://evil","x")' in names


def test_report_and_errors_escape_names(cli, hostile_names, tmp_path):
    result = cli("report", hostile_names, "-o", tmp_path / "report")
    assert result.exit_code == 0, result.output
    text = (tmp_path / "report" / "report.md").read_text()
    assert "\x1b" not in text and "\\x1b\\[2J" in text  # Markdown: "\x1b[2J" with its "[" escaped
    error = cli("kernels", hostile_names, "--range", "nothing")  # the hint lists the trace's range names
    assert "\x1b" not in error.output and "\\x1b" in error.output


def test_dollar_signs_in_names_are_text_in_pictures(cli, tmp_path):
    """matplotlib would typeset "$...$" as maths, and fail on "$\\frac{$": names are drawn as text."""
    from helpers.snapshot_builder import stack

    b = SnapshotBuilder()
    b.alloc(0x2000, 4 * MIB, 100, stack("model.py:3 $\\frac{$", "train.py:9 cost_in_$"))
    b.alloc(0x3000, 2 * MIB, 200, stack("model.py:4 $x^2$"))
    snapshot = b.dump(tmp_path / "dollars.pickle")
    picture = tmp_path / "timeline.png"
    result = cli("memory", snapshot, "--plot", picture)
    assert result.exit_code == 0, result.output
    assert picture.stat().st_size > 1000


def drop_columns(path: Path, table: str, *columns: str) -> None:
    import sqlite3

    with sqlite3.connect(path) as connection:
        for column in columns:
            connection.execute(f"ALTER TABLE {table} DROP COLUMN {column}")


def test_exports_without_optional_columns_work_and_say_what_is_missing(cli, tmp_path):
    """globalPid is nullable in nsys's schema and absent from minimal exporters' files: GPU ops are then
    matched to their launches by correlation id alone, and the output says so."""
    b = ExportBuilder("2026.2")
    b.push_pop(0, 1_000, "step")
    b.kernel(100, 200, GEMM, launch_at=10)
    b.kernel(300, 350, GEMM, launch_at=20)
    b.memcpy(400, 450, size=4096, launch_at=30)
    b.kernel(5_000, 5_100, GEMM, launch_at=4_000)  # outside the range
    path = b.write(tmp_path / "minimal.sqlite")
    drop_columns(path, "CUPTI_ACTIVITY_KIND_KERNEL", "globalPid", "gridZ", "demangledName")
    drop_columns(path, "CUPTI_ACTIVITY_KIND_MEMCPY", "globalPid", "copyKind")
    drop_columns(path, "NVTX_EVENTS", "endGlobalTid", "domainId")
    for args, value in (
        (("kernels", "--range", "step", "--format", "json"), 150),
        (("breakdown", "--phases", "step", "--format", "json"), None),
        (("ranges", "--format", "json"), None),
        (("ranges", "--tree", "--format", "json"), None),
    ):
        result = cli(*args[:1], path, *args[1:])
        assert result.exit_code == 0 and "Traceback" not in result.output, result.output
        if value is not None:
            import json

            assert sum(row["Total Time (ns)"] for row in json.loads(result.stdout)) == value
    notes = cli("kernels", path, "--range", "step").stdout
    assert "CUPTI_ACTIVITY_KIND_KERNEL has no globalPid column: GPU operations are matched" in notes
    assert "has no demangledName column: the short kernel name stands for the full one" in notes
    breakdown = cli("breakdown", path, "--phases", "step", "--ops", "all", "--format", "json")
    import json

    step = json.loads(breakdown.stdout)["breakdown"][0]
    assert step["GPU Op Time (ns)"] == 200 and step["Memcpy Time (ns)"] == 50  # 150 of kernels, the copy


def test_an_export_without_a_required_column_is_one_line(cli, tmp_path, export):
    drop_columns(export, "CUPTI_ACTIVITY_KIND_KERNEL", "start")
    one_line_error(cli("kernels", export), "needs a column this export lacks")


@pytest.mark.parametrize("where", [0.3, 0.5, 0.7, 0.9])
def test_a_damaged_page_is_one_line(cli, shared_traces, tmp_path, where):
    """Bytes overwritten past the header: SQLite reports a malformed file while reading; one line names it."""
    damaged = tmp_path / "damaged.sqlite"
    data = bytearray((shared_traces / "h100_videogen_2gpu_a_nsys2026.2.sqlite").read_bytes())
    at = int(len(data) * where) // 4096 * 4096
    data[at : at + 4096] = b"\xff" * 4096
    damaged.write_bytes(bytes(data))
    failed = 0
    for command in ("kernels", "ranges", "breakdown"):
        result = cli(command, damaged)
        if result.exit_code == 0:  # the page held nothing this command reads
            continue
        failed += 1
        one_line_error(result, str(damaged), "is damaged: SQLite stopped reading")
    assert failed  # each position spoils a page that ranges (and so breakdown) read


@pytest.mark.parametrize(
    "manifest",
    [
        '{"timings_ms": {"step": 5}, "samples_ms": {"step": [1, "a", null]}}',
        '{"timings_ms": [1, 2], "samples_ms": "x", "config": [], "device": 3, "notes": {"a": 1}}',
        '{"timings_ms": {"step": {"mean": "fast", "std": true}}, "wall_s": [], "versions": "1"}',
        "[1, 2, 3]",
        "{not json",
    ],
)
def test_a_hand_edited_run_json_is_read_for_what_it_holds(cli, export, tmp_path, manifest):
    from tracekit import runs

    run = tmp_path / "run"
    run.mkdir()
    (run / runs.EXPORT).write_bytes(export.read_bytes())
    (run / runs.MANIFEST).write_text(manifest)
    result = cli("report", run, "-o", tmp_path / "report")
    assert result.exit_code == 0 and "Traceback" not in result.output, result.output
    assert (tmp_path / "report" / "report.md").read_text().startswith("#")


def test_snapshot_bounds_are_checked_before_memory_is_spent(cli, tmp_path, monkeypatch):
    from helpers.snapshot_builder import stack

    b = SnapshotBuilder()
    b.alloc(0x2000, 4 * MIB, 100, stack(*[f"f.py:{i} deep" for i in range(50)]))
    snapshot = b.dump(tmp_path / "snap.pickle")
    assert cli("memory", snapshot).exit_code == 0  # the defaults take it
    monkeypatch.setenv("TRACEKIT_SNAPSHOT_MAX_FRAMES", "20")
    one_line_error(
        cli("memory", snapshot), "stack of 52 frames, above the limit of 20", "TRACEKIT_SNAPSHOT_MAX_FRAMES=52"
    )
    monkeypatch.delenv("TRACEKIT_SNAPSHOT_MAX_FRAMES")
    big = tmp_path / "big.pickle"
    big.write_bytes(snapshot.read_bytes() + b"\0" * (3 * MIB))  # past the size limit below
    monkeypatch.setenv("TRACEKIT_SNAPSHOT_LIMIT_MB", "2")
    one_line_error(cli("memory", big), "is 3 MiB, above the 2 MiB limit", "TRACEKIT_SNAPSHOT_LIMIT_MB=4")


def test_every_real_snapshot_is_within_the_default_bounds(cli, shared_memory):
    for snapshot in sorted(shared_memory.glob("*.pickle")):
        result = cli("memory", snapshot, "--top", "1")
        assert result.exit_code == 0, (snapshot.name, result.output)


def test_names_that_are_not_utf8_are_read_with_replacement_characters(cli, export):
    import sqlite3

    with sqlite3.connect(export) as connection:
        connection.execute("UPDATE StringIds SET value = CAST(X'616d706572655f8066' AS TEXT) WHERE value = ?", (GEMM,))
    result = cli("kernels", export, "--format", "csv")
    assert result.exit_code == 0, result.output
    assert "ampere_\ufffdf" in result.stdout


@pytest.mark.parametrize(
    "args, fragment",
    [
        (("memory", "{snapshot}", "--plot", "{tmp}/x.xyz"), "pictures are written as"),
        (("memory", "{snapshot}", "--plot", "{tmp}/out.txt"), "pictures are written as"),
        (("report", "--bench", "{notes}"), "is not an SQLite database"),
        (("report", "--bench", "{export}"), "has no runs table"),
        (("kernels", "{snapshot}"), "is a pickle"),
        (("memory", "{export}"), "looks like an nsys SQLite export (.sqlite), not a memory snapshot"),
        (("kernels", "{export}", "--format", "csv", "-o", "{tmp}/missing/k.csv"), "does not exist"),
        (("ranges", "{export}", "--within", "nothing"), "no NVTX range matches"),
    ],
)
def test_each_reported_traceback_is_one_line_now(cli, export, tmp_path, args, fragment):
    """Cases that once ended in a traceback: one line and exit status 1."""
    b = SnapshotBuilder()
    b.alloc(0x2000, 4 * MIB, 100)
    snapshot = b.dump(tmp_path / "snap.pickle")
    notes = tmp_path / "notes.txt"
    notes.write_text("not a database")
    filled = [arg.format(snapshot=snapshot, export=export, notes=notes, tmp=tmp_path) for arg in args]
    assert one_line_error(cli(*filled), fragment).startswith("Error: ")


def test_null_ids_are_valid_input(cli, tmp_path):
    """NULL correlationId, globalPid and globalTid are allowed by nsys's schema: no error, no traceback."""
    import json
    import sqlite3

    b = ExportBuilder("2026.2")
    b.push_pop(0, 1_000, "step")
    b.kernel(100, 200, GEMM, launch_at=10)
    b.kernel(300, 360, GEMM, launch_at=20)

    def with_nulls(name: str, range_thread: bool) -> Path:
        path = b.write(tmp_path / name)
        with sqlite3.connect(path) as connection:
            connection.execute("UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET correlationId = NULL WHERE start = 300")
            connection.execute("UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET globalPid = NULL WHERE start = 100")
            if range_thread:
                connection.execute("UPDATE NVTX_EVENTS SET globalTid = NULL")
        return path

    path = with_nulls("nulls.sqlite", range_thread=True)
    for args in (("kernels",), ("ranges",), ("ranges", "--tree"), ("breakdown", "--phases", "step")):
        result = cli(args[0], path, *args[1:], "--format", "json")
        assert result.exit_code == 0 and "Traceback" not in result.output, (args, result.output)
    rows = json.loads(cli("kernels", path, "--format", "json").stdout)
    assert sum(row["Total Time (ns)"] for row in rows) == 160
    # the kernel without a correlation id has no launching call, so no range owns it: said, not hidden
    ranged = cli("kernels", with_nulls("ranged.sqlite", range_thread=False), "--range", "step", "--format", "json")
    assert ranged.exit_code == 0, ranged.output
    assert sum(row["Total Time (ns)"] for row in json.loads(ranged.stdout)) == 100
    assert "1 of 2 GPU operations have no recorded launching call" in ranged.stderr


@pytest.mark.parametrize("rows, nulls", [("start = 100", 1), ("1", 2)])
def test_null_where_the_schema_forbids_it(cli, tmp_path, rows, nulls):
    """A file whose schema text was edited to allow NULL in blockZ: where blockZ is read (a summary by
    launch configuration), a NULL block reads as unknown (0 0 0) and is counted, its kernel still counts; a
    column that is NULL in every row of a chunk (nothing for group_concat to join) is no traceback. The
    plain summary does not read blockZ."""
    import json
    import sqlite3

    b = ExportBuilder("2026.2")
    b.kernel(100, 200, GEMM, launch_at=10, block=(128, 1, 1))
    b.kernel(300, 360, GEMM, launch_at=20, block=(128, 1, 1))
    path = without_not_null(b.write(tmp_path / "nulls.sqlite"), "CUPTI_ACTIVITY_KIND_KERNEL")
    with sqlite3.connect(path) as connection:
        connection.execute(f"UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET blockZ = NULL WHERE {rows}")
    plain = cli("kernels", path, "--format", "json")
    assert plain.exit_code == 0 and sum(row["Total Time (ns)"] for row in json.loads(plain.stdout)) == 160
    assert "left out" not in plain.stderr and "unknown" not in plain.stderr
    result = cli("kernels", path, "--by-launch-config", "--format", "json")
    assert result.exit_code == 0, result.output
    blocks = {row["BlockXYZ"].split()[0]: row["Total Time (ns)"] for row in json.loads(result.stdout)}
    assert blocks == ({"128": 60, "0": 100} if nulls == 1 else {"0": 160})
    assert result.stderr.startswith(f"note: {nulls} gpu_ops {'value' if nulls == 1 else 'values'} of")
    assert f"read as unknown (block: {nulls})" in result.stderr, result.stderr


def edited(path: Path, *statements: str) -> Path:
    """Run SQL on an export after lifting its NOT NULL rules (schema text edited, as a hostile writer could)."""
    import sqlite3

    with sqlite3.connect(without_not_null(path)) as connection:
        for statement in statements:
            connection.execute(statement)
    return path


@pytest.fixture
def small(tmp_path) -> Path:
    """Two steps of two kernels each, launched inside them; GPU metadata and a named string table."""
    b = ExportBuilder("2026.2")
    b.gpu(0, "NVIDIA H100 80GB HBM3", 132, 80 * 2**30, 9, 0)
    for step in range(2):
        b.push_pop(step * 1_000, step * 1_000 + 900, "step")
        b.kernel(step * 1_000 + 100, step * 1_000 + 200, GEMM, launch_at=step * 1_000 + 10)
        b.kernel(step * 1_000 + 300, step * 1_000 + 360, "vectorized_elementwise_kernel", launch_at=step * 1_000 + 20)
    return b.write(tmp_path / "small.sqlite")


def json_rows(result) -> list[dict]:
    import json

    assert result.exit_code == 0 and "Traceback" not in result.output, result.output
    return json.loads(result.stdout)


@pytest.mark.parametrize(
    "statements",
    [
        # rowids far apart: chunks follow the rows, not the 2^64 span (which once took all memory)
        (
            "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET rowid = 9223372036854775807 WHERE start = 1300",
            "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET rowid = -9223372036854775808 WHERE start = 100",
        ),
        ("UPDATE NVTX_EVENTS SET globalTid = NULL",),  # allowed by nsys's schema
        ("UPDATE TARGET_INFO_GPU SET id = NULL",),
        ("UPDATE TARGET_INFO_GPU SET id = 'x', computeMajor = 'a', totalMemory = 'a', smCount = 1.5",),
        ("UPDATE StringIds SET value = CAST(value AS BLOB)",),
    ],
)
def test_damaged_but_readable_exports_give_the_same_numbers(cli, small, statements):
    expected = json_rows(cli("kernels", small, "--format", "json"))
    in_step = json_rows(cli("kernels", small, "--range", "step", "--format", "json"))
    edited(small, *statements)
    assert json_rows(cli("kernels", small, "--format", "json")) == expected
    ranged = cli("kernels", small, "--range", "step", "--format", "json")
    if "globalTid" in statements[0]:  # the ranges' process is unknown: they own no launch
        one_line_error(ranged, "no GPU kernels were launched inside step")
    else:
        assert json_rows(ranged) == in_step
    for command in (("ranges",), ("breakdown", "--phases", "step"), ("kernels", "--by", "category")):
        json_rows(cli(*command, small, "--format", "json"))


@pytest.mark.parametrize(
    "statement, kernel_names, range_names",
    [
        ("UPDATE StringIds SET value = NULL", {""}, {"step"}),  # names unknown: the numbers stay
        ("UPDATE StringIds SET value = X'00ff'", {"\x00\ufffd"}, {"step"}),  # a BLOB, not UTF-8
        # a BLOB holding the text separator: the range is read row by row, as text
        ("UPDATE NVTX_EVENTS SET text = X'ff1f'", {GEMM, "vectorized_elementwise_kernel"}, {"\ufffd\x1f"}),
    ],
)
def test_names_of_any_type_read_as_text(cli, small, statement, kernel_names, range_names):
    edited(small, statement)
    kernels = json_rows(cli("kernels", small, "--format", "json"))
    assert {row["Name"] for row in kernels} == kernel_names  # strings, never bytes
    assert sum(row["Total Time (ns)"] for row in kernels) == 320
    assert {row["Range"] for row in json_rows(cli("ranges", small, "--format", "json"))} == range_names
    assert {row["Category"] for row in json_rows(cli("kernels", small, "--by", "category", "--format", "json"))}


def test_a_cache_file_claiming_a_huge_array_is_rebuilt(cli, small, monkeypatch):
    monkeypatch.setenv("TRACEKIT_CACHE_MIN_BYTES", "0")
    expected = json_rows(cli("breakdown", small, "--format", "json"))
    column = next(Path(f"{small}.tracekit-cache").glob("gpu_ops/start.npy"))
    header = b"{'descr': '<i8', 'fortran_order': False, 'shape': (1000000000000,), }"
    column.write_bytes(b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header + b"\0" * 64)
    result = cli("breakdown", small, "--format", "json")
    assert json_rows(result) == expected and "rebuilt" in result.stderr


def test_a_deeply_nested_run_json_is_no_traceback(cli, small, tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / runs.EXPORT).write_bytes(small.read_bytes())
    (run / runs.MANIFEST).write_text('{"a":' * 100_000 + "1" + "}" * 100_000)
    result = cli("report", run, "-o", tmp_path / "report")
    assert result.exit_code == 0 and "Traceback" not in result.output, result.output


def snapshot_with(tmp_path: Path, frames, history=None, time_us=1.0) -> Path:
    import pickle

    block = {"address": 1, "size": 512, "requested_size": 512, "state": "active_allocated"}
    block.update({"history": history} if history is not None else {"frames": frames})
    entry = {"action": "alloc", "addr": 1, "size": 512, "stream": 0, "time_us": time_us, "frames": frames}
    segment = {
        "device": 0,
        "address": 0,
        "total_size": 2 << 20,
        "allocated_size": 512,
        "active_size": 512,
        "stream": 0,
        "segment_type": "large",
        "blocks": [block],
    }
    path = tmp_path / "hostile.pickle"
    path.write_bytes(pickle.dumps({"segments": [segment], "device_traces": [[entry]]}))
    return path


def nested(depth: int) -> list:
    value: list = []
    for _ in range(depth):
        value = [value]
    return value


@pytest.mark.parametrize(
    "frames, history, label",
    [
        ([1, 2, 3], None, "?"),  # frames that are not dicts
        ([{"filename": None, "line": None, "name": None}], None, "?"),
        ([{"filename": "m.py", "line": 7, "name": nested(5_000)}], None, "m.py:7 ?"),  # never repr'd
        ([], [], "(no stack recorded)"),  # a block whose history is empty
    ],
)
def test_snapshot_frames_of_any_shape_are_read_as_text(cli, tmp_path, frames, history, label):
    import sys

    sys.setrecursionlimit(20_000)  # to pickle the nested list; tracekit itself never recurses into it
    try:
        snapshot = snapshot_with(tmp_path, frames, history)
    finally:
        sys.setrecursionlimit(1_000)
    for args in (("--by", "frame"), ("--format", "json"), ("--plot", str(tmp_path / "t.png"))):
        result = cli("memory", snapshot, *args)
        assert result.exit_code == 0 and "Traceback" not in result.output, (args, result.output)
    assert label in cli("memory", snapshot, "--by", "frame").stdout


def test_snapshot_times_that_are_not_numbers_and_entries_by_reference(cli, tmp_path):
    one_line_error(cli("memory", snapshot_with(tmp_path, [], time_us=float("nan"))), "NaN or infinity")
    import pickle

    entry = {"action": "alloc", "addr": 1, "size": 512, "stream": 0, "time_us": 1.0, "frames": []}
    bomb = tmp_path / "bomb.pickle"  # one entry repeated 100,000 times by reference: 2 bytes each
    bomb.write_bytes(pickle.dumps({"segments": [], "device_traces": [[entry] * 100_000]}))
    one_line_error(cli("memory", bomb), "names 100,000 trace entries and blocks in", "repeated by reference")


def test_snapshot_sizes_left_empty_read_as_zero(tmp_path):
    """A field some writer left empty ("", None) reads as 0, as it did before fields were read by column;
    text that is not a number stays an error."""
    import pickle

    from tracekit.sources.snapshot.reader import load_snapshot

    entries = [
        {"action": "alloc", "addr": 16, "size": 512, "stream": 0, "time_us": 1.0, "frames": []},
        {"action": "free_requested", "addr": 16, "size": "", "stream": None, "time_us": 2.0, "frames": []},
    ]
    path = tmp_path / "empty.pickle"
    path.write_bytes(pickle.dumps({"segments": [], "device_traces": [entries]}))
    events = load_snapshot(path).events
    assert events["size"].tolist() == [512, 0] and events["stream"].tolist() == [0, 0]
    entries[1]["size"] = "big"
    path.write_bytes(pickle.dumps({"segments": [], "device_traces": [entries]}))
    with pytest.raises(Exception, match="big"):
        load_snapshot(path)


def test_an_unclosed_range_beside_a_damaged_start_closes_at_the_last_usable_time(tmp_path, cli):
    """nsys closes an unclosed range at the last NVTX timestamp; a TEXT start (a damaged row, left out)
    sorts above every number in SQLite and must not be taken for that timestamp."""
    b = ExportBuilder("2026.2")
    b.push_pop(0, 1_000, "step")
    b.push_pop(100, 400, "open")
    b.push_pop(500, 600, "damaged")
    path = b.write(tmp_path / "unclosed.sqlite")
    with sqlite3.connect(path) as connection:
        connection.execute("UPDATE NVTX_EVENTS SET end = NULL WHERE start = 100")
        connection.execute("UPDATE NVTX_EVENTS SET start = 'bad' WHERE start = 500")
    result = cli("ranges", path, "--format", "json")
    assert result.exit_code == 0, result.output
    rows = {row["Range"]: row for row in json.loads(result.stdout)}
    assert set(rows) == {"step", "open"}
    assert rows["open"]["Total Time (ns)"] == 1_000 - 100  # closed at the last usable time: step's end
