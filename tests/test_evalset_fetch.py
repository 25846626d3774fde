"""benchmarks/evalset: the manifest's entries are whole and their labels are findings advise can give, and
fetch.py materialises a trace from a mirrored repository or a directory only when its size and sha256 are
the manifest's, through a temporary file renamed into place."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
import subprocess
from pathlib import Path

import pytest
from helpers.evalset import fetch_module
from helpers.paths import ROOT

fetch = fetch_module()
CONTENT = b'{"traceEvents": []}\n' * 1000


def advise_finding_kinds() -> set[str]:
    """The finding kinds tracekit's advice rules can give: each rule builds ``Finding("kind", ...)``."""
    sources = (ROOT / "tracekit" / "analysis" / "advice").glob("*.py")
    return {kind for path in sources for kind in re.findall(r'Finding\(\s*"([^"]+)"', path.read_text())}


def test_every_trace_of_the_manifest_is_pinned_and_labelled_with_a_finding_advise_gives():
    traces = fetch.load_manifest()
    kinds = advise_finding_kinds()
    assert {"fp32 matmul", "host stall", "cold start", "unfused attention"} <= kinds  # the scan finds them
    assert len({trace.name for trace in traces}) == len(traces) >= 6
    for trace in traces:
        assert trace.name.endswith((".json", ".json.gz", ".sqlite")), trace.name
        assert re.fullmatch(r"[0-9a-f]{40}", trace.commit) and re.fullmatch(r"[0-9a-f]{64}", trace.sha256)
        assert re.fullmatch(r"[\w.-]+/[\w.-]+", trace.repository) and trace.path and trace.size > 0
        assert trace.licence and trace.what and trace.reason
        assert trace.first is None or trace.first in kinds, trace.first
        assert trace.xfail is None or trace.xfail.strip()


@pytest.fixture
def mirrored(tmp_path: Path):
    """A mirror holding owner/name with ``traces/t.json`` (CONTENT) at one commit, and that trace's entry."""
    work = tmp_path / "work"
    (work / "traces").mkdir(parents=True)
    (work / "traces" / "t.json").write_bytes(CONTENT)
    git = ["git", "-C", str(work), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "init", "-q", str(work)], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "trace"], check=True)
    commit = subprocess.run([*git, "rev-parse", "HEAD"], check=True, capture_output=True, text=True).stdout.strip()
    mirror = tmp_path / "mirror"
    subprocess.run(["git", "clone", "-q", "--bare", str(work), str(mirror / "owner+name" / "repo")], check=True)
    trace = fetch.Trace(
        name="owner_t.json",
        repository="owner/name",
        commit=commit,
        path="traces/t.json",
        sha256=hashlib.sha256(CONTENT).hexdigest(),
        size=len(CONTENT),
        licence="MIT",
        what="a test trace",
        first="host stall",
        reason="a test",
    )
    return trace, mirror, tmp_path / "dest"


def test_a_trace_comes_from_the_mirror_at_its_commit_and_is_left_alone_once_present(mirrored):
    trace, mirror, dest = mirrored
    assert fetch.materialise(trace, dest, mirror) == "from the mirror"
    target = dest / trace.name
    assert target.read_bytes() == CONTENT and target.stat().st_mode & 0o777 == 0o644
    assert [path.name for path in dest.iterdir()] == [trace.name]  # no temporary file left
    written = target.stat().st_mtime_ns
    assert fetch.materialise(trace, dest, mirror) == "present"
    assert target.stat().st_mtime_ns == written


def test_a_source_directory_is_looked_in_before_the_mirror_and_a_wrong_file_in_place_is_replaced(mirrored, tmp_path):
    trace, mirror, dest = mirrored
    source = tmp_path / "downloads"
    source.mkdir()
    (source / trace.name).write_bytes(CONTENT)
    dest.mkdir()
    (dest / trace.name).write_bytes(b"truncated")
    assert fetch.materialise(trace, dest, mirror, source) == f"from {source}"
    assert (dest / trace.name).read_bytes() == CONTENT


def test_a_copy_whose_sha256_differs_is_not_written(mirrored):
    trace, mirror, dest = mirrored
    wrong = dataclasses.replace(trace, sha256="0" * 64)
    with pytest.raises(fetch.FetchError, match="owner_t.json: got 20,000 bytes with sha256 .* not written"):
        fetch.materialise(wrong, dest, mirror)
    assert list(dest.iterdir()) == []


def test_a_trace_nowhere_to_be_found_is_one_line_with_its_address_and_the_exit_status_is_1(mirrored, tmp_path, capsys):
    trace, mirror, dest = mirrored
    missing_commit = dataclasses.replace(trace, commit="1" * 40)
    with pytest.raises(fetch.FetchError, match=r"1{40}:traces/t.json is not in .*repo: "):
        fetch.materialise(missing_commit, dest, mirror)
    manifest = tmp_path / "manifest.json"
    manifest.write_text('{"traces": [' + json.dumps(dataclasses.asdict(trace)) + "]}")
    status = fetch.main(["--manifest", str(manifest), "--mirror", str(tmp_path / "none"), "--dest", str(dest)])
    out = capsys.readouterr().out.splitlines()
    assert status == 1
    assert out == [
        f"error: owner_t.json: not found (no mirror {tmp_path / 'none' / 'owner+name' / 'repo'}); download "
        f"https://raw.githubusercontent.com/owner/name/{trace.commit}/traces/t.json"
    ]
