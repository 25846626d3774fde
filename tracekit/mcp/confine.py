"""What a tool call may touch: the folders it may read (``--root``, after symbolic links are resolved), the
one folder it may write (``--out``), and how much it may read at once (``--max-input-mb``).

A path given to a tool is resolved (``..`` and every symbolic link, ``os.path.realpath``) before it is
judged, and the resolved path is what the call then reads: a link inside a root that points outside is
refused, and one swapped after the check is not followed. A folder or glob is expanded here, each of its
traces and run folders judged (a run folder's files too), so the command receives only resolved paths.
Refusals are ``ConfinementError``: one line naming the path and the folders allowed.
"""

from __future__ import annotations

import glob
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from tracekit.errors import UsageError

MIB = 2**20
MOST_MATCHES = 10_000  # a glob or folder naming more inputs than this is refused, not read


class ConfinementError(UsageError):
    """A tool call names a path outside what the server may read or write, or more than it may read."""


def resolved(path: str | os.PathLike) -> Path:
    """``path`` with ``~``, ``..`` and every symbolic link resolved (relative: to the working folder)."""
    return Path(os.path.realpath(os.path.expanduser(os.fspath(path))))


def inside(path: Path, folder: Path) -> bool:
    """Whether the resolved ``path`` is ``folder`` or lies under it."""
    return path == folder or folder in path.parents


@dataclass(frozen=True)
class Confinement:
    """The folders a server reads (``roots``) and writes (``out``: None writes nothing), resolved, and the
    most bytes of input one call may read."""

    roots: tuple[Path, ...]
    out: Path | None = None
    max_input_bytes: int = 2048 * MIB

    @classmethod
    def of(cls, roots: Sequence[str | os.PathLike], out: str | os.PathLike | None, max_input_mb: float) -> Confinement:
        """Roots (default: the working folder) and out resolved; each must be an existing folder."""
        folders = [resolved(root) for root in (roots or ["."])]
        missing = [str(folder) for folder in folders if not folder.is_dir()]
        if missing:
            raise ConfinementError(f"--root {missing[0]} is not a folder")
        target = resolved(out) if out is not None else None
        if target is not None:
            target.mkdir(parents=True, exist_ok=True)
        return cls(tuple(dict.fromkeys(folders)), target, int(max_input_mb * MIB))

    def _shown_roots(self) -> str:
        return ", ".join(str(root) for root in self.roots)

    def readable(self, path: str | os.PathLike) -> Path:
        """``path`` resolved; ConfinementError when it is under no root."""
        real = resolved(path)
        if not any(inside(real, root) for root in self.roots):
            raise ConfinementError(f"{path} is outside the folders this server may read ({self._shown_roots()})")
        return real

    def inputs(self, given: Sequence[str]) -> list[str]:
        """The resolved inputs ``given`` names: each path, or a glob's or plain folder's traces and run
        folders, every one under a root (a run folder's files too) and all of them together no larger than
        ``max_input_bytes``."""
        from tracekit.sources.input_paths import expand_inputs

        found: list[Path] = []
        for argument in given:
            if not isinstance(argument, str) or not argument.strip():
                raise ConfinementError(f"an input is a path (a non-empty text), not {argument!r}")
            if glob.has_magic(argument) and not os.path.lexists(argument):
                matches = glob.glob(os.path.expanduser(argument))
                if len(matches) > MOST_MATCHES:
                    raise ConfinementError(f"{argument} matches {len(matches):,} paths; at most {MOST_MATCHES:,}")
                for match in matches:
                    self._judge(self.readable(match))
            else:
                self._judge(self.readable(argument))
            found += expand_inputs([argument])
        if len(found) > MOST_MATCHES:
            raise ConfinementError(f"{len(found):,} inputs; a call reads at most {MOST_MATCHES:,}")
        paths = [self.readable(path) for path in found]
        size = sum(self._size(path) for path in paths)
        if size > self.max_input_bytes:
            raise ConfinementError(
                f"the inputs hold {size / MIB:,.0f} MiB; this server reads at most "
                f"{self.max_input_bytes / MIB:,.0f} MiB in one call (--max-input-mb)"
            )
        if self.out is None:
            self._no_export_needed(paths)
        return [str(path) for path in dict.fromkeys(paths)]

    def _no_export_needed(self, paths: list[Path]) -> None:
        """A report (.nsys-rep) without its SQLite export is exported on first read: a file written, which a
        server without --out does not do."""
        from tracekit.runs import Run
        from tracekit.sources import RUN_KIND, input_kind

        for path in paths:
            kind = input_kind(path)
            run = Run(path) if kind == RUN_KIND else None
            if kind == "nsys-report" or (run is not None and run.export is None and run.report is not None):
                raise ConfinementError(
                    f"{path}: an Nsight Systems report is exported to SQLite on first read, which writes a file; "
                    "export it (nsys export --type sqlite) or start the server with --out DIR"
                )

    def _judge(self, path: Path) -> None:
        """Before a folder is listed (a folder of traces: the first bytes of its files are read), its traces
        and sub-folders are judged: a link among them that leads outside every root is refused unread."""
        from tracekit.sources.input_paths import TRACE_SUFFIXES

        if path.is_dir():
            for entry in path.iterdir():
                if entry.name.endswith(TRACE_SUFFIXES) or entry.is_dir():
                    self.readable(entry)

    def _size(self, path: Path) -> int:
        """Bytes a resolved input holds: a file's size, or a run folder's files' (each under a root)."""
        if not path.is_dir():
            return path.stat().st_size
        files = [self.readable(entry) for entry in path.iterdir()]
        return sum(entry.stat().st_size for entry in files if entry.is_file())

    def writable(self, path: str) -> Path:
        """Where an output named ``path`` (relative: to ``out``) goes, resolved, its folder made; ConfinementError
        when the server writes nothing or the file would land outside ``out``."""
        if self.out is None:
            raise ConfinementError("this server writes no files: start it with --out DIR to have it write there")
        if not isinstance(path, str) or not path.strip():
            raise ConfinementError(f"an output is a file name (a non-empty text), not {path!r}")
        real = resolved(self.out / os.path.expanduser(path))
        if not inside(real, self.out) or real == self.out:
            raise ConfinementError(f"{path} is outside the folder this server writes ({self.out})")
        real.parent.mkdir(parents=True, exist_ok=True)
        return real
