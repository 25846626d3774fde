"""``tracekit memory --by role``: what the memory live at the peak is for: parameters, optimizer state,
gradients, activations, temporaries, and the allocator's rounding.

Rules, in this order, for each allocation live at the peak:
- Allocated before the trace began (no frames), when the snapshot shows an optimizer (torch/optim/ frames
  or an Optimizer annotation; without one, all of it is parameters): a model's parameters and their
  optimizer state are
  made once and share shapes: every parameter size appears (1 + s) times, s the optimizer's states per
  parameter (AdamW 2, SGD with momentum 1). Sizes are compared as the caching allocator rounds them
  (512 B below 1 MiB, 2 MiB above). s is the largest of {2, 1} under which at least 90 % of the bytes come
  in whole multiples of (1 + s) (a count divisible by 6 fits both: the larger is the more specific); in each
  such size, 1/(1 + s) of the bytes are parameters and the rest optimizer
  state; sizes whose counts are not multiples are "other (before the trace)". Sizes are the bytes asked
  for (the allocator's rounding is its own role); where the trace shows which sizes parameters have
  (gradients, tensors the optimizer step makes), only those sizes can be parameters: buffers and
  cuBLAS workspaces are "other".
- Frames naming AccumulateGrad (autograd writing a .grad): gradients.
- Frames in torch/optim/ and still allocated at the end of the trace: a replacement of memory from before
  the trace when the trace freed as many of that size (a step that writes new parameter tensors frees the
  old ones): it takes their split; else optimizer state (made by a step). Freed ones are temporaries.
- Frames in a forward (a ``forward`` function, no ``backward`` frame) still live at the peak:
  activations (saved for backward).
- Everything else: temporaries.
- The allocator's rounding (block size - requested size, where the snapshot records it) is its own role,
  for allocations from before the trace too.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from tracekit.analysis.memory import MIB, DeviceMemory
from tracekit.model.memory import MemoryTrace
from tracekit.model.result import Chart

ROLES = ("parameters", "optimizer state", "gradients", "activations", "temporaries",
         "other (before the trace)", "allocator rounding")  # fmt: skip
SMALL, LARGE = 512, 2 * MIB
COVERAGE = 0.9  # share of the before-trace bytes a hypothesis of s states must explain


def allocator_size(sizes: np.ndarray) -> np.ndarray:
    """Sizes as the caching allocator rounds them: 512 B steps below 1 MiB, 2 MiB steps above."""
    sizes = np.asarray(sizes, dtype=np.int64)
    step = np.where(sizes < MIB, SMALL, LARGE)
    return -(-sizes // step) * step


def has_optimizer(trace: MemoryTrace) -> bool:
    """Whether the snapshot shows an optimizer: frames in torch/optim/, or an annotation naming one."""
    in_frames = any("torch/optim/" in str(frame.get("filename", "")) for stack in trace.stacks for frame in stack)
    texts = trace.annotations.select_dtypes(include=["object", "string", "category"]).astype(str)
    return in_frames or bool(texts.apply(lambda column: column.str.contains("Optimizer")).to_numpy().any())


def split_before_trace(
    sizes: np.ndarray, optimizer: bool = True, parameter_sizes: np.ndarray | None = None
) -> tuple[np.ndarray, int]:
    """Per allocation made before the trace: the share of its bytes that are parameters (the rest of a
    matched size is optimizer state), NaN for sizes that do not come in multiples; and s. Without an
    optimizer in the snapshot, s is 0: everything made before it counts as parameters (and buffers).
    ``parameter_sizes`` (``parameter_size_evidence``, when the trace has any): only sizes among them can
    be parameters, so that buffers that happen to come in threes (a RoPE table per layer) are not read
    as a parameter and its states."""
    if not optimizer:
        return np.ones(len(sizes)), 0
    rounded = allocator_size(sizes)
    keys, inverse, counts = np.unique(rounded, return_inverse=True, return_counts=True)
    eligible = np.ones(len(keys), dtype=bool)
    if parameter_sizes is not None and len(parameter_sizes):
        eligible = np.isin(keys, allocator_size(parameter_sizes))
    totals = np.bincount(inverse, weights=np.asarray(sizes, dtype=float))
    states = 1
    for candidate in (2, 1):  # the more specific hypothesis first: a count divisible by 6 fits both
        if totals[eligible & (counts % (1 + candidate) == 0)].sum() >= COVERAGE * totals[eligible].sum():
            states = candidate
            break
    matched = (eligible & (counts % (1 + states) == 0))[inverse]
    return np.where(matched, 1.0 / (1 + states), np.nan), states


def asked_sizes(allocations: pd.DataFrame) -> np.ndarray:
    """Bytes each allocation asked for: its requested size where the snapshot records one, else the
    block's size (which the allocator rounds up: a 2.25 MiB tensor may hold a 3 MiB block)."""
    requested = allocations["requested_size"].to_numpy(np.int64)
    return np.where(requested >= 0, requested, allocations["size"].to_numpy(np.int64))


