"""On a machine with an NVIDIA GPU: nsys and torch.profiler see the same kernels of the same workload.

Captures the small model (3 measured steps after 2 warm-up) with `tracekit capture --profiler nsys`
and with `--profiler torch`, then compares, per kernel name, the instances (must be equal) and the
total time (the two profilers time kernels with CUPTI alike; they differ by their own overhead, which
this prints). CI has no GPU: run it by hand (`python benchmarks/gpu_profilers_agree.py`).

Expected output (written from the design, not yet measured: no GPU was lent while writing it):

    kernels: N names, M instances under nsys; the same names and instances under torch.profiler
    total kernel time: nsys X ms, torch.profiler Y ms (difference within 10 %)
    OK

On a CPU-only machine it says so and exits 0 without capturing anything.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

TRACEKIT = str(Path(sys.executable).parent / "tracekit")


def main() -> int:
    if shutil.which("nvidia-smi") is None:
        print("no NVIDIA GPU here (nvidia-smi not found): nothing to compare; run this on a GPU machine")
        return 0
    from tracekit.sources import open_trace

    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder)
        common = ["small", "--ctx", "128", "--warmup", "2", "--steps", "3", "--device", "cuda", "--out", str(out)]
        for profiler in ("nsys", "torch"):
            subprocess.run([TRACEKIT, "capture", *common, "--profiler", profiler, "--name", profiler], check=True)
        tables = {}
        for profiler in ("nsys", "torch"):
            ops = open_trace(out / profiler).gpu_ops
            kernels = ops.loc[ops["kind"] == "kernel"]
            tables[profiler] = kernels.groupby(kernels["name"].astype(str))["duration"].agg(["count", "sum"])
        nsys, torch = tables["nsys"], tables["torch"]
        print(
            f"kernels: {len(nsys)} names, {int(nsys['count'].sum())} instances under nsys; "
            f"{len(torch)} names, {int(torch['count'].sum())} instances under torch.profiler"
        )
        same = nsys.index.equals(torch.index.sort_values()) and (nsys["count"] == torch.loc[nsys.index, "count"]).all()
        total_nsys, total_torch = nsys["sum"].sum() / 1e6, torch["sum"].sum() / 1e6
        difference = abs(total_nsys - total_torch) / max(total_nsys, 1e-9)
        print(
            f"total kernel time: nsys {total_nsys:.2f} ms, torch.profiler {total_torch:.2f} ms "
            f"(difference {100 * difference:.1f} %)"
        )
        ok = same and difference <= 0.10
        print("OK" if ok else "DIFFERENT: see above")
        return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
