"""What report.html's timeline draws for one trace: the phases of its steps (forward, backward,
optimizer: the host's ranges, one lane per process), its GPU ops by lane (a GPU's stream), each GPU's
idle gaps by cause, and the steps, as flat integer arrays (ns from the trace's first GPU op, or its first
step or phase in a trace without GPU ops) that the page's script reads once and draws with level of
detail. The legend lists only the categories and phases that occur.

Columns, not objects: a million ops are five arrays of a million numbers (about 30 bytes an op in
JSON), so a 1M-kernel report stays well under 50 MB and parses in a fraction of a second.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from tracekit.analysis.memory.on_trace import memory_on_trace
from tracekit.analysis.primitives.categories import CATEGORIES, op_categories
from tracekit.analysis.primitives.joins import op_launches
from tracekit.analysis.primitives.phases import choose_phases
from tracekit.analysis.primitives.selection import select
from tracekit.analysis.primitives.step_window import step_rows
from tracekit.analysis.waits.idle import gap_devices, idle_gaps
from tracekit.analysis.waits.syncs import NO_RANGE, innermost_range
from tracekit.model.memory import MemoryTrace
from tracekit.model.option_fields import DEFAULT_PHASES
from tracekit.model.trace import Trace
from tracekit.render.colours import HOST_COLOURS, IDLE_COLOURS, TIMELINE_COLOURS, category_colour, phase_colour
from tracekit.render.safe_text import printable
from tracekit.report.host_lanes import HOST_KINDS, host_rows, op_launch_threads


def timeline_data(
    trace: Trace, title: str, snapshot: MemoryTrace | None = None, phases: Sequence[str] = DEFAULT_PHASES
) -> dict:
    """The timeline of ``trace`` for the page: lanes (phases per process, then each GPU stream, then each
    GPU's idle gaps), ranges (lane, start, duration, range name, phase), ops (lane, start, duration,
    name, category), gaps (lane, start, duration, cause), steps (start, duration); ``phases``: the range
    specs of the phases (default: found by name, as ``breakdown`` finds them). With a ``snapshot``, its
    allocated and reserved MiB over time on the same axis ("memory"), or why not."""
    ops = trace.gpu_ops
    steps = step_rows(trace)
    phase_rows, labels = _phase_rows(trace, phases)
    origin = (
        int(ops["start"].min())
        if len(ops)
        else int(steps["start"].min())
        if len(steps)
        else int(phase_rows["start"].min())
        if len(phase_rows)
        else 0
    )
    processes = np.unique(phase_rows["pid"].to_numpy(np.int64))
    lanes = [
        {"name": "phases" if len(processes) == 1 else f"phases · pid {pid}", "kind": "ranges", "pid": int(pid)}
        for pid in processes.tolist()
    ]
    host = host_rows(trace)
    first_host_lane = len(lanes)
    lanes += host.lanes
    first_op_lane = len(lanes)
    device, stream = ops["device"].to_numpy(np.int64), ops["stream"].to_numpy(np.int64)
    lane_keys, op_lane = np.unique(np.stack([device, stream], axis=1), axis=0, return_inverse=True)
    op_lane = op_lane.reshape(-1) + first_op_lane
    devices = sorted(set(lane_keys[:, 0].tolist()))
    lanes += [{"name": f"GPU {d} · stream {s}", "device": int(d), "kind": "ops"} for d, s in lane_keys.tolist()]
    idle_lane = {d: len(lanes) + index for index, d in enumerate(devices)}
    lanes += [{"name": f"GPU {d} · idle", "device": int(d), "kind": "gaps"} for d in devices]

    range_lane = np.searchsorted(processes, phase_rows["pid"].to_numpy(np.int64))
    range_order = np.lexsort((phase_rows["start"].to_numpy(), range_lane))
    range_names, range_name_list = pd.factorize(phase_rows["name"].to_numpy(dtype=object)[range_order])
    order = np.lexsort((ops["start"].to_numpy(), op_lane))  # by lane, then time: the page searches by time
    name_codes, names = pd.factorize(ops["name"].astype(str).to_numpy(dtype=object)[order])
    categories = op_categories(trace)[order] if len(ops) else np.zeros(0, dtype=np.int64)
    present = np.unique(categories)  # the legend's categories: those of this trace's ops only
    gaps = _gaps(trace)
    cause_codes, causes = pd.factorize(gaps["Cause"].astype(str).to_numpy(dtype=object))
    range_codes, launch_ranges = _launching_ranges(trace, order) if len(ops) else ([], [])
    launch, threads = (
        op_launch_threads(trace, order, host, first_host_lane) if len(ops) else ({"thread_runs": [], "lead": []}, [])
    )
    return {
        "title": title,
        "lanes": lanes,
        "phases": labels,
        "phase_colours": [phase_colour(label) for label in labels],
        "phase_names": [printable(str(name)) for name in range_name_list],
        "ranges": _packed(
            range_lane[range_order],
            phase_rows["start"].to_numpy(np.int64)[range_order] - origin,
            phase_rows["duration"].to_numpy(np.int64)[range_order],
            range_names,
            phase_rows["phase"].to_numpy(np.int64)[range_order],
            len(lanes),
        ),
        "host": _packed(
            host.lane + first_host_lane, host.start - origin, host.duration, host.name, host.kind, len(lanes)
        ),
        "host_names": host.names,
        "host_kinds": list(HOST_KINDS),
        "host_colours": [HOST_COLOURS[kind] for kind in HOST_KINDS],
        "host_note": host.note,
        "threads": threads,
        "marks": TIMELINE_COLOURS,
        "launch": launch,
        "names": [printable(str(name)) for name in names],  # shown, not obeyed: a newline or U+202E as escapes
        "categories": [CATEGORIES[code] for code in present.tolist()],
        "colours": [category_colour(CATEGORIES[code]) for code in present.tolist()],
        "causes": [str(cause) for cause in causes],
        "cause_colours": [IDLE_COLOURS.get(str(cause), "#dbdb8d") for cause in causes],
        "range_names": launch_ranges,
        "op_range": range_codes,
        "ops": _packed(
            op_lane[order],
            ops["start"].to_numpy(np.int64)[order] - origin,
            ops["duration"].to_numpy(np.int64)[order],
            name_codes,
            np.searchsorted(present, categories),
            len(lanes),
        ),
        "gaps": _packed(
            np.array([idle_lane[d] for d in gaps["device"].tolist()], dtype=np.int64),
            gaps["Start (ns)"].to_numpy(np.int64) - origin,
            gaps["Idle (ns)"].to_numpy(np.int64),
            cause_codes,
            cause_codes,
            len(lanes),
        ),
        "steps": {
            "start": (steps["start"].to_numpy(np.int64) - origin).tolist(),
            "duration": steps["duration"].to_numpy(np.int64).tolist(),
        },
        "origin_ns": origin,
        "count": len(ops),
        **(_memory(snapshot, trace, origin) if len(ops) else {"memory": None}),
    }


def _phase_rows(trace: Trace, phases: Sequence[str]) -> tuple[pd.DataFrame, list[str]]:
    """Every instance of the phases ``phases`` names (found by name by default: ``primitives.phases``): pid,
    start, duration (ns), the range's name and the phase's position in the labels; and the labels of
    the phases found."""
    columns = {"pid": np.int64, "start": np.int64, "duration": np.int64, "name": object, "phase": np.int64}
    empty = pd.DataFrame({name: pd.Series(dtype=dtype) for name, dtype in columns.items()})
    chosen = choose_phases(trace, phases).chosen if not trace.ranges.empty else ()
    if not chosen:
        return empty, []
    selection = select(trace, [spec for _, spec in chosen])
    found = [(label, selection.of(spec)) for label, spec in chosen]
    found = [(label, rows) for label, rows in found if len(rows)]
    parts = [
        pd.DataFrame(
            {
                "pid": rows["pid"].to_numpy(np.int64),
                "start": rows["start"].to_numpy(np.int64),
                "duration": rows["duration"].to_numpy(np.int64),
                "name": rows["name"].astype(str).to_numpy(dtype=object),
                "phase": code,
            }
        )
        for code, (_, rows) in enumerate(found)
    ]
    return (pd.concat(parts, ignore_index=True) if parts else empty), [label for label, _ in found]


def _gaps(trace: Trace) -> pd.DataFrame:
    """Each GPU's idle gaps with their device, by device then time (none without GPU ops)."""
    if trace.gpu_ops.empty:
        return pd.DataFrame(
            {
                "device": pd.Series(dtype=np.int64),
                "Start (ns)": pd.Series(dtype=np.int64),
                "Idle (ns)": pd.Series(dtype=np.int64),
                "Cause": pd.Series(dtype=object),
            }
        )
    gaps = idle_gaps(trace)
    return gaps.assign(device=gap_devices(gaps)).sort_values(["device", "Start (ns)"], kind="stable")


