"""``tracekit ranks``: one row per rank of a distributed job (or per run), and where they differ.

Per input:
- Steps and Step Time (ns): the mean duration of its step ranges: ``step_range`` when given,
  else torch.profiler's ``ProfilerStep#N`` (CPU side), else ranges named ``step`` (tracekit's
  workloads and ``annotate.steps``). A trace without any: no steps, and the GPU figures cover it all.
- GPU Busy / Span / Idle (ns): summed over the input's GPUs (``busy``: every GPU op counts).
- Computation, Communication, Memory (ns): summed durations of the GPU ops of each of
  HolisticTraceAnalysis's kernel types (``kernel_types``: NCCL kernels are communication), as its
  ``get_gpu_kernel_breakdown`` sums them per rank; ``drop_last_step`` applies its step window.
- Per NCCL collective (AllReduce, SendRecv, AllGather, ...; from the kernel name): instances and time.

Across inputs: the spread of each figure (slowest and fastest rank), the collectives per rank, per
kernel name the rank where its mean duration is highest against the one where it is lowest, and the
stragglers (``stragglers``: HolisticTraceAnalysis's definition, a Straggler column and a table).
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pandas as pd

from tracekit.analysis.many.inputs import Part
from tracekit.analysis.many.ranks_command import RanksOptions
from tracekit.analysis.many.stragglers import potential_stragglers, straggler_piece
from tracekit.analysis.primitives.busy import SUM, device_busy, known_devices
from tracekit.analysis.primitives.joins import op_launches
from tracekit.analysis.primitives.kernel_types import TYPES, op_types
from tracekit.analysis.primitives.step_window import launched_before_last_step, step_rows
from tracekit.model.options import named as option_name
from tracekit.model.result import Table
from tracekit.model.trace import Trace

COLLECTIVE = re.compile(r"^nccl(?:Dev)?Kernel_([A-Za-z]+)")
STEPS, STEP_TIME = "Steps", "Step Time (ns)"
BUSY, SPAN, IDLE = "GPU Busy (ns)", "GPU Span (ns)", "GPU Idle (ns)"
TYPE_COLUMNS = {kind: f"{kind.capitalize()} (ns)" for kind in TYPES}
COMM_SHARE = "Communication (%)"
SPREAD_METRICS = [STEP_TIME, BUSY, IDLE, TYPE_COLUMNS["computation"], TYPE_COLUMNS["communication"]]
KERNEL_TOP = 15


def collective_name(kernel: str) -> str:
    """ "ncclKernel_AllReduce_RING_LL_Sum_float(...)" -> "AllReduce"; other names stay whole."""
    found = COLLECTIVE.match(kernel)
    return found.group(1) if found else kernel.split("(")[0]


def ranks_part(trace: Trace, part: Part, options: RanksOptions, limit: int) -> Part:
    """One input's row (one per GPU when it holds several: a single export of a multi-GPU job, each
    GPU's row with the steps of the processes that launched its work), its collectives and its
    per-kernel means."""
    ops = trace.gpu_ops
    window = None
    if options.drop_last_step:
        window, note = launched_before_last_step(trace)
        part.notes.append(note)
    counted = np.ones(len(ops), dtype=bool) if window is None else window
    devices = ops["device"].to_numpy()
    gpus = known_devices(devices[counted])
    # the whole input (its row among a job's ranks), then each GPU (its rows when it is the only input)
    groups = [(None, counted)] + (
        [(f"cuda:{int(gpu)}", counted & (devices == gpu)) for gpu in gpus] if len(gpus) > 1 else []
    )
    steps = step_rows(trace, options.step_range)
    launches = op_launches(trace)
    launcher = np.where(launches.found, launches.pid, ops["pid"].to_numpy())
    types, durations = op_types(ops), ops["duration"].to_numpy()
    codes = ops["name"].cat.codes.to_numpy()
    labels = np.asarray(ops["name"].cat.categories, dtype=object)
    collective_names = np.asarray([collective_name(str(name)) for name in labels], dtype=object)
    kernel = (ops["kind"] == "kernel").to_numpy()
    unknown = int((counted & (devices < 0)).sum())
    if len(gpus) > 1 and unknown:
        part.notes.append(f"{unknown:,} GPU operations ran on an unknown device: they count in no GPU's row")
    part.pieces["rows"] = []
    for gpu, mine in groups:
        own = steps if gpu is None else steps.loc[steps["pid"].isin(np.unique(launcher[mine])).to_numpy()]
        step_ns = own["duration"].to_numpy() if not own.empty else np.zeros(0, dtype=np.int64)
        busy = device_busy(ops, np.where(mine, 0, -1)).set_index("GPU")
        # the GPUs summed; one GPU: its row; none (no op in the window): zeros
        chosen = busy.loc[[SUM]] if SUM in busy.index else busy.iloc[:1]
        totals = {column: int(chosen[column].sum()) for column in ("Busy (ns)", "Span (ns)", "Idle (ns)")}
        row: dict[str, Any] = {
            STEPS: len(step_ns),
            STEP_TIME: float(step_ns.mean()) if len(step_ns) else np.nan,
            BUSY: totals["Busy (ns)"],
            SPAN: totals["Span (ns)"],
            IDLE: totals["Idle (ns)"],
        }
        for index, kind in enumerate(TYPES):
            row[TYPE_COLUMNS[kind]] = int(durations[mine & (types == index)].sum())
        kernels = row[TYPE_COLUMNS["computation"]] + row[TYPE_COLUMNS["communication"]]
        communication_ns = row[TYPE_COLUMNS["communication"]]
        row[COMM_SHARE] = communication_ns * 100.0 / kernels if kernels else 0.0
        communication = mine & (types == TYPES.index("communication"))
        frame = pd.DataFrame({"Collective": collective_names[codes[communication]], "ns": durations[communication]})
        collectives = frame.groupby("Collective", as_index=False).agg(
            Instances=("ns", "size"), **{"Time (ns)": ("ns", "sum")}
        )
        chosen = mine & kernel
        instances = np.bincount(codes[chosen], minlength=len(labels))
        totals = np.bincount(codes[chosen], weights=durations[chosen], minlength=len(labels))
        present = instances > 0
        kernel_table = pd.DataFrame(
            {"Name": labels[present], "Instances": instances[present], "Total": totals[present].astype(np.int64)}
        )
        part.pieces["rows"].append((gpu, row, collectives, kernel_table))
    part.pieces["stragglers"] = straggler_piece(trace, options.step_range)
    part.notes += trace.warnings
    return part


class RanksMerger:
    """Rows of every input side by side, their spread, collectives per rank, kernels slowest where."""

    def __init__(self, options: RanksOptions, limit: int):
        self.top = options.top or KERNEL_TOP
        self.rows: dict[tuple[int, str], dict[str, Any]] = {}  # (input, GPU or "") -> row
        self.collectives: list[pd.DataFrame] = []
        self.kernels: list[pd.DataFrame] = []
        self.stragglers: dict[int, Any] = {}

    def add(self, index: int, pieces: dict[str, Any]) -> None:
        self.stragglers[index] = pieces.get("stragglers")
        for gpu, row, collectives, kernels in pieces["rows"]:
            key = (index, gpu or "")
            self.rows[key] = row
            self.collectives.append(collectives.assign(input=[key] * len(collectives)))
            self.kernels.append(kernels.assign(input=[key] * len(kernels)))

    def tables(self, labels: dict[int, Any], column: str) -> tuple[list[Table], list[str]]:
        inputs = {index for index, _ in self.rows}
        split = len(inputs) == 1 and len(self.rows) > 1  # one export of a multi-GPU job: its GPUs are the ranks
        keep = {key for key in self.rows if bool(key[1]) == split}
        self.rows = {key: row for key, row in self.rows.items() if key in keep}
        self.collectives = [frame.loc[[key in keep for key in frame["input"]]] for frame in self.collectives]
        self.kernels = [frame.loc[[key in keep for key in frame["input"]]] for frame in self.kernels]
        if split:
            column = "GPU"
            label = {key: key[1] for key in self.rows}
        else:
            label = {key: labels[key[0]] for key in self.rows}
        # by input, then GPU number (cuda:2 before cuda:10)
        order = sorted(self.rows, key=lambda key: (label[key] if not split else "", key[0], _gpu_number(key[1])))
        table = pd.DataFrame([{column: label[key], **self.rows[key]} for key in order])
        steps = table[STEP_TIME].to_numpy(float)
        if np.isfinite(steps).any() and len(table) > 1:
            table["Step vs Median (%)"] = (steps / np.nanmedian(steps) - 1) * 100
        named = column if column == "GPU" else column.lower()
        tables = [Table("ranks", table, f"Per {named}: steps, GPU busy and idle, compute and communication")]
        notes = []
        if len(table) > 1:
            tables.append(Table("spread", _spread(table, column), "Slowest and fastest per figure"))
        else:
            alone = "one input with one GPU" if table[SPAN].iloc[0] > 0 else "one input, without GPU work"
            notes.append(
                f"{alone}: nothing to compare it with (ranks compares the traces of a job's "
                "ranks: give them as files, a folder or a glob)"
            )
        if split and len(inputs) == 1:
            notes.append(
                f"one input holding {len(table)} GPUs: compared GPU by GPU (each with the steps of the "
                "processes that launched its work)"
            )
        collectives = pd.concat(self.collectives, ignore_index=True)
        if not collectives.empty:
            collectives.insert(0, column, [label[key] for key in collectives.pop("input")])
            collectives = collectives.sort_values(["Collective", column], kind="stable", ignore_index=True)
            tables.append(Table("collectives", collectives, f"NCCL collectives per {named}"))
        kernels = _kernel_spread(pd.concat(self.kernels, ignore_index=True), label, column, self.top)
        if not kernels.empty:
            tables.append(Table("kernels", kernels, f"Kernels whose mean differs most between {named}s"))
        if not split and len(table) > 1:
            stragglers, said = potential_stragglers({labels[index]: piece for index, piece in self.stragglers.items()})
            notes.append(said)
            if not stragglers.empty:
                table.insert(
                    len(table.columns),
                    "Straggler",
                    table[column].map(dict(zip(stragglers["Rank"], stragglers["Straggler"], strict=True))).fillna(""),
                )
                tables[0].frame = table
                stragglers = stragglers.rename(columns={"Rank": column})
                tables.append(Table("stragglers", stragglers, f"Who the others waited for, per {named}"))
        return tables, notes + _straggler_note(table, column)


def _gpu_number(gpu: str) -> int:
    return int(gpu.removeprefix("cuda:")) if gpu.startswith("cuda:") else -1


def _spread(table: pd.DataFrame, column: str) -> pd.DataFrame:
    rows = []
    for metric in SPREAD_METRICS:
        values = table[metric].to_numpy(float)
        if not np.isfinite(values).any() or not np.nan_to_num(values).any():  # nothing, or zero everywhere
            continue
        low, high = int(np.nanargmin(values)), int(np.nanargmax(values))
        rows.append(
            {
                "Figure": metric.removesuffix(" (ns)"),
                f"Min {column}": table[column].iloc[low],
                "Min (ns)": values[low],
                f"Max {column}": table[column].iloc[high],
                "Max (ns)": values[high],
                "Median (ns)": float(np.nanmedian(values)),
                "Spread (ns)": values[high] - values[low],
                # no share of nothing
                "Spread (%)": (values[high] - values[low]) * 100 / values[low] if values[low] else None,
            }
        )
    return pd.DataFrame(rows)


def _kernel_spread(kernels: pd.DataFrame, label: dict[Any, Any], column: str, top: int) -> pd.DataFrame:
    """Per kernel name on two or more inputs: where its mean is highest and lowest; ordered by the time
    the slowest input loses against the fastest (difference of means x the slow input's instances)."""
    if kernels.empty:
        return kernels
    kernels = kernels.assign(Mean=kernels["Total"] / kernels["Instances"])
    grouped = kernels.groupby("Name", sort=False)
    spread = grouped.agg(Inputs=("input", "size"), Instances=("Instances", "sum"), Total=("Total", "sum"))
    spread = spread.loc[spread["Inputs"] > 1]
    if spread.empty:
        return pd.DataFrame()
    slow = kernels.loc[grouped["Mean"].idxmax()].set_index("Name").loc[spread.index]
    fast = kernels.loc[grouped["Mean"].idxmin()].set_index("Name").loc[spread.index]
    table = pd.DataFrame(
        {
            f"{column}s": spread["Inputs"].to_numpy(),
            "Instances": spread["Instances"].to_numpy(),
            "Avg (ns)": spread["Total"].to_numpy() / spread["Instances"].to_numpy(),
            f"Slowest {column}": [label[index] for index in slow["input"]],
            "Slowest Avg (ns)": slow["Mean"].to_numpy(),
            f"Fastest {column}": [label[index] for index in fast["input"]],
            "Fastest Avg (ns)": fast["Mean"].to_numpy(),
            "Lost (ns)": (slow["Mean"].to_numpy() - fast["Mean"].to_numpy()) * slow["Instances"].to_numpy(),
            "Name": spread.index.to_numpy(),
        }
    )
    table["Spread (%)"] = (
        table["Slowest Avg (ns)"] / table["Fastest Avg (ns)"].where(table["Fastest Avg (ns)"] > 0) - 1
    ) * 100
    table = table.sort_values("Lost (ns)", ascending=False, kind="stable", ignore_index=True)
    return table.loc[:, [c for c in table.columns if c != "Name"] + ["Name"]].head(top)


def _straggler_note(table: pd.DataFrame, column: str) -> list[str]:
    """Who was slowest by step time (who the others waited for: ``stragglers``)."""
    notes = []
    named = column if column == "GPU" else column.lower()
    steps = table[STEP_TIME].to_numpy(float)
    if not np.isfinite(steps).any():
        notes.append(f"no step ranges (ProfilerStep#N, step or {option_name('step_range')}): no step times per {named}")
    elif len(table) > 1:
        slow, fast = int(np.nanargmax(steps)), int(np.nanargmin(steps))
        median = float(np.nanmedian(steps))
        notes.append(
            f"slowest {named} by step time: {table[column].iloc[slow]} ({steps[slow] / 1e6:,.3f} ms, "
            f"{(steps[slow] / median - 1) * 100:+.1f}% against the median {median / 1e6:,.3f} ms); fastest: "
            f"{table[column].iloc[fast]} ({steps[fast] / 1e6:,.3f} ms)"
        )
    return notes
