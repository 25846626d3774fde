"""Built torch.profiler traces for the critical path: two whose paths are worked out by hand
(``launch_then_sync``, ``stream_wait``; times in µs) and random ones with many steps (``random_steps``) whose
paths the columnar implementation must find exactly as the reference one does (helpers.critical_path_reference).

Times are whole µs, so equal times (ties in every sort and between equal-length paths) are common; the
threads nest operators, annotations and calls, and now and then a range overlaps another without nesting
(HTA's stack pops whatever is on top).
"""

from __future__ import annotations

import random
from pathlib import Path

from helpers.kineto_builder import KinetoBuilder

STREAMS = (7, 20, 21)
US = 1000


def launch_then_sync(path, with_sync: bool = True, step: bool = False):
    """aten::mm launches K1 (stream idle: a launch edge), aten::add launches K2 while K1 runs (queued
    behind it: a kernel-kernel edge), cudaStreamSynchronize waits for both, aten::item follows.
    Path by hand: mm's own 2 -> launch delay 18 -> K1 100 -> gap 10 -> K2 50 -> (sync) -> item 5 = 185."""
    b = KinetoBuilder()
    if step:
        b.annotation("ProfilerStep#7", 0, 212)
    b.annotation("aten::mm", 0, 10, cat="cpu_op").launch("cudaLaunchKernel", 2, 3, correlation=1)
    b.kernel("gemm_kernel", 20, 100, correlation=1)
    b.annotation("aten::add", 30, 10, cat="cpu_op").launch("cudaLaunchKernel", 32, 3, correlation=2)
    b.kernel("add_kernel", 130, 50, correlation=2)
    b.launch("cudaStreamSynchronize", 45, 155, correlation=3)
    if with_sync:
        b.sync("Stream Sync", 181, 1, correlation=3)
    b.annotation("aten::item", 205, 5, cat="cpu_op")
    return b.write(path / "built.json")


def stream_wait(path, wait: bool = True):
    """K1 on stream 7 is recorded by an event that stream 20 waits for before K3: K3 starts after K1 ends,
    so the path runs through K1 (launch 10 + K1 100 + K3 20 = 130); without the wait, K3's own launch
    delay from a CPU chain of 9 µs decides it (9 + 103 + 20 = 132)."""
    b = KinetoBuilder()
    b.launch("cudaLaunchKernel", 0, 5, correlation=1).kernel("first_kernel", 10, 100, correlation=1)
    b.launch("cudaEventRecord", 6, 2, correlation=2)
    b.launch("cudaStreamWaitEvent", 9, 2, correlation=3)
    if wait:
        b.sync("Stream Wait Event", 12, 1, correlation=3, stream=20, waits_on=(7, 2))
    b.launch("cudaLaunchKernel", 12, 3, correlation=4).kernel("third_kernel", 115, 20, correlation=4, stream=20)
    return b.write(path / "wait.json")


def side_stream_wait(path, device: int = 0):
    """A main stream runs a long backward pass (four kernels queued back to back, 2 µs apart) while a side
    stream's two tiny device-to-host copies, the second queued behind the first, are 40 ms apart (the second
    waited for the backward, through no dependency the trace records); a stream sync waits for the second,
    aten::item follows. HTA's path: copy 1 + the 40,000 µs gap + copy 2 + item 5 = 40,007 (the gap as
    Kernel-Kernel Overhead); tracekit's: the backward 39,960 + its gaps 6 + 5 from its last kernel's end to
    copy 2 + copy 2 1 + item 5 = 39,977, GPU Compute 39,961. ``device``: the backward's GPU (another than the
    copies' 0: nothing links them)."""
    b = KinetoBuilder(devices=2)
    copy = "Memcpy DtoH (Device -> Pinned)"
    b.launch("cudaMemcpyAsync", 10, 2, correlation=1).memcpy(20, 1, correlation=1, size=4, stream=20, name=copy)
    b.launch("cudaMemcpyAsync", 13, 2, correlation=2).memcpy(40_021, 1, correlation=2, size=4, stream=20, name=copy)
    for index, (start, duration) in enumerate([(50, 10_000), (10_052, 10_000), (20_054, 10_000), (30_056, 9_960)]):
        b.launch("cudaLaunchKernel", 30 + 3 * index, 2, correlation=3 + index)
        b.kernel("backward_kernel", start, duration, correlation=3 + index, device=device)
    b.launch("cudaStreamSynchronize", 42, 39_988, correlation=7).sync(
        "Stream Sync", 40_023, 1, correlation=7, stream=20
    )
    b.annotation("aten::item", 40_040, 5, cat="cpu_op")
    return b.write(path / "side_stream.json")


