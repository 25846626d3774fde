"""The ``tracekit`` command: a click group; the analysis commands are derived from the registry
(``analyses``, other packages' analysis commands too), the others (``timeline``, ``report``, ``export``,
``capture``, ``mcp``: the server for coding agents) have a module each; ``bench`` is ``workloads``' (an entry point, loaded by ``extensions`` when
named); ``common`` holds what they share (errors as one line, --format/--output, ``emit``); ``__main__``
makes ``python -m tracekit.cli`` the program.

Each command is click -> options -> registry (or one library function) -> the renderer
(``common.emit``); library errors become one line and exit status 1 (``common.TracekitGroup``).
Importing this package loads click and nothing heavy: pandas, numpy, pyarrow, matplotlib and torch
are imported inside the command that needs them.
"""

from __future__ import annotations

import os
import sys

import click

from tracekit.cli.analyses import ANALYSES
from tracekit.cli.capture import capture
from tracekit.cli.export import export
from tracekit.cli.extensions import ExtensibleGroup
from tracekit.cli.mcp import mcp
from tracekit.cli.report import report
from tracekit.cli.timeline import timeline
from tracekit.version import __version__


@click.group(cls=ExtensibleGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="tracekit")
def main():
    """Where a PyTorch training step's GPU time and memory go, from Nsight Systems traces."""


for command in (*ANALYSES, timeline, report, export, capture, mcp):
    main.add_command(command)


# Commands that only read their inputs and write whole files: once they have printed, nothing is left to
# do but exit (``run``). capture and bench start programs and clean up after them, mcp its calls' processes
# and its fork server: they exit normally.
FAST_EXIT = {command.name for command in main.commands.values()} - {"capture", "bench", "mcp"}


def run() -> None:
    """The ``tracekit`` program: ``main``, then, for a command that has finished its work, an immediate
    exit. Python's own exit tears down every module it imported, ~0.25 s once pandas and pyarrow are
    loaded, longer than many commands take; nothing in it matters once the output is flushed. A child
    process or a non-daemon thread still running gets the normal exit, which waits for them."""
    _one_malloc_arena()
    try:
        main()
        code = 0
    except SystemExit as done:
        code = done.code if isinstance(done.code, int) else (0 if done.code is None else 1)
        if not isinstance(done.code, (int, type(None))):
            print(done.code, file=sys.stderr)
    if _may_exit_now():
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):  # a closed pipe (``| head``): nothing more can reach it
                pass
        os._exit(code)
    sys.exit(code)


def _one_malloc_arena() -> None:
    """glibc gives each thread that allocates a heap of its own (an arena), and memory freed into one is
    not used again by the others: tables read on the reading threads, then worked on in the main one,
    held 200-300 MB more at the peak that way (ranges of 4.9M ranges: 1.4-1.6 GB, 1.2 GB with one arena,
    no slower). The program's own process only: a library caller's allocator is theirs to set. Elsewhere
    than glibc (no mallopt, or one that ignores the setting) nothing changes."""
    if not sys.platform.startswith("linux"):
        return
    M_ARENA_MAX = -8  # glibc's malloc.h
    try:
        import ctypes

        ctypes.CDLL(None).mallopt(M_ARENA_MAX, 1)
    except (ImportError, OSError, AttributeError, TypeError):  # a C library without it: nothing to set
        pass


def _may_exit_now() -> bool:
    import threading

    command = next((argument for argument in sys.argv[1:] if not argument.startswith("-")), None)
    if command is not None and command not in FAST_EXIT:
        return False
    main_thread = threading.main_thread()
    if any(thread is not main_thread and thread.is_alive() and not thread.daemon for thread in threading.enumerate()):
        return False
    multiprocessing = sys.modules.get("multiprocessing")
    return multiprocessing is None or not multiprocessing.active_children()
