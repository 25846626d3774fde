"""``tracekit capture``: one command from a model size to a run folder (see ``tracekit.capture``)."""

from __future__ import annotations

from pathlib import Path

import click

from tracekit.run_config import ATTENTIONS, DTYPE_NAMES, MODEL_NAMES, MODES


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("model", required=False, metavar="[MODEL]")
@click.option("--ctx", type=click.IntRange(min=1), default=256, show_default=True, help="context length")
@click.option("--batch", type=click.IntRange(min=1), default=4, show_default=True)
@click.option("--mode", type=click.Choice(MODES), default="train", show_default=True)
@click.option(
    "--dtype",
    type=click.Choice(DTYPE_NAMES),
    default="fp32",
    show_default=True,
    help="fp32, or autocast to bf16/fp16",
)
@click.option("--compile", "compiled", is_flag=True, help="torch.compile the model")
@click.option("--attention", type=click.Choice(ATTENTIONS), default="naive", show_default=True)
@click.option(
    "--warmup",
    type=click.IntRange(min=0),
    default=5,
    show_default=True,
    help="steps run before the capture starts (not in the trace)",
)
@click.option("--steps", type=click.IntRange(min=1), default=10, show_default=True, help="captured steps")
@click.option("--memory", is_flag=True, help="also record a CUDA memory snapshot of the captured steps")
@click.option("--device", type=click.Choice(["auto", "cpu", "cuda", "mps"]), default="auto", show_default=True)
@click.option(
    "--out", type=click.Path(file_okay=False), default="traces", show_default=True, help="where run folders go"
)
@click.option("--name", default=None, help="run folder name (default: what ran and when); replaces an earlier run")
@click.option("--nsys", default=None, metavar="PATH", help="nsys executable (default: PATH, then usual places)")
@click.option(
    "--trace",
    "trace",
    default=None,
    metavar="APIS",
    help="nsys --trace list (default: cuda,nvtx,osrt with a GPU, nvtx without)",
)
@click.option(
    "--nsys-grace",
    type=click.FloatRange(min=0),
    default=600.0,
    show_default=True,
    help="seconds nsys may take to finish after the program ended before the watchdog stops it",
)
@click.option(
    "--start-timeout",
    type=click.FloatRange(min=1),
    default=300.0,
    show_default=True,
    help="seconds nsys may take to start the program before the capture is given up",
)
@click.option(
    "--profiler",
    type=click.Choice(["auto", "nsys", "torch"]),
    default="auto",
    show_default=True,
    help="for a COMMAND: nsys, torch.profiler, or nsys when it is installed (else torch)",
)
@click.option("--nsys-args", default="", metavar="'ARGS'", help="extra nsys profile arguments, one quoted string")
@click.argument("command", nargs=-1, type=click.UNPROCESSED, metavar="[-- COMMAND...]")
def capture(
    model,
    ctx,
    batch,
    mode,
    dtype,
    compiled,
    attention,
    warmup,
    steps,
    memory,
    device,
    out,
    name,
    nsys,
    trace,
    nsys_grace,
    start_timeout,
    profiler,
    nsys_args,
    command,
):
    """Profile a built-in MODEL under Nsight Systems, or your own program: `tracekit capture -- python
    train.py` (nsys or torch.profiler, see --profiler). Writes traces/<name>/ with the trace, run.json
    and (CUDA, --memory) a memory snapshot. Mark your steps with tracekit.annotate (README).

    Processes the program leaves running when it exits are ended (a profiler would wait for them).
    Ctrl-C or SIGTERM stops the program's whole process tree (SIGINT first, so that it can write what it
    recorded; SIGTERM and SIGKILL if it does not end), keeps and imports what was recorded, and marks
    run.json interrupted; a second Ctrl-C stops at once."""
    import shlex

    extra = tuple(shlex.split(nsys_args))
    if model is None or model not in MODEL_NAMES or command:
        if model in MODEL_NAMES and command:
            raise click.UsageError("nsys options go in --nsys-args '...'; after MODEL nothing else is read")
        program = tuple(part for part in (model, *command) if part is not None)
        return _capture_command(program, profiler, memory, out, name, nsys, extra, trace, nsys_grace, start_timeout)
    nsys_args = extra
    from tracekit.analysis.kernels.kernels_command import KernelsOptions
    from tracekit.capture.nsys import CaptureOptions
    from tracekit.capture.nsys import capture as run_capture
    from tracekit.commands import run_command
    from tracekit.errors import NoGpuDataError
    from tracekit.model.result import Result
    from tracekit.render.tables import render_text
    from tracekit.run_config import RunConfig, require_torch
    from tracekit.sources import open_trace

    require_torch(f"capturing the built-in model {model}")  # the workload runs in this Python, on torch
    config = RunConfig(model, ctx, batch, mode, dtype, compiled, attention, warmup, steps, device)
    if profiler == "torch":  # the workload as a program of its own, its measured steps in a torch.profiler window
        import sys

        from tracekit.capture.nsys import LAUNCHER

        program = (sys.executable, str(LAUNCHER), *config.arguments(), "--capture-range")
        return _capture_command(
            program, profiler, memory, out, name, nsys, extra, trace, nsys_grace, start_timeout, workload=config
        )
    options = CaptureOptions(config, memory, Path(out), name, nsys, trace, tuple(nsys_args), nsys_grace, start_timeout)
    captured = run_capture(options)
    run, notes = captured.run, list(captured.notes)
    click.echo(
        f"Captured {model} ctx {ctx} batch {batch} {mode} {dtype}{' compiled' if compiled else ''} on "
        f"{run.device}: {steps} steps after {warmup} warm-up, nsys {run.versions.get('nsys')}, "
        f"--trace={run.trace_apis}\n"
    )
    phases = run.phases()
    if not phases.empty:
        click.echo(render_text(Result.of("phases", phases, "Step phases (harness, ms)"), "table") + "\n")
    try:
        top = run_command("kernels", open_trace(run.folder), KernelsOptions(top=5, name="short"))
        click.echo(render_text(Result.of("kernels", top.frame, "Top 5 kernels"), "table") + "\n")
    except NoGpuDataError:
        notes.append("no CUDA kernels in this trace (a CPU run): it holds the NVTX ranges only")
    for note in notes:
        click.echo(f"note: {note}")
    click.echo(
        f"written: {run.folder}/ ({', '.join(run.files)}); "
        + (
            f"{captured.latest} points here"
            if captured.latest
            else f"{run.folder.parent / 'latest'} is not a link: left as it is"
        )
    )
    if run.status == "oom":
        raise click.ClickException(
            f"the workload ran out of memory ({run.program_error}); the trace of what ran is in {run.folder}"
        )


