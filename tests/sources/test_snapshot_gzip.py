"""Memory snapshots kept gzip-compressed (``.pickle.gz``, as tests/data/gpu keeps its own): read as the
plain pickle is, told by their content, within the same size bound (counted decompressed, before
anything is inflated into memory) and with the same unpickler that refuses every global."""

from __future__ import annotations

import gzip
import os
import pickle
import sys
import tracemalloc
from pathlib import Path

import pandas as pd
import pytest
from helpers.paths import ROOT
from helpers.snapshot_builder import SnapshotBuilder, stack

import tracekit
from tracekit.errors import SnapshotError
from tracekit.sources import open_snapshot
from tracekit.sources.snapshot.reader import load_snapshot

MIB = 2**20
OWN = ROOT / "tests" / "data" / "gpu" / "h100_small_ctx256_train_memory.pickle.gz"


def built(tmp_path: Path) -> Path:
    b = SnapshotBuilder()
    b.alloc(0x2000, 4 * MIB, 100, stack("model/layers.py:39 forward"))
    b.alloc(0x3000, 8 * MIB, 200, stack("model/attention.py:12 softmax"))
    b.free(0x3000, 8 * MIB, 300)
    b.segment(0x0, 20 * MIB, [(0x2000, 4 * MIB, "active_allocated"), (0x3000, 16 * MIB, "inactive")])
    return b.dump(tmp_path / "built.pickle")


def gzipped(path: Path, target: Path) -> Path:
    target.write_bytes(gzip.compress(path.read_bytes()))
    return target


def same_tables(a: tracekit.Result, b: tracekit.Result) -> None:
    assert [table.name for table in a.tables] == [table.name for table in b.tables]
    for mine, theirs in zip(a.tables, b.tables):
        pd.testing.assert_frame_equal(mine.frame, theirs.frame)


def test_a_gzipped_built_snapshot_reads_as_the_plain_one(tmp_path, cli):
    plain = built(tmp_path)
    for name in ("built.pickle.gz", "built.bin"):  # by content, whatever the name
        packed = gzipped(plain, tmp_path / name)
        same_tables(tracekit.memory(packed), tracekit.memory(plain))
        pd.testing.assert_frame_equal(open_snapshot(packed).events, open_snapshot(plain).events)
        result = cli("memory", packed, "--format", "csv")
        assert result.exit_code == 0 and result.stdout == cli("memory", plain, "--format", "csv").stdout


def test_a_real_snapshot_gzipped(tmp_path, shared_memory):
    plain = shared_memory / "cs336_medium_ctx512_forward.pickle"
    packed = gzipped(plain, tmp_path / "forward.pickle.gz")
    same_tables(tracekit.memory(packed, by="all"), tracekit.memory(plain, by="all"))


def test_the_repositorys_own_gzipped_snapshot_and_a_run_folder_holding_one(tmp_path):
    """tests/data/gpu keeps its H100 snapshot as .pickle.gz: read as it is, and as a run folder's snapshot
    (what report and export read) beside a plain copy's numbers."""
    plain = tmp_path / "plain.pickle"
    plain.write_bytes(gzip.decompress(OWN.read_bytes()))
    same_tables(tracekit.memory(OWN), tracekit.memory(plain))
    run = tmp_path / "run"
    run.mkdir()
    (run / "memory.pickle.gz").write_bytes(OWN.read_bytes())
    (run / "run.json").write_text("{}")
    same_tables(tracekit.memory(run), tracekit.memory(plain))


def test_a_gzip_bomb_is_refused_before_it_inflates(tmp_path, cli, monkeypatch):
    """64 MiB of pickle in a 64 KiB file, against a 2 MiB limit: refused in one line, having held about a
    block of it in memory, never the 64 MiB."""
    bomb = tmp_path / "bomb.pickle.gz"
    with gzip.GzipFile(bomb, "wb") as stream:
        stream.write(pickle.PROTO + b"\x04")
        for _ in range(64):
            stream.write(b"\0" * MIB)
    assert bomb.stat().st_size < 100_000
    monkeypatch.setenv("TRACEKIT_SNAPSHOT_LIMIT_MB", "2")
    tracemalloc.start()
    try:
        with pytest.raises(SnapshotError, match="holds more than 2 MiB once decompressed, above the 2 MiB limit"):
            tracekit.memory(bomb)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 8 * MIB
    result = cli("memory", bomb)
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert result.exit_code == 1 and len(lines) == 1 and "set TRACEKIT_SNAPSHOT_LIMIT_MB above 2 to read it" in lines[0]


class Exploit:
    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_a_gzipped_pickle_naming_a_global_runs_nothing(tmp_path, cli):
    marker = tmp_path / "pwned"
    path = tmp_path / "evil.pickle.gz"
    path.write_bytes(gzip.compress(pickle.dumps({"segments": [], "device_traces": [[Exploit(marker)]]})))
    with pytest.raises(SnapshotError, match=r"asks to load the Python object (posix|os)\.system"):
        load_snapshot(path)
    result = cli("memory", path)
    assert result.exit_code == 1 and "refused without running anything" in result.output
    assert not marker.exists()


@pytest.mark.parametrize(
    "content, message",
    [
        (gzip.compress(pickle.dumps({"segments": [], "device_traces": [[]]}), mtime=0)[:-12], "truncated"),
        (b"\x1f\x8b\x08\x00garbage that is not deflate", "not valid gzip"),
        (gzip.compress(b"not a pickle at all", mtime=0), "not a readable pickle"),
    ],
    ids=["truncated", "not-deflate", "not-a-pickle"],  # (the same test names on every xdist worker)
)
def test_damaged_gzip_is_one_line(tmp_path, cli, content, message):
    path = tmp_path / "bad.pickle.gz"
    path.write_bytes(content)
    result = cli("memory", path)
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert result.exit_code == 1 and len(lines) == 1 and message in lines[0], result.output


def test_a_trace_command_given_a_gzipped_snapshot_says_what_it_is(tmp_path, cli):
    packed = gzipped(built(tmp_path), tmp_path / "built.pickle.gz")
    result = cli("kernels", packed)
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert result.exit_code == 1 and len(lines) == 1
    assert "is a pickle (a memory snapshot? read it with `tracekit memory`)" in lines[0]


def test_a_failed_load_s_cleanup_noise_is_not_printed(monkeypatch, capsys):
    """A damaged pickle's bytearray opcode can leave CPython printing "SystemError: deallocated bytearray object
    has exported buffers" beside tracekit's one-line error (found by the fuzz test): while a snapshot loads,
    such unraisable errors go nowhere, and the hook is put back after."""
    from tracekit.sources.snapshot.reader import _no_unraisable_noise

    heard = []
    monkeypatch.setattr(sys, "unraisablehook", heard.append)

    class Noisy:
        def __del__(self):
            raise RuntimeError("noise on the way out")

    printed = []
    monkeypatch.setattr(sys, "excepthook", lambda *error: printed.append(error))
    with _no_unraisable_noise():
        Noisy()
        # CPython's own report of a bytearray freed with exported buffers: PyErr_Print, which calls
        # sys.excepthook, whose default writes to sys.stderr
        sys.excepthook(SystemError, SystemError("deallocated bytearray object"), None)
        print("SystemError: deallocated bytearray object", file=sys.stderr)
    assert heard == [] and printed == [] and sys.unraisablehook == heard.append
    assert capsys.readouterr().err == ""
