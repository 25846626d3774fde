"""``tracekit bench`` (added to ``tracekit`` by this package's entry point, ``tracekit.cli``): the model
sweep and the attention, optimizer and dtype micro-benchmarks.

``tracekit bench small medium --ctx 128 256`` sweeps models x contexts; lists may also be written
``--ctx 128,256`` or ``--ctx 128 --ctx 256``. Torch is imported only when a benchmark runs.
"""

from __future__ import annotations

from typing import Any

import click

from tracekit.cli.common import emit, output_options
from tracekit.run_config import ATTENTION_IMPLEMENTATIONS, ATTENTIONS, MODEL_NAMES, MODES, OPTIMIZERS, require_torch
from tracekit.run_config import DTYPE_NAMES as DTYPES
from tracekit.signals import Interrupted
from workloads.cli_options import (
    choices,
    cpu_sized,
    device_option,
    expand_lists,
    progress,
    sizes,
    tf32_option,
)


class BenchGroup(click.Group):
    """`tracekit bench MODEL...` (no subcommand name) runs the model sweep."""

    def parse_args(self, ctx, args):
        args = expand_lists(list(args))
        if args and not any(arg in self.commands for arg in args) and args[0] not in ("-h", "--help"):
            args = ["models", *args]
        return super().parse_args(ctx, args)


@click.group("bench", cls=BenchGroup, context_settings={"help_option_names": ["-h", "--help"]})
def bench():
    """Time models and kernels: `tracekit bench MODEL...` sweeps models, or run one of the
    micro-benchmarks below. Lists (--ctx 128 256) sweep their product."""
    require_torch("tracekit bench")


@bench.command("models")
@click.argument("models", nargs=-1, required=True, type=click.Choice(MODEL_NAMES))
@click.option("--ctx", multiple=True, default=("128",), callback=sizes(), help="context lengths  [default: 128]")
@click.option("--batch", multiple=True, default=("4",), callback=sizes(), help="batch sizes  [default: 4]")
@click.option(
    "--mode",
    multiple=True,
    default=("train",),
    callback=choices(MODES),
    help="forward, forward-backward or train (+ AdamW step)  [default: train]",
)
@click.option(
    "--dtype",
    multiple=True,
    default=("fp32",),
    callback=choices(DTYPES),
    help="fp32, or autocast to bf16/fp16  [default: fp32]",
)
@click.option("--compile", "compiled", is_flag=True, help="torch.compile the model")
@click.option("--compare-compile", is_flag=True, help="run every configuration eager and compiled")
@click.option(
    "--attention",
    multiple=True,
    default=("naive",),
    callback=choices(ATTENTIONS),
    help="naive (matmul, softmax, matmul) or sdpa  [default: naive]",
)
@click.option(
    "--warmup",
    multiple=True,
    default=("5",),
    callback=sizes(least=0),
    help="untimed steps first; several (--warmup 0 1 2 5) add a table of step time per warm-up count  [default: 5]",
)
@click.option("--steps", type=click.IntRange(min=1), default=10, show_default=True, help="timed steps")
@device_option
@tf32_option
@click.option(
    "--db",
    type=click.Path(dir_okay=False),
    default=None,
    help="append every row to this SQLite results database (table runs)",
)
@click.option("--wide", is_flag=True, help="table/md: every statistic (csv, json and --db always have them)")
@output_options
def bench_models(
    models,
    ctx,
    batch,
    mode,
    dtype,
    compiled,
    compare_compile,
    attention,
    warmup,
    steps,
    device,
    tf32,
    db,
    wide,
    fmt,
    output,
):
    """Forward, backward, optimizer and step time (mean, std, median, min, max ms) per configuration."""
    from workloads.results_db import ResultsDB
    from workloads.sweep import benchmark, configurations

    compiles = (False, True) if compare_compile else (compiled,)
    configs = configurations(models, ctx, batch, mode, dtype, compiles, attention, warmup, steps, device, tf32 == "on")
    compact = fmt in ("table", "md") and not wide
    tf32_note = _tf32_on_cpu(device, tf32)
    results_db = ResultsDB.open(db) if db is not None else None  # checked before the first configuration runs
    bar = progress(len(configs), "benchmarking")
    try:
        if bar:
            with bar:
                result = benchmark(configs, results_db, on_result=lambda result: bar.update(1), compact=compact)
        else:
            result = benchmark(configs, results_db, compact=compact)
    except Interrupted as interruption:  # Ctrl-C or SIGTERM (the command line raises both as Interrupted)
        saved = f"; {results_db.added} finished configurations are saved in {db}" if results_db is not None else ""
        raise click.ClickException(f"interrupted ({interruption.name}){saved}") from None
    finally:
        if results_db is not None:
            results_db.close()
    result.notes.extend(tf32_note)
    emit(result, fmt, output)


