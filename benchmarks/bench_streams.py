"""Per-stream work: each analysis on N GPU ops spread over many streams against the same N ops on one
stream (issue 38: `queues` cost ~0.7 ms per stream, 96 s at 100k streams, while 1M kernels on a few
streams took 1 s). The bar: many streams within 2x of one.

The traces are built in memory (``Trace.from_frames``), so only the analysis is timed, not reading:
one launch call per op on one thread, 1,000 ns apart; every 10th op a memcpy (for bandwidth), every
20th an NCCL kernel (for overlap). A fresh Trace per sample, so no derived table is reused.

    python benchmarks/bench_streams.py --ops 300000 --streams 100000 --repeat 3
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
import pandas as pd

import tracekit
from tracekit.model.trace import Trace, TraceMeta

COMMANDS = {
    "queues": lambda trace: tracekit.queues(trace),
    "idle --per-stream": lambda trace: tracekit.idle(trace, per_stream=True),
    "sequences": lambda trace: tracekit.sequences(trace),
    "bandwidth": lambda trace: tracekit.bandwidth(trace),
    "launches": lambda trace: tracekit.launches(trace),
    "overlap": lambda trace: tracekit.overlap(trace),
    "kernels": lambda trace: tracekit.kernels(trace),
}
KERNELS = ["void gemm_kernel<float>(float*)", "void add_kernel<float>()", "void relu_kernel<float>()"]
NCCL = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)"
COPY = "[CUDA memcpy HtoD]"


def frames(ops: int, streams: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """gpu_ops and launches of ``ops`` ops, op i on stream 7 + i % ``streams``."""
    index = np.arange(ops, dtype=np.int64)
    copy, nccl = index % 10 == 9, index % 20 == 0
    names = np.where(copy, COPY, np.where(nccl, NCCL, np.asarray(KERNELS)[index % len(KERNELS)]))
    start = index * 1_000 + 500
    name = pd.Categorical(names)
    zero = np.zeros(ops, dtype=np.int32)
    gpu_ops = pd.DataFrame(
        {
            "start": start,
            "end": start + 300,
            "duration": np.full(ops, 300, dtype=np.int64),
            "kind": pd.Categorical(np.where(copy, "memcpy", "kernel"), categories=["kernel", "memcpy", "memset"]),
            "name": name,
            "short_name": pd.Categorical([text.split("<")[0].split("(")[0] for text in names]),
            "device": np.zeros(ops, dtype=np.int16),
            "stream": (7 + index % streams).astype(np.int32),
            "correlation_id": index + 1,
            "pid": np.full(ops, 100, dtype=np.int32),
            "grid_x": zero + 1,
            "grid_y": zero + 1,
            "grid_z": zero + 1,
            "block_x": zero + 128,
            "block_y": zero + 1,
            "block_z": zero + 1,
            "registers_per_thread": np.where(copy, 0, 32).astype(np.int32),
            "shared_memory": zero.astype(np.int64),
            "bytes": np.where(copy, 1 << 20, 0).astype(np.int64),
        }
    )
    launches = pd.DataFrame(
        {
            "start": index * 1_000,
            "end": index * 1_000 + 5,
            "duration": np.full(ops, 5, dtype=np.int64),
            "name": pd.Categorical(np.where(copy, "cudaMemcpyAsync_v3020", "cudaLaunchKernel_v7000")),
            "correlation_id": index + 1,
            "pid": np.full(ops, 100, dtype=np.int64),
            "tid": np.full(ops, 100, dtype=np.int64),
        }
    )
    return gpu_ops, launches


def seconds(command, gpu_ops: pd.DataFrame, launches: pd.DataFrame, repeat: int) -> list[float]:
    samples = []
    for _ in range(repeat):
        trace = Trace.from_frames(TraceMeta("built"), gpu_ops, launches)
        started = time.perf_counter()
        command(trace)
        samples.append(time.perf_counter() - started)
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--ops", type=int, default=300_000)
    parser.add_argument("--streams", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--only", nargs="*", default=list(COMMANDS), choices=list(COMMANDS))
    arguments = parser.parse_args()
    one, many = frames(arguments.ops, 1), frames(arguments.ops, arguments.streams)
    print(f"{arguments.ops:,} ops; median of {arguments.repeat} (min-max), s")
    print(f"| command | 1 stream | {arguments.streams:,} streams | ratio |\n|---|---|---|---|")
    for label in arguments.only:
        on_one = seconds(COMMANDS[label], *one, arguments.repeat)
        on_many = seconds(COMMANDS[label], *many, arguments.repeat)
        first, second = statistics.median(on_one), statistics.median(on_many)
        print(
            f"| {label} | {first:.3f} ({min(on_one):.3f}-{max(on_one):.3f}) | {second:.3f} "
            f"({min(on_many):.3f}-{max(on_many):.3f}) | {second / first:.2f} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
