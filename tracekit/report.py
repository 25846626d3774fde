"""``tracekit report``: run folders or traces become ``reports/<name>/report.md`` with its pictures.

Every table is the output of a tracekit command, rendered by the same renderer, and says which
command reproduces it; numbers are in ms and MiB. Pictures are PNG files beside report.md, linked
by relative path. Sections that need what a trace lacks (kernels in a CPU capture, a memory
snapshot) say so instead of showing empty tables.
"""

from __future__ import annotations

import re
import shlex
from datetime import datetime, timezone
from pathlib import Path

import pandas as pd

from tracekit import __version__, plots, render, runs
from tracekit.analysis import breakdown, kernels, ranges, stats
from tracekit.errors import NoGpuDataError, TracekitError, UsageError
from tracekit.sources import open_trace, resolve_trace_file
from tracekit.trace import Trace

PHASES = ["forward", "backward", "optimizer"]
TOP_KERNELS, TOP_PHASE_KERNELS, TOP_RANGES = 10, 5, 15
RANGE_COLUMNS = ["Range", "Instances", "Total Time (ms)", "Avg (ms)", "Med (ms)", "Depth", "GPU Ops", "GPU Time (ms)"]


class Section:
    """Markdown being written for one input, with its pictures' file prefix."""

    def __init__(self, folder: Path, prefix: str, source: str):
        self.folder, self.prefix, self.source = folder, prefix, source
        self.lines: list[str] = []

    def text(self, *lines: str) -> None:
        self.lines += list(lines) + [""]

    def table(self, frame: pd.DataFrame, command: str | None = None) -> None:
        self.lines += [render.render(frame, "md"), ""]
        if command:
            self.lines += [f"<sub>`{command}`</sub>", ""]

    def picture(self, figure, name: str, caption: str) -> None:
        file = f"{self.prefix}{name}.png"
        plots.save(figure, self.folder / file)
        self.lines += [f"![{caption}]({file})", ""]


def report_name(inputs: list[Path]) -> str:
    names = [(path.resolve().name if path.is_dir() else path.stem) for path in inputs]
    return re.sub(r"[^A-Za-z0-9._-]+", "-", "-vs-".join(names))[:120]


def write_report(
    inputs: list[str | Path], out: str | Path | None = None, nsys: str | None = None, reports: str | Path = "reports"
) -> Path:
    """Write the report of one or more runs/traces; returns the path of report.md."""
    paths = [Path(path) for path in inputs]
    for path in paths:
        resolve_trace_file(path)  # one clear error for a missing input before any work
    folder = Path(out) if out else Path(reports) / report_name(paths)
    folder.mkdir(parents=True, exist_ok=True)
    lines = [
        f"# tracekit report: {report_name(paths)}",
        "",
        f"Generated {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC by tracekit {__version__}.",
        "",
    ]
    opened = []
    for number, path in enumerate(paths):
        trace = open_trace(path, nsys)
        opened.append(trace)
        label = f"{chr(65 + number)}: " if len(paths) > 1 else ""
        prefix = f"{chr(97 + number)}-" if len(paths) > 1 else ""
        section = Section(folder, prefix, str(path))
        _input_section(section, path, trace, heading=f"{label}{path}")
        lines += section.lines
    if len(paths) == 2:
        lines += _comparison(paths, opened)
    report = folder / "report.md"
    report.write_text("\n".join(lines).rstrip() + "\n")
    return report


def _input_section(section: Section, path: Path, trace: Trace, heading: str) -> None:
    manifest = runs.read_manifest(path) if path.is_dir() else None
    section.text(f"## {heading}")
    gpus = ", ".join(sorted(set(trace.meta.gpus["name"].dropna().astype(str)))) or "not recorded"
    section.text(
        f"Trace `{trace.name}`: Nsight Systems {trace.meta.tool_version} (export schema "
        f"{trace.meta.schema_version}); GPUs: {gpus}."
    )
    if manifest:
        _run_section(section, manifest)
    has_kernels = _has_kernels(trace)
    if has_kernels:
        _gpu_sections(section, trace, manifest)
    else:
        section.text(
            "No CUDA kernels in this trace (a CPU capture, or nsys ran without `--trace=cuda`): the GPU "
            "sections are left out. Capture on an NVIDIA GPU to get them."
        )
    _range_sections(section, trace)
    snapshot = path / runs.MEMORY if path.is_dir() else None
    if snapshot is not None and snapshot.exists():
        _memory_section(section, snapshot)
    elif manifest:
        section.text(
            "### Memory",
            "No memory snapshot in this run (`tracekit capture MODEL --memory` on a CUDA GPU records one).",
        )