def _capture_command(
    program, profiler, memory, out, name, nsys, nsys_args, trace, nsys_grace, start_timeout, workload=None
):
    from tracekit.analysis.kernels.kernels_command import KernelsOptions
    from tracekit.capture.command import CommandOptions, capture_command
    from tracekit.commands import run_command
    from tracekit.errors import NoGpuDataError
    from tracekit.model.result import Result
    from tracekit.render.tables import render_text
    from tracekit.sources import open_trace

    options = CommandOptions(
        program, profiler, memory, Path(out), name, nsys, nsys_args, trace, nsys_grace, start_timeout, workload
    )
    captured = capture_command(options)
    run = captured.run
    click.echo(f"Captured `{' '.join(program)}` with {captured.profiler}\n")
    trace_read = open_trace(run.folder)
    ranges = trace_read.ranges
    user = ranges.loc[ranges["domain"] == ""]
    if len(user):
        counts = user["name"].astype(str).value_counts().rename_axis("Range").reset_index(name="Instances")
        click.echo(
            render_text(Result.of("ranges", counts.head(10), "Ranges (tracekit ranges: the full table)"), "table")
            + "\n"
        )
    notes = list(captured.notes)
    try:
        top = run_command("kernels", trace_read, KernelsOptions(top=5, name="short"))
        click.echo(render_text(Result.of("kernels", top.frame, "Top 5 kernels"), "table") + "\n")
    except NoGpuDataError:
        notes.append("no CUDA kernels in this trace (a CPU run): it holds the ranges only")
    for note in notes:
        click.echo(f"note: {note}")
    click.echo(f"written: {run.folder}/ ({', '.join(run.files)})")