def parameter_size_evidence(trace: MemoryTrace, allocations: pd.DataFrame) -> np.ndarray:
    """Sizes (bytes asked) the trace shows parameters have: tensors allocated with AccumulateGrad in
    their frames (gradients) or by the optimizer step (torch/optim/ frames: foreach and single-tensor
    optimizers make one per parameter). Empty when the trace allocated neither (a fused optimizer, a
    forward pass)."""
    traced = allocations.loc[~allocations["before_trace"].to_numpy()]
    stacks = traced["stack"].to_numpy(np.int64)
    texts = {int(stack): _stack_text(trace, int(stack)) for stack in np.unique(stacks)}
    chosen = [stack for stack, text in texts.items() if "AccumulateGrad" in text or "torch/optim/" in text]
    return asked_sizes(traced.loc[np.isin(stacks, chosen)])


def _stack_text(trace: MemoryTrace, stack: int) -> str:
    frames = trace.stacks[stack] if 0 <= stack < len(trace.stacks) else []
    return "\n".join(f"{frame.get('filename', '')}:{frame.get('name', '')}" for frame in frames)


def role_bytes(trace: MemoryTrace, memory: DeviceMemory, rows: pd.DataFrame) -> tuple[np.ndarray, int]:
    """Bytes per role (columns in ``ROLES`` order) of each allocation in ``rows`` (rows of
    ``memory.allocations``), by the module's rules; and s, the optimizer states per parameter."""
    everything = memory.allocations
    before_all = everything.loc[everything["before_trace"].to_numpy()]
    shares, states = split_before_trace(asked_sizes(before_all), has_optimizer(trace),
                                        parameter_size_evidence(trace, everything))  # fmt: skip
    share = pd.Series(shares, index=before_all.index).reindex(rows.index).to_numpy(np.float64)
    result = np.zeros((len(rows), len(ROLES)))
    role = {name: index for index, name in enumerate(ROLES)}
    events = int(memory.timeline["index"].max())
    blocks = rows["size"].to_numpy(np.float64)
    size = asked_sizes(rows).astype(np.float64)
    result[:, role["allocator rounding"]] = blocks - size  # 0 where the snapshot records no requested size
    before = rows["before_trace"].to_numpy()
    matched = before & ~np.isnan(share)
    result[matched, role["parameters"]] = (size * share)[matched]
    result[matched, role["optimizer state"]] = (size * (1 - share))[matched]
    result[before & ~matched, role["other (before the trace)"]] = size[before & ~matched]
    # One role per distinct stack (stacks repeat), then per allocation by lookup.
    stacks = rows["stack"].to_numpy(np.int64)
    kept = rows["end"].to_numpy(np.int64) > events
    replacing = _replacements(trace, everything, before_all, shares, events).reindex(rows.index).to_numpy(np.float64)
    swapped = ~np.isnan(replacing)
    result[swapped, role["parameters"]] = (size * replacing)[swapped]
    result[swapped, role["optimizer state"]] = (size * (1 - replacing))[swapped]
    before = before | swapped  # decided: the frame rules below leave them alone
    for stack in np.unique(stacks[~before]):
        text = _stack_text(trace, int(stack))
        mine = ~before & (stacks == stack)
        if "AccumulateGrad" in text:
            result[mine, role["gradients"]] = size[mine]
        elif "torch/optim/" in text:
            result[mine & kept, role["optimizer state"]] = size[mine & kept]
            result[mine & ~kept, role["temporaries"]] = size[mine & ~kept]
        elif ":forward" in text and ":backward" not in text.lower():
            result[mine, role["activations"]] = size[mine]
        else:
            result[mine, role["temporaries"]] = size[mine]
    return result, states


