"""Every benchmark of the issue notes, in one run (about 10 minutes on the 2-core CPU machine).

Builds its inputs under benchmarks/data/ (git-ignored) from ../shared/traces, then:
  1. tracekit kernels vs nsys stats gpukernsum at 1M and 10M kernels (time, peak memory)
  2. tracekit breakdown vs tracekit kernels at 1M kernels with NVTX ranges and launches scaled up
  3. tracekit kernels on the 10M export: first run (writes the cache) vs second (reads it)
  4. memory: a 1M-entry snapshot vs torch's _memory_viz
  5. the benchmark harness's overhead on a training step
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
DATA = HERE / "data"
SOURCE = HERE.parent.parent / "shared" / "traces" / "h100_videogen_2gpu_a_nsys2026.2.sqlite"
PYTHON = sys.executable


def run(*args: str, env: dict | None = None) -> None:
    print(f"\n$ {' '.join(args)}", flush=True)
    subprocess.run(args, check=True, env={**os.environ, **(env or {})})


def export(name: str, kernels: int, ranges: bool = False) -> Path:
    path = DATA / name
    if not path.exists():
        run(
            PYTHON,
            str(HERE / "make_large_export.py"),
            str(SOURCE),
            str(path),
            "--kernels",
            str(kernels),
            *(["--with-ranges"] if ranges else []),
        )
    return path


def cache_speedup(path: Path) -> None:
    shutil.rmtree(path.with_name(path.name + ".tracekit-cache"), ignore_errors=True)
    tracekit = str(Path(PYTHON).parent / "tracekit")
    times = []
    for _ in range(2):
        started = time.perf_counter()
        subprocess.run(
            [tracekit, "kernels", str(path), "--by-launch-config", "--format", "csv"],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        times.append(time.perf_counter() - started)
    print(
        f"\ntracekit kernels on {path.name}: first {times[0]:.2f} s (writes the cache), second {times[1]:.2f} s, "
        f"{times[0] / times[1]:.1f}x faster"
    )


def main() -> None:
    if not SOURCE.exists():
        raise SystemExit(f"{SOURCE} is missing: the benchmarks replicate it")
    DATA.mkdir(exist_ok=True)
    no_cache = {"TRACEKIT_CACHE": "0"}  # 1 and 2 measure reading the export itself
    one, ten = export("kernels_1m.sqlite", 1_000_000), export("kernels_10m.sqlite", 10_000_000)
    with_ranges = export("ranges_1m.sqlite", 1_000_000, ranges=True)
    for path, repeat in ((one, "5"), (ten, "1")):
        run(
            PYTHON,
            str(HERE / "bench_commands.py"),
            str(path),
            "--tracekit",
            "kernels --by-launch-config --format csv",
            "--nsys",
            "gpukernsum",
            "--repeat",
            repeat,
            env=no_cache,
        )
    run(
        PYTHON,
        str(HERE / "bench_commands.py"),
        str(with_ranges),
        "--tracekit",
        "kernels --format csv",
        "--tracekit",
        "breakdown --phases aten::linear*,aten::layer_norm*,FSDP* --format csv",
        "--repeat",
        "3",
        env=no_cache,
    )
    cache_speedup(ten)
    run(PYTHON, str(HERE / "bench_memory.py"), "--keep", str(DATA / "snapshot_1m.pickle"))
    run(PYTHON, str(HERE / "bench_harness_overhead.py"))


if __name__ == "__main__":
    main()
