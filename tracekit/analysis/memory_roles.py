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
  state; sizes whose counts are not multiples are "other (before the trace)".
- Frames naming AccumulateGrad (autograd writing a .grad): gradients.
- Frames in torch/optim/ and still allocated at the end of the trace: optimizer state (made by a step);
  freed ones are temporaries.
- Frames in a forward (a ``forward`` function, no ``backward`` frame) still live at the peak:
  activations (saved for backward).
- Everything else: temporaries.
- The allocator's rounding (size - requested size, where the snapshot records it) is its own role.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from tracekit.analysis.memory import MIB, DeviceMemory
from tracekit.model.memory import MemoryTrace

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


def split_before_trace(sizes: np.ndarray, optimizer: bool = True) -> tuple[np.ndarray, int]:
    """Per allocation made before the trace: the share of its bytes that are parameters (the rest of a
    matched size is optimizer state), NaN for sizes that do not come in multiples; and s. Without an
    optimizer in the snapshot, s is 0: everything made before it counts as parameters (and buffers)."""
    if not optimizer:
        return np.ones(len(sizes)), 0
    rounded = allocator_size(sizes)
    keys, inverse, counts = np.unique(rounded, return_inverse=True, return_counts=True)
    totals = np.bincount(inverse, weights=np.asarray(sizes, dtype=float))
    states = 1
    for candidate in (2, 1):  # the more specific hypothesis first: a count divisible by 6 fits both
        if totals[counts % (1 + candidate) == 0].sum() >= COVERAGE * totals.sum():
            states = candidate
            break
    matched = (counts % (1 + states) == 0)[inverse]
    return np.where(matched, 1.0 / (1 + states), np.nan), states


def _stack_text(trace: MemoryTrace, stack: int) -> str:
    frames = trace.stacks[stack] if 0 <= stack < len(trace.stacks) else []
    return "\n".join(f"{frame.get('filename', '')}:{frame.get('name', '')}" for frame in frames)


def memory_by_role(trace: MemoryTrace, memory: DeviceMemory) -> tuple[pd.DataFrame, list[str]]:
    """Role, Size (MiB), Share (%) of the memory live at the peak; notes stating the inferences."""
    live = memory.live_at_peak
    everything = memory.allocations
    before_all = everything.loc[everything["before_trace"].to_numpy()]
    shares, states = split_before_trace(before_all["size"].to_numpy(), has_optimizer(trace))
    share_of = pd.Series(shares, index=before_all.index)
    totals = dict.fromkeys(ROLES, 0.0)
    events = int(memory.timeline["index"].max())
    size = live["size"].to_numpy(np.float64)
    before = live["before_trace"].to_numpy()
    share = share_of.reindex(live.index).to_numpy(np.float64)
    matched = before & ~np.isnan(share)
    totals["parameters"] += float((size * share)[matched].sum())
    totals["optimizer state"] += float((size * (1 - share))[matched].sum())
    totals["other (before the trace)"] += float(size[before & ~matched].sum())
    requested = live["requested_size"].to_numpy(np.float64)
    known = ~before & (requested >= 0)
    totals["allocator rounding"] += float((size - requested)[known].sum())
    size = np.where(known, requested, size)
    # One role per distinct stack (stacks repeat), then per allocation by lookup.
    stacks = live["stack"].to_numpy(np.int64)
    ends = live["end"].to_numpy(np.int64)
    for stack in np.unique(stacks[~before]):
        text = _stack_text(trace, int(stack))
        mine = ~before & (stacks == stack)
        if "AccumulateGrad" in text:
            totals["gradients"] += float(size[mine].sum())
        elif "torch/optim/" in text:
            kept = mine & (ends > events)
            totals["optimizer state"] += float(size[kept].sum())
            totals["temporaries"] += float(size[mine & ~kept].sum())
        elif ":forward" in text and ":backward" not in text.lower():
            totals["activations"] += float(size[mine].sum())
        else:
            totals["temporaries"] += float(size[mine].sum())
    if not totals["allocator rounding"]:
        del totals["allocator rounding"]  # the snapshot records no requested sizes: the rounding is unknown here
    total = sum(totals.values())
    table = pd.DataFrame({"Role": list(totals), "Size (MiB)": [value / MIB for value in totals.values()]})
    table["Share (%)"] = np.round(100 * table["Size (MiB)"] * MIB / total, 1) if total else 0.0
    before_bytes = float(before_all["size"].sum())
    if states:
        kind = "Adam/AdamW" if states == 2 else "SGD with momentum"
        notes = [f"before the trace: {before_bytes / MIB:,.1f} MiB allocated with no frames; their sizes repeat as 1 + "
                 f"{states} copies (a parameter and its {states} optimizer state(s), as {kind} keeps), so 1/{1 + states} "
                 "of each repeated size counts as parameters"]  # fmt: skip
    else:
        notes = [f"before the trace: {before_bytes / MIB:,.1f} MiB allocated with no frames; no optimizer in the snapshot "
                 "(no torch/optim frames or Optimizer annotation), so all of it counts as parameters (and buffers)"]  # fmt: skip
    return table, notes
