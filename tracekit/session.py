"""What is process-wide, in one object: a ``Session``.

A command (or a notebook's analyses) shares a few things across calls: settings read from the
environment, the threads that read SQLite chunks, tables read ahead of need, the files that are its
inputs (never written over by ``-o``), and cache tables written in the background. They live in the
current ``Session``, not in module globals, so they can be seen, and ended, in one place:

- the command line opens one per command (``with Session(...)``) and closes it before it exits;
- the Python API uses a default session, created on first use and shared by every thread, whose
  settings follow the environment as it is at each call; ``tracekit.current_session().close()`` ends
  what it holds (threads, reads, inputs), and ``with tracekit.Session(...)`` replaces it for a block;
- ``with Session(...)`` holds for the current context only (a ``ContextVar``): the thread, or the asyncio
  task, that entered it; another thread keeps its own. Settings given to one call (``open_trace(path,
  nsys=...)``) hold for that call (``overriding``), never written into a shared session;
- threads that tracekit starts (reads ahead, chunk readers, cache writers, loads behind) run their work in
  the context of the code that started them (``in_this_context``): they see its session and settings;
- worker processes (the pool, Dask) receive the client's ``Settings`` as an argument and open a
  session of their own with them: nothing is passed through ``os.environ``.

The standard library only: every layer of tracekit may use it.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar, Token, copy_context
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, ParamSpec, Protocol, TypeVar

P = ParamSpec("P")
R = TypeVar("R")

DEFAULT_CACHE_MIN_BYTES = 32 * 2**20
DEFAULT_DECODE_MIN_BYTES = 64 * 2**20
DEFAULT_SNAPSHOT_LIMIT_MB = 1024
DEFAULT_SNAPSHOT_MAX_FRAMES = 10_000


def _whole_number(environ: Mapping[str, str], name: str, default: int | None) -> int | None:
    """A whole number from the environment; ``default`` when unset or not a plain number (a mistyped
    value is not worth a traceback)."""
    text = environ.get(name, "").strip()
    return int(text) if text.isdigit() else default


@dataclass(frozen=True)
class Settings:
    """Settings of a session, each with the environment variable it is read from.

    ``nsys``: the nsys executable that exports reports (TRACEKIT_NSYS; None: PATH, then usual places).
    ``cache``: whether large exports' tables are cached as column files (TRACEKIT_CACHE=0 turns it off).
    ``cache_min_bytes``: exports smaller than this are not cached (TRACEKIT_CACHE_MIN_BYTES, bytes).
    ``cache_home``: where caches go when an export's folder is not writable (XDG_CACHE_HOME/tracekit).
    ``decode_workers``: processes that decode one large torch.profiler trace (TRACEKIT_WORKERS; None:
    up to 4 cores; 0 or 1: in this process).
    ``decode_min_bytes``: smaller torch.profiler traces are decoded in this process
    (TRACEKIT_PARALLEL_MIN_BYTES, bytes).
    ``snapshot_limit_mb``: the largest memory snapshot read (TRACEKIT_SNAPSHOT_LIMIT_MB, MiB).
    ``snapshot_max_frames``: stack frames kept per snapshot entry (TRACEKIT_SNAPSHOT_MAX_FRAMES).
    ``beside_inputs``: caches and the exports of reports are written beside their input where its folder is
    writable (else under ``cache_home``); False: always under ``cache_home``, so that nothing is written among
    the inputs (``tracekit mcp``, which writes only in its own folder).
    """

    nsys: str | None = None
    cache: bool = True
    cache_min_bytes: int = DEFAULT_CACHE_MIN_BYTES
    cache_home: str = field(default_factory=lambda: str(Path.home() / ".cache"))
    decode_workers: int | None = None
    decode_min_bytes: int = DEFAULT_DECODE_MIN_BYTES
    snapshot_limit_mb: int = DEFAULT_SNAPSHOT_LIMIT_MB
    snapshot_max_frames: int = DEFAULT_SNAPSHOT_MAX_FRAMES
    beside_inputs: bool = True

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] | None = None) -> Settings:
        """The settings the environment gives (``os.environ`` unless ``environ``): the one place tracekit
        reads its TRACEKIT_* variables."""
        env = os.environ if environ is None else environ
        return cls(
            nsys=env.get("TRACEKIT_NSYS") or None,
            cache=env.get("TRACEKIT_CACHE", "1") != "0",
            cache_min_bytes=_whole_number(env, "TRACEKIT_CACHE_MIN_BYTES", DEFAULT_CACHE_MIN_BYTES) or 0,
            cache_home=env.get("XDG_CACHE_HOME") or str(Path.home() / ".cache"),
            decode_workers=_whole_number(env, "TRACEKIT_WORKERS", None),
            decode_min_bytes=_whole_number(env, "TRACEKIT_PARALLEL_MIN_BYTES", DEFAULT_DECODE_MIN_BYTES) or 0,
            snapshot_limit_mb=max(1, _whole_number(env, "TRACEKIT_SNAPSHOT_LIMIT_MB", DEFAULT_SNAPSHOT_LIMIT_MB) or 1),
            snapshot_max_frames=max(
                1, _whole_number(env, "TRACEKIT_SNAPSHOT_MAX_FRAMES", DEFAULT_SNAPSHOT_MAX_FRAMES) or 1
            ),
        )

    def replace(self, **changes: Any) -> Settings:
        """These settings with ``changes``."""
        return replace(self, **changes)


class Closable(Protocol):
    def close(self) -> None: ...


class Session:
    """What one command (or one notebook) shares between its reads and writes; ``close`` ends it all.

    ``settings``: given, or (None) read from the environment at each use. ``write_behind``: cache
    tables are written on background threads, every one finished by ``close`` (the command line's
    choice: its analysis goes on meanwhile); otherwise each is written before its read returns.
    ``option_name``: how messages name an option (default: its parameter name, as the API takes it).

    ``with Session(...)`` makes it the current session of this thread, or asyncio task, only: other threads
    keep theirs (the default session unless they entered one), and the threads tracekit starts for a read
    use the session of the code that started them.
    """

    def __init__(
        self,
        settings: Settings | None = None,
        write_behind: bool = False,
        option_name: Callable[[str], str] | None = None,
    ):
        self._settings = settings
        self.write_behind = write_behind
        # How messages name an option: its parameter name (the API's), or what the caller offers
        # instead (the command line: --flags). Analyses speak in parameter names and ask this.
        self.option_name: Callable[[str], str] = option_name or (lambda name: name)
        self.lock = threading.Lock()
        self.inputs: set[str] = set()  # real paths of the files read as inputs
        self.input_ids: set[tuple[int, int]] = set()  # (device, inode): a hard link is the same input
        self.reads_ahead: dict[str, Any] = {}  # key -> concurrent.futures.Future of a read started early
        self.pending_writes: list[threading.Thread] = []  # cache tables being written
        self.resources: dict[str, Closable] = {}  # e.g. the reading threads, started on first use
        self._tokens: list[Token[Session | None]] = []  # one per ``with``: what to restore on leaving it
        self.closed = False

    def sendable_option_name(self) -> Callable[[str], str] | None:
        """``option_name`` when another process can receive it (a module's function, as the command line's
        flag naming is), else None (the API's own naming, which a worker's new Session has anyway)."""
        import pickle

        try:
            pickle.dumps(self.option_name)
        except (pickle.PicklingError, AttributeError, TypeError):
            return None
        return self.option_name

    @property
    def settings(self) -> Settings:
        """The session's settings (given, else the environment's now), with the changes ``overriding``
        makes in the current context."""
        settings = self._settings if self._settings is not None else Settings.from_environment()
        changes = _OVERRIDES.get()
        return settings.replace(**changes) if changes else settings

    # -- inputs: files ``-o`` must never write over ------------------------------------------------

    def protect(self, *paths: str | os.PathLike | None) -> None:
        """Mark files as inputs: ``files.check_target`` refuses to write over them."""
        for path in paths:
            if path is None:
                continue
            self.inputs.add(os.path.realpath(path))
            identity = _identity(path)
            if identity is not None:
                self.input_ids.add(identity)

    def is_input(self, path: str | os.PathLike) -> bool:
        """Whether ``path`` (a real path) is one of the inputs, or a hard link to one."""
        return str(path) in self.inputs or (bool(self.input_ids) and _identity(path) in self.input_ids)

    # -- things started on first use ---------------------------------------------------------------

    def resource(self, name: str, start: Callable[[], Closable]) -> Any:
        """The session's ``name`` (e.g. its reading threads), started by ``start`` on first use."""
        with self.lock:
            if name not in self.resources:
                self.resources[name] = start()
            return self.resources[name]

    def finish_writes(self) -> None:
        """Wait for every cache table being written in the background."""
        while self.pending_writes:
            self.pending_writes.pop().join()

    def close(self) -> None:
        """End what the session holds: wait for background writes and reads started ahead, stop the
        reading threads, forget the inputs. A closed session can still be used (it starts afresh)."""
        self.finish_writes()
        with self.lock:
            reads, self.reads_ahead = list(self.reads_ahead.values()), {}
        for future in reads:  # a read started ahead runs on its own thread: wait for it to end
            future.exception()
        with self.lock:  # after the reads: what they started (reading threads) is stopped too
            resources, self.resources = list(self.resources.values()), {}
        for resource in resources:
            resource.close()
        self.inputs.clear()
        self.input_ids.clear()
        self.closed = True

    def __enter__(self) -> Session:
        self._tokens.append(_ACTIVE.set(self))
        self.closed = False
        return self

    def __exit__(self, *exc_info: object) -> None:
        _ACTIVE.reset(self._tokens.pop())
        self.close()