def _tf32_on_cpu(device: str, tf32: str) -> list[str]:
    """A note when --tf32 on cannot matter: TF32 is a CUDA tensor-core mode (Ampere and newer)."""
    from workloads.bench import resolve_device

    if tf32 == "on" and resolve_device(device).type != "cuda":
        return ["--tf32 on has no effect off CUDA: rows record the setting asked for, the CPU computed in float32"]
    return []


@bench.command("attention")
@click.option(
    "--head-dim",
    multiple=True,
    default=("16", "32", "64", "128"),
    callback=sizes(),
    help="head dimensions  [default: 16 32 64 128]",
)
@click.option(
    "--seq",
    multiple=True,
    default=("256", "1024", "4096", "8192", "16384"),
    callback=sizes(),
    help="sequence lengths  [default: 256 1024 4096 8192 16384]",
)
@click.option("--batch", type=click.IntRange(min=1), default=8, show_default=True)
@click.option(
    "--passes",
    type=click.IntRange(min=1),
    default=100,
    show_default=True,
    help="timed forward and backward passes per point",
)
@click.option("--warmup", type=click.IntRange(min=0), default=5, show_default=True)
@click.option(
    "--impl",
    multiple=True,
    default=ATTENTIONS,
    callback=choices(ATTENTION_IMPLEMENTATIONS),
    help="naive, explicit (naive with the softmax written out: max, exp, sum, divide) and/or sdpa  [default: naive sdpa]",
)
@click.option("--compile", "compiled", is_flag=True, help="torch.compile the attention function")
@click.option("--compare-compile", is_flag=True, help="eager and compiled rows")
@click.option("--causal/--no-causal", default=True, show_default=True)
@click.option(
    "--dtype",
    multiple=True,
    default=("fp32",),
    callback=choices(DTYPES),
    help="dtypes of q, k and v (native, not autocast); a list sweeps them  [default: fp32]",
)
@device_option
@tf32_option
@output_options
def bench_attention(
    head_dim, seq, batch, passes, warmup, impl, compiled, compare_compile, causal, dtype, device, tf32, fmt, output
):
    """Attention forward and backward time, TFLOP/s of the useful (causal) FLOPs, bytes saved for backward,
    peak memory (CUDA) and the SDPA backend, over head dim x sequence length x dtype. On a CPU, options left
    at their defaults shrink to --head-dim 16 64 --seq 128 256 --passes 10."""
    from workloads.attention import attention_grid

    context = click.get_current_context()
    notes = cpu_sized(context, device, {"head_dim": (16, 64), "seq": (128, 256), "passes": 10})
    head_dim, seq, passes = context.params["head_dim"], context.params["seq"], context.params["passes"]

    compiles = (False, True) if compare_compile else (compiled,)
    bar = progress(len(head_dim) * len(seq) * len(impl) * len(compiles) * len(dtype), "attention grid")
    # Keyword arguments of mixed types for attention_grid, which checks them by name.
    arguments: dict[str, Any] = dict(
        head_dims=head_dim,
        lengths=seq,
        implementations=impl,
        compiles=compiles,
        batch=batch,
        passes=passes,
        warmup=warmup,
        causal=causal,
        device=device,
        tf32=tf32 == "on",
        dtypes=dtype,
    )
    if bar:
        with bar:
            result = attention_grid(**arguments, on_row=lambda row: bar.update(1))
    else:
        result = attention_grid(**arguments)
    result.notes.extend(notes)
    emit(result, fmt, output)


