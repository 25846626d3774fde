"""Start the workload the way ``python -m workloads`` would, but always this installation's.

``python -m workloads`` resolves the package against the current directory first, so a folder named
``workloads`` wherever the user stands would run instead of ours. Run as a script, this file's own
folder is ``sys.path[0]`` (never the current directory); it puts the folder holding this installation's
``tracekit`` and ``workloads`` there instead and runs the package. PYTHONPATH and user site-packages
stay as the user set them (no ``-I``; ``-P`` would need Python 3.11).

The program's output goes to the file TRACEKIT_PROGRAM_LOG names (apart from nsys's own), and if it
dies before writing its ``--result`` file (torch missing, say), the cause is written there, so that a
failed capture is blamed on what really failed.

    python .../tracekit/capture/launch.py tiny --ctx 32 ... --result PATH   (the workload's arguments)
"""

import json
import os
import runpy
import sys
import traceback
from pathlib import Path


def _result_path(argv: list[str]) -> str | None:
    return argv[argv.index("--result") + 1] if "--result" in argv[:-1] else None


def _redirect_output(log: str) -> None:
    descriptor = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o666)
    for stream in (1, 2):
        os.dup2(descriptor, stream)
    os.close(descriptor)


if __name__ == "__main__":
    if os.environ.get("TRACEKIT_PROGRAM_LOG"):
        _redirect_output(os.environ["TRACEKIT_PROGRAM_LOG"])
    result = _result_path(sys.argv)
    sys.path[0] = str(Path(__file__).resolve().parents[2])  # replaces this file's folder, not the cwd's
    sys.argv[0] = "workloads"
    try:
        runpy.run_module("workloads", run_name="__main__", alter_sys=True)
    except SystemExit:
        raise
    except BaseException as error:
        traceback.print_exc()
        if result and not os.path.exists(result):
            with open(result, "w") as handle:
                json.dump({"status": "failed", "error": f"{type(error).__name__}: {error}"}, handle)
        sys.exit(1)
