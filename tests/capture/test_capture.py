"""`tracekit capture`: the real nsys on the CPU (the CI integration test), and a fake nsys that
hangs, leaves an agent behind, or is interrupted; and no nsys at all."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tracekit import nsys_tool, runs
from tracekit.capture import watchdog
from tracekit.capture.run_folder import NewRun
from tracekit.errors import CaptureError
from tracekit.sources.nsys.export import read_nsys_export

pytest.importorskip("torch")


@pytest.mark.nsys
@pytest.mark.slow
def test_capture_tiny_on_cpu(cli, nsys, tmp_path):
    """The CI integration test: a complete run folder whose trace holds exactly the measured steps."""
    pytest.importorskip("nvtx")
    result = cli("capture", "tiny", "--ctx", "32", "--warmup", "2", "--steps", "3", "--out", tmp_path, "--memory")
    assert result.exit_code == 0, result.output
    assert "memory snapshots need CUDA" in result.output and "no CUDA kernels" in result.output
    latest = tmp_path / "latest"
    folder = latest.resolve()
    assert folder.parent == tmp_path and folder.name.startswith("tiny-ctx32-train-fp32-")
    assert {path.name for path in folder.iterdir()} >= {"trace.nsys-rep", "trace.sqlite", "run.json"}
    assert not (folder / "memory.pickle").exists()
    manifest = json.loads((folder / "run.json").read_text())
    assert manifest["status"] == "complete" and manifest["trace"] == "nvtx"
    assert manifest["config"]["steps"] == 3 and manifest["versions"]["nsys"] == nsys_tool.nsys_version(nsys)
    assert "`tracekit bench activations tiny --ctx 32 --batch 4`" in manifest["activation_note"]
    assert len(manifest["samples_ms"]["step"]) == 3 and manifest["timings_ms"]["step"]["mean"] > 0
    assert manifest["versions_program"]["torch"] and manifest["wall_s"]["total"] > 0

    ranges = read_nsys_export(folder / "trace.sqlite").ranges
    steps = ranges[ranges["name"] == "step"]
    assert len(steps) == 3  # warm-up stayed out of the capture
    for _, step in steps.iterrows():
        children = set(ranges.loc[ranges["parent"] == step["range_id"], "name"].astype(str))
        assert children == {"forward", "backward", "optimizer"}
    table = cli("ranges", latest, "--format", "json")
    counts = {row["Range"]: row["Instances"] for row in json.loads(table.stdout)}
    assert counts["step"] == counts["forward"] == counts["backward"] == counts["optimizer"] == 3
    assert counts["softmax"] == 3 * 2  # two layers


def test_watchdog_stops_a_lingering_agent(cli, fake_nsys, tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_NSYS_MODE", "agent")
    out = tmp_path / "traces"
    result = cli(
        "capture",
        "tiny",
        "--ctx",
        "16",
        "--warmup",
        "0",
        "--steps",
        "1",
        "--device",
        "cpu",
        "--out",
        out,
        "--nsys",
        fake_nsys,
        "--name",
        "agent",
    )
    assert result.exit_code == 0, result.output
    assert "the nsys agent (pid" in result.output and "kept running after the program ended" in result.output
    manifest = runs.Run(out / "agent").manifest
    assert manifest["status"] == "complete"
    (killed,) = manifest["watchdog"]["killed_agents"]
    assert not watchdog._alive(killed)


def test_watchdog_stops_nsys_that_never_exits(cli, fake_nsys, tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_NSYS_MODE", "hang")
    started = time.monotonic()
    result = cli(
        "capture",
        "tiny",
        "--ctx",
        "16",
        "--warmup",
        "0",
        "--steps",
        "1",
        "--device",
        "cpu",
        "--out",
        tmp_path / "traces",
        "--nsys",
        fake_nsys,
        "--name",
        "hang",
        "--nsys-grace",
        "1",
    )
    assert result.exit_code == 0, result.output
    assert time.monotonic() - started < 60
    assert "did not exit 1 s after the program ended; the watchdog stopped it" in result.output
    assert runs.Run(tmp_path / "traces" / "hang").manifest["watchdog"]["killed_nsys"] is True


def test_ctrl_c_stops_cleanly(fake_nsys, tmp_path):
    out = tmp_path / "traces"
    environment = {**os.environ, "FAKE_NSYS_MODE": "slow"}
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tracekit.cli",
            "capture",
            "tiny",
            "--ctx",
            "16",
            "--warmup",
            "0",
            "--steps",
            "1",
            "--device",
            "cpu",
            "--out",
            str(out),
            "--nsys",
            str(fake_nsys),
            "--name",
            "stopped",
        ],
        env=environment,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    deadline = time.monotonic() + 120
    while not list(out.glob(".stopped.partial-*/trace.profiling")) and time.monotonic() < deadline:
        time.sleep(0.1)  # the run is written into a hidden sibling until it ends
    os.killpg(process.pid, signal.SIGINT)  # what a terminal does on Ctrl-C: the whole process group
    stdout, stderr = process.communicate(timeout=120)
    assert process.returncode == 1
    assert "capture interrupted" in stderr and "Traceback" not in stderr
    manifest = runs.Run(out / "stopped").manifest
    assert manifest["status"] == "interrupted" and manifest["name"] == "stopped"
    assert (out / "stopped" / "trace.nsys-rep").exists()
    assert sorted(path.name for path in out.iterdir()) == ["stopped"]  # no partial folder, no lock left


def test_stream_without_importer(cli, fake_nsys, tmp_path, monkeypatch):
    """What the borrowed H100 machines have: an nsys that writes a .qdstrm and no importer anywhere."""
    monkeypatch.setenv("FAKE_NSYS_MODE", "stream")
    monkeypatch.setattr(nsys_tool, "IMPORTER_LOCATIONS", [])
    result = cli(
        "capture",
        "tiny",
        "--ctx",
        "16",
        "--warmup",
        "0",
        "--steps",
        "1",
        "--device",
        "cpu",
        "--out",
        tmp_path / "traces",
        "--nsys",
        fake_nsys,
        "--name",
        "stream",
    )
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert result.exit_code == 1 and len(lines) == 1
    assert "no Nsight Systems importer (QdstrmImporter)" in lines[0] and "QdstrmImporter -i" in lines[0]
    assert runs.Run(tmp_path / "traces" / "stream").manifest["status"] == "failed"
    assert (tmp_path / "traces" / "stream" / "trace.qdstrm").exists()  # kept, to import elsewhere


@pytest.mark.parametrize("how", ["model", "command"])
def test_a_stream_tracekit_imported_leaves_no_error_in_the_log(cli, fake_nsys, tmp_path, monkeypatch, how):
    """Debian's nsys 2022.4: it finds no importer, says "Importer error status: ...", leaves a .qdstrm;
    tracekit imports it and the capture (of a model, or of a command) works. nsys.log then says how the
    report was made, not that an error happened; nsys's other lines stay, naming where the run is now."""
    monkeypatch.setenv("FAKE_NSYS_MODE", "stream")
    importer = tmp_path / "host-linux-x64" / "QdstrmImporter"  # copies the real report to -o
    importer.parent.mkdir()
    importer.write_text('#!/bin/sh\ncp "$FAKE_NSYS_REPORT" "$4"\n')
    importer.chmod(0o755)
    monkeypatch.setattr(nsys_tool, "IMPORTER_LOCATIONS", [str(importer)])
    script = tmp_path / "program.sh"
    script.write_text("#!/bin/sh\necho 'working'\n")
    script.chmod(0o755)
    what = ["tiny", "--ctx", "16", "--warmup", "0", "--steps", "1", "--device", "cpu"] if how == "model" else []
    after = [] if how == "model" else ["--profiler", "nsys", "--", str(script)]
    result = cli("capture", *what, "--out", tmp_path / "traces", "--nsys", fake_nsys, "--name", "imported", *after)
    assert result.exit_code == 0, result.output
    run = runs.Run(tmp_path / "traces" / "imported")
    assert run.manifest["status"] == "complete" and (run.folder / "trace.nsys-rep").exists()
    log = (run.folder / runs.LOG).read_text().splitlines()
    assert [line for line in log if "error" in line.lower() or "importer version" in line] == []
    generated = log.index("Generated:")  # nsys's own lines stay, naming where the run is now
    assert log[generated + 1] == f"    {run.folder}/trace.qdstrm"
    assert log[-1] == (
        "tracekit: nsys found no importer of its own and left the raw trace.qdstrm; tracekit imported it into "
        f"trace.nsys-rep with {importer} (then removed the .qdstrm)"
    )
    assert not (run.folder / "trace.qdstrm").exists()