@bench.command("optimizer")
@click.option(
    "--params",
    multiple=True,
    default=("1", "2", "4", "8", "16", "32"),
    callback=sizes(),
    help="numbers of parameter tensors  [default: 1 2 4 8 16 32]",
)
@click.option(
    "--size",
    multiple=True,
    default=("16Ki", "64Ki", "256Ki", "1Mi", "4Mi"),
    callback=sizes(),
    help="elements per tensor (Ki, Mi suffixes)  [default: 16Ki 64Ki 256Ki 1Mi 4Mi]",
)
@click.option(
    "--impl",
    multiple=True,
    default=OPTIMIZERS,
    callback=choices(OPTIMIZERS),
    help="single-tensor, foreach, fused, compiled",
)
@click.option("--steps", type=click.IntRange(min=1), default=50, show_default=True)
@click.option("--warmup", type=click.IntRange(min=0), default=5, show_default=True)
@device_option
@output_options
def bench_optimizer(params, size, impl, steps, warmup, device, fmt, output):
    """AdamW step time (ms/iter) for N parameters of S elements, per implementation. On a CPU, options left
    at their defaults shrink to --params 1 8 --size 16Ki 256Ki --steps 10."""
    from workloads.optimizers import optimizer_grid

    context = click.get_current_context()
    notes = cpu_sized(context, device, {"params": (1, 8), "size": (16 * 1024, 256 * 1024), "steps": 10})
    params, size, steps = context.params["params"], context.params["size"], context.params["steps"]

    bar = progress(len(params) * len(size), "optimizer grid")
    arguments = dict(counts=params, sizes=size, implementations=impl, warmup=warmup, steps=steps, device=device)
    if bar:
        with bar:
            result = optimizer_grid(**arguments, on_row=lambda row: bar.update(1))
    else:
        result = optimizer_grid(**arguments)
    result.notes.extend(notes)
    emit(result, fmt, output)


@bench.command("dtypes")
@click.argument("model", type=click.Choice(MODEL_NAMES), default="tiny")
@click.option("--dtype", type=click.Choice(["bf16", "fp16"]), default="bf16", show_default=True)
@click.option("--ctx", type=click.IntRange(min=1), default=32, show_default=True)
@click.option("--batch", type=click.IntRange(min=1), default=2, show_default=True)
@device_option
@output_options
def bench_dtypes(model, dtype, ctx, batch, device, fmt, output):
    """The dtype of parameters, each sub-layer's output, logits, loss and gradients under autocast (see
    `tracekit bench precision` for why the accumulators stay float32)."""
    from workloads.dtypes import dtype_table

    emit(dtype_table(model, dtype, ctx, batch, device), fmt, output)


@bench.command("precision")
@output_options
def bench_precision(fmt, output):
    """Why accumulators stay float32: 0.01 added 1,000 times in fp32, fp16, bf16 and mixed, with the exact
    result of each and why (see `tracekit bench dtypes` for the dtypes of a real step)."""
    from workloads.precision import precision_table

    emit(precision_table(), fmt, output)


@bench.command("activations")
@click.argument("model", type=click.Choice(MODEL_NAMES))
@click.option("--ctx", type=click.IntRange(min=1), default=128, show_default=True)
@click.option("--batch", type=click.IntRange(min=1), default=1, show_default=True)
@click.option("--dtype", type=click.Choice(DTYPES), default="fp32", show_default=True, help="autocast dtype")
@click.option(
    "--run",
    "run_folder",
    type=click.Path(exists=True, file_okay=False),
    default=None,
    help="a run folder captured with --memory: its snapshot's figures beside the formula",
)
@output_options
def bench_activations(model, ctx, batch, dtype, run_folder, fmt, output):
    """Activation memory saved for backward: the formula term by term beside what autograd saved (counted
    on the CPU with saved-tensor hooks), and with --run what a real step's memory snapshot shows."""
    from workloads.activations import activations_table

    result = activations_table(model, ctx, batch, dtype)
    if run_folder is not None:
        _add_snapshot_figures(result, run_folder, {"model": model, "context": ctx, "batch": batch, "dtype": dtype})
    emit(result, fmt, output)


def _add_snapshot_figures(result, run_folder: str, asked: dict) -> None:
    """The run's memory snapshot: the peak of allocations made during the measured steps (activations,
    gradients, optimizer temporaries), with the differences from the formula named in notes."""
    from tracekit.analysis.memory.replay import replay
    from tracekit.runs import Run
    from tracekit.sources import open_snapshot

    run = Run(run_folder)
    memory = replay(open_snapshot(run.require_snapshot()))
    in_trace = int(memory.timeline["allocated_in_trace"].max())
    frame = result.tables[0].frame
    frame.loc[len(frame)] = {
        "Part": "snapshot: peak of allocations during the steps",
        "How": str(run.folder),
        "MiB": in_trace / 2**20,
    }
    config = run.config
    differs = [f"{key} {config.get(key)}" for key, value in asked.items() if config.get(key) not in (None, value)]
    if differs:
        result.notes.append(f"the run was captured with {', '.join(differs)}: its figure is for that configuration")
    result.notes.append(
        "the snapshot's peak also holds gradients (one per parameter), optimizer temporaries and the allocator's "
        "rounding, and under autocast the low-precision copies of weights; the formula counts activations alone"
    )
