"""``tracekit report RUN_OR_TRACE...``: ``reports/<name>/report.md`` with its pictures.

Every table is a table of a tracekit command's Result, rendered by the same renderer, and names the
command that reproduces it; times are in ms. Each Result is computed once and serves every table and
picture made from it. Sections that need what an input lacks (kernels in a CPU capture, a memory
snapshot) say so instead of showing empty tables. Two or more inputs add a comparison against the
first.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import pandas as pd

from tracekit.analysis.advice.advise_command import AdviseOptions
from tracekit.analysis.critical_path.analysis import WHOLE_TRACE
from tracekit.analysis.critical_path.critical_path_command import CriticalPathOptions
from tracekit.analysis.kernels.kernels_command import KernelsOptions
from tracekit.analysis.many.diff import letter_labels
from tracekit.analysis.memory.memory_command import MemoryOptions
from tracekit.analysis.primitives.busy import ANY, known_devices
from tracekit.analysis.primitives.op_selection import kernel_mask
from tracekit.analysis.primitives.phases import choose_phases
from tracekit.analysis.ranges.breakdown import PHASE, WHOLE, phase_notes
from tracekit.analysis.ranges.breakdown_command import BreakdownOptions
from tracekit.analysis.ranges.ranges_command import RangesOptions
from tracekit.commands import run_command
from tracekit.commands.command_line import command_line
from tracekit.errors import NoGpuDataError, TracekitError, UsageError
from tracekit.model.option_fields import DEFAULT_PHASES
from tracekit.model.result import Chart
from tracekit.model.schema import GPU_OPS
from tracekit.model.trace import Trace, command_notes
from tracekit.render.markup import md_code, md_prose, md_text
from tracekit.render.tables import in_unit
from tracekit.report.comparison import TOP_KERNELS, comparison_section
from tracekit.report.declared import declared_sections
from tracekit.report.document import TRACES_HEADING, Document, write_report_folder
from tracekit.report.findings_page import findings_with_evidence
from tracekit.report.why import WHY_HEADING, why_section
from tracekit.runs import Run
from tracekit.sources import open_trace, run_snapshot
from tracekit.sources.distinct import distinct_inputs
from tracekit.sources.input_paths import input_labels
from tracekit.version import __version__

FINDING_COLUMNS = ["Rank", "Severity", "Finding", "What", "Recoverable (ns)", "Of Span (%)", "Fix"]
TOP_PHASE_KERNELS, TOP_RANGES, TOP_MEMORY = 5, 15, 10
RANGE_COLUMNS = ["Range", "Instances", "Total Time (ms)", "Avg (ms)", "Med (ms)", "Depth", "GPU Ops", "GPU Time (ms)"]
# The sections of a trace with GPU work, in their order; a CPU capture's report names them as left out.
ADVICE_HEADING, BREAKDOWN_HEADING, TOP_KERNELS_HEADING = (
    "What to fix first",
    "GPU time by phase and category",
    "Top kernels",
)
GPU_SECTIONS = (ADVICE_HEADING, BREAKDOWN_HEADING, TOP_KERNELS_HEADING, WHY_HEADING)


def report_name(inputs: list[Path]) -> str:
    """The report's folder name in ``reports/``: the inputs' names joined, in letters, digits and ``._-``.
    Never hidden nor ``.`` or ``..`` (a file ``..sqlite`` would otherwise name ``reports`` itself, and
    ``...sqlite`` the working folder, each then replaced whole by the report): leading dots are dropped,
    and a name left empty is "report"."""
    names = [(path.resolve().name if path.is_dir() else path.stem) for path in inputs]
    return re.sub(r"[^A-Za-z0-9._-]+", "-", "-vs-".join(names))[:120].lstrip(".") or "report"


def write_report(
    inputs: list[str | Path],
    out: str | Path | None = None,
    nsys: str | None = None,
    reports: str | Path = "reports",
    html: bool = False,
    phases: tuple[str, ...] = DEFAULT_PHASES,
    step_range: str | None = None,
    notes: list[str] | None = None,
) -> Path:
    """Write the report of one or more runs/traces; returns the path of report.md. ``html``: also
    report.html beside it, the same content as one self-contained page with each trace's timeline.
    ``phases``: range specs (default: found by name); ``step_range``: the range that is one step.
    ``notes``: what the report says about its inputs (one given twice is reported once) is added to it."""
    choice = Choices(tuple(phases), step_range)
    distinct, repeated = distinct_inputs(list(inputs))
    paths = [Path(path) for path in distinct]
    traces = [open_trace(path, nsys) for path in paths]  # every input recognised before anything is written
    folder = Path(out) if out else Path(reports) / report_name(paths)
    if notes is not None:
        notes += repeated

    def write_into(staging: Path) -> None:
        document = Document(staging)
        document.text(f"{TRACES_HEADING} {md_text(report_name(paths))}")
        document.text(f"Generated {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC by tracekit {__version__}.")
        for note in repeated:
            document.note(note)
        labels = letter_labels(len(paths)) if len(paths) > 1 else [""]
        for label, name, path, trace in zip(labels, input_labels(paths), paths, traces):
            section = Document(staging, f"{label.lower()}-" if label else "")
            _input_section(section, path, trace, f"{label} ({name}): {path}" if label else str(path), choice)
            document.extend(section)
        if len(traces) > 1:
            comparison_section(document, paths, traces, choice.phases)
        document.write(staging / "report.md")
        if html:
            from tracekit.report.timeline_data import timeline_data

            timelines = [
                timeline_data(
                    trace, f"{label} ({name}): {path}" if label else str(path), _readable_snapshot(path), choice.phases
                )
                for label, name, path, trace in zip(labels, input_labels(paths), paths, traces)
            ]
            document.write_html(staging / "report.html", f"tracekit report: {report_name(paths)}", timelines)

    # refused before any picture is drawn when the folder holds anything but a previous report (or an input);
    # one command: what its sections' analyses find in a trace is said under that input (``trace.warnings``)
    with command_notes():
        write_report_folder(folder, write_into)
    return folder / "report.md"


@dataclass(frozen=True)
class Choices:
    """What the user chose for every input: the phases (range specs) and the step range."""

    phases: tuple[str, ...] = DEFAULT_PHASES
    step_range: str | None = None


def _input_section(section: Document, path: Path, trace: Trace, heading: str, choice: Choices) -> None:
    run = Run.at(path)
    section.text(f"## {md_text(heading)}")
    trace.need("gpu_ops", GPU_OPS.names)  # the report's tables use every GPU-op column: one read of them all
    has_kernels = _has_kernels(trace)  # first: a reader may complete the metadata as its tables load
    gpus = ", ".join(sorted(set(trace.meta.gpus["name"].dropna().astype(str))))
    gpus = gpus or ("not recorded" if not trace.gpu_ops.empty else "none traced")
    if has_kernels and not len(trace.meta.gpus):  # the export names no GPU, but its work says which ran
        devices = known_devices(trace.columns("gpu_ops", ["device"])["device"].to_numpy())
        gpus += (
            f" (its GPU work ran on {', '.join(f'cuda:{int(device)}' for device in devices)})" if len(devices) else ""
        )
    tool = "Nsight Systems" if trace.meta.tool == "nsys" else trace.meta.tool
    version = f" {trace.meta.tool_version}" if trace.meta.tool_version else ""
    schema = f" (export schema {trace.meta.schema_version})" if trace.meta.schema_version else ""
    section.text(f"Trace {md_code(trace.name)}: {md_text(f'{tool}{version}{schema}; GPUs: {gpus}')}.")
    source = str(path)
    if run is not None and run.manifest:
        _run_section(section, run)
    if has_kernels:
        _advice_section(section, source, trace)
        _gpu_sections(section, source, trace, run, choice)
        why_section(section, source, trace, choice.step_range)
    else:
        # in a sentence: "why the GPU waits", "GPU time by phase ..." (an acronym keeps its case)
        names = [h if h.split()[0].isupper() else f"{h[0].lower()}{h[1:]}" for h in GPU_SECTIONS]
        section.text(
            "No CUDA kernels in this trace (a CPU capture, or nsys ran without `--trace=cuda`), so the sections "
            f"that read GPU work are left out: {', '.join(names[:-1])} and {names[-1]}. Capture on an NVIDIA GPU "
            "(`tracekit capture MODEL` there) to get them; the NVTX ranges below are the host's CPU time."
        )
    _range_sections(section, source, trace)
    declared_sections(section, source, trace)
    if run is not None and run.snapshot is not None:
        _memory_section(section, run.snapshot)
    elif run is not None and run.manifest:
        section.text(
            "### Memory",
            "No memory snapshot in this run (`tracekit capture MODEL --memory` on a CUDA GPU records one).",
        )
    # Tables load as the sections need them, so by now every table read has reported what it left out.
    for warning in trace.warnings:
        section.note(warning)


def _has_kernels(trace: Trace) -> bool:
    try:
        kernel_mask(trace, "kernels")
        return True
    except NoGpuDataError:
        return False


def _program_name(command: list) -> str | None:
    """ "python train.py" of ["/usr/bin/python3", "train.py", "--token", "..."]: the executable's name
    and, for an interpreter, the script or module; never the arguments."""
    words = [str(word) for word in command if not str(word).startswith("-")]
    if not words:
        return None
    name = Path(words[0]).name
    if name.startswith("python") and len(command) > 1:
        module = command[command.index("-m") + 1] if "-m" in command[:-1] else None
        return f"{name} -m {module}" if module else f"{name} {Path(words[1]).name}" if len(words) > 1 else name
    return name


def _run_section(section: Document, run: Run) -> None:
    config = run.config
    steps, warmup = config.get("steps"), config.get("warmup")
    command = run.manifest.get("command") if "model" not in config else None
    rows = [
        ("status", run.status),
        # the program, not its arguments: a command line may hold secrets (tokens, paths)
        ("program", _program_name(command) if isinstance(command, list) else None),
        ("profiler", run.manifest.get("profiler")),
        ("model", config.get("model")),
        ("context", config.get("context")),
        ("batch", config.get("batch")),
        ("mode", config.get("mode")),
        ("dtype", config.get("dtype")),
        ("torch.compile", config.get("compile")),
        ("attention", config.get("attention")),
        (
            "steps (after warm-up)",
            None if steps is None else f"{steps}" + (f" (after {warmup})" if warmup is not None else ""),
        ),
        ("device", run.device if run.device != "unknown" else None),
        ("nsys --trace", run.trace_apis),
        ("versions", ", ".join(f"{key} {value}" for key, value in run.versions.items()) or None),
        ("capture wall time (s)", run.wall_s.get("total")),
    ]
    rows = [(key, value) for key, value in rows if value is not None and value != ""]  # what is known only
    section.text("### Run")
    section.table(pd.DataFrame([(key, str(value)) for key, value in rows], columns=["", "Value"]))
    if run.timings_ms:
        section.text(
            "### Step phases (harness)",
            "Wall time per phase of the measured steps, as the benchmark harness timed them (on a GPU, after "
            "synchronising it).",
        )
        section.table(run.phases())
        if any(run.samples_ms.values()):
            chart = Chart("step_times", "Time per measured step", {"samples_ms": run.samples_ms})
            section.picture(chart, "step_times", "time per measured step")
    for note in run.notes:
        section.note(note)


def _advice_section(section: Document, source: str, trace: Trace) -> None:
    """ "What to fix first": the findings of ``advise``, most recoverable time first."""
    options = AdviseOptions()
    advice = run_command("advise", trace, options)
    section.text(f"### {ADVICE_HEADING}")
    findings = advice.table("findings")
    if findings.empty:
        said = next((note for note in advice.notes if note.startswith("no findings")), "no findings")
        section.text(md_prose(f"{said[0].upper()}{said[1:]}."))
    else:
        page = findings_with_evidence(findings, advice.table("evidence"), FINDING_COLUMNS)  # the page: all of it
        section.table(findings.loc[:, FINDING_COLUMNS], command_line("advise", [source], options, "ms"), page=page)
        section.text("The evidence of each finding, the bounds of its figures and nsys's expert rules: the command.")
    section.note(advice.notes[0])
    if "critical-path" in advice.names:
        path = advice.table("critical-path")
        label = str(path["Step"].iloc[0])
        critical = CriticalPathOptions(step=None if label == WHOLE_TRACE else label)
        section.text(
            "The critical path of a typical step (the chain of dependent work that decides its time: "
            "HolisticTraceAnalysis's definition, with a stream's long waits not counted as overhead and the path "
            "stopped at the step's end), by what bounds it:"
        )
        section.table(path, command_line("critical-path", [source], critical, "ms"))
    said = next((note for note in advice.notes if note.startswith(("the critical path", "no critical path"))), None)
    if said:
        section.note(said)


def _gpu_sections(section: Document, source: str, trace: Trace, run: Run | None, choice: Choices) -> None:
    options = BreakdownOptions(phases=choice.phases)
    breakdown = run_command("breakdown", trace, options)
    table = breakdown.table("breakdown")
    present = table.loc[(table["Instances"] > 0) | (table[PHASE] == WHOLE)]
    section.text(
        f"### {BREAKDOWN_HEADING}",
        "Kernel time is the summed duration of the kernels (concurrent streams both count); memory copies and "
        "sets are the columns beside it, not part of it.",
    )
    section.table(present, command_line("breakdown", [source], options, "ms"))
    how = f"`{command_line('breakdown', [source], options)} --phases ...`"
    for note in phase_notes(trace, choice.phases, how=how):  # (the trace's warnings come once, at the end)
        section.note(note)
    if "categories" in breakdown.charts:
        section.picture(breakdown.charts["categories"], "categories", "share of kernel time by category and phase")
    gpus = breakdown.table("gpus")
    section.text(
        "Busy and idle per GPU: busy while any kernel, copy or set runs on it; idle = span - busy, the time it "
        "waited inside each phase instance. With several GPUs, *any GPU busy* counts idle only when every GPU is idle."
    )
    section.table(gpus)
    if "copies" in breakdown.names:
        section.text("Memory copies and sets:")
        section.table(breakdown.table("copies"))
    timings = run.timings_ms if run is not None else {}
    phases = present.loc[present[PHASE] != WHOLE]
    if timings and not phases.empty:
        # "any GPU busy", or the one GPU's own row where there is only one
        any_gpu = gpus.loc[(gpus["GPU"] == ANY) | ~gpus.groupby(PHASE)["GPU"].transform(lambda g: (g == ANY).any())]
        any_gpu = any_gpu.set_index(PHASE)
        rows = [
            {
                "Phase": phase,
                "Harness Mean (ms)": (timings.get(phase) or {}).get("mean"),
                # a phase that launched nothing (a CPU optimizer step) has no GPU row: busy and idle 0
                "GPU Busy / Step (ns)": any_gpu["Busy (ns)"].get(phase, 0) / instances,
                "GPU Idle / Step (ns)": any_gpu["Idle (ns)"].get(phase, 0) / instances,
            }
            for phase, instances in zip(phases[PHASE], phases["Instances"])
        ]
        section.text("Harness wall time per phase beside the time any GPU was busy in it (per step):")
        section.table(pd.DataFrame(rows))
    section.text(
        f"### {TOP_KERNELS_HEADING}", "Base names; `tracekit kernels` without `--name short` gives templated names."
    )
    top_options = KernelsOptions(top=TOP_KERNELS, name="short")
    top = run_command("kernels", trace, top_options)
    section.table(top.frame, command_line("kernels", [source], top_options, "ms"))
    specs = dict(choose_phases(trace, choice.phases).chosen)  # a phase found by name: its label and its range spec
    for phase in phases.loc[phases["Kernels"] > 0, PHASE]:  # a phase that launched no kernel has no top list
        inside_options = KernelsOptions(
            top=TOP_PHASE_KERNELS, name="short", ranges=(specs.get(str(phase), str(phase)),)
        )
        inside = run_command("kernels", trace, inside_options)
        section.text(f"#### Inside {md_code(str(phase))}")
        section.table(inside.frame, command_line("kernels", [source], inside_options, "ms"))


def _range_sections(section: Document, source: str, trace: Trace) -> None:
    if trace.ranges.empty:
        section.text("### NVTX ranges", "No NVTX ranges in this trace.")
        return
    options = RangesOptions(top=TOP_RANGES)
    summary = run_command("ranges", trace, options)
    table = _host_only(in_unit(summary.frame, "ms"), trace)
    shown = (
        f"The {len(table)} range names with the most CPU time"
        if len(table) >= TOP_RANGES
        else f"All {len(table)} range names, most CPU time first"
    )
    section.text("### NVTX ranges", f"{shown}; the command under the table prints all its columns.")
    section.table(
        table.loc[:, [column for column in RANGE_COLUMNS if column in table.columns]],
        command_line("ranges", [source], options, "ms"),
    )
    for note in summary.notes:
        if note not in trace.warnings:  # rows left out are said once, for every table, under the input
            section.note(note)
    if (trace.ranges["name"] == "attention").any():
        try:
            within_options = RangesOptions(within="attention")
            within = run_command("ranges", trace, within_options)
        except UsageError:
            return
        parts = _host_only(within.frame, trace)
        time = "CPU time" if len(parts.columns) < len(within.frame.columns) else "CPU and GPU time"
        section.text("### Inside attention", f"Each part's share of the attention ranges' {time}.")
        section.table(parts, command_line("ranges", [source], within_options, "ms"))


def _host_only(table: pd.DataFrame, trace: Trace) -> pd.DataFrame:
    """``table`` without its GPU columns (GPU Ops, GPU Time, GPU (%)...) when ``trace`` has no GPU op: a
    CPU capture's columns of zeros say nothing. The command prints them all."""
    if not trace.gpu_ops.empty:
        return table
    return table.drop(columns=[column for column in table.columns if str(column).startswith("GPU")])


