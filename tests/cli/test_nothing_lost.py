"""Nothing lost, round two: many inputs are protected from -o, inputs that are not files are one line,
a many-input run stops within a second of Ctrl-C or SIGTERM and leaves no process behind, --workers
is capped, --scheduler addresses are checked, names render without bidirectional tricks, and a JSON
trace may start with a byte order mark."""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from helpers.nsys_builder import ExportBuilder
from helpers.paths import SHARED

from tracekit.capture import watchdog

GEMM = "void gemm_kernel<float>(float*)"


def export(path: Path, name: str = GEMM) -> Path:
    b = ExportBuilder("2026.2")
    b.kernel(100, 200, name, launch_at=50)
    b.kernel(300, 400, "void add_kernel<float>()", launch_at=250)
    return b.write(path)


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize("fmt", ["json", "md", "table"])
def test_o_never_overwrites_one_of_several_inputs(cli, tmp_path, fmt):
    """`kernels a.sqlite b.sqlite -o b.sqlite` exited 0 with b.sqlite replaced by a table: inputs were
    protected only in the worker processes, never in the one that writes."""
    a, b = export(tmp_path / "a.sqlite"), export(tmp_path / "b.sqlite")
    before = digest(b)
    result = cli("kernels", a, b, "-o", b, "--format", fmt)
    assert result.exit_code == 1 and "is an input of this command and would be overwritten" in result.output
    assert digest(b) == before


def test_o_never_overwrites_an_input_found_in_a_folder_or_by_a_per_table_name(cli, tmp_path):
    folder = tmp_path / "runs"
    folder.mkdir()
    export(folder / "a.sqlite")
    named = export(folder / "o.kernels.json")  # a trace named like the per-table file csv derives from o.json
    before = digest(named)
    result = cli("kernels", folder, "--format", "csv", "-o", folder / "o.json")  # json named, csv asked: refused
    assert result.exit_code == 2 and "names json, --format says csv" in result.output and digest(named) == before
    result = cli("kernels", folder, "--format", "parquet", "-o", folder / "o.kernels.json")
    assert result.exit_code == 2 and digest(named) == before
    result = cli("ranks", folder, "-o", folder / "a.sqlite", "--format", "json")
    assert result.exit_code == 1 and digest(named) == before


def test_inputs_that_are_not_files_are_one_line(cli, tmp_path):
    fifo = tmp_path / "pipe.sqlite"
    os.mkfifo(fifo)
    loop = tmp_path / "loop.sqlite"
    loop.symlink_to(tmp_path / "loop2.sqlite")
    (tmp_path / "loop2.sqlite").symlink_to(loop)
    for path, what in ((fifo, "is a FIFO (named pipe)"), (loop, "is a symbolic link that loops")):
        result = cli("kernels", path)  # a FIFO was read and waited on for ever
        assert result.exit_code == 1 and what in result.output and "Traceback" not in result.output
        result = cli("kernels", path, export(tmp_path / "a.sqlite"))  # many inputs: RuntimeError: Symlink loop
        assert result.exit_code == 1 and what in result.output and "Traceback" not in result.output


def test_a_folder_skips_what_is_not_a_file_and_says_so(cli, tmp_path):
    export(tmp_path / "a.sqlite")
    export(tmp_path / "b.sqlite")
    os.mkfifo(tmp_path / "c.sqlite")
    (tmp_path / "d.sqlite").symlink_to(tmp_path / "d.sqlite")  # a link to itself
    result = cli("kernels", tmp_path, "--format", "json")
    assert result.exit_code == 0, result.output
    assert "2 entries left out: not a regular file or folder" in result.stderr
    assert "c.sqlite: a FIFO (named pipe)" in result.stderr and "d.sqlite: a symbolic link that loops" in result.stderr