def _replacements(
    trace: MemoryTrace, everything: pd.DataFrame, before_all: pd.DataFrame, shares: np.ndarray, events: int
) -> pd.Series:
    """Allocations an optimizer made and kept that replace memory from before the trace: a step that
    writes new parameter tensors (``p.data = p - lr * update``) frees the old ones. Per size, as many
    kept torch/optim allocations (earliest first) as before-trace allocations of that size were freed
    take the freed ones' parameter share (a Series of shares by allocation index; the others absent)."""
    freed = before_all["end"].to_numpy(np.int64) <= events
    if not freed.any():
        return pd.Series(dtype=np.float64)
    freed_sizes = allocator_size(asked_sizes(before_all)[freed])
    sizes, counts = np.unique(freed_sizes, return_counts=True)
    share_by_size = pd.Series(shares[freed], index=freed_sizes).groupby(level=0).first()
    traced = everything.loc[~everything["before_trace"].to_numpy() & (everything["end"].to_numpy() > events)]
    stacks = traced["stack"].to_numpy(np.int64)
    optim = {int(stack) for stack in np.unique(stacks) if "torch/optim/" in _stack_text(trace, int(stack))}
    candidates = traced.loc[np.isin(stacks, list(optim))].sort_values("start", kind="stable")
    rounded = pd.Series(allocator_size(asked_sizes(candidates)), index=candidates.index)
    rank = rounded.groupby(rounded).cumcount()
    allowed = pd.Series(counts, index=sizes).reindex(rounded.to_numpy()).fillna(0).to_numpy()
    chosen = rank.to_numpy() < allowed
    return pd.Series(
        share_by_size.reindex(rounded.to_numpy()[chosen]).to_numpy(np.float64), index=candidates.index[chosen]
    )


def role_timeline(trace: MemoryTrace, memory: DeviceMemory, points: int = 2000) -> Chart:
    """Live bytes per role over the trace (stacked bands), at up to ``points`` evenly spaced events
    and the peak; x as the memory timeline's (ms, or event index without timestamps)."""
    allocations = memory.allocations
    weights, _ = role_bytes(trace, memory, allocations)
    timeline = memory.timeline
    first = int(timeline["index"].min())  # -1: before the first event
    length = int(timeline["index"].max()) - first + 2
    change = np.zeros((length, len(ROLES)))
    starts = allocations["start"].to_numpy(np.int64) - first
    ends = np.minimum(allocations["end"].to_numpy(np.int64) - first, length - 1)
    np.add.at(change, starts, weights)
    np.add.at(change, ends, -weights)
    live = np.cumsum(change, axis=0)[: length - 1]
    rows = np.unique(np.append(np.linspace(0, len(timeline) - 1, min(points, len(timeline))).astype(np.int64),
                               int(np.flatnonzero(timeline["index"].to_numpy() == memory.peak_index)[0])))  # fmt: skip
    index = timeline["index"].to_numpy()[rows] - first
    shown = [name for column, name in enumerate(ROLES) if live[:, column].any()]
    return Chart(
        "role_timeline",
        f"Live memory by role, cuda:{memory.device}",
        {
            "x": timeline["x"].to_numpy()[rows],
            "bands": [live[index, ROLES.index(name)] / MIB for name in shown],
            "labels": shown,
            "x_label": "time (ms)" if memory.has_time else "allocator event",
        },
    )


def memory_by_role(trace: MemoryTrace, memory: DeviceMemory) -> tuple[pd.DataFrame, list[str]]:
    """Role, Size (MiB), Share (%) of the memory live at the peak; notes stating the inferences."""
    weights, states = role_bytes(trace, memory, memory.live_at_peak)
    totals = dict(zip(ROLES, weights.sum(axis=0).tolist()))
    if not totals["allocator rounding"]:
        del totals["allocator rounding"]  # the snapshot records no requested sizes: the rounding is unknown here
    total = sum(totals.values())
    table = pd.DataFrame({"Role": list(totals), "Size (MiB)": [value / MIB for value in totals.values()]})
    table["Share (%)"] = np.round(100 * table["Size (MiB)"] * MIB / total, 1) if total else 0.0
    before_bytes = float(memory.allocations.loc[memory.allocations["before_trace"].to_numpy(), "size"].sum())
    if states:
        kind = "Adam/AdamW" if states == 2 else "SGD with momentum"
        notes = [f"before the trace: {before_bytes / MIB:,.1f} MiB allocated with no frames; their sizes repeat as 1 + "
                 f"{states} copies (a parameter and its {states} optimizer state(s), as {kind} keeps), so 1/{1 + states} "
                 "of each repeated size counts as parameters"]  # fmt: skip
    else:
        notes = [f"before the trace: {before_bytes / MIB:,.1f} MiB allocated with no frames; no optimizer in the snapshot "
                 "(no torch/optim frames or Optimizer annotation), so all of it counts as parameters (and buffers)"]  # fmt: skip
    return table, notes