def _memory_section(section: Document, snapshot: Path) -> None:
    try:
        memory = run_command("memory", snapshot, MemoryOptions(top=TOP_MEMORY, by="all", timeline=True))
    except TracekitError as error:
        section.text("### Memory", md_prose(f"The memory snapshot could not be read: {error}"))
        return
    source = [str(snapshot)]
    section.text("### Memory")
    section.table(memory.table("summary"), command_line("memory", source, MemoryOptions()))
    for note in memory.notes:
        section.note(note)
    section.picture(memory.charts["timeline"], "memory_timeline", "active memory timeline")
    section.text("What the memory live at the peak is for (parameters, optimizer state, gradients, activations):")
    section.table(memory.table("roles"), command_line("memory", source, MemoryOptions(by="role")))
    if "roles" in memory.charts:
        section.picture(memory.charts["roles"], "memory_roles", "live memory by role over time")
    section.text("What holds the memory at the peak:")
    section.table(memory.table("holders"), command_line("memory", source, MemoryOptions(by="frame")))
    section.text("Largest allocations live at the peak:")
    section.table(
        memory.table("allocations").drop(columns=["Stack"]),
        command_line("memory", source, MemoryOptions(top=TOP_MEMORY)),
    )


def _readable_snapshot(path: Path):
    """A run folder's memory snapshot, or None (none, or one that cannot be read: its section says so)."""
    try:
        return run_snapshot(path)
    except TracekitError:
        return None
