"""Materialise the evaluation set (``manifest.json``) into ``benchmarks/data/evalset/`` (git-ignored).

Each trace is taken at its recorded commit from a local mirror of its repository (``git --git-dir
MIRROR/owner+name/repo cat-file blob COMMIT:PATH``), or from a directory holding it under its manifest
name (``--source DIR``: files downloaded by hand from the addresses this script prints for what it
cannot find). Its size and sha256 are checked before it is renamed into place: a file is either whole
and verified or not there. Files already present with the right sha256 are left alone.

    python benchmarks/evalset/fetch.py                     # from ../.mirror beside the project
    python benchmarks/evalset/fetch.py --source ~/traces   # from a directory of downloaded files

Exit status 0 when every trace is present and verified, 1 otherwise (each missing one said on a line).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
MANIFEST = HERE / "manifest.json"
DATA = ROOT / "benchmarks" / "data" / "evalset"
MIRROR = ROOT.parent / ".mirror"  # fetched snapshots: MIRROR/owner+name/repo is a bare git directory
CHUNK = 1 << 20  # bytes hashed and written at a time


@dataclass(frozen=True)
class Trace:
    """One labelled trace: where it comes from (repository, commit, path), what it must be (sha256, size in
    bytes), and the label (``first``: the finding an expert fixes first, None: nothing to fix; ``xfail``:
    why tracekit disagrees today, None when it agrees)."""

    name: str
    repository: str
    commit: str
    path: str
    sha256: str
    size: int
    licence: str
    what: str
    first: str | None
    reason: str
    xfail: str | None = None

    @property
    def url(self) -> str:
        """Where the file can be downloaded by hand (GitHub's raw address at the recorded commit)."""
        return f"https://raw.githubusercontent.com/{self.repository}/{self.commit}/{self.path}"


class FetchError(Exception):
    """A trace that could not be materialised: the message says which and why, in one line."""


def load_manifest(path: Path = MANIFEST) -> list[Trace]:
    """The traces of the manifest at ``path``, in its order."""
    return [Trace(**entry) for entry in json.loads(path.read_text())["traces"]]


def sha256_of(path: Path) -> str:
    """The sha256 of the file at ``path`` (hex), read in chunks."""
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        for chunk in iter(lambda: stream.read(CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()


def materialise(trace: Trace, dest: Path = DATA, mirror: Path = MIRROR, source: Path | None = None) -> str:
    """Put ``trace`` at ``dest/trace.name``, verified; return how (``present``, ``from DIR``, ``from the
    mirror``). ``source``, when given, is looked in first. Raises FetchError when no origin has it whole."""
    target = dest / trace.name
    if target.is_file() and target.stat().st_size == trace.size and sha256_of(target) == trace.sha256:
        return "present"
    dest.mkdir(parents=True, exist_ok=True)
    if source is not None and (source / trace.name).is_file():
        with (source / trace.name).open("rb") as stream:
            _write_verified(trace, target, lambda out: shutil.copyfileobj(stream, out, CHUNK))
        return f"from {source}"
    git_dir = mirror / trace.repository.replace("/", "+") / "repo"
    if git_dir.is_dir():
        _write_verified(trace, target, lambda out: _git_blob(git_dir, f"{trace.commit}:{trace.path}", out))
        return "from the mirror"
    looked = f"neither {source / trace.name} nor {git_dir}" if source is not None else f"no mirror {git_dir}"
    raise FetchError(f"{trace.name}: not found ({looked}); download {trace.url}")


def _write_verified(trace: Trace, target: Path, fill: Callable[[IO[bytes]], None]) -> None:
    """Write ``target`` through a temporary file in its folder that ``fill(stream)`` writes, renamed into
    place only when its size and sha256 are the manifest's (a failed or wrong copy leaves nothing)."""
    with tempfile.NamedTemporaryFile(dir=target.parent, prefix=f".{target.name}.", suffix=".part", delete=False) as out:
        part = Path(out.name)
    try:
        with part.open("wb") as stream:
            fill(stream)
        size, digest = part.stat().st_size, sha256_of(part)
        if size != trace.size or digest != trace.sha256:
            raise FetchError(
                f"{trace.name}: got {size:,} bytes with sha256 {digest[:12]}..., the manifest says "
                f"{trace.size:,} bytes, {trace.sha256[:12]}...: not written"
            )
        part.chmod(0o644)  # a temporary file is made private (0600): the data is anyone's to read
        os.replace(part, target)
    finally:
        part.unlink(missing_ok=True)


def _git_blob(git_dir: Path, spec: str, out: IO[bytes]) -> None:
    """Write the blob ``COMMIT:PATH`` of the git directory into ``out``."""
    done = subprocess.run(
        ["git", "--git-dir", str(git_dir), "cat-file", "blob", spec], stdout=out, stderr=subprocess.PIPE
    )
    if done.returncode != 0:
        message = done.stderr.decode(errors="replace").strip().splitlines()
        raise FetchError(f"{spec} is not in {git_dir}: {message[-1] if message else 'git failed'}")


def materialise_all(traces: list[Trace], dest: Path, mirror: Path, source: Path | None) -> Iterator[tuple[str, str]]:
    """``(name, how)`` for each trace materialised, or ``(name, "error: ...")`` for each that was not."""
    for trace in traces:
        try:
            yield trace.name, materialise(trace, dest, mirror, source)
        except FetchError as error:
            yield trace.name, f"error: {error}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Materialise the evaluation set into benchmarks/data/evalset/.")
    parser.add_argument("--mirror", type=Path, default=MIRROR, help=f"mirrored repositories (default {MIRROR})")
    parser.add_argument("--source", type=Path, help="a directory holding the files under their manifest names")
    parser.add_argument("--dest", type=Path, default=DATA, help=f"where to put them (default {DATA})")
    parser.add_argument("--manifest", type=Path, default=MANIFEST, help="the manifest to read")
    args = parser.parse_args(argv)
    failed = 0
    for name, how in materialise_all(load_manifest(args.manifest), args.dest, args.mirror, args.source):
        failed += how.startswith("error: ")
        print(how if how.startswith("error: ") else f"{name}: {how}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
