"""Property-based fuzzing: random valid and damaged exports and snapshots through the CLI.

Whatever the input, a command either succeeds (and then a valid input's numbers are right) or fails
with one line and exit status 1; never a traceback, never a file written outside its output folder.
Examples are derandomized, so CI runs the same cases every time; the suite stays well under a minute.
"""

from __future__ import annotations

import json
import os
import pickle
import sqlite3
import tempfile
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers.nsys_builder import ExportBuilder, without_not_null
from helpers.snapshot_builder import SnapshotBuilder, stack
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tracekit.cli import main

FUZZ = settings(
    max_examples=150,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
KERNEL_NAMES = ["ampere_sgemm_128x64_tn", "void at::native::vectorized_elementwise_kernel<4>()", "=cmd", "\x1b[2J"]
WRONG_VALUES = st.one_of(
    st.none(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=8),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.binary(max_size=8),
)
KERNEL_COLUMNS = [
    "start",
    "end",
    "deviceId",
    "streamId",
    "correlationId",
    "globalPid",
    "demangledName",
    "shortName",
    "gridX",
    "gridY",
    "blockZ",
]
NVTX_COLUMNS = ["start", "end", "textId", "text", "domainId", "globalTid", "endGlobalTid", "eventType"]
COMMANDS = [
    ["kernels"],
    ["kernels", "--by", "category", "--ops", "all"],
    ["ranges"],
    ["ranges", "--tree"],
    ["breakdown", "--phases", "step,phase*"],
    ["kernels", "--range", "step", "--format", "csv", "-o", "{out}/kernels.csv"],
    ["report", "-o", "{out}/report"],
]


def run(args: list[str], workdir: Path) -> tuple[int, str]:
    """The command in-process from ``workdir``; exceptions are not caught, so a traceback fails the test."""
    runner = CliRunner()
    cwd = os.getcwd()
    os.chdir(workdir)
    try:
        result = runner.invoke(main, args, catch_exceptions=False)
    finally:
        os.chdir(cwd)
    return result.exit_code, result.output


def listing(root: Path, skip: Path) -> set[str]:
    return {str(path.relative_to(root)) for path in root.rglob("*") if skip not in path.parents and path != skip}


def assert_clean(code: int, output: str) -> None:
    assert "Traceback" not in output
    if code != 0:
        lines = [line for line in output.splitlines() if line.strip()]
        assert code in (1, 2) and lines and lines[-1].startswith("Error"), output
        if code == 1:
            assert len(lines) == 1, output


exports = st.fixed_dictionaries(
    {
        "generation": st.sampled_from(["2022.4", "2026.2"]),
        "kernels": st.lists(
            st.tuples(st.integers(0, 10_000), st.integers(0, 500), st.sampled_from(KERNEL_NAMES), st.integers(0, 2)),
            max_size=12,
        ),
        "ranges": st.lists(
            st.tuples(
                st.integers(0, 10_000),
                st.integers(0, 3_000),
                st.sampled_from(["step", "phase1", "{'op': 1}", "a/b", ""]),
            ),
            max_size=6,
        ),
        "copies": st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 100), st.integers(0, 2**20)), max_size=3),
    }
)
damage = st.one_of(
    st.none(),
    st.tuples(
        st.just("cell"),
        st.sampled_from(["CUPTI_ACTIVITY_KIND_KERNEL", "NVTX_EVENTS"]),
        st.integers(0, 20),
        st.sampled_from(sorted(set(KERNEL_COLUMNS + NVTX_COLUMNS))),
        WRONG_VALUES,
    ),
    st.tuples(
        st.just("drop_column"),
        st.sampled_from(["CUPTI_ACTIVITY_KIND_KERNEL", "NVTX_EVENTS"]),
        st.sampled_from(sorted(set(KERNEL_COLUMNS + NVTX_COLUMNS))),
    ),
    st.tuples(
        st.just("drop_table"),
        st.sampled_from(["StringIds", "CUPTI_ACTIVITY_KIND_KERNEL", "NVTX_EVENTS", "CUPTI_ACTIVITY_KIND_RUNTIME"]),
    ),
    st.tuples(st.just("bytes"), st.floats(0, 1), st.binary(min_size=1, max_size=64)),
    st.tuples(st.just("truncate"), st.floats(0, 1)),
)


