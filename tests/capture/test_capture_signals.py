"""Captures interrupted (Ctrl-C, SIGTERM) at any moment, under torch.profiler and under (a fake) nsys:
the program's whole process tree ends, what was recorded is kept (and imported), run.json says
"interrupted", no lock or hidden partial folder is left in --out; a second Ctrl-C stops at once; a
program's leftover children are ended so that the capture can finish."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tracekit import runs
from tracekit.capture import watchdog

pytest.importorskip("torch", reason="--profiler torch needs torch")

LOOPING = textwrap.dedent("""
    import signal, sys, time
    import torch
    if "--deaf" in sys.argv:  # a program that ignores SIGINT and SIGTERM
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    open(sys.argv[1], "w").close()  # running
    x = torch.ones(8)
    while True:  # profiled whole: no annotate.steps
        x = x * 1.0
        time.sleep(0.01)
""")
LEAVES_A_CHILD = textwrap.dedent("""
    import subprocess, sys
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)", sys.argv[1]])
    print("left", child.pid, flush=True)
""")


def start(
    tmp_path: Path, program: str, *args: str, profiler: str = "torch", nsys: Path | None = None, mode: str = "plain"
) -> tuple[subprocess.Popen, Path, Path]:
    script = tmp_path / "program.py"
    script.write_text(program)
    marker = tmp_path / "running"
    out = tmp_path / "traces"
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tracekit.cli",
            "capture",
            "--profiler",
            profiler,
            "--out",
            str(out),
            "--name",
            "run",
            *(["--nsys", str(nsys)] if nsys else []),
            "--",
            sys.executable,
            str(script),
            str(marker),
            *args,
        ],
        env={**os.environ, "FAKE_NSYS_MODE": mode, "FAKE_NSYS_SIGNALS": str(tmp_path / "signals")},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # signals below go to tracekit (or its group) alone
    )
    return process, out, marker


def wait_for(path: Path, seconds: float = 120) -> None:
    deadline = time.monotonic() + seconds
    while not path.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert path.exists()


def programs_of(marker: Path) -> list[int]:
    return [
        pid
        for pid, argv in watchdog.command_lines().items()
        if pid != os.getpid() and str(marker) in argv and watchdog._alive(pid)
    ]


def left_in(out: Path) -> list[str]:
    return sorted(path.name for path in out.iterdir())


def test_sigterm_stops_a_deaf_program_and_releases_the_run(tmp_path):
    """SIGTERM to tracekit exited -15 and left the program running with .run.lock and .run.partial-*/."""
    process, out, marker = start(tmp_path, LOOPING, "--deaf")
    wait_for(marker)
    signalled = time.monotonic()
    process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=60)
    assert time.monotonic() - signalled < 10, stderr  # SIGINT, SIGTERM 3 s later, SIGKILL 3 s after that
    assert process.returncode == 1 and "capture interrupted (SIGTERM)" in stderr and "Traceback" not in stderr
    assert programs_of(marker) == [] and left_in(out) == ["run"]
    assert runs.Run(out / "run").manifest["status"] == "interrupted"


def test_a_second_ctrl_c_stops_at_once(tmp_path):
    process, out, marker = start(tmp_path, LOOPING, "--deaf")
    wait_for(marker)
    process.send_signal(signal.SIGINT)
    time.sleep(0.5)
    signalled = time.monotonic()
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=60)
    assert time.monotonic() - signalled < 3, stderr
    assert "capture interrupted (Ctrl-C)" in stderr and programs_of(marker) == [] and left_in(out) == ["run"]


def test_ctrl_c_lets_a_program_profiled_whole_write_its_trace(tmp_path):
    """The program got SIGTERM at once, so the trace of a program profiled whole was never written: it
    gets SIGINT first, and its launcher writes the trace as it stops."""
    process, out, marker = start(tmp_path, LOOPING)
    wait_for(marker)
    time.sleep(1.0)
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=60)
    assert "capture interrupted (Ctrl-C)" in stderr and "what it recorded is in" in stderr, stderr
    assert (out / "run" / runs.TORCH_TRACE).is_file() and left_in(out) == ["run"]
    manifest = runs.Run(out / "run").manifest
    assert manifest["status"] == "interrupted" and manifest["files"]["trace"] == runs.TORCH_TRACE


def test_children_a_program_leaves_running_are_ended(tmp_path):
    process, out, marker = start(tmp_path, LEAVES_A_CHILD)
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == 0, stderr
    time.sleep(0.2)
    assert programs_of(marker) == []  # the sleeping child, ended after the program exited
    assert runs.Run(out / "run").manifest["status"] == "complete"


def test_nsys_gets_one_sigint_when_the_whole_group_is_interrupted(fake_nsys, tmp_path):
    """A SIGINT to the whole process group without a terminal made the watchdog send nsys a second one,
    and nsys abandoned its report to /tmp: nsys now runs in a session of its own and hears one."""
    process, out, marker = start(tmp_path, LOOPING, profiler="nsys", nsys=fake_nsys)
    wait_for(marker)
    os.killpg(process.pid, signal.SIGINT)
    _, stderr = process.communicate(timeout=120)
    assert "capture interrupted (Ctrl-C)" in stderr, stderr
    assert (tmp_path / "signals").read_text().splitlines() == ["SIGINT"]
    assert (out / "run" / runs.REPORT).is_file() and left_in(out) == ["run"] and programs_of(marker) == []


def test_a_recording_left_as_a_stream_is_imported_after_an_interruption(fake_nsys, tmp_path):
    """After SIGINT the run folder held only nsys.log and trace.qdstrm: the stream, a complete recording,
    was never imported. It is now, and run.json says the capture was interrupted."""
    importer = fake_nsys.parent / "QdstrmImporter"  # where tracekit looks: beside nsys
    importer.write_text(
        f'#!/bin/sh\nexec {sys.executable} -c "import os, shutil, sys; '
        f"shutil.copy(os.environ['FAKE_NSYS_REPORT'], sys.argv[sys.argv.index('-o') + 1])\" \"$@\"\n"
    )
    importer.chmod(0o755)
    process, out, marker = start(tmp_path, LOOPING, profiler="nsys", nsys=fake_nsys, mode="streamint")
    wait_for(marker)
    process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=120)
    assert "capture interrupted (SIGTERM)" in stderr and "trace.nsys-rep" in stderr, stderr
    assert (out / "run" / runs.REPORT).is_file() and not (out / "run" / runs.STREAM).exists()
    assert runs.Run(out / "run").manifest["status"] == "interrupted" and left_in(out) == ["run"]


def test_nsys_does_not_wait_for_a_childs_child(fake_nsys, tmp_path):
    """nsys waits for the program's whole tree: a child it left running hung the capture, or past
    --nsys-grace the run was "exited with status 1" though the program exited 0, and the trace lost."""
    process, out, marker = start(tmp_path, LEAVES_A_CHILD, profiler="nsys", nsys=fake_nsys, mode="subreaper")
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == 0, stderr
    assert programs_of(marker) == [] and (out / "run" / runs.REPORT).is_file()
    assert runs.Run(out / "run").manifest["status"] == "complete"


def test_sigterm_while_importing_leaves_no_lock_partial_folder_or_half_report(fake_nsys, tmp_path):
    """SIGTERM while the importer (or nsys export) ran left .run.lock, .run.partial-*/ and a partial export."""
    importer = fake_nsys.parent / "QdstrmImporter"
    importer.write_text(
        f"#!/bin/sh\ntouch {tmp_path}/importing\nexec {sys.executable} -c 'import time; time.sleep(300)'\n"
    )
    importer.chmod(0o755)
    script = tmp_path / "quick.py"
    script.write_text("print('done')\n")
    out = tmp_path / "traces"
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tracekit.cli",
            "capture",
            "--profiler",
            "nsys",
            "--nsys",
            str(fake_nsys),
            "--out",
            str(out),
            "--name",
            "run",
            "--",
            sys.executable,
            str(script),
        ],
        env={**os.environ, "FAKE_NSYS_MODE": "stream"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    wait_for(tmp_path / "importing")
    process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 1 and "interrupted (SIGTERM)" in stderr and "Traceback" not in stderr
    assert left_in(out) == ["run"]  # no lock, no hidden partial folder
    assert sorted(path.name for path in (out / "run").iterdir() if path.name.startswith(".")) == []  # no half report
    assert (out / "run" / runs.STREAM).exists()  # the recording is kept, to import again


def test_a_full_disk_names_the_run_where_it_is(cli, tmp_path, monkeypatch):
    """On a full disk the error named the hidden partial path, gone after the rename."""
    import errno

    from tracekit.capture import command

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(command, "_finish", full)
    out = tmp_path / "traces"
    result = cli("capture", "--profiler", "torch", "--out", out, "--name", "full", "--", sys.executable, "-c", "pass")
    assert result.exit_code == 1 and "No space left on device" in result.output
    assert str(out / "full") in result.output and ".partial" not in result.output
