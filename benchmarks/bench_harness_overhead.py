"""What the benchmark harness adds to a training step, against a bare loop of the same work.

Two measurements:
1. The harness's own work per step, alone: the phase clocks, the step/forward/backward/optimizer
   NVTX ranges and the sample bookkeeping, run with no model work in between (microseconds), and
   its share of the harness's measured step time.
2. An A/B check: bare loop and harness loop of the same model (its own layer and attention ranges
   included), alternating, median over rounds of (harness / bare - 1). On a shared 2-core VM this
   varies by several percent between rounds, more than the effect; (1) is the precise figure.

    python benchmarks/bench_harness_overhead.py [--model tiny --ctx 256 --batch 8 --steps 50 --rounds 5]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from workloads import bench
from workloads.annotate import BACKEND
from workloads.models import build_model


def bare_loop(config: bench.RunConfig) -> float:
    """Wall seconds of warm-up + steps with nothing but the work."""
    device = torch.device(config.device)
    model = build_model(config.model, config.context, config.attention, device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    inputs, targets = bench.make_batch(config, device)
    started = time.perf_counter()
    for _ in range(config.warmup + config.steps):
        logits = model(inputs)
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), targets.reshape(-1))
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    return time.perf_counter() - started


def harness_loop(config: bench.RunConfig) -> float:
    """Wall seconds of the harness's own loop (model construction excluded, as in the bare loop)."""
    real_build = bench.build_model
    built = {}

    def build(*args, **kwargs):
        model = real_build(*args, **kwargs)
        built["at"] = time.perf_counter()
        return model

    bench.build_model = build
    try:
        bench._measure(config, torch.device(config.device), capture_range=False, memory_snapshot=None)
        return time.perf_counter() - built["at"]
    finally:
        bench.build_model = real_build


def bookkeeping_us(device: torch.device, repeats: int = 20_000) -> float:
    """Microseconds per step of the harness's timing and annotation, with no work inside."""
    from contextlib import nullcontext

    from workloads.annotate import nvtx_range

    samples = {phase: [] for phase in bench.PHASES}
    started = time.perf_counter()
    for _ in range(repeats):
        clock = bench.PhaseClock(device)
        with nvtx_range("step"):
            clock.mark()
            with nvtx_range("forward"), nullcontext():
                pass
            clock.mark()
            with nvtx_range("backward"):
                pass
            clock.mark()
            with nvtx_range("optimizer"):
                pass
            clock.mark()
        durations = clock.durations_ms()
        for phase, duration in zip(bench.PHASES, durations):
            samples[phase].append(duration)
        samples["step"].append(sum(durations))
    return (time.perf_counter() - started) / repeats * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="tiny")
    parser.add_argument("--ctx", type=int, default=128)
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    config = bench.RunConfig(args.model, args.ctx, args.batch, warmup=3, steps=args.steps, device="cpu")
    bare, harness = [], []
    for _ in range(args.rounds):
        bare.append(bare_loop(config))
        harness.append(harness_loop(config))
    ratios = [h / b - 1 for h, b in zip(harness, bare)]
    steps = config.warmup + config.steps
    print(
        f"{args.model} ctx {args.ctx} batch {args.batch}, {steps} steps per run, {args.rounds} rounds, "
        f"NVTX backend: {BACKEND}, torch threads: {torch.get_num_threads()}"
    )
    print(f"bare loop:    median {statistics.median(bare) / steps * 1e3:.2f} ms/step")
    print(f"harness loop: median {statistics.median(harness) / steps * 1e3:.2f} ms/step")
    print(
        f"A/B overhead: median {statistics.median(ratios) * 100:+.2f}% (per round: "
        + ", ".join(f"{ratio * 100:+.2f}%" for ratio in ratios)
        + ")"
    )
    own = bookkeeping_us(torch.device("cpu"))
    step_ms = statistics.median(harness) / steps * 1e3
    print(f"harness's own work: {own:.1f} us per step = {own / (step_ms * 1e3) * 100:.3f}% of a {step_ms:.1f} ms step")


if __name__ == "__main__":
    main()