def test_missing_nsys(cli, tmp_path, monkeypatch):
    empty = tmp_path / "bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    monkeypatch.delenv("TRACEKIT_NSYS", raising=False)
    monkeypatch.setattr(nsys_tool, "NSYS_LOCATIONS", [])
    result = cli("capture", "tiny", "--out", tmp_path / "traces")
    assert result.exit_code == 1
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and "nsys) is not installed" in lines[0]
    assert "apt-get install nsight-systems" in lines[0] and "https://developer.nvidia.com/nsight-systems" in lines[0]
    assert "--nsys PATH" in lines[0]
    assert not (tmp_path / "traces").exists()


def listing(root: Path) -> dict[str, tuple]:
    """Every path under ``root`` with its kind, size and mtime: what a capture must leave unchanged."""
    return {
        str(path.relative_to(root)): (path.is_dir(), path.is_symlink(), path.lstat().st_size, path.lstat().st_mtime_ns)
        for path in root.rglob("*")
    }


def test_default_names_and_replacing(tmp_path):
    from datetime import datetime

    name = runs.default_name("xl", 256, "train", "bf16", True, "naive", datetime(2026, 11, 22, 14, 3))
    assert name == "xl-ctx256-train-bf16-compiled-20261122-1403"
    first = NewRun(tmp_path, name, replace=False)
    assert first.folder.name.startswith(f".{name}.partial-")  # hidden until it is published
    first = first.publish().folder
    second = NewRun(tmp_path, name, replace=False).publish().folder
    assert first.name == name and second.name == name + "-2" and first.exists()
    (first / runs.MANIFEST).write_text("{}")
    replaced = NewRun(tmp_path, name, replace=True)
    (replaced.folder / runs.LOG).write_text("new")
    assert replaced.publish().folder == first and (first / runs.LOG).read_text() == "new"
    assert not (first / runs.MANIFEST).exists()  # the old run's files went with it
    assert sorted(path.name for path in tmp_path.iterdir()) == [name, name + "-2"]


