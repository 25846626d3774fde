"""What report.html's timeline draws for one trace: its GPU ops by lane (a GPU's stream), each GPU's
idle gaps by cause, and the steps, as flat integer arrays (ns from the trace's first GPU op) that the
page's script reads once and draws with level of detail.

Columns, not objects: a million ops are five arrays of a million numbers (about 30 bytes an op in
JSON), so a 1M-kernel report stays well under 50 MB and parses in a fraction of a second.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from tracekit.analysis.kernels.categories import CATEGORIES, op_categories
from tracekit.analysis.memory.on_trace import memory_on_trace
from tracekit.analysis.ranges.attribution import op_launches
from tracekit.analysis.ranges.steps import step_rows
from tracekit.analysis.waits.idle import gap_devices, idle_gaps
from tracekit.analysis.waits.syncs import NO_RANGE, innermost_range
from tracekit.model.memory import MemoryTrace
from tracekit.model.trace import Trace
from tracekit.render.colours import IDLE_COLOURS, category_colour
from tracekit.render.safe_text import printable


def timeline_data(trace: Trace, title: str, snapshot: MemoryTrace | None = None) -> dict:
    """The timeline of ``trace`` for the page: lanes, ops (lane, start, duration, name, category),
    gaps (lane, start, duration, cause), steps (start, duration), in ns from the first GPU op; with a
    ``snapshot``, its allocated and reserved MiB over time on the same axis ("memory"), or why not."""
    ops = trace.gpu_ops
    if ops.empty:  # a CPU-only capture: its steps still show, on an axis from the first of them
        steps = step_rows(trace)
        first = int(steps["start"].min()) if len(steps) else 0
        return {"title": title, "lanes": [], "names": [], "categories": list(CATEGORIES),
                "colours": [category_colour(category) for category in CATEGORIES], "causes": [], "cause_colours": [],
                "range_names": [], "op_range": [], "ops": _columns(), "gaps": _columns(),
                "steps": {"start": (steps["start"].to_numpy(np.int64) - first).tolist(),
                          "duration": steps["duration"].to_numpy(np.int64).tolist()},
                "origin_ns": first, "count": 0, "memory": None}  # fmt: skip
    origin = int(ops["start"].min())
    device, stream = ops["device"].to_numpy(np.int64), ops["stream"].to_numpy(np.int64)
    lane_keys, lane = np.unique(np.stack([device, stream], axis=1), axis=0, return_inverse=True)
    lane = lane.reshape(-1)
    devices = sorted(set(lane_keys[:, 0].tolist()))
    lanes = [{"name": f"GPU {d} · stream {s}", "device": int(d), "kind": "ops"} for d, s in lane_keys.tolist()]
    idle_lane = {d: len(lanes) + index for index, d in enumerate(devices)}
    lanes += [{"name": f"GPU {d} · idle", "device": int(d), "kind": "gaps"} for d in devices]
    order = np.lexsort((ops["start"].to_numpy(), lane))  # by lane, then time: the page searches by time
    name_codes, names = pd.factorize(ops["name"].astype(str).to_numpy(dtype=object)[order])
    gaps = idle_gaps(trace)
    gaps = gaps.assign(device=gap_devices(gaps)).sort_values(["device", "Start (ns)"], kind="stable")
    gap_device = gaps["device"].to_numpy()
    cause_codes, causes = pd.factorize(gaps["Cause"].astype(str).to_numpy(dtype=object))
    steps = step_rows(trace)
    range_codes, range_names = _launching_ranges(trace, order)
    return {
        "title": title,
        "lanes": lanes,
        "names": [printable(str(name)) for name in names],  # shown, not obeyed: a newline or U+202E as escapes
        "categories": list(CATEGORIES),
        "colours": [category_colour(category) for category in CATEGORIES],
        "causes": [str(cause) for cause in causes],
        "cause_colours": [IDLE_COLOURS.get(str(cause), "#dbdb8d") for cause in causes],
        "range_names": range_names,
        "op_range": range_codes,
        "ops": _packed(
            lane[order],
            ops["start"].to_numpy(np.int64)[order] - origin,
            ops["duration"].to_numpy(np.int64)[order],
            name_codes,
            op_categories(trace)[order],
            len(lanes),
        ),
        "gaps": _packed(
            np.array([idle_lane[d] for d in gap_device.tolist()], dtype=np.int64),
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
        **_memory(snapshot, trace, origin),
    }


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
    return {"memory": {"device": int(device), "start": (times[keep] - origin).tolist(),
                       "allocated_mib": np.round(allocated[keep] / 2**20, 3).tolist(),
                       "reserved_mib": np.round(reserved[keep] / 2**20, 3).tolist()}}  # fmt: skip


def _packed(lane: np.ndarray, start: np.ndarray, duration: np.ndarray, name: np.ndarray, category: np.ndarray,
            lanes: int) -> dict:  # fmt: skip
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


def _columns() -> dict:
    return {"lane_counts": [], "start_step": [], "duration": [], "name": [], "category": []}
