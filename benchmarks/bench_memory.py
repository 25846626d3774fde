"""Memory snapshot analysis at scale: a synthetic snapshot of ~1M trace entries.

The snapshot imitates training steps: each step allocates activations of varied sizes (forward) and
frees them in reverse order (backward), over weights allocated before the trace began. As in real
dumps, entries share a pool of stack lists. Times, each in a fresh process:
  1. tracekit: load + replay + peak summary + top 20 + holders (the `tracekit memory` work)
  2. tracekit: the timeline PNG on top of 1
  3. torch's own `python -m torch.cuda._memory_viz stats` and `trace` on the same file

    python benchmarks/bench_memory.py [--entries 1000000] [--keep benchmarks/data/snapshot_1m.pickle]
"""

from __future__ import annotations

import argparse
import pickle
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ANALYSIS = """
import sys, time
started = time.perf_counter()
from tracekit.sources.snapshot.reader import load_snapshot
from tracekit.analysis.memory.tables import memory_summary
trace = load_snapshot(sys.argv[1])
loaded = time.perf_counter()
result = memory_summary(trace, top=20, by="all")  # peak, top 20, holders, timeline data
analysed = time.perf_counter()
if sys.argv[2] == "plot":
    from tracekit.render.plots import save
    save(result.charts["timeline"], sys.argv[3])
peak_mib = result.table("summary").set_index("Quantity").loc["peak allocated (MiB)", "Value"]
print(f"{loaded - started:.2f} {analysed - loaded:.2f} {time.perf_counter() - analysed:.2f} {peak_mib}")
"""


def build(entries: int, path: Path, seed: int = 0) -> dict:
    random.seed(seed)
    stacks = [
        [
            {"filename": "??", "line": 0, "name": "torch::unwind::unwind()"},
            {"filename": "CUDACachingAllocator.cpp", "line": 0, "name": "DeviceCachingAllocator::malloc"},
            {"filename": f"/home/user/model/layer{k % 40}.py", "line": 10 + k, "name": f"forward_{k}"},
            {"filename": "/home/user/train.py", "line": 88, "name": "main"},
        ]
        for k in range(500)
    ]
    trace, time_us, address = [], 1_700_000_000_000_000, 1 << 32
    weights = [(address + i * (64 << 20), 48 << 20) for i in range(50)]
    while len(trace) < entries:
        live = []
        for _ in range(random.randint(200, 2000)):  # forward: activations pile up
            size = random.choice((512, 4096, 1 << 20, 8 << 20, 32 << 20))
            address += size + 512
            time_us += random.randint(1, 50)
            trace.append(
                {
                    "action": "alloc",
                    "addr": address,
                    "size": size,
                    "stream": 0,
                    "time_us": time_us,
                    "frames": random.choice(stacks),
                    "compile_context": "N/A",
                    "user_metadata": "",
                }
            )
            live.append((address, size))
        for addr, size in reversed(live):  # backward: freed in reverse order
            for action in ("free_requested", "free_completed"):
                time_us += random.randint(1, 20)
                trace.append(
                    {
                        "action": action,
                        "addr": addr,
                        "size": size,
                        "stream": 0,
                        "time_us": time_us,
                        "frames": [],
                        "compile_context": "N/A",
                        "user_metadata": "",
                    }
                )
    blocks = [
        {"address": addr, "size": size, "requested_size": size, "state": "active_allocated", "frames": stacks[0]}
        for addr, size in weights
    ]
    blocks += [
        {"address": addr + size, "size": (64 << 20) - size, "requested_size": 0, "state": "inactive", "frames": []}
        for addr, size in weights
    ]  # the rest of each 64 MiB stretch, free
    snapshot = {
        "segments": [
            {
                "device": 0,
                "address": weights[0][0],
                "total_size": 50 * (64 << 20),
                "allocated_size": 50 * (48 << 20),
                "active_size": 50 * (48 << 20),
                "requested_size": 50 * (48 << 20),
                "stream": 0,
                "segment_type": "large",
                "segment_pool_id": (0, 0),
                "is_expandable": False,
                "frames": [],
                "blocks": blocks,
            }
        ],
        "device_traces": [trace],
        "allocator_settings": {},
        "external_annotations": [],
    }
    with open(path, "wb") as handle:
        pickle.dump(snapshot, handle, protocol=4)
    return {"entries": len(trace), "mb": path.stat().st_size / 1e6}


def timed(command: list[str]) -> tuple[float, str]:
    started = time.perf_counter()
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        return float("nan"), result.stderr.strip().splitlines()[-1] if result.stderr.strip() else "failed"
    return time.perf_counter() - started, result.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--entries", type=int, default=1_000_000)
    parser.add_argument("--keep", type=Path, default=None, help="write the snapshot here instead of a temp file")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp())
    path = args.keep or folder / "snapshot.pickle"
    info = build(args.entries, path)
    print(f"snapshot: {info['entries']:,} trace entries, {info['mb']:.0f} MB")
    wall, out = timed([sys.executable, "-c", ANALYSIS, str(path), "noplot"])
    load, analyse, _, peak = out.split()
    print(
        f"tracekit peak + top 20 + holders + timeline data: {wall:.2f} s wall (load {load} s, analysis {analyse} s),"
        f" peak {float(peak) / 2**10:.2f} GiB"
    )
    picture = folder / "timeline.png"
    wall_plot, out = timed([sys.executable, "-c", ANALYSIS, str(path), "plot", str(picture)])
    print(
        f"tracekit with the PNG: {wall_plot:.2f} s wall (PNG {out.split()[2]} s, {picture.stat().st_size // 1024} KiB)"
    )
    for command in ("stats", "trace"):
        wall_torch, out = timed([sys.executable, "-m", "torch.cuda._memory_viz", command, str(path)])
        print(
            f"torch _memory_viz {command}: {wall_torch:.2f} s wall" + ("" if wall_torch == wall_torch else f" ({out})")
        )


if __name__ == "__main__":
    main()