def test_a_folder_of_something_else_is_never_replaced(tmp_path):
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "thesis.tex").write_text("not a run")
    (tmp_path / "mixed").mkdir()
    (tmp_path / "mixed" / runs.MANIFEST).write_text("{}")
    (tmp_path / "mixed" / "notes.txt").write_text("mine")
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "elsewhere")
    (tmp_path / "disguised" / runs.EXPORT).mkdir(parents=True)  # a folder named like a run file
    (tmp_path / "disguised" / runs.EXPORT / "notes.txt").write_text("precious")
    (tmp_path / "disguised" / runs.MANIFEST).write_text("{}")
    before = listing(tmp_path)
    for name, why in (
        ("mine", "did not write"),
        ("mixed", "notes.txt"),
        ("link", "a link or a file"),
        ("disguised", runs.EXPORT),
    ):
        with pytest.raises(CaptureError, match=why):
            NewRun(tmp_path, name, replace=True)
    assert listing(tmp_path) == before


@pytest.mark.parametrize(
    "name",
    ["..", ".", "../x", "/tmp/x", "a/b", ".hidden", "latest", "a\\b", "tab\there", "", "\u202eevil", "c1\x9b31m"],
)
def test_run_names_are_one_plain_component(cli, fake_nsys, tmp_path, name):
    """Nothing outside --out changes, and nothing inside it either, for a name that is not a plain one."""
    out = tmp_path / "work" / "traces"
    out.mkdir(parents=True)
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / runs.MANIFEST).write_text("{}")  # a run-looking folder beside --out
    before = listing(tmp_path)
    result = cli("capture", "tiny", "--device", "cpu", "--out", out, "--nsys", fake_nsys, "--name", name)
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert result.exit_code == 1 and len(lines) == 1 and "run name" in lines[0], result.output
    assert listing(tmp_path) == before


def test_two_captures_of_one_name_never_delete_each_other(tmp_path):
    first = NewRun(tmp_path, "same", replace=True)
    (first.folder / runs.LOG).write_text("first")
    with pytest.raises(CaptureError, match=rf"another capture \(pid {os.getpid()}\) is writing run 'same'"):
        NewRun(tmp_path, "same", replace=True)
    assert (first.folder / runs.LOG).read_text() == "first"
    published = first.publish()
    assert (published.folder / runs.LOG).read_text() == "first" and not (tmp_path / ".same.lock").exists()
    (tmp_path / ".other.lock").write_text("999999999")  # left by a capture that died: taken over
    assert NewRun(tmp_path, "other", replace=True).publish().folder.name == "other"