def gpu_behind(path):
    """Two 10 ms steps. Step 1's aten::mm launches a 15 ms GEMM at 1,010 µs: it runs to 16,010, 6,010 µs into
    step 2, whose aten::add launches a 2 ms kernel at 12,002 queued behind it (16,012 to 18,012).
    HTA: step 1's path is mm's 2 + launch 10 + the GEMM 15,000 = 15,012 (longer than the step); step 2's is
    add's 2 + a "launch delay" of 4,010 (the GEMM it waited for is no part of its window) + 2,000 = 6,012.
    tracekit: step 1's is 2 + 10 + the GEMM up to the step's end 8,990 = 9,002; step 2's the GEMM from the
    step's start 6,010 + gap 2 + 2,000 = 8,012."""
    b = KinetoBuilder()
    b.annotation("ProfilerStep#1", 0, 10_000).annotation("ProfilerStep#2", 10_000, 10_000)
    b.annotation("aten::mm", 998, 10, cat="cpu_op").launch("cudaLaunchKernel", 1_000, 5, correlation=1)
    b.kernel("gemm_kernel", 1_010, 15_000, correlation=1)
    b.annotation("aten::add", 12_000, 10, cat="cpu_op").launch("cudaLaunchKernel", 12_002, 3, correlation=2)
    b.kernel("add_kernel", 16_012, 2_000, correlation=2)
    return b.write(path / "gpu_behind.json")