def test_strict_stops_with_one_line_and_no_ignored_exception(tmp_path):
    """--strict printed its error, then "Exception ignored in: <generator object _on_pool> ... cannot join
    current thread": the pool was left to the garbage collector."""
    export(tmp_path / "a.sqlite")
    (tmp_path / "b.sqlite").write_bytes(b"not sqlite at all")
    done = subprocess.run(
        [sys.executable, "-m", "tracekit.cli", "kernels", str(tmp_path), "--strict"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1 and "b.sqlite" in done.stderr
    assert "Exception ignored" not in done.stderr and "Traceback" not in done.stderr


def test_workers_are_capped_at_the_cpus(cli, tmp_path):
    paths = [export(tmp_path / f"{name}.sqlite") for name in "ab"]
    result = cli("kernels", *paths, "--workers", "1000", "--format", "json")
    assert result.exit_code == 0 and "--workers 1000 lowered to" in result.stderr


@pytest.mark.parametrize("address", ["not an address", "foo://x:1", "http://127.0.0.1:8786", "", "tcp://host:70000"])
def test_a_scheduler_address_of_the_wrong_form_is_one_line(cli, tmp_path, address):
    pytest.importorskip("dask.distributed", reason="Dask is not installed (pip install -e '.[dask]')")
    paths = [export(tmp_path / f"{name}.sqlite") for name in "ab"]
    result = cli("kernels", *paths, "--scheduler", address)
    assert result.exit_code == 1 and "is not a Dask scheduler address" in result.output
    assert "Traceback" not in result.output


def listening(reply: bytes | None) -> tuple[int, socket.socket, list[socket.socket]]:
    """A server on a free port that accepts and then says ``reply`` (or nothing, ever); the connections
    it accepted, to be closed when the test is done."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    held = []

    def serve() -> None:
        while True:
            try:
                connection, _ = server.accept()
            except OSError:
                return
            held.append(connection)
            if reply:
                connection.sendall(reply)

    threading.Thread(target=serve, daemon=True).start()
    return server.getsockname()[1], server, held


def close_all(server: socket.socket, held: list[socket.socket]) -> None:
    server.close()
    for connection in held:
        connection.close()


def test_a_scheduler_that_is_not_one_is_one_line_in_bounded_time(tmp_path):
    pytest.importorskip("dask.distributed", reason="Dask is not installed (pip install -e '.[dask]')")
    from tracekit.analysis.many.dask_client import connect
    from tracekit.errors import TracekitError

    with socket.socket() as probe:  # a port nothing listens on: refused at once, not after 20 s
        probe.bind(("127.0.0.1", 0))
        refused = probe.getsockname()[1]
    started = time.monotonic()
    with pytest.raises(TracekitError, match=rf"cannot reach the Dask scheduler at tcp://127.0.0.1:{refused}"):
        connect(f"tcp://127.0.0.1:{refused}")
    assert time.monotonic() - started < 5
    silent, server, held = listening(None)
    started = time.monotonic()
    with pytest.raises(TracekitError, match="accepted the connection but no Dask scheduler answered within 2 s"):
        connect(f"tcp://127.0.0.1:{silent}", timeout_s=2)  # the whole handshake is bounded
    assert time.monotonic() - started < 10
    close_all(server, held)
    # The handshake given up on ends once the server hangs up: no thread outlives the silence.
    deadline = time.monotonic() + 15
    while any(thread.name == "tracekit-dask-handshake" for thread in threading.enumerate()):
        assert time.monotonic() < deadline, "the abandoned handshake still waits after the server closed"
        time.sleep(0.1)
    foreign, server, held = listening(b"HTTP/1.1 200 OK\r\n\r\n" + b"\xff" * 64)  # "Unable to allocate 3.07 EiB"
    with pytest.raises(TracekitError, match=f"no Dask scheduler answered at tcp://127.0.0.1:{foreign}"):
        connect(f"tcp://127.0.0.1:{foreign}", timeout_s=5)
    close_all(server, held)


@pytest.fixture(scope="module")
def many_files(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("many")
    first = export(folder / "t0.sqlite")
    for index in range(1, 300):
        shutil.copyfile(first, folder / f"t{index}.sqlite")
    return folder


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_many_input_run_stops_within_a_second_and_leaves_no_process(many_files, sig):
    """Ctrl-C on 3,000 files exited 40 s later (every queued file read first); SIGTERM left workers,
    the forkserver and the resource tracker running, holding a reader of the output."""
    process = subprocess.Popen(
        [sys.executable, "-m", "tracekit.cli", "kernels", str(many_files), "--workers", "2"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "TRACEKIT_CACHE": "0"},
    )
    deadline = time.monotonic() + 60
    while len(watchdog.descendants(process.pid)) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)  # the workers are up
    time.sleep(1.0)
    workers = watchdog.descendants(process.pid)
    signalled = time.monotonic()
    process.send_signal(sig)
    _, stderr = process.communicate(timeout=60)  # returns when every holder of its pipes is gone
    assert time.monotonic() - signalled < 1.5, stderr
    name = "Ctrl-C" if sig == signal.SIGINT else "SIGTERM"
    assert process.returncode == 1 and f"interrupted ({name}):" in stderr and "of 300 inputs finished" in stderr
    assert "Traceback" not in stderr
    deadline = time.monotonic() + 2  # the workers, and the resource tracker once its pipe closes
    while [pid for pid in workers if watchdog._alive(pid)] and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not [pid for pid in workers if watchdog._alive(pid)]


def test_bidirectional_and_invisible_characters_are_escaped(cli, tmp_path):
    """U+202E in a kernel name reversed how the rest of the line read in table and md output."""
    path = export(tmp_path / "t.sqlite", name="gemm\u202eslow\u200b_kernel")
    for fmt in ("table", "md"):
        output = cli("kernels", path, "--format", fmt).output
        assert "\u202e" not in output and "\u200b" not in output and "gemm\\u202eslow\\u200b_kernel" in output
    raw = json.loads(cli("kernels", path, "--format", "json").output)  # JSON keeps the value as it is
    assert "gemm\u202eslow\u200b_kernel" in {row["Name"] for row in raw}


@pytest.mark.skipif(not (SHARED / "kineto").is_dir(), reason="real traces not available")
@pytest.mark.parametrize("compressed", [False, True])
def test_a_json_trace_may_start_with_a_byte_order_mark(cli, tmp_path, compressed):
    source = SHARED / "kineto" / "gp100_steps_gpu_user_annotation.json.gz"
    data = b"\xef\xbb\xbf" + gzip.decompress(source.read_bytes())
    path = tmp_path / ("bom.json.gz" if compressed else "bom.json")
    path.write_bytes(gzip.compress(data) if compressed else data)
    result = cli("kernels", path, "--format", "json")
    assert result.exit_code == 0, result.output  # was "not an SQLite database"
    assert json.loads(result.output) == json.loads(cli("kernels", source, "--format", "json").output)
    assert "damaged or cut short" not in result.stderr