def test_run_files_get_the_users_umask_not_nsys(tmp_path):
    run = NewRun(tmp_path, "modes", replace=True)
    for name in (runs.MEMORY, runs.EXPORT):
        (run.folder / name).write_text("x")
        os.chmod(run.folder / name, 0o666)  # what a program under nsys (umask 0) leaves
    old = os.umask(0o027)
    try:
        folder = run.publish().folder
    finally:
        os.umask(old)
    assert {oct((folder / name).stat().st_mode & 0o777) for name in (runs.MEMORY, runs.EXPORT)} == {oct(0o640)}


def test_a_workloads_folder_in_the_current_directory_is_not_run(cli, fake_nsys, tmp_path, monkeypatch):
    """capture starts this installation's workload, not whatever ./workloads the user stands next to."""
    here = tmp_path / "project"
    (here / "workloads").mkdir(parents=True)
    hijacked = tmp_path / "hijacked"
    for name in ("__init__.py", "__main__.py"):
        (here / "workloads" / name).write_text(f"open({str(hijacked)!r}, 'w').write('ran')\n")
    monkeypatch.chdir(here)
    monkeypatch.setenv("FAKE_NSYS_MODE", "plain")
    out = tmp_path / "traces"
    result = cli(
        "capture",
        "tiny",
        "--ctx",
        "16",
        "--warmup",
        "0",
        "--steps",
        "1",
        "--device",
        "cpu",
        "--out",
        out,
        "--nsys",
        fake_nsys,
        "--name",
        "safe",
    )
    assert result.exit_code == 0, result.output
    assert not hijacked.exists()
    assert runs.Run(out / "safe").manifest["samples_ms"]["step"]  # our workload ran and measured


def tree_of(marker: str) -> list[int]:
    """Live processes (not zombies) whose command line mentions ``marker``: nsys and the program."""
    return [
        pid
        for pid, argv in watchdog.command_lines().items()
        if pid != os.getpid() and any(marker in arg for arg in argv) and watchdog._alive(pid)
    ]


def start_capture(fake_nsys, out: Path, mode: str, steps: int, *extra: str) -> subprocess.Popen:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tracekit.cli",
            "capture",
            "tiny",
            "--ctx",
            "16",
            "--warmup",
            "0",
            "--steps",
            str(steps),
            "--device",
            "cpu",
            "--out",
            str(out),
            "--nsys",
            str(fake_nsys),
            "--name",
            "stopped",
            *extra,
        ],
        env={**os.environ, "FAKE_NSYS_MODE": mode},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # signals below go to tracekit alone, not to a process group
    )


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_to_tracekit_alone_stops_the_whole_tree(fake_nsys, tmp_path, sig):
    """kill PID (or SIGINT to tracekit only): nsys, the workload and their children all end, the run is
    marked interrupted, the exit status is non-zero."""
    out = tmp_path / "traces"
    process = start_capture(fake_nsys, out, "plain", 1_000_000)
    deadline = time.monotonic() + 120
    while len(tree_of(str(out))) < 2 and time.monotonic() < deadline:  # nsys and the workload run
        time.sleep(0.2)
    assert len(tree_of(str(out))) >= 2
    process.send_signal(sig)
    stdout, stderr = process.communicate(timeout=120)
    assert process.returncode == 1 and "Traceback" not in stderr
    assert "capture interrupted" in stderr and "were stopped" in stderr
    time.sleep(0.5)
    assert tree_of(str(out)) == []
    assert runs.Run(out / "stopped").manifest["status"] == "interrupted"


@pytest.mark.parametrize("kind", ["file", "folder"])
def test_a_latest_that_is_not_our_link_is_left_alone(cli, fake_nsys, tmp_path, kind):
    out = tmp_path / "traces"
    out.mkdir()
    latest = out / runs.LATEST
    latest.mkdir() if kind == "folder" else latest.write_text("keep")
    result = cli(
        "capture",
        "tiny",
        "--ctx",
        "16",
        "--warmup",
        "0",
        "--steps",
        "1",
        "--device",
        "cpu",
        "--out",
        out,
        "--nsys",
        fake_nsys,
        "--name",
        "a",
    )
    assert result.exit_code == 0, result.output
    assert "is not a link: left as it is" in result.output
    assert (latest.is_dir() and not latest.is_symlink()) if kind == "folder" else latest.read_text() == "keep"
    assert sorted(path.name for path in out.iterdir()) == ["a", "latest"]  # no stray temporary link


