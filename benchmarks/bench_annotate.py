"""What ``tracekit.annotate.range`` costs a training loop: per range, with no profiler attached (the
promise: under a microsecond), with torch imported, and inside a running torch.profiler.

    python benchmarks/bench_annotate.py
"""

from __future__ import annotations

import time

from tracekit import annotate

RANGES = 200_000


def per_range_us(count: int = RANGES) -> float:
    started = time.perf_counter()
    for _ in range(count):
        with annotate.range("forward"):
            pass
    return (time.perf_counter() - started) / count * 1e6


def main() -> None:
    print(f"no profiler, torch not imported: {per_range_us():.2f} us per range")
    import torch

    print(f"no profiler, torch imported:     {per_range_us():.2f} us per range")
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]):
        recorded = per_range_us(20_000)
    print(f"inside torch.profiler:           {recorded:.2f} us per range (record_function)")
    empty = time.perf_counter()
    for _ in range(RANGES):
        pass
    print(f"(the empty loop itself:          {(time.perf_counter() - empty) / RANGES * 1e6:.2f} us per iteration)")


if __name__ == "__main__":
    main()
