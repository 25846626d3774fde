"""report.html's host lanes: each thread's NVTX ranges (torch.profiler's record_function annotations) and
its CPU operators (torch.profiler's ``cpu_op`` domain), one lane per depth, which the page folds into one
lane a thread until it is clicked open; and, for each GPU op, the thread that launched it and how long
before the op started, which the page draws as an arrow when the op is hovered.

The page holds at most ``HOST_ROWS`` host rows (the longest: a range that is kept keeps the ranges around
it, which are longer) and ``MAX_DEPTHS`` depths a thread; what is left out is said in a note under the
timeline. Columns throughout: no loop over rows.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from tracekit.analysis.primitives.joins import op_launches
from tracekit.model.trace import Trace
from tracekit.render.safe_text import printable

HOST_ROWS = 100_000  # host rows in a page: about 2 MB of JSON, parsed in well under 100 ms
MAX_DEPTHS = 12  # depth lanes a thread's group opens into
HOST_KINDS = ("range", "CPU op")  # what a host row is (its colour in the page: render.colours.HOST_COLOURS)
CPU_DOMAIN, GPU_DOMAIN = "cpu_op", "gpu"  # torch.profiler's CPU operators; its annotations' GPU-side spans


@dataclass
class HostRows:
    """The host lanes (lane dicts in order, each group's depth 0 first) and their rows: lane (an index into
    ``lanes``), start and duration (ns, the trace's time), name (a code into ``names``), kind (a code into
    HOST_KINDS); the threads that have lanes, (pid, tid) by the index of their first lane; a note on what
    was left out, or ""."""

    lanes: list[dict] = field(default_factory=list)
    lane: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    start: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    duration: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    name: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    kind: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    names: list[str] = field(default_factory=list)
    threads: dict[tuple[int, int], int] = field(default_factory=dict)
    note: str = ""
    several_processes: bool = False


def host_rows(trace: Trace) -> HostRows:
    """The host lanes of ``trace``: a group of lanes per (process, thread, kind), ordered so."""
    ranges = trace.ranges
    domain = ranges["domain"].astype(str).to_numpy(dtype=object)
    rows = ranges.loc[domain != GPU_DOMAIN]
    if rows.empty:
        return HostRows()
    kind = (rows["domain"].astype(str).to_numpy(dtype=object) == CPU_DOMAIN).astype(np.int64)
    duration = rows["duration"].to_numpy(np.int64)
    total, left_out = len(rows), []
    if total > HOST_ROWS:  # the longest rows: those a whole-trace view can show
        keep = np.sort(np.argpartition(-duration, HOST_ROWS - 1)[:HOST_ROWS])
        rows, kind, duration = rows.iloc[keep], kind[keep], duration[keep]
        left_out.append(f"the host lanes hold the {HOST_ROWS:,} longest of {total:,} ranges and CPU ops")
    pid, tid = rows["pid"].to_numpy(np.int64), rows["tid"].to_numpy(np.int64)
    groups, group = np.unique(np.stack([pid, tid, kind], axis=1), axis=0, return_inverse=True)
    group = group.reshape(-1)
    # depths numbered 0, 1, 2, ... within a group: the CPU ops inside an annotation start below it
    pairs, pair = np.unique(np.stack([group, rows["depth"].to_numpy(np.int64)], axis=1), axis=0, return_inverse=True)
    depth = pair.reshape(-1) - np.searchsorted(pairs[:, 0], group)
    deep = depth >= MAX_DEPTHS
    if deep.any():
        left_out.append(f"{int(deep.sum()):,} ranges and CPU ops deeper than {MAX_DEPTHS} levels are not drawn")
    depths = np.minimum(np.bincount(pairs[:, 0], minlength=len(groups)), MAX_DEPTHS)
    first_lane = np.concatenate([[0], np.cumsum(depths)[:-1]])
    several = len(np.unique(groups[:, 0])) > 1
    lanes, threads = [], {}
    for index, ((p, t, k), count) in enumerate(zip(groups.tolist(), depths.tolist())):
        threads.setdefault((p, t), int(first_lane[index]))
        label = f"{thread_name(p, t, several)} · {'CPU ops' if k else 'ranges'}"
        lanes += [{"name": label, "kind": "host", "group": index, "depth": d, "depths": count} for d in range(count)]
    lane, start = first_lane[group] + depth, rows["start"].to_numpy(np.int64)
    kept = np.flatnonzero(~deep)
    kept = kept[np.lexsort((start[kept], lane[kept]))]  # by lane, then time: as the page reads rows
    codes, names = pd.factorize(rows["name"].astype(str).to_numpy(dtype=object)[kept])
    return HostRows(
        lanes,
        lane[kept],
        start[kept],
        duration[kept],
        codes,
        kind[kept],
        [printable(str(name)) for name in names],
        threads,
        "; ".join(left_out),
        several,
    )


def thread_name(pid: int, tid: int, several_processes: bool) -> str:
    """A thread as a lane names it, short enough for the lane's label: "tid 7", or with several processes
    "pid 3 · tid 7" ("pid 3" alone for a process's main thread, whose tid is its pid)."""
    if not several_processes:
        return f"tid {tid}"
    return f"pid {pid}" if pid == tid else f"pid {pid} · tid {tid}"


def op_launch_threads(trace: Trace, order: np.ndarray, host: HostRows, first_host_lane: int):
    """Per GPU op (in ``order``): the thread that launched it, as runs of [count, code] (code: an index into
    the thread list, -1 none recorded), and how long before the op the launching call started (ns; 0 where
    none); the thread list: each launching thread's name and its first host lane (-1: it has none)."""
    launched = op_launches(trace)
    found, pid, tid = launched.found[order], launched.pid[order], launched.tid[order]
    keys, code = np.unique(np.stack([pid, tid], axis=1), axis=0, return_inverse=True)
    code = np.where(found, code.reshape(-1), -1)
    used = np.unique(code[code >= 0])
    code = np.where(code >= 0, np.searchsorted(used, code), -1)  # only threads that launched a found op
    several = host.several_processes or (len(np.unique(keys[used, 0])) > 1 if len(used) else False)
    thread_list = [
        {
            "name": thread_name(p, t, several),
            "lane": first_host_lane + host.threads[(p, t)] if (p, t) in host.threads else -1,
        }
        for p, t in keys[used].tolist()
    ]
    change = np.flatnonzero(code[1:] != code[:-1]) + 1
    starts = np.concatenate([[0], change]).astype(np.int64)
    counts = np.diff(np.concatenate([starts, [len(code)]]))
    runs = np.stack([counts, code[starts]], axis=1).reshape(-1) if len(code) else np.zeros(0, np.int64)
    lead = np.where(found, trace.gpu_ops["start"].to_numpy(np.int64)[order] - launched.start[order], 0)
    return {"thread_runs": runs.tolist(), "lead": lead.tolist()}, thread_list