def _launching_ranges(trace: Trace, order: np.ndarray) -> tuple[list[int], list[str]]:
    """Per op (in ``order``): the innermost NVTX range open on its launching thread when the call
    started, as a code into a list of names (-1: none, or no launching call in the trace)."""
    launched = op_launches(trace)
    codes = np.full(len(launched.found), -1, dtype=np.int64)
    if launched.found.any() and not trace.ranges.empty:
        rows = np.flatnonzero(launched.found)
        calls = pd.DataFrame({"pid": launched.pid[rows], "tid": launched.tid[rows], "start": launched.start[rows]})
        names = innermost_range(trace.ranges, calls)
        found, labels = pd.factorize(pd.Series(names, dtype=object))
        none = [index for index, label in enumerate(labels) if label == NO_RANGE]
        found = np.where(np.isin(found, none), -1, found)
        codes[rows] = found
        return codes[order].tolist(), [printable(str(label)) for label in labels]
    return codes[order].tolist(), []


def _memory(snapshot: MemoryTrace | None, trace: Trace, origin: int) -> dict:
    if snapshot is None:
        return {"memory": None}
    placed = memory_on_trace(snapshot, trace)
    if isinstance(placed, str):
        return {"memory": None, "memory_note": placed}
    times, allocated, reserved, device = placed
    # at most a few thousand points: the lane is a picture of the level, not of every event
    keep = np.unique(np.linspace(0, len(times) - 1, min(len(times), 4000)).astype(np.int64)) if len(times) else times
    return {
        "memory": {
            "device": int(device),
            "start": (times[keep] - origin).tolist(),
            "allocated_mib": np.round(allocated[keep] / 2**20, 3).tolist(),
            "reserved_mib": np.round(reserved[keep] / 2**20, 3).tolist(),
        }
    }


def _packed(
    lane: np.ndarray, start: np.ndarray, duration: np.ndarray, name: np.ndarray, category: np.ndarray, lanes: int
) -> dict:
    """Rows sorted by (lane, start), small in JSON: how many rows each lane has, and each start as the
    step from the one before it in its lane (the page adds them up again), so a number takes a few
    digits, not the twelve of a time since the trace began."""
    first = np.ones(len(lane), dtype=bool)
    first[1:] = lane[1:] != lane[:-1]
    step = np.where(first, start, start - np.concatenate([[0], start[:-1]]))
    return {
        "lane_counts": np.bincount(lane, minlength=lanes).tolist(),
        "start_step": step.tolist(),
        "duration": duration.tolist(),
        "name": np.asarray(name).tolist(),
        "category": np.asarray(category).tolist(),
    }
