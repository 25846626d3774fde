"""Stragglers: the ranks that arrive last at the collective whose timing varies most between ranks, as
HolisticTraceAnalysis 0.5's ``get_potential_stragglers`` finds them.

Per rank (``straggler_piece``): its steps (``steps.step_rows``; numbered by their ``#N``, else in order),
the last left out when it has two or more (as HTA's default step window); the span of the steps kept
(first step's start to the last end of a CPU event that started in one, or of a GPU op launched in
one); its NCCL kernels (``kernel_types``' communication: ``^nccl.*Kernel``) on streams above 0
launched in a step kept, each with its step.
Across ranks (``potential_stragglers``), in one time base (each rank's clock as recorded: the ranks of
one job share the host clock):
1. mean step time = (the latest end - the earliest start over every rank's span) / the number of steps;
2. the significant kernels: 1 % of the mean step time or longer, in a step numbered above 0;
3. per (rank, stream, step, kernel name) the last such kernel; its start and duration divided by the
   mean step time (its start counted from the earliest start);
4. the (stream, name) whose normalized duration varies most between ranks (standard deviation across
   ranks per step, averaged over steps): the collective everyone waits in;
5. per step, the ``candidates`` ranks that start it latest (every rank whose start is at least the
   ``candidates``-th latest) are flagged; a rank's count is the steps it was flagged in;
6. the stragglers: the ``candidates`` ranks flagged most (ties by rank).
A kernel that runs until every rank has joined starts latest on the rank the others wait for. Beyond
HTA: Made Others Wait (ns), per rank, the median rank's wait for it summed over the instances of that
collective it joined last (the k-th instance of a step on every rank is one collective); and no
stragglers are named among as few ranks as candidates (HTA flags them all), nor among ranks whose
steps do not overlap in time (traces of different jobs).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from tracekit.analysis.primitives.joins import op_launches
from tracekit.analysis.primitives.kernel_types import TYPES, op_types
from tracekit.analysis.primitives.step_window import step_of, step_rows
from tracekit.model.trace import Trace

MIN_SHARE = 0.01  # of the mean step time: HTA's min_normalized_duration
CANDIDATES = 2  # HTA's num_candidates
WAIT = "Made Others Wait (ns)"  # per rank: the median rank's wait, in each instance of the collective it joined last
START = "Start (% of mean step)"  # HTA's normalized start time of the chosen collective, x 100
STEP_NUMBER = re.compile(r"#\s*(\d+)$")


def straggler_piece(trace: Trace, step_range: str | None = None) -> dict[str, Any] | None:
    """What one rank brings to the comparison (see the module docstring); None without steps."""
    steps = step_rows(trace, step_range).reset_index(drop=True)
    if steps.empty:
        return None
    names = steps["name"].astype(str).tolist()
    # unnumbered steps ("step") count from 1, as HTA counts only the steps numbered above 0
    numbers = [
        int(found.group(1)) if (found := STEP_NUMBER.search(name)) else index + 1 for index, name in enumerate(names)
    ]
    kept = np.ones(len(steps), dtype=bool)
    if len(set(names)) >= 2:  # the last step is often cut short by the profiler's schedule
        kept[int(np.argmax(steps["start"].to_numpy()))] = False
    step_number = np.asarray(numbers, dtype=np.int64)
    ops = trace.gpu_ops
    launches = op_launches(trace)
    op_step = np.where(launches.found, step_of(steps, launches.pid, launches.start), -1)
    op_kept = (op_step >= 0) & kept[np.maximum(op_step, 0)]
    ends = [ops["end"].to_numpy()[op_kept]]
    for table in (trace.ranges.loc[(trace.ranges["domain"].astype(str) != "gpu").to_numpy()], trace.launches):
        where = step_of(steps, table["pid"].to_numpy(), table["start"].to_numpy())
        inside = (where >= 0) & kept[np.maximum(where, 0)]
        ends.append(table["end"].to_numpy()[inside])
    communication = op_kept & (op_types(ops) == TYPES.index("communication")) & (ops["stream"].to_numpy() > 0)
    rows = np.flatnonzero(communication)
    kernels = pd.DataFrame(
        {
            "step": step_number[op_step[rows]],
            "stream": ops["stream"].to_numpy()[rows],
            "name": ops["name"].astype(str).to_numpy()[rows],
            "start": ops["start"].to_numpy()[rows],
            "duration": ops["duration"].to_numpy()[rows],
            "order": rows,
        }
    )
    every_end = np.concatenate(ends)
    return {
        "steps": sorted(set(step_number[kept].tolist())),
        "first": int(steps["start"].to_numpy()[kept].min()),
        "last": int(every_end.max()) if len(every_end) else int(steps["end"].to_numpy()[kept].max()),
        "kernels": kernels,
    }


def potential_stragglers(
    pieces: Mapping[Any, dict[str, Any] | None], candidates: int = CANDIDATES
) -> tuple[pd.DataFrame, str]:
    """Per rank (the keys of ``pieces``): the steps it was flagged in, its start of the collective chosen
    (HTA's normalized start x 100, mean over steps) and whether it is a straggler; and a sentence saying which
    kernel decided it. An empty table (and why) when there is nothing to compare."""
    present = {rank: piece for rank, piece in pieces.items() if piece is not None}
    empty = pd.DataFrame(columns=["Rank", "Flagged Steps", START, WAIT, "Straggler"])
    if len(present) < 2:
        return empty, "stragglers: fewer than two ranks with steps to compare"
    if len(present) <= candidates:  # HTA would flag every rank
        return empty, (
            f"stragglers: {len(present)} ranks, and the definition flags the {candidates} that start a "
            "collective latest: too few ranks to tell one out"
        )
    if max(piece["first"] for piece in present.values()) > min(piece["last"] for piece in present.values()):
        return empty, "stragglers: the ranks' steps do not overlap in time (not one job's clock): nothing to compare"
    steps = sorted(set().union(*(piece["steps"] for piece in present.values())))
    first = min(piece["first"] for piece in present.values())
    mean_step = (max(piece["last"] for piece in present.values()) - first) / max(len(steps), 1)
    every = pd.concat([piece["kernels"].assign(rank=rank) for rank, piece in present.items()], ignore_index=True)
    kernels = every.loc[(every["step"] > 0) & (every["duration"] >= mean_step * MIN_SHARE)]
    if kernels.empty or mean_step <= 0:
        return empty, "stragglers: no NCCL kernel of 1 % of the mean step time or longer in a step"
    last = (
        kernels.sort_values("order", kind="stable").groupby(["rank", "stream", "step", "name"], as_index=False).last()
    )
    last["normalized_start"] = (last["start"] - first) / mean_step
    last["normalized_duration"] = last["duration"] / mean_step
    spread = last.groupby(["stream", "step", "name"])["normalized_duration"].std().groupby(["stream", "name"]).mean()
    if spread.isna().all():
        return empty, "stragglers: no collective ran on two ranks or more"
    stream, name = spread.idxmax()
    chosen = last.loc[(last["stream"] == stream) & (last["name"] == name)]
    flagged = pd.Series(0, index=sorted(present), dtype=np.int64)
    for _, group in chosen.groupby("step"):
        starts = group["normalized_start"].to_numpy()
        threshold = np.sort(starts)[::-1][min(candidates, len(starts)) - 1]
        for rank in group["rank"].to_numpy()[starts >= threshold]:
            flagged[rank] += 1
    order = sorted(flagged.index, key=lambda rank: (-flagged[rank], rank))
    stragglers = set(order[:candidates])
    mean_start = chosen.groupby("rank")["normalized_start"].mean()
    made_wait = _made_wait(every.loc[(every["stream"] == stream) & (every["name"] == name) & (every["step"] > 0)])
    table = pd.DataFrame(
        {
            "Rank": list(flagged.index),
            "Flagged Steps": flagged.to_numpy(),
            START: [100 * float(mean_start.get(rank, np.nan)) for rank in flagged.index],
            WAIT: [made_wait.get(rank, 0) for rank in flagged.index],
            "Straggler": ["yes" if rank in stragglers else "" for rank in flagged.index],
        }
    )
    table.attrs.update(mean_step_ns=mean_step, steps=int(chosen["step"].nunique()), collective=name.split("(")[0])
    idle = [rank for rank in sorted(stragglers) if made_wait.get(rank, 0) == 0]
    named = ", ".join(str(rank) for rank in sorted(stragglers))
    said = (
        f"stragglers (HolisticTraceAnalysis's definition): {named}, the ranks that start the collective whose "
        f"duration varies most between ranks latest ({name.split('(')[0]} on stream {stream}; its start as a "
        f"share of the mean step time, {mean_step / 1e6:,.3f} ms, from the earliest start)"
        + (f"; {', '.join(str(rank) for rank in idle)} made no rank wait: a candidate only" if idle else "")
    )
    return table, said


def _made_wait(instances: pd.DataFrame) -> dict[Any, int]:
    """Per rank, the time the median rank waited for it in the instances of one collective it joined
    last: the collective's k-th instance of a step on every rank is one collective (NCCL runs them in
    order), and its last starter made the median starter wait for the difference of their starts."""
    if instances.empty:
        return {}
    ordered = instances.sort_values(["rank", "step", "start"], kind="stable")
    ordered = ordered.assign(instance=ordered.groupby(["rank", "step"]).cumcount())
    starts = ordered.pivot_table(index=["step", "instance"], columns="rank", values="start", aggfunc="first")
    starts = starts.dropna()  # an instance some rank did not run is not one collective of all of them
    if starts.empty:
        return {}
    values = starts.to_numpy(dtype=np.float64)
    latest = np.asarray(starts.columns)[np.argmax(values, axis=1)]
    wait = values.max(axis=1) - np.median(values, axis=1)
    ranks, group = np.unique(latest, return_inverse=True)
    return dict(
        zip(ranks.tolist(), np.bincount(group.reshape(-1), weights=wait).astype(np.int64).tolist(), strict=True)
    )
