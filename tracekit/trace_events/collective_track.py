"""Collectives as tracks of the timeline: per GPU, one track per process group, each collective kernel drawn
as its wait for the last peer ("wait: AllReduce") then its transfer ("AllReduce 4.0 MiB"), from
``collectives`` over the trace's own GPUs (one export of a node's job holds every rank). A kernel no peer
matched is one transfer slice, "(unmatched)" in its name.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from tracekit.analysis.collectives.across_ranks import compare_ranks
from tracekit.analysis.collectives.instances import collective_instances
from tracekit.analysis.collectives.matching import INSTANCE, WAIT
from tracekit.analysis.collectives.rank_record import rank_record
from tracekit.model.trace import Trace
from tracekit.trace_events.window import Window

FIRST_TID = 2**31 - 1_000  # group k's track on a GPU: FIRST_TID - k (below the sequence tracks' numbers)


def collective_slices(trace: Trace, window: Window) -> pd.DataFrame:
    """The slices the window holds: device, tid (the group's track), start, duration (ns), name, and per track
    its name ("collectives: group 0")."""
    columns = ["device", "tid", "start", "duration", "name", "track"]
    if collective_instances(trace).empty:  # (most traces: what a rank's record adds is not needed)
        return pd.DataFrame({name: [] for name in columns})
    record = rank_record(trace)
    calls = record.calls
    if calls.empty:
        return pd.DataFrame({name: [] for name in columns})
    compared = compare_ranks(calls.assign(rank=calls["device"].to_numpy()), record.covered).calls
    group = compared["group"].astype(object).where(compared["group"].notna(), "").astype(str)
    codes, groups = pd.factorize(group, sort=True)
    start, duration = compared["start"].to_numpy(np.int64), compared["duration"].to_numpy(np.int64)
    matched = compared[INSTANCE].to_numpy() >= 0
    wait = np.where(matched, compared[WAIT].to_numpy(), 0)
    operation = compared["operation"].astype(object).where(compared["operation"].notna(), "collective").astype(str)
    size = compared["bytes"].to_numpy()
    # each distinct size formatted once (a few per job), not once per collective
    amounts, of_size = np.unique(size, return_inverse=True)
    mib = np.asarray([f" {amount / 2**20:,.1f} MiB" if amount >= 0 else "" for amount in amounts], dtype=object)
    transfer_name = (
        operation.to_numpy(object) + mib[of_size.reshape(-1)] + np.where(matched, "", " (unmatched)").astype(object)
    )
    tid = FIRST_TID - codes
    track = np.asarray([f"collectives: group {name}" if name else "collectives" for name in groups], dtype=object)[
        codes
    ]
    waiting = wait > 0
    frame = pd.DataFrame(
        {
            "device": np.concatenate([compared["device"].to_numpy()[waiting], compared["device"].to_numpy()]),
            "tid": np.concatenate([tid[waiting], tid]),
            "start": np.concatenate([start[waiting], start + wait]),
            "duration": np.concatenate([wait[waiting], duration - wait]),
            "name": np.concatenate([("wait: " + operation).to_numpy(object)[waiting], transfer_name]),
            "track": np.concatenate([track[waiting], track]),
        }
    )
    inside = window.overlapping(frame["start"].to_numpy(), (frame["start"] + frame["duration"]).to_numpy())
    return frame if inside is None else frame.loc[inside].reset_index(drop=True)
