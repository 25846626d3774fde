"""Shell completion (click's): commands, options, their choices and trace paths, as docs/guide/agents.md
says to turn it on."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.shell_completion import BashComplete
from helpers.paths import ROOT

from tracekit.cli import main


def completions(*words: str) -> list[tuple[str, str]]:
    """What bash is offered for the last word after ``tracekit WORDS...``: (type, value) pairs."""
    complete = BashComplete(main, {}, "tracekit", "_TRACEKIT_COMPLETE")
    return [(item.type, item.value) for item in complete.get_completions(list(words[:-1]), words[-1])]


def test_commands_complete():
    assert completions("ker") == [("plain", "kernels")]
    assert ("plain", "mcp") in completions("")
    assert {value for _, value in completions("")} >= {"kernels", "advise", "report", "capture", "bench", "mcp"}


def test_options_and_their_choices_complete():
    assert completions("kernels", "trace.sqlite", "--same") == [("plain", "--same-thread")]
    assert completions("kernels", "--by", "") == [("plain", "kernel"), ("plain", "category"), ("plain", "type")]
    assert completions("mcp", "--r") == [("plain", "--root")]


def test_trace_paths_complete_as_files():
    """The shell completes a trace argument as a path (click's "file" items: the shell lists the folder)."""
    assert completions("kernels", "traces/tr") == [("file", "traces/tr")]
    assert completions("advise", "a.sq") == [("file", "a.sq")]
    assert completions("mcp", "--root", "sh") == [("dir", "sh")]


@pytest.mark.skipif(sys.platform == "win32", reason="bash completion")
def test_the_installed_command_prints_its_bash_script_and_completes():
    program = shutil.which("tracekit", path=str(Path(sys.executable).parent)) or shutil.which("tracekit")
    if program is None:
        pytest.skip("the tracekit console script is not installed")
    environment = {**os.environ, "PYTHONPATH": str(ROOT)}
    script = subprocess.run(
        [program], env={**environment, "_TRACEKIT_COMPLETE": "bash_source"}, capture_output=True, text=True
    )
    assert "complete -o nosort -F _tracekit_completion tracekit" in script.stdout
    asked = {"COMP_WORDS": "tracekit kernels --by c", "COMP_CWORD": "3", "_TRACEKIT_COMPLETE": "bash_complete"}
    answer = subprocess.run([program], env={**environment, **asked}, capture_output=True, text=True)
    assert answer.stdout.split() == ["plain,category"]
