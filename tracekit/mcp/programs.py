"""``capture`` and ``bench`` as tools, offered only with ``--allow-run``: they run programs (a training
script, a model), which no folder can confine. Each runs as ``tracekit capture|bench ARGUMENTS`` in a
process group of its own, its working folder ``--out`` (capture's run folders go to ``--out``/traces), its
output returned as text; past ``--timeout`` the group is stopped (SIGTERM: capture stops the program and
keeps what was recorded; SIGKILL after a grace).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from tracekit.errors import UsageError
from tracekit.mcp.child import GRACE_S, CallTimeout

PROGRAMS = {
    "capture": "Profile a program or a GPT-2-family model into a run folder under --out/traces: the words after "
    "`tracekit capture` (a model name and options, or -- COMMAND...). Runs the program: offered with --allow-run.",
    "bench": "Time models and kernels: the words after `tracekit bench` (a subcommand and its options), run in the "
    "--out folder. Runs models: offered with --allow-run.",
}
TAIL_CHARS = 20_000


def program_schema(name: str) -> dict:
    """A program tool's input schema: the command line's words after ``tracekit NAME``."""
    return {
        "type": "object",
        "properties": {
            "arguments": {
                "type": "array",
                "items": {"type": "string"},
                "description": f"the words after `tracekit {name}`, one per item (see `tracekit {name} --help`)",
            }
        },
        "required": ["arguments"],
        "additionalProperties": False,
    }


def program_words(name: str, arguments: object, out: Path | None) -> list[str]:
    """The command that runs ``tracekit NAME ARGUMENTS`` under the server's rules; UsageError when the
    arguments are not a list of words, no --out was given, or capture is asked to write elsewhere."""
    if not isinstance(arguments, list) or not all(isinstance(word, str) for word in arguments):
        raise UsageError(f"arguments is a list of words (texts), not {arguments!r}")
    if out is None:
        raise UsageError(f"{name} writes files: start the server with --out DIR")
    own = arguments[: arguments.index("--")] if "--" in arguments else arguments
    if name == "capture" and any(word == "--out" or word.startswith("--out=") for word in own):
        raise UsageError("capture writes its run folders under the server's --out/traces: leave --out out")
    extra = ["--out", str(out / "traces")] if name == "capture" else []
    return [sys.executable, "-m", "tracekit.cli", name, *extra, *arguments]


def run_program(words: list[str], out: Path, timeout_s: float) -> tuple[int, str]:
    """Run ``words`` in ``out``; its exit status and the tail of its output (standard output and error)."""
    process = subprocess.Popen(
        words,
        cwd=out,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
        text=True,
        errors="replace",
    )
    try:
        output, _ = process.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        _stop(process)
        raise CallTimeout(
            f"the call ran past this server's time limit of {timeout_s:g} s (--timeout) and was stopped"
        ) from None
    except BaseException:
        _stop(process)
        raise
    return process.returncode, output[-TAIL_CHARS:]


def _stop(process: subprocess.Popen) -> None:
    for number in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(process.pid, number)
        except ProcessLookupError:
            return
        try:
            process.communicate(timeout=GRACE_S)
            return
        except subprocess.TimeoutExpired:
            continue
