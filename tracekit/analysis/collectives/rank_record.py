"""What one trace brings to the comparison of collectives across ranks: each collective kernel on each of
its GPUs (a GPU is a rank; a trace holds one rank, or every rank of a job on one node) with what is known
of it, the parts computation covered, its GPUs' links and its step count. Small: a few rows per
collective, nothing of the trace itself, so it travels from a pool worker or a Dask cluster.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from tracekit.analysis.collectives.exposure import CoveredPieces, covered_pieces
from tracekit.analysis.collectives.instances import collective_instances
from tracekit.analysis.hardware.link_bandwidths import Link, gpu_link
from tracekit.analysis.primitives.device_gpus import device_peaks
from tracekit.analysis.primitives.joins import op_launches
from tracekit.analysis.primitives.kernel_types import TYPES, op_types
from tracekit.analysis.primitives.step_window import step_labels, step_of, step_rows
from tracekit.model.trace import Trace

# The columns of RankRecord.calls
CALL_COLUMNS = (
    "device",  # the GPU: the rank within its trace
    "stream",  # its stream: the communicator, where no group is recorded
    "operation",
    "dtype",
    "bytes",  # -1 unknown
    "group",
    "ranks",
    "seq",
    "start",  # ns
    "duration",  # ns
    "launch",  # ns, the launching call's start (-1 unknown)
    "step",  # the step its launch fell in ("" none)
    "before",  # the computation kernel that ended last before it on its GPU ("" none)
    "sizes",
    "recorded",  # torch's name of the call ("all_to_all", ...; None not recorded)
    "in_split",  # the input's split sizes per peer, as torch wrote them ("[4, 4]"; None or "[]" not recorded)
    "group_ranks",  # the group's global ranks, as torch wrote them
)


@dataclass
class RankRecord:
    """One trace's collectives: ``calls`` (``CALL_COLUMNS``, one row per collective kernel, by start per
    device), ``covered`` (the parts of each call computation hid), ``steps`` (per device: its steps),
    ``links`` (per device: its GPU's link, None unknown) and notes."""

    calls: pd.DataFrame
    covered: CoveredPieces
    steps: dict[int, int] = field(default_factory=dict)
    links: dict[int, Link | None] = field(default_factory=dict)
    gpu_names: dict[int, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def rank_record(trace: Trace, step_range: str | None = None) -> RankRecord:
    """The record of ``trace``'s collectives (see the module)."""
    ops = trace.gpu_ops
    instances = collective_instances(trace).sort_values(["device", "start"], kind="stable").reset_index(drop=True)
    rows = instances["op"].to_numpy()
    launches = op_launches(trace)
    launch = np.where(launches.found[rows], launches.start[rows], -1)
    pid = np.where(launches.found[rows], launches.pid[rows], ops["pid"].to_numpy()[rows])
    steps = step_rows(trace, step_range).reset_index(drop=True)
    labels = step_labels(steps) if len(steps) else np.zeros(0, dtype=object)
    step = step_of(steps, pid, np.where(launch >= 0, launch, instances["start"].to_numpy()))
    step_label = np.where(step >= 0, labels[np.maximum(step, 0)] if len(labels) else "", "").astype(object)
    calls = pd.DataFrame(
        instances.assign(
            launch=launch,
            step=step_label,
            before=_kernel_before(ops, instances),
        )[list(CALL_COLUMNS)]
    )
    devices = sorted({int(device) for device in instances["device"]})
    launchers = pd.Series(pid).groupby(instances["device"].to_numpy()).unique()
    per_device_steps = {
        device: int(steps["pid"].isin(launchers.get(device, [])).sum()) if len(steps) else 0 for device in devices
    }
    peaks = device_peaks(trace).peaks if devices else {}
    links = {device: gpu_link(found.key if (found := peaks.get(device)) else None) for device in devices}
    names = {int(gpu["id"]): str(gpu.get("name")) for gpu in trace.meta.gpus.to_dict("records")}
    notes = list(trace.warnings)
    if step_range and not len(steps):
        notes.append(f"no range named {step_range!r}: no rate per step")
    unsized = int((instances["bytes"] < 0).sum())
    if unsized:
        which = (
            "no collective kernel has"
            if unsized == len(instances)
            else f"{unsized:,} of {len(instances):,} collective kernels have no"
        )
        notes.append(
            f"{which} recorded message size (torch.profiler "
            "records it with record_param_comms; nsys exports do not carry NCCL's NVTX payloads): their bandwidth "
            "is left empty"
        )
    return RankRecord(calls, covered_pieces(ops, instances), per_device_steps, links, names, notes)


def _kernel_before(ops: pd.DataFrame, instances: pd.DataFrame) -> np.ndarray:
    """Per collective: the short name of the computation kernel that ended last, at or before its start, on its
    GPU ("" none): the work that delayed a late rank."""
    computing = np.flatnonzero(op_types(ops) == TYPES.index("computation"))
    found = np.full(len(instances), "", dtype=object)
    if not len(computing) or instances.empty:
        return found
    devices = ops["device"].to_numpy()[computing]
    ends = ops["end"].to_numpy()[computing]
    names = (ops["short_name"] if "short_name" in ops else ops["name"]).astype("category")
    codes, labels = names.cat.codes.to_numpy(), np.append(np.asarray(names.cat.categories, dtype=object), "")
    on, start = instances["device"].to_numpy(), instances["start"].to_numpy()
    for device in np.unique(on):
        mine = np.flatnonzero(on == device)
        theirs = computing[devices == device]
        if not len(theirs):
            continue
        order = np.argsort(ops["end"].to_numpy()[theirs], kind="stable")
        sorted_rows, sorted_ends = theirs[order], ends[devices == device][order]
        at = np.searchsorted(sorted_ends, start[mine], side="right") - 1
        have = at >= 0
        found[mine[have]] = labels[codes[sorted_rows[at[have]]]]  # code -1 (no name): ""
    return found
