"""Start the workload the way ``python -m workloads`` would, but always this installation's.

``python -m workloads`` resolves the package against the current directory first, so a folder named
``workloads`` wherever the user stands would run instead of ours. Run as a script, this file's own
folder is ``sys.path[0]`` (never the current directory); it puts the folder holding this installation's
``tracekit`` and ``workloads`` there instead and runs the package. PYTHONPATH and user site-packages
stay as the user set them (no ``-I``; ``-P`` would need Python 3.11).

    python .../tracekit/capture/launch.py tiny --ctx 32 ...   (the workload's arguments)
"""

import runpy
import sys
from pathlib import Path

if __name__ == "__main__":
    sys.path[0] = str(Path(__file__).resolve().parents[2])  # replaces this file's folder, not the cwd's
    sys.argv[0] = "workloads"
    runpy.run_module("workloads", run_name="__main__", alter_sys=True)