def test_sigterm_stops_the_tree_before_a_process_manager_would_kill(fake_nsys, tmp_path):
    """An nsys deaf to SIGINT ("deaf": the fake ignores it while the program runs): after SIGTERM the tree
    is gone within docker stop's 10 s, not after the minute a Ctrl-C'd nsys gets to write its report."""
    out = tmp_path / "traces"
    process = start_capture(fake_nsys, out, "deaf", 1_000_000)
    deadline = time.monotonic() + 120
    while len(tree_of(str(out))) < 2 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert len(tree_of(str(out))) >= 2
    signalled = time.monotonic()
    process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=60)
    assert time.monotonic() - signalled < 10, stderr
    assert process.returncode == 1 and "capture interrupted (SIGTERM)" in stderr
    assert tree_of(str(out)) == []


def test_an_nsys_that_never_starts_the_program_is_given_up(cli, fake_nsys, tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_NSYS_MODE", "nostart")
    out = tmp_path / "traces"
    result = cli(
        "capture",
        "tiny",
        "--device",
        "cpu",
        "--out",
        out,
        "--nsys",
        fake_nsys,
        "--name",
        "stuck",
        "--start-timeout",
        "2",
    )
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert result.exit_code == 1 and len(lines) == 1 and "did not start the program within 2 s" in lines[0]
    assert tree_of(str(out)) == [] and runs.Run(out / "stuck").manifest["status"] == "failed"


FAILURES = {
    # what a sitecustomize on PYTHONPATH breaks in the workload's process -> what the message must say
    "no_torch": ("import sys\nsys.modules['torch'] = None\n", "ModuleNotFoundError: import of torch"),
    "oom_in_warmup": (
        "import workloads.bench as bench\n"
        "def build(*args, **kwargs):\n"
        "    raise RuntimeError('CUDA out of memory. Tried to allocate 20.00 GiB')\n"
        "bench.build_model = build\n",
        "out of memory",
    ),
}


@pytest.mark.parametrize("cause", ["no_torch", "oom_in_warmup", "cuda_on_cpu"])
def test_a_failed_capture_names_the_real_cause(cli, fake_nsys, tmp_path, monkeypatch, cause):
    """The message comes from the workload's own error, not from the last line of nsys's log that
    mentions an error (nsys prints its own, the importer's among them)."""
    monkeypatch.setenv("FAKE_NSYS_MODE", "plain")
    monkeypatch.setenv("FAKE_NSYS_NOISE", "1")  # nsys's log ends with an error line of its own
    device = "cpu"
    if cause == "cuda_on_cpu":
        device, expected = "cuda", "CUDA"
    else:
        site = tmp_path / "site"
        site.mkdir()
        code, expected = FAILURES[cause]
        (site / "sitecustomize.py").write_text(code)
        monkeypatch.setenv("PYTHONPATH", f"{site}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    out = tmp_path / "traces"
    result = cli(
        "capture",
        "tiny",
        "--ctx",
        "16",
        "--warmup",
        "1",
        "--steps",
        "1",
        "--device",
        device,
        "--out",
        out,
        "--nsys",
        fake_nsys,
        "--name",
        cause,
    )
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert expected in lines[-1] and "QdstrmImporter" not in lines[-1], lines[-1]
    assert "program.log" in lines[-1] or cause == "oom_in_warmup"  # an oom is its own message
    assert (out / cause / runs.PROGRAM_LOG).exists()


def test_two_default_names_in_one_second_take_suffixes(tmp_path):
    """Two captures with the default name started in the same second: the second takes "-2" (its
    docstring's promise) instead of failing on the first one's lock."""
    first = NewRun(tmp_path, "tiny-ctx32-train-fp32-20261126-0700", replace=False)
    second = NewRun(tmp_path, "tiny-ctx32-train-fp32-20261126-0700", replace=False)
    assert (first.publish().folder.name, second.publish().folder.name) == (
        "tiny-ctx32-train-fp32-20261126-0700",
        "tiny-ctx32-train-fp32-20261126-0700-2",
    )
    assert not list(tmp_path.glob(".*.lock"))


@pytest.mark.parametrize("name", ["", " ", " run", "run "])
def test_blank_names_are_refused(tmp_path, name):
    with pytest.raises(CaptureError, match="1 to 200 characters|blank or start or end with spaces"):
        NewRun(tmp_path, name, replace=True)