def _has_kernels(trace: Trace) -> bool:
    try:
        kernels.kernel_rows(trace, "kernels")
        return True
    except NoGpuDataError:
        return False


def _run_section(section: Section, manifest: dict) -> None:
    config = manifest.get("config", {})
    versions = {
        **manifest.get("versions", {}),
        **{k: v for k, v in (manifest.get("versions_program") or {}).items() if k != "python"},
    }
    rows = [
        ("status", manifest.get("status")),
        ("model", config.get("model")),
        ("context", config.get("context")),
        ("batch", config.get("batch")),
        ("mode", config.get("mode")),
        ("dtype", config.get("dtype")),
        ("torch.compile", config.get("compile")),
        ("attention", config.get("attention")),
        ("steps (after warm-up)", f"{config.get('steps')} (after {config.get('warmup')})"),
        ("device", f"{manifest.get('device', {}).get('name')} ({manifest.get('device', {}).get('type')})"),
        ("nsys --trace", manifest.get("trace")),
        ("versions", ", ".join(f"{key} {value}" for key, value in versions.items() if value)),
        ("capture wall time (s)", manifest.get("wall_s", {}).get("total")),
    ]
    section.text("### Run")
    section.table(pd.DataFrame([(key, str(value)) for key, value in rows], columns=["", "Value"]))
    timings = manifest.get("timings_ms") or {}
    if timings:
        section.text(
            "### Step phases (harness)",
            "Wall time per phase of the measured steps, timed with device synchronisation by the benchmark harness.",
        )
        section.table(runs.phase_table(manifest))
        section.picture(
            plots.step_times(manifest.get("samples_ms", {}), "Time per measured step"),
            "step_times",
            "time per measured step",
        )
    for note in manifest.get("notes", []):
        section.text(f"> note: {note}")


def _gpu_sections(section: Section, trace: Trace, manifest: dict | None) -> None:
    source = shlex.quote(section.source)
    table = breakdown.breakdown_table(trace, PHASES)
    present = table[(table["Instances"] > 0) | (table["Phase"] == breakdown.WHOLE)]
    section.text(
        "### GPU time by phase and category",
        "Kernel time is summed op durations (concurrent streams both count); GPU Busy is wall time with "
        "at least one op running; Idle = Span - Busy, the time the GPU waited.",
    )
    section.table(stats.in_unit(present, "ms"), f"tracekit breakdown {source} --unit ms")
    if len(present) > 1 or present["Kernel Time (ns)"].sum() > 0:
        section.picture(
            plots.category_bars(present, "Share of kernel time by category"),
            "categories",
            "share of kernel time by category and phase",
        )
    timings = (manifest or {}).get("timings_ms") or {}
    phases = present[present["Phase"] != breakdown.WHOLE]
    if timings and not phases.empty:
        rows = [
            {
                "Phase": row["Phase"],
                "Harness Mean (ms)": (timings.get(row["Phase"]) or {}).get("mean"),
                "GPU Busy / Step (ms)": row["GPU Busy (ns)"] / row["Instances"] / 1e6,
                "GPU Idle / Step (ms)": row["GPU Idle (ns)"] / row["Instances"] / 1e6,
            }
            for _, row in phases.iterrows()
        ]
        section.text("Harness wall time per phase beside the GPU's busy time in it (per step):")
        section.table(pd.DataFrame(rows))
    section.text("### Top kernels", "Base names; `tracekit kernels` without `--name short` gives templated names.")
    section.table(
        stats.in_unit(kernels.kernel_table(trace, top=TOP_KERNELS, name="short"), "ms"),
        f"tracekit kernels {source} --top {TOP_KERNELS} --name short --unit ms",
    )
    for phase in phases["Phase"]:
        table = kernels.kernel_table(trace, top=TOP_PHASE_KERNELS, name="short", ranges=[phase])
        section.text(f"#### Inside `{phase}`")
        section.table(
            stats.in_unit(table, "ms"),
            f"tracekit kernels {source} --range {phase} --top {TOP_PHASE_KERNELS} --name short --unit ms",
        )


def _range_sections(section: Section, trace: Trace) -> None:
    source = shlex.quote(section.source)
    if trace.ranges.empty:
        section.text("### NVTX ranges", "No NVTX ranges in this trace.")
        return
    table = stats.in_unit(ranges.range_table(trace, top=TOP_RANGES), "ms")
    section.text("### NVTX ranges", f"The {TOP_RANGES} range names with the most CPU time (all columns: the command).")
    section.table(
        table[[column for column in RANGE_COLUMNS if column in table.columns]],
        f"tracekit ranges {source} --top {TOP_RANGES} --unit ms",
    )
    if (trace.ranges["name"] == "attention").any():
        try:
            within = stats.in_unit(ranges.range_within(trace, "attention"), "ms")
        except UsageError:
            return
        section.text("### Inside attention", "Each part's share of the attention ranges' CPU and GPU time.")
        section.table(within, f"tracekit ranges {source} --within attention --unit ms")


