"""A built torch.profiler trace with known kernel sequences, for the sequences tests and the timeline's
sequence tracks."""

from __future__ import annotations

from helpers.kineto_builder import KinetoBuilder


def windows_trace(path):
    """Stream 7 runs A B C A B C, a copy, A B C (10 µs each); stream 8 runs A B C. The first six and stream
    8's are launched inside the range "layer" (0-60 µs), the last three inside "other" (100-160 µs)."""
    b = KinetoBuilder()
    b.annotation("layer", 0, 60).annotation("other", 100, 60)
    correlation = 0

    def launch(at, name, start, stream=7):
        nonlocal correlation
        correlation += 1
        b.launch("cudaLaunchKernel", at, 1, correlation=correlation)
        b.kernel(name, start, 10, correlation=correlation, stream=stream)

    for index, (name, start) in enumerate(zip("ABCABC", (100, 115, 130, 145, 160, 175))):
        launch(10 + 2 * index, name, start)
    correlation += 1
    b.launch("cudaMemcpyAsync", 22, 1, correlation=correlation).memcpy(190, 5, correlation=correlation, size=4096)
    for index, (name, start) in enumerate(zip("ABC", (200, 215, 230))):
        launch(110 + 2 * index, name, start)
    for index, (name, start) in enumerate(zip("ABC", (100, 120, 140))):
        launch(30 + 2 * index, name, start, stream=8)
    return b.write(path / "windows.json")
