"""tracekit against the tools it replaces, in one run and one table (issue #17's bars).

Builds its inputs under benchmarks/data/ (git-ignored) from ../shared, then times each piece of work
as a fresh process (what a user waits for: start-up, imports, reading, computing, printing), several
times, tracekit and the alternative alternating so that both see the same machine:

  kernel summary   tracekit kernels E            vs  nsys stats -r gpukernsum E     (1M and 10M kernels)
  cached re-read   the same once the cache exists (1M and 10M)
  NVTX ranges      tracekit ranges E             vs  nsys stats -r nvtxsum E        (4.9M ranges)
  breakdown        tracekit breakdown E --phases ...   vs  tracekit kernels E  (same export, first reads)
  critical path    tracekit critical-path E      vs  tracekit kernels E  (the whole trace: 7.8M events, cached)
  efficiency       tracekit efficiency E         vs  tracekit kernels E  (1M kernels, and with 4.9M ranges)
  memory snapshot  tracekit memory S             vs  python -m torch.cuda._memory_viz stats S  (1M entries)
  start-up         tracekit --version
  torch.profiler   tracekit kernels T --by type --ops all  vs  HolisticTraceAnalysis load + kernel
                   breakdown (200k kernels; only with --hta: HTA takes ~2 minutes there)

"First read" means no cache beforehand: the cache the command writes on the way is part of its time.
Peak RSS is the child's maximum resident memory (wait4, which includes the processes it waited for:
nsys stats runs its report in a child). The table is Markdown: min and median seconds, peak MB (max
over the runs), the ratio of medians, and the bar the issue sets.

    python benchmarks/run_all.py [--repeat 5] [--quick] [--hta]
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # the other benchmark scripts' helpers
DATA = HERE / "data"
SHARED = HERE.parent.parent / "shared"
SOURCE = SHARED / "traces" / "h100_videogen_2gpu_a_nsys2026.2.sqlite"
KINETO_SOURCE = SHARED / "kineto" / "v100_resnet_torch2.3_ns_precision.pt.trace.json.gz"
PYTHON = sys.executable
TRACEKIT = str(Path(PYTHON).parent / "tracekit")
PHASES = "aten::linear*,aten::layer_norm*,FSDP*"


@dataclass
class Runs:
    """Wall seconds and peak RSS (MB) of each run of one command."""

    seconds: list[float] = field(default_factory=list)
    peak_mb: list[float] = field(default_factory=list)

    @property
    def median(self) -> float:
        return statistics.median(self.seconds)

    def cell(self) -> str:
        return f"{min(self.seconds):.2f} / {self.median:.2f}"

    def peak(self) -> float:
        return max(self.peak_mb)


def run_once(command: list[str], env: dict | None = None, tree: bool = False) -> tuple[float, float]:
    """Wall seconds and peak RSS (MB) of one run of ``command``; SystemExit when it fails. ``tree``: the
    peak of the whole process tree, sampled (tracekit decodes large JSON on worker processes)."""
    if tree:
        from bench_kineto import measure

        seconds, peak, status = measure(command, env)
        if status:
            raise SystemExit(f"{' '.join(command)} failed (exit {status})")
        return seconds, peak
    started = time.perf_counter()
    child = subprocess.Popen(
        command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env={**os.environ, **(env or {})}
    )
    _, status, usage = os.wait4(child.pid, 0)
    elapsed = time.perf_counter() - started
    error = child.stderr.read().decode(errors="replace") if child.stderr else ""
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{' '.join(command)} failed: {error[-600:]}")
    return elapsed, usage.ru_maxrss / 1024  # Linux reports KiB


@dataclass
class Work:
    """One row: a tracekit command against an alternative on the same input."""

    work: str
    tracekit: list[str]
    alternative: list[str] | None
    alternative_label: str
    bar: str
    before: list[Path] = field(default_factory=list)  # cache folders removed before each run
    tree: bool = False  # peak RSS of the process tree (see run_once)

    def measure(self, repeat: int, alternative_repeat: int) -> tuple[Runs, Runs | None]:
        ours, theirs = Runs(), Runs() if self.alternative else None
        for index in range(max(repeat, alternative_repeat if self.alternative else 0)):
            if index < repeat:
                for folder in self.before:
                    shutil.rmtree(folder, ignore_errors=True)
                seconds, peak = run_once(self.tracekit, tree=self.tree)
                ours.seconds.append(seconds)
                ours.peak_mb.append(peak)
            if theirs is not None and self.alternative and index < alternative_repeat:
                for folder in self.before:
                    shutil.rmtree(folder, ignore_errors=True)
                seconds, peak = run_once(self.alternative, tree=self.tree)
                theirs.seconds.append(seconds)
                theirs.peak_mb.append(peak)
        return ours, theirs


def build_inputs(hta: bool) -> dict[str, Path]:
    """The benchmark inputs, built once (replicas of real files; see make_large_export.py)."""
    DATA.mkdir(exist_ok=True)
    inputs = {}
    for name, kernels, ranges in (
        ("kernels_1m", 1_000_000, False),
        ("kernels_10m", 10_000_000, False),
        ("ranges_1m", 1_000_000, True),
    ):
        path = inputs[name] = DATA / f"{name}.sqlite"
        if not path.exists():
            command = [PYTHON, str(HERE / "make_large_export.py"), str(SOURCE), str(path), "--kernels", str(kernels)]
            subprocess.run(command + (["--with-ranges"] if ranges else []), check=True)
    snapshot = inputs["snapshot"] = DATA / "snapshot_1m.pickle"
    if not snapshot.exists():
        # In a child process: a command's peak RSS (wait4) counts this process's own peak when it forked
        # it (Linux keeps the high-water mark across exec), so this process must stay small.
        build = f"import sys; sys.path.insert(0, {str(HERE)!r}); from pathlib import Path; from bench_memory import build; build(1_000_000, Path({str(snapshot)!r}))"
        subprocess.run([PYTHON, "-c", build], check=True)
    if hta:
        trace = inputs["kineto"] = DATA / "kineto_200k.json"
        if not trace.exists():
            command = [
                PYTHON,
                str(HERE / "make_kineto_trace.py"),
                str(KINETO_SOURCE),
                str(trace),
                "--kernels",
                "200000",
            ]
            subprocess.run(command, check=True)
    return inputs


def cache_of(path: Path) -> Path:
    return path.with_name(path.name + ".tracekit-cache")


def works(inputs: dict[str, Path], hta: bool) -> list[Work]:
    nsys = shutil.which("nsys")

    def nsys_stats(report: str, path: Path) -> list[str] | None:
        return [nsys, "stats", "-q", "-r", report, "-f", "csv", str(path)] if nsys else None

    one, ten, ranges = inputs["kernels_1m"], inputs["kernels_10m"], inputs["ranges_1m"]
    rows = [
        Work(
            "kernel summary, 1M kernels, first read",
            [TRACEKIT, "kernels", str(one), "--format", "csv"],
            nsys_stats("gpukernsum", one),
            "nsys stats -r gpukernsum",
            "<= 0.4x time, <= 1.5x memory",
            before=[cache_of(one)],
        ),
        Work(
            "kernel summary, 1M kernels, cached",
            [TRACEKIT, "kernels", str(one), "--format", "csv"],
            nsys_stats("gpukernsum", one),
            "nsys stats -r gpukernsum",
            "-",
        ),
        Work(
            "kernel summary, 10M kernels, first read",
            [TRACEKIT, "kernels", str(ten), "--format", "csv"],
            nsys_stats("gpukernsum", ten),
            "nsys stats -r gpukernsum",
            "<= 0.4x time, <= 1x memory",
            before=[cache_of(ten)],
        ),
        Work(
            "kernel summary, 10M kernels, cached",
            [TRACEKIT, "kernels", str(ten), "--format", "csv"],
            None,
            "-",
            "< 1.5 s",
        ),
        Work(
            "NVTX ranges, 4.9M ranges, first read",
            [TRACEKIT, "ranges", str(ranges), "--format", "csv"],
            nsys_stats("nvtxsum", ranges),
            "nsys stats -r nvtxsum",
            "<= 0.33x time, <= 1x memory",
            before=[cache_of(ranges)],
        ),
        Work(
            "breakdown, 1M kernels + 4.9M ranges, first read",
            [TRACEKIT, "breakdown", str(ranges), "--phases", PHASES, "--format", "csv"],
            [TRACEKIT, "kernels", str(ranges), "--format", "csv"],
            "tracekit kernels, first read",
            "<= 1.5x kernels",
            before=[cache_of(ranges)],
        ),
        Work(
            "timeline (Chrome trace events), 1M kernels, first read",
            [TRACEKIT, "timeline", str(one), "-o", str(one.with_name("timeline_1m.json"))],
            [TRACEKIT, "kernels", str(one), "--format", "csv"],
            "tracekit kernels, first read",
            "<= 2x kernels",
            before=[cache_of(one)],
        ),
        Work(
            "critical path, whole trace (no steps), 1M kernels + 1.7M API calls + 4.9M ranges, cached",
            [TRACEKIT, "critical-path", str(ranges), "--format", "csv"],
            [TRACEKIT, "kernels", str(ranges), "--format", "csv"],
            "tracekit kernels, cached",
            "<= 5x kernels, a few GB",
        ),
        Work(
            "efficiency, 1M kernels (per kernel: no shapes recorded), cached",
            [TRACEKIT, "efficiency", str(one), "--format", "csv"],
            [TRACEKIT, "kernels", str(one), "--format", "csv"],
            "tracekit kernels, cached",
            "<= 2x kernels",
        ),
        Work(
            "efficiency, 1M kernels + 4.9M ranges (per kernel), cached",
            [TRACEKIT, "efficiency", str(ranges), "--format", "csv"],
            [TRACEKIT, "kernels", str(ranges), "--format", "csv"],
            "tracekit kernels, cached",
            "<= 2x kernels",
        ),
        Work(
            "memory snapshot, 1M entries",
            [TRACEKIT, "memory", str(inputs["snapshot"]), "--format", "csv"],
            [PYTHON, "-m", "torch.cuda._memory_viz", "stats", str(inputs["snapshot"])],
            "torch _memory_viz stats",
            "<= 0.6x time, <= 1x memory",
        ),
        Work("start-up", [TRACEKIT, "--version"], None, "-", "<= 0.15 s"),
    ]
    if hta:
        from bench_kineto import HTA

        trace = inputs["kineto"]
        rows.append(
            Work(
                "torch.profiler trace, 200k kernels, first read",
                [TRACEKIT, "kernels", str(trace), "--by", "type", "--ops", "all", "--format", "csv"],
                [PYTHON, "-c", HTA, str(trace)],
                "HTA 0.5 load + get_gpu_kernel_breakdown",
                "-",
                before=[cache_of(trace)],
                tree=True,
            )
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=5, help="runs per tracekit command (alternatives: fewer)")
    parser.add_argument("--quick", action="store_true", help="1M-row work only (no 10M, no ranges)")
    parser.add_argument("--hta", action="store_true", help="also the torch.profiler trace against HTA (minutes)")
    args = parser.parse_args()
    if not SOURCE.exists():
        raise SystemExit(f"{SOURCE} is missing: the benchmarks replicate it")
    inputs = build_inputs(args.hta)
    print(
        f"machine: {platform.node()}, {os.cpu_count()} cores, {platform.processor() or platform.machine()}, "
        f"Python {platform.python_version()}; {args.repeat} runs each (slow alternatives fewer)",
        flush=True,
    )
    print(
        "\n| work | tracekit min / median s | peak MB | alternative | min / median s | peak MB | time ratio "
        "| memory ratio | bar |\n|---|---|---|---|---|---|---|---|---|",
        flush=True,
    )
    for work in works(inputs, args.hta):
        if args.quick and ("10M" in work.work or "ranges" in work.work or "breakdown" in work.work):
            continue
        slow = "10M" in work.work or "ranges" in work.work or "torch.profiler" in work.work
        repeat = 2 if slow else args.repeat
        if "cached" in work.work:  # a first run writes the cache; the measured runs read it
            run_once(work.tracekit)
        ours, theirs = work.measure(repeat, 1 if slow else max(2, args.repeat // 2))
        if theirs is None:
            print(f"| {work.work} | {ours.cell()} | {ours.peak():.0f} | - | - | - | - | - | {work.bar} |", flush=True)
            continue
        print(
            f"| {work.work} | {ours.cell()} | {ours.peak():.0f} | {work.alternative_label} | {theirs.cell()} | "
            f"{theirs.peak():.0f} | {ours.median / theirs.median:.2f}x | {ours.peak() / theirs.peak():.2f}x | "
            f"{work.bar} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