def _memory_section(section: Section, snapshot: Path) -> None:
    from tracekit.analysis.memory import holders_at_peak, memory_tables
    from tracekit.sources.snapshot import load_snapshot

    try:
        trace = load_snapshot(snapshot)
        summary, largest, memory = memory_tables(trace, top=10)
    except TracekitError as error:
        section.text("### Memory", f"The memory snapshot could not be read: {error}")
        return
    source = shlex.quote(str(snapshot))
    section.text("### Memory")
    section.table(summary, f"tracekit memory {source}")
    section.picture(plots.memory_timeline(trace, memory), "memory_timeline", "active memory timeline")
    section.text("What holds the memory at the peak:")
    section.table(holders_at_peak(trace, memory).head(10), f"tracekit memory {source} --by frame")
    section.text("Largest allocations live at the peak:")
    section.table(largest.drop(columns=["Stack"]), f"tracekit memory {source} --top 10")


def _comparison(paths: list[Path], traces: list[Trace]) -> list[str]:
    from tracekit.analysis.diff import diff_categories, diff_kernels

    lines = ["## Comparison: B against A", ""]
    try:
        table = diff_categories(traces[0], traces[1], PHASES)
        lines += [render.render(table, "md"), "", f"<sub>`tracekit diff {paths[0]} {paths[1]}`</sub>", ""]
        lines += ["Kernels that changed most:", "", render.render(diff_kernels(traces[0], traces[1], 10), "md"), ""]
    except NoGpuDataError as error:
        lines += [f"No GPU comparison: {error}", ""]
    return lines


def write_bench_report(db: str | Path, out: str | Path | None = None, reports: str | Path = "reports") -> Path:
    """``tracekit report --bench results.db``: the sweep database as tables and a scaling plot."""
    import sqlite_utils

    path = Path(db)
    if not path.exists():
        raise UsageError(f"{path}: no such results database (write one with `tracekit bench ... --db {path}`)")
    database = sqlite_utils.Database(path)
    if "runs" not in database.table_names():
        raise UsageError(f"{path} has no runs table: not a `tracekit bench --db` database")
    rows = pd.DataFrame(list(database["runs"].rows))
    folder = Path(out) if out else Path(reports) / "bench"
    folder.mkdir(parents=True, exist_ok=True)
    ok = rows[rows["status"] == "ok"].copy()
    # The latest run of each configuration stands for it; earlier ones remain in the database.
    keys = ["model", "ctx", "batch", "mode", "dtype", "compile", "attention", "device"]
    latest = ok.sort_values("time_utc").groupby(keys, as_index=False).tail(1)
    latest["Variant"] = latest["dtype"] + latest["compile"].map({1: " compiled", 0: "", True: " compiled", False: ""})
    latest["cell"] = [f"{mean:,.2f} ± {std:,.2f}" for mean, std in zip(latest["step_mean_ms"], latest["step_std_ms"])]
    pivot = latest.pivot_table(
        index=["model", "ctx", "batch", "mode"], columns="Variant", values="cell", aggfunc="first"
    ).reset_index()
    pivot.columns = [
        str(column).capitalize() if column in ("model", "ctx", "batch", "mode") else str(column)
        for column in pivot.columns
    ]
    lines = [
        f"# Benchmarks: {path.name}",
        "",
        f"{len(rows)} rows ({len(rows) - len(ok)} not ok: out of memory or "
        "error), latest run per configuration. Step time in ms, mean ± std over the measured steps.",
        "",
        render.render(pivot, "md"),
        "",
    ]
    scaling = latest.rename(
        columns={"model": "Model", "ctx": "Ctx", "step_mean_ms": "Step Mean (ms)", "step_std_ms": "Step Std (ms)"}
    )
    plots.save(plots.bench_scaling(scaling, "Step time against context length"), folder / "step_vs_context.png")
    lines += ["![step time against context length](step_vs_context.png)", ""]
    failed = rows[rows["status"] != "ok"]
    if not failed.empty:
        lines += [
            "Configurations that did not run:",
            "",
            render.render(failed[["model", "ctx", "batch", "mode", "dtype", "status", "error"]], "md"),
            "",
        ]
    report = folder / "report.md"
    report.write_text("\n".join(lines))
    return report