class _Steps:
    def __init__(self, seed: int, threads: int):
        self.rng = random.Random(seed)
        self.b = KinetoBuilder()
        self.correlation = 0
        self.stream_free: dict[int, int] = dict.fromkeys(STREAMS, 0)  # when each stream's last op ends
        # per thread, stream -> correlation of its latest cudaEventRecord on that thread (the threads are built
        # one after the other: another thread's record may lie ahead in time)
        self.recorded: dict[int, dict[int, int]] = {}
        self.threads = [100 + index for index in range(threads)]

    def next_correlation(self) -> int:
        self.correlation += 1
        return self.correlation

    def gpu_op(self, call_start: int, correlation: int, stream: int) -> int:
        rng = self.rng
        start = max(call_start + rng.randint(1, 4), self.stream_free[stream] + rng.randint(-2, 3))
        duration = rng.randint(0, 12)
        name = rng.choice(["gemm_kernel", "add_kernel", "ncclKernel_AllReduce_RING_LL_Sum_float", "softmax"])
        if rng.random() < 0.15:
            self.b.memcpy(start, duration, correlation, 1024, stream=stream)
        else:
            self.b.kernel(name, start, duration, correlation, stream=stream)
        self.stream_free[stream] = max(self.stream_free[stream], start + duration)
        return start + duration

    def call(self, at: int, tid: int) -> int:
        """One CUDA call at ``at`` on thread ``tid`` (and its GPU side); returns its end."""
        rng, b = self.rng, self.b
        correlation, stream = self.next_correlation(), rng.choice(STREAMS)
        recorded_on = self.recorded.setdefault(tid, {})
        choice = rng.random()
        if choice < 0.5:
            duration = rng.randint(1, 4)
            b.launch(
                rng.choice(["cudaLaunchKernel", "cudaLaunchKernel", "cudaMemcpyAsync"]),
                at,
                duration,
                correlation,
                tid=tid,
            )
            self.gpu_op(at, correlation, stream)
            return at + duration
        if choice < 0.6:
            end = max(at + 1, self.stream_free[stream] + rng.randint(0, 2))
            b.launch("cudaStreamSynchronize", at, end - at, correlation, tid=tid)
            if rng.random() < 0.9:
                b.sync("Stream Sync", end - 1, 1, correlation, stream=stream)
            return end
        if choice < 0.65:
            end = max(at + 1, max(self.stream_free.values()) + rng.randint(0, 2))
            b.launch("cudaDeviceSynchronize", at, end - at, correlation, tid=tid)
            b.sync("Context Sync", end - 1, 1, correlation)
            return end
        if choice < 0.8:
            b.launch("cudaEventRecord", at, 1, correlation, tid=tid)
            recorded_on[stream] = correlation
            return at + 1
        if choice < 0.92 and recorded_on:
            recorded = rng.choice(sorted(recorded_on))
            waiting = rng.choice([s for s in STREAMS if s != recorded])
            b.launch("cudaStreamWaitEvent", at, 1, correlation, tid=tid)
            b.sync(
                "Stream Wait Event", at + 1, 1, correlation, stream=waiting, waits_on=(recorded, recorded_on[recorded])
            )
            return at + 1
        if recorded_on:
            recorded = rng.choice(sorted(recorded_on))
            end = max(at + 1, self.stream_free[recorded] + rng.randint(0, 2))
            b.launch("cudaEventSynchronize", at, end - at, correlation, tid=tid)
            b.sync("Event Sync", end - 1, 1, correlation, stream=recorded, waits_on=(recorded, recorded_on[recorded]))
            return end
        return at

    def operator(self, at: int, tid: int, depth: int) -> int:
        """An operator (or annotation) at ``at`` holding calls and, above depth 0, smaller operators."""
        rng = self.rng
        cursor = at + rng.randint(0, 1)
        for _ in range(rng.randint(0, 3)):
            if depth < 2 and rng.random() < 0.4:
                cursor = self.operator(cursor, tid, depth + 1)
            else:
                cursor = self.call(cursor, tid)
            cursor += rng.randint(0, 1)
        end = cursor + rng.randint(0, 1)
        kind = rng.random()
        if kind < 0.7:
            self.b.annotation(
                rng.choice(["aten::mm", "aten::add", "aten::copy_", "Optimizer.step#SGD.step"]),
                at,
                end - at,
                tid=tid,
                cat="cpu_op",
            )
        else:
            self.b.annotation(rng.choice(["forward", "## backward ##"]), at, end - at, tid=tid)
        if rng.random() < 0.05:  # a range that overlaps the operator's end without nesting
            self.b.annotation("aten::overlapping", (at + end) // 2, end - at + 2, tid=tid, cat="cpu_op")
        return end

    def build(self, steps: int, alike: bool = False) -> KinetoBuilder:
        time = 0
        base = self.rng.randint(0, 2**31) if alike else 0
        for step in range(steps):
            ends = []
            for tid in self.threads:
                if alike:  # the same work on every thread (its GPU ops differ: the streams are shared)
                    self.rng = random.Random(base + step)
                cursor = time + self.rng.randint(0, 2)
                for _ in range(self.rng.randint(1, 4)):
                    cursor = self.operator(cursor, tid, 0) + self.rng.randint(0, 3)
                ends.append(cursor)
            self.b.annotation(f"ProfilerStep#{step + 1}", time, max(ends) - time)
            time = max(ends) + self.rng.randint(0, 2)
        return self.b


def random_steps(path: Path, seed: int, steps: int = 8, threads: int = 2, alike: bool = False) -> Path:
    """A random trace of ``steps`` ProfilerStep#N (see the module docstring), written to ``path``. ``alike``:
    every thread does the same work at the same times in each step, so equal-length paths in unrelated
    chains (which networkx's order decides between) are the rule."""
    return _Steps(seed, threads).build(steps, alike).write(path)