def _identity(path: str | os.PathLike) -> tuple[int, int] | None:
    try:
        status = os.stat(path)
    except OSError:
        return None
    return status.st_dev, status.st_ino


# The session in use in this context (thread, asyncio task): the innermost ``with Session()``; None: the
# default one, shared by the whole process and created on first use.
_ACTIVE: ContextVar[Session | None] = ContextVar("tracekit_session", default=None)
# Settings changed for the calls made within ``overriding`` in this context, on top of the session's own.
_OVERRIDES: ContextVar[Mapping[str, Any] | None] = ContextVar("tracekit_settings_overrides", default=None)
_LOCK = threading.Lock()
_DEFAULT: list[Session | None] = [None]


def current() -> Session:
    """The session in use: the innermost ``with Session()`` of this context, else the default one (created
    on first use)."""
    active = _ACTIVE.get()
    if active is not None:
        return active
    with _LOCK:
        if _DEFAULT[0] is None:
            _DEFAULT[0] = Session()
        return _DEFAULT[0]


@contextmanager
def overriding(**changes: Any) -> Iterator[None]:
    """Within (in this context only): the current session's ``settings`` carry ``changes`` (``nsys=...``),
    the session itself untouched: how one call's settings reach what it reads, and no other call's."""
    token = _OVERRIDES.set({**(_OVERRIDES.get() or {}), **changes})
    try:
        yield
    finally:
        _OVERRIDES.reset(token)


def in_this_context(function: Callable[P, R]) -> Callable[P, R]:
    """``function``, to run on another thread in the context of the code calling this (its session, its
    settings): a new thread starts in an empty context, which sees the default session. Each call runs in
    a copy of that context of its own (one context cannot be entered on two threads at once)."""
    context = copy_context()

    def run(*args: P.args, **kwargs: P.kwargs) -> R:
        return context.copy().run(_closing_behind, function, *args, **kwargs)

    return run


def _closing_behind(function: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
    """``function``, then, when the ``with Session()`` it ran in has ended meanwhile (a load behind that
    outlived its command), that session closed again: the reading threads the work started stop with it."""
    try:
        return function(*args, **kwargs)
    finally:
        session = _ACTIVE.get()
        if session is not None and session.closed:
            session.close()


def _after_fork_in_child() -> None:
    """A forked child holds its parent's records but not its threads: it starts with empty sessions."""
    for session in (_ACTIVE.get(), _DEFAULT[0]):
        if session is not None:
            session.lock = threading.Lock()
            session.resources = {}
            session.reads_ahead = {}
            session.pending_writes = []


if hasattr(os, "register_at_fork"):  # not on Windows, which does not fork
    os.register_at_fork(after_in_child=_after_fork_in_child)
