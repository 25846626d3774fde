"""The comparison section of a report of two or more inputs: each against the first (``tracekit diff``
per phase and category and per kernel, then ``tracekit compare``), times in ms."""

from __future__ import annotations

from pathlib import Path

from tracekit.analysis.many.compare import compare_traces
from tracekit.analysis.many.compare_command import CompareOptions
from tracekit.analysis.many.diff import compare_categories, compare_kernels, letter_labels
from tracekit.analysis.many.diff_command import DiffOptions
from tracekit.commands.command_line import command_line
from tracekit.errors import NoGpuDataError
from tracekit.model.trace import Trace
from tracekit.render.markup import md_code, md_prose
from tracekit.report.document import Document
from tracekit.runs import Run
from tracekit.sources.input_paths import input_labels

TOP_KERNELS = 10  # the kernels that changed most


def comparison_section(document: Document, paths: list[Path], traces: list[Trace], phases: tuple[str, ...]) -> None:
    """The report's comparison of every input against the first: per phase and category, the kernels that
    changed most, and kernel time per phase instance input by input (with the commands printing each)."""
    labels = letter_labels(len(traces))
    against = "B against A" if len(traces) == 2 else f"{', '.join(labels[1:])} against A"
    document.text(f"## Comparison: {against}")
    document.text("; ".join(f"{label} is {md_code(name)}" for label, name in zip(labels, input_labels(paths))) + ".")
    # Only two inputs have a command of their own; more are this report's alone.
    sources = [str(path) for path in paths]

    def diff(**options) -> str | None:
        options = {"phases": phases, **options}
        return command_line("diff", sources, DiffOptions(**options), "ms") if len(paths) == 2 else None

    try:
        document.table(compare_categories(traces, list(phases)), diff(by="category"))
        document.text("Kernels that changed most:")
        document.table(compare_kernels(traces, TOP_KERNELS), diff(by="kernel", top=TOP_KERNELS))
    except NoGpuDataError as error:
        document.text(md_prose(f"No GPU comparison: {error}"))
        return
    runs = [Run.at(path) for path in paths]
    configs = [run.config if run is not None else {} for run in runs]
    options = CompareOptions(phases=phases)
    names = input_labels(paths)  # the runs' own names in the table and picture, not letters
    compared = compare_traces(traces, names, configs, options)
    document.text("Kernel time per phase instance and its split by category, input by input:")
    document.table(compared.table("compare"), command_line("compare", sources, options, "ms"))
    if "compare" in compared.charts:
        document.picture(compared.charts["compare"], "compare", "kernel time per phase instance by category")