def build_export(spec: dict, path: Path) -> int:
    """Write the export; returns the kernels' total duration (ns)."""
    b = ExportBuilder(spec["generation"])
    for start, length, name in spec["ranges"]:
        b.push_pop(start, start + length, name)
    total = 0
    for index, (start, length, name, device) in enumerate(spec["kernels"]):
        b.kernel(start, start + length, name, device=device, launch_at=max(0, start - 5 - index))
        total += length
    for start, length, size in spec["copies"]:
        b.memcpy(start, start + length, size=size, launch_at=start)
    b.write(path)
    return total


def spoil(path: Path, how: tuple | None) -> None:
    if how is None:
        return
    if how[0] in ("bytes", "truncate"):
        spoil_bytes(path, how)
        return
    lifted = None
    with sqlite3.connect(path) as connection:
        tables = {row[0] for row in connection.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        if how[0] == "drop_table" and how[1] in tables:
            connection.execute(f"DROP TABLE {how[1]}")
        elif how[0] == "drop_column" and how[1] in tables:
            columns = {row[1] for row in connection.execute(f"PRAGMA table_info({how[1]})")}
            if how[2] in columns and len(columns) > 1:
                connection.execute(f"ALTER TABLE {how[1]} DROP COLUMN {how[2]}")
        elif how[0] == "cell" and how[1] in tables:
            columns = {row[1] for row in connection.execute(f"PRAGMA table_info({how[1]})")}
            if how[3] in columns:
                update = f"UPDATE {how[1]} SET {how[3]} = ? WHERE rowid = ?"
                try:
                    connection.execute(update, (how[4], how[2]))
                except sqlite3.IntegrityError:  # NULL in a NOT NULL column: a hostile file has no such rule
                    lifted = update
    connection.close()
    if lifted is not None:
        with sqlite3.connect(without_not_null(path, how[1])) as connection:
            connection.execute(lifted, (how[4], how[2]))


def spoil_bytes(path: Path, how: tuple) -> None:
    """("truncate", where) cuts the file there; ("bytes", where, data) overwrites bytes from there."""
    data = bytearray(path.read_bytes())
    at = int(how[1] * (len(data) - 1))
    if how[0] == "truncate":
        del data[at:]
    else:
        data[at : at + len(how[2])] = how[2]
    path.write_bytes(bytes(data))


@pytest.mark.slow
@FUZZ
@given(spec=exports, how=damage, command=st.sampled_from(COMMANDS))
def test_exports_never_crash_or_write_elsewhere(spec, how, command):
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        (root / "out").mkdir()
        export = root / "trace.sqlite"
        total = build_export(spec, export)
        spoil(export, how)
        before = listing(root, root / "out")
        args = [arg.format(out=root / "out") for arg in command]
        code, output = run([args[0], str(export), *args[1:]], root)
        assert_clean(code, output)
        assert listing(root, root / "out") == before  # written only inside out/ (no cache below its size)
        if how is None and command == ["kernels"] and spec["kernels"]:
            assert code == 0
            json_code, printed = run(["kernels", str(export), "--format", "json"], root)
            assert sum(row["Total Time (ns)"] for row in json.loads(printed)) == total


snapshots = st.fixed_dictionaries(
    {
        "with_time": st.booleans(),
        "allocs": st.lists(st.tuples(st.integers(0, 2**20), st.integers(1, 2**26), st.integers(0, 10**6)), max_size=10),
        "names": st.lists(st.sampled_from(["f", "$x^2$", "$\\frac{$", "\x1b[31m", "=a"]), min_size=1, max_size=3),
    }
)
snapshot_damage = st.one_of(
    st.none(),
    st.tuples(st.just("truncate"), st.floats(0, 1)),
    st.tuples(st.just("bytes"), st.floats(0, 1), st.binary(min_size=1, max_size=16)),
    st.tuples(
        st.just("field"),
        st.sampled_from(["segments", "device_traces", "external_annotations", "size", "frames", "time_us", "action"]),
        WRONG_VALUES,
    ),
    st.just(("global",)),
)


def build_snapshot(spec: dict, how: tuple | None, path: Path) -> None:
    b = SnapshotBuilder(with_time=spec["with_time"])
    for index, (addr, size, time_us) in enumerate(spec["allocs"]):
        b.alloc(addr, size, time_us, stack(*[f"m.py:{index} {name}" for name in spec["names"]]))
    b.dump(path)
    if how is None:
        return
    if how[0] == "field":
        data = pickle.loads(path.read_bytes())
        if how[1] in data:
            data[how[1]] = how[2]
        else:
            for entry in data["device_traces"][0]:
                entry[how[1]] = how[2]
        path.write_bytes(pickle.dumps(data))
    elif how[0] == "global":
        path.write_bytes(b"\x80\x04cos\nsystem\n(S'true'\ntR.")
    else:
        spoil_bytes(path, how)


@pytest.mark.slow
@FUZZ
@given(spec=snapshots, how=snapshot_damage, plot=st.booleans())
def test_snapshots_never_crash_or_run_code(spec, how, plot):
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        (root / "out").mkdir()
        snapshot = root / "memory.pickle"
        build_snapshot(spec, how, snapshot)
        before = listing(root, root / "out")
        args = ["memory", str(snapshot)] + (["--plot", str(root / "out" / "timeline.png")] if plot else [])
        code, output = run(args, root)
        assert_clean(code, output)
        assert listing(root, root / "out") == before
        if how is None:
            assert code == 0, output


kineto_traces = st.fixed_dictionaries(
    {
        "kernels": st.lists(
            st.tuples(st.integers(0, 10_000), st.integers(0, 500), st.integers(0, 999), st.sampled_from(KERNEL_NAMES)),
            max_size=10,
        ),
        "annotations": st.lists(
            st.tuples(
                st.integers(0, 10_000), st.integers(0, 3_000), st.sampled_from(["step", "phase1", "}, {", 'a"b', "\\"])
            ),
            max_size=5,
        ),
        "compress": st.booleans(),
    }
)
kineto_damage = st.one_of(
    st.none(),
    st.tuples(st.just("bytes"), st.floats(0, 1), st.binary(min_size=1, max_size=64)),
    st.tuples(st.just("truncate"), st.floats(0, 1)),
    st.tuples(st.just("field"), st.sampled_from(["ts", "dur", "name", "cat", "args", "pid", "ph"]), WRONG_VALUES),
)
KINETO_COMMANDS = [
    ["kernels"],
    ["kernels", "--by", "type", "--ops", "all", "--drop-last-step"],
    ["ranges", "--domain", "cpu_op"],
    ["breakdown", "--phases", "step"],
]


def build_kineto(spec: dict, how: tuple | None, path: Path) -> int:
    """A torch.profiler trace of ``spec``; returns its total kernel time in ns."""
    from helpers.kineto_builder import KinetoBuilder

    built = KinetoBuilder(rank=0, world_size=1)
    total = 0
    for index, (start, duration_us, fraction, name) in enumerate(spec["kernels"]):
        built.launch("cudaLaunchKernel", start, 1, correlation=index + 1)
        built.kernel(name, f"{start + 2}.{fraction:03d}", duration_us, correlation=index + 1)
        total += duration_us * 1000
    for start, duration_us, name in spec["annotations"]:
        built.annotation(name, start, duration_us)
    text = built.text()
    if how is not None and how[0] == "field":  # one field of the first kernel gets a value of the wrong type
        document = json.loads(text)
        kernels = [event for event in document["traceEvents"] if event.get("cat") == "kernel"]
        if kernels:
            value = how[2].hex() if isinstance(how[2], bytes) else how[2]
            kernels[0][how[1]] = value if not (isinstance(value, float) and value != value) else "nan"
        text = json.dumps(document)
    data = text.encode()
    path.write_bytes(__import__("gzip").compress(data) if spec["compress"] else data)
    if how is not None and how[0] != "field":
        spoil_bytes(path, how)
    return total


@pytest.mark.slow
@FUZZ
@given(spec=kineto_traces, how=kineto_damage, command=st.sampled_from(KINETO_COMMANDS))
def test_torch_profiler_traces_never_crash(spec, how, command):
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        trace = root / ("trace.json.gz" if spec["compress"] else "trace.json")
        total = build_kineto(spec, how, trace)
        before = listing(root, root / "out")
        code, output = run([command[0], str(trace), *command[1:]], root)
        assert_clean(code, output)
        assert listing(root, root / "out") == before
        if how is None and command == ["kernels"] and spec["kernels"]:
            assert code == 0
            _, printed = run(["kernels", str(trace), "--format", "json"], root)
            assert sum(row["Total Time (ns)"] for row in json.loads(printed)) == total


# --- many inputs and the cache (issue 33: nothing lost) ------------------------------------------------

FOLDER_ENTRIES = st.lists(
    st.sampled_from(["export", "export", "corrupt", "fifo", "loop", "dangling", "empty", "subfolder"]),
    min_size=1,
    max_size=6,
)
MANY_COMMANDS = [["kernels"], ["kernels", "--by", "category"], ["ranges"], ["breakdown"], ["ranks"]]


def folder_of(entries: list[str], folder: Path) -> list[Path]:
    """A folder holding these entries (named trace-like, as a user's folder of ranks); the regular files."""
    files = []
    for index, kind in enumerate(entries):
        path = folder / f"rank{index}.sqlite"
        if kind == "export":
            build_export(
                {"generation": "2026.2", "kernels": [(100, 50, "gemm", 0)], "ranges": [(0, 500, "step")], "copies": []},
                path,
            )
            files.append(path)
        elif kind == "corrupt":
            path.write_bytes(b"SQLite format 3\x00" + bytes(range(256)) * 4)
            files.append(path)
        elif kind == "empty":
            path.write_bytes(b"")
            files.append(path)
        elif kind == "fifo":
            os.mkfifo(path)
        elif kind == "loop":
            path.symlink_to(path)
        elif kind == "dangling":
            path.symlink_to(folder / "nowhere")
        elif kind == "subfolder":
            path.mkdir()
    return files


def digests(paths: list[Path]) -> dict[Path, bytes]:
    return {path: path.read_bytes() for path in paths}


@pytest.mark.slow
@settings(FUZZ, max_examples=20)
@given(
    entries=FOLDER_ENTRIES,
    command=st.sampled_from(MANY_COMMANDS),
    target=st.integers(0, 5),
    fmt=st.sampled_from(["json", "md", "csv"]),
)
def test_many_input_folders_never_crash_hang_or_lose_an_input(entries, command, target, fmt):
    """A folder of exports, corrupt files, FIFOs, link loops and folders named like traces, with -o
    naming one of them: one line or a table, never a traceback, never a hang (an alarm fails the case),
    never an input changed."""
    import signal

    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        files = folder_of(entries, root)
        before = digests(files)
        output = root / f"rank{target}.sqlite"
        signal.signal(signal.SIGALRM, lambda *_: pytest.fail(f"hung: {entries} {command}"))
        signal.alarm(60)
        try:
            code, printed = run(
                [command[0], str(root), *command[1:], "--workers", "1", "--format", fmt, "-o", str(output)], root
            )
        finally:
            signal.alarm(0)
        assert "Traceback" not in printed and code in (0, 1, 2), printed
        assert digests(files) == before, printed


@pytest.mark.slow
@settings(FUZZ, max_examples=40)
@given(choice=st.integers(0, 10**6), offset=st.floats(0, 1), flip=st.integers(1, 255))
def test_a_damaged_cache_is_never_read(choice, offset, flip):
    """One byte of one cached file changed: the command gives the numbers of the export (the damaged
    table is rebuilt and said), never a traceback, never numbers off by the damage."""
    os.environ["TRACEKIT_CACHE_MIN_BYTES"] = "0"
    try:
        with tempfile.TemporaryDirectory() as folder:
            root = Path(folder)
            path = root / "t.sqlite"
            build_export(
                {
                    "generation": "2026.2",
                    "kernels": [(index * 100, 10 + index, "gemm", 0) for index in range(20)],
                    "ranges": [(0, 5_000, "step")],
                    "copies": [],
                },
                path,
            )
            _, expected = run(["idle", str(path), "--unit", "ns", "--format", "json"], root)
            cached = sorted(file for file in root.rglob("*") if file.is_file() and ".tracekit-cache" in str(file))
            assert cached
            victim = cached[choice % len(cached)]
            data = bytearray(victim.read_bytes())
            if data:
                data[int(offset * (len(data) - 1))] ^= flip
                victim.write_bytes(bytes(data))
            code, printed = run(["idle", str(path), "--unit", "ns", "--format", "json"], root)
            assert code == 0 and "Traceback" not in printed, printed
            assert json.loads(printed.split("\nnote:")[0]) == json.loads(expected.split("\nnote:")[0])
    finally:
        del os.environ["TRACEKIT_CACHE_MIN_BYTES"]
