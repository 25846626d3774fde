"""torch.profiler traces: tracekit against HolisticTraceAnalysis, and the JSON readers one could build on.

Each measurement runs in its own process; time is wall clock, memory the peak RSS of the process and
its children together (psutil). On one file:

  tracekit        ``tracekit kernels FILE --by type --ops all`` with the table cache off (a first read)
  tracekit cached the same with the cache on, after a run that wrote it
  HTA             HolisticTraceAnalysis 0.5: ``TraceAnalysis`` load + ``get_gpu_kernel_breakdown``
                  (HTA_DISABLE_NS_ROUNDING=1, as the parity tests run it)
  --parsers       the readers alone, no analysis: ``json.loads``, orjson, msgspec untyped, msgspec typed
                  on the whole document, ijson's event stream (yajl2_c; HTA's optional backend), and
                  tracekit's streamed typed decoding in one process (``json_stream`` + ``kineto_events``)
                  (``pip install ijson orjson psutil`` first; a reader that is missing shows as failed)

    python benchmarks/bench_kineto.py benchmarks/data/kineto_200k.json --parsers
    python benchmarks/bench_kineto.py benchmarks/data/kineto_1m_torch1.8.json --no-hta
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PYTHON = sys.executable
TRACEKIT = str(Path(PYTHON).parent / "tracekit")

HTA = """
import os, sys, tempfile
os.environ["HTA_DISABLE_NS_ROUNDING"] = "1"
import logging; logging.disable(logging.WARNING)
from hta.trace_analysis import TraceAnalysis
folder = tempfile.mkdtemp()
os.symlink(sys.argv[1], os.path.join(folder, os.path.basename(sys.argv[1])))
analysis = TraceAnalysis(trace_dir=folder)
analysis.get_gpu_kernel_breakdown(visualize=False, num_kernels=10**9, duration_ratio=1.0, include_memory_kernels=True)
"""

PARSERS = {
    "json.loads": "import json, sys; json.loads(open(sys.argv[1], 'rb').read())",
    "orjson.loads": "import orjson, sys; orjson.loads(open(sys.argv[1], 'rb').read())",
    "msgspec untyped": "import msgspec, sys; msgspec.json.decode(open(sys.argv[1], 'rb').read())",
    "msgspec typed, whole document": (
        "import msgspec, sys\n"
        "from tracekit.sources.kineto.events import Event\n"
        "class Document(msgspec.Struct):\n"
        "    traceEvents: list[Event] = []\n"
        "msgspec.json.decode(open(sys.argv[1], 'rb').read(), type=Document)"
    ),
    "ijson events (yajl2_c)": (
        "import ijson, sys\nassert 'yajl2_c' in ijson.backend\n"
        "for _ in ijson.items(open(sys.argv[1], 'rb'), 'traceEvents.item', use_float=True): pass"
    ),
    "tracekit streamed typed": (
        "import sys; from pathlib import Path\n"
        "from tracekit.sources.kineto.json_stream import Skeleton, decoded_chunks\n"
        "from tracekit.sources.kineto.events import EventColumns\n"
        "columns = EventColumns()\n"
        "for _ in decoded_chunks(Path(sys.argv[1]), Skeleton(), columns.decode): pass"
    ),
}


def measure(command: list[str], env: dict | None = None) -> tuple[float, float, int]:
    """(seconds, peak RSS in MB, exit status) of one process and its children: tracekit decodes large
    files on worker processes, so the peak is of the whole tree's RSS, sampled every 20 ms (and never
    below the largest single process's peak, from wait4)."""
    import psutil  # pyright: ignore[reportMissingModuleSource]  (a benchmark dependency)

    started = time.perf_counter()
    process = subprocess.Popen(
        command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env={**os.environ, **(env or {})}
    )
    tree_peak = 0
    watched = psutil.Process(process.pid)
    while True:
        try:
            tree = [watched, *watched.children(recursive=True)]
            tree_peak = max(tree_peak, sum(member.memory_info().rss for member in tree))
        except psutil.Error:
            pass
        finished, status, usage = os.wait4(process.pid, os.WNOHANG)
        if finished:
            break
        time.sleep(0.02)
    seconds = time.perf_counter() - started
    return seconds, max(tree_peak / 2**20, usage.ru_maxrss / 1024), os.waitstatus_to_exitcode(status)


def row(label: str, seconds: float, rss_mb: float, status: int, against: tuple[float, float] | None = None) -> str:
    result = f"| {label} | {seconds:,.1f} s | {rss_mb:,.0f} MB |"
    if status:
        result += f" failed (exit {status}) |"
    elif against:
        result += f" {seconds / against[0]:.3f}x time, {rss_mb / against[1]:.2f}x memory |"
    else:
        result += " |"
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("trace", type=Path)
    parser.add_argument("--parsers", action="store_true", help="also the readers alone")
    parser.add_argument("--no-hta", action="store_true", help="leave HolisticTraceAnalysis out")
    parser.add_argument("--repeat", type=int, default=1, help="runs of each tracekit measurement (min is kept)")
    args = parser.parse_args()
    trace = args.trace.resolve()
    size = trace.stat().st_size
    print(f"{trace.name}: {size / 1e6:,.0f} MB\n\n| work | time | peak RSS | against HTA |\n|---|---|---|---|")
    hta = None
    if not args.no_hta:
        seconds, rss, status = measure([PYTHON, "-c", HTA, str(trace)])
        hta = (seconds, rss) if status == 0 else None
        print(row("HTA load + get_gpu_kernel_breakdown", seconds, rss, status), flush=True)
    cache = trace.with_name(trace.name + ".tracekit-cache")
    shutil.rmtree(cache, ignore_errors=True)
    command = [TRACEKIT, "kernels", str(trace), "--by", "type", "--ops", "all"]
    first = min((measure(command, {"TRACEKIT_CACHE": "0"}) for _ in range(args.repeat)), key=lambda run: run[0])
    print(row("tracekit kernels --by type (first read, no cache)", *first, hta), flush=True)
    measure(command)  # writes the cache
    cached = min((measure(command) for _ in range(args.repeat)), key=lambda run: run[0])
    print(row("tracekit kernels --by type (cached)", *cached, hta), flush=True)
    shutil.rmtree(cache, ignore_errors=True)
    if args.parsers:
        print("\n| reader alone | time | peak RSS | MB/s |\n|---|---|---|---|")
        for label, program in PARSERS.items():
            with tempfile.TemporaryDirectory():
                seconds, rss, status = measure([PYTHON, "-c", program, str(trace)])
            speed = f"{size / 1e6 / seconds:,.0f}" if status == 0 else f"failed (exit {status})"
            print(f"| {label} | {seconds:,.1f} s | {rss:,.0f} MB | {speed} |", flush=True)


if __name__ == "__main__":
    main()
