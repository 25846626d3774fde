"""``tracekit timeline``: traces as one Perfetto protobuf or Chrome trace-event file for Perfetto UI,
chrome://tracing or TensorBoard (the Python API: ``tracekit.timeline``)."""

from __future__ import annotations

import click

from tracekit.cli.common import nsys_option


@click.command("timeline")
@click.argument("traces", nargs=-1, required=True)
@click.option(
    "-o",
    "--output",
    default=None,
    type=click.Path(dir_okay=False),
    help="the file to write; its suffix picks the format: .pftrace or .perfetto-trace (Perfetto's protobuf "
    "format, compressed: ~40x smaller than JSON), .json or .json.gz (Chrome trace-event JSON, gzip: for "
    "chrome://tracing, TensorBoard and tools that read only JSON). Without it: the first trace's name in the "
    "current folder, .pftrace above 100,000 GPU ops (the first trace's, times the traces: where the JSON "
    "passes ~60 MB and Perfetto UI and chrome://tracing slow down), else .json.gz; an existing file is not "
    "written over",
)
@click.option("--start", "start_ms", type=float, default=None, help="window start, ms from the trace's first event")
@click.option("--end", "end_ms", type=float, default=None, help="window end, ms from the trace's first event")
@click.option("--step", type=int, default=None, help="only the N-th training step (1: the first)")
@click.option("--range", "range", default=None, metavar="SPEC", help="only one instance of this range (a range spec)")
@click.option(
    "--instance",
    type=int,
    default=0,
    show_default=True,
    help="which instance of --range, 0-based in time order (as ranges --instance)",
)
@click.option(
    "--memory",
    type=click.Path(dir_okay=False),
    default=None,
    help="a CUDA memory snapshot: its allocated and reserved memory as a counter track on its GPU "
    "(a run folder's own memory.pickle is used without it)",
)
@click.option(
    "--sequences",
    type=int,
    default=0,
    show_default=True,
    metavar="N",
    help="also a track per GPU for each of the N kernel sequences seen most often (tracekit sequences: "
    "3 consecutive kernels on a stream), a slice per occurrence",
)
@nsys_option
def timeline(traces, output, start_ms, end_ms, step, range, instance, memory, sequences, nsys):
    """Write TRACES as one timeline file that Perfetto UI (ui.perfetto.dev), chrome://tracing and
    TensorBoard open: each GPU a process with a track per stream and a track of its idle gaps coloured
    by cause, each host thread its NVTX or record_function ranges and CUDA API calls, an arrow from each
    launch to its GPU op, the training steps, counters of each stream's launch queue and each GPU's copy
    bandwidth (HolisticTraceAnalysis's), and the GPU's memory when there is a snapshot. Several
    traces (ranks): one file, a process group per rank, on one clock (each trace's wall-clock start;
    one that has none is aligned on its first step). torch.profiler readers read the JSON back (its
    GPU ops carry their device, stream and correlation).

    TRACES: nsys exports or reports, torch.profiler traces, run folders, globs or folders of them."""
    import sys

    from tracekit.render.safe_text import printable
    from tracekit.session import overriding
    from tracekit.trace_events.window import WindowOptions
    from tracekit.trace_events.writer import timeline as write

    options = WindowOptions(
        start_ms=start_ms, end_ms=end_ms, step=step, range=range, instance=instance, sequences=sequences
    )
    with overriding(**({"nsys": nsys} if nsys else {})):
        written = write(list(traces), output, options, memory)
    for note in written.notes:
        click.echo(f"note: {printable(note)}", err=True)
    click.echo(written.summary(), file=sys.stderr)
