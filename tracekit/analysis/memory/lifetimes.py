"""What the memory allocated before the trace was, from how it lived through the trace.

Such memory has no frames of its own (``roles`` splits it by how its sizes repeat); when it was freed,
and where, says more:
- gradients freed by ``zero_grad``: freed in a frame named ``zero_grad`` (``Optimizer.zero_grad``,
  ``Module.zero_grad``: ``set_to_none`` frees each ``.grad``) or inside a ``zero_grad`` annotation. They
  are gradients whatever their sizes say, and they are left out of the size split, whose copies per
  parameter they would inflate (a parameter, its gradient and two Adam states are 4 copies, of which 3
  are live at the peak: splitting the live 3 by 4 reads a quarter of the states as gradients);
- a retained previous iteration: freed after this trace's first forward allocation and before its first
  backward one (``out = model(x)`` frees the previous ``out``, and the graph it holds, only once the
  new forward has run), not in a ``zero_grad`` frame, in sizes this trace's activations also take (at
  least ``RETAINED_MATCH`` of those bytes), sizes no parameter has (gradients and optimizer tensors of
  the trace show the parameters' sizes). They held the previous iteration's outputs and graph, live
  beside the new ones.
Frees recorded without frames (``_record_memory_history(context="alloc")``) cannot be placed in
``zero_grad``; ``roles`` then reads them by count (``gradients_by_count``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import pandas as pd

from tracekit.analysis.memory.frames import stack_text
from tracekit.analysis.memory.replay import MIB, DeviceMemory, allocator_size, asked_sizes
from tracekit.model.memory import MemoryTrace

RETAINED_MATCH = 0.5  # of the bytes freed in the forward: this much in activation sizes is a retained iteration
ZERO_GRAD = re.compile(r"zero_grad")
FORWARD = re.compile(r":forward\b")
BACKWARD = re.compile(r"backward|AccumulateGrad|autograd::engine|autograd engine", re.IGNORECASE)


@dataclass(frozen=True)
class Lives:
    """Per allocation of ``DeviceMemory.allocations`` (aligned masks): gradients that ``zero_grad`` freed,
    and the retained previous iteration; both only among allocations made before the trace."""

    zero_grad: np.ndarray
    retained: np.ndarray

    @property
    def decided(self) -> np.ndarray:
        """Allocations these rules decided (the size split leaves them out)."""
        return self.zero_grad | self.retained


def before_trace_lives(
    trace: MemoryTrace, memory: DeviceMemory, sizes: np.ndarray, parameter_sizes: np.ndarray
) -> Lives:
    """The module's two readings of the replayed allocations (``DeviceMemory.allocations``); ``sizes``: each allocation's bytes asked for,
    rounded as the allocator does; ``parameter_sizes``: sizes (rounded) the trace shows parameters have."""
    allocations = memory.allocations
    before = allocations["before_trace"].to_numpy()
    events = int(memory.timeline["index"].max())
    ends = allocations["end"].to_numpy(np.int64)
    freed = before & (ends <= events)
    if not freed.any():
        nothing = np.zeros(len(allocations), dtype=bool)
        return Lives(nothing, nothing.copy())
    texts = _texts(trace, allocations["free_stack"].to_numpy(np.int64))
    zero_grad = freed & (texts.str.contains(ZERO_GRAD).to_numpy() | _in_zero_grad_annotation(trace, memory, ends))
    return Lives(zero_grad, _retained(trace, memory, sizes, parameter_sizes, freed & ~zero_grad))


def lifetime_notes(memory: DeviceMemory, lives: Lives) -> list[str]:
    """What the lifetimes of the memory from before the trace said, one note each."""
    held = memory.allocations["size"].to_numpy(np.float64)
    notes = []
    if lives.zero_grad.any():
        notes.append(
            f"before the trace: {held[lives.zero_grad].sum() / MIB:,.1f} MiB freed by zero_grad in the trace are "
            "gradients (left out of the size split; the gradients at the peak are the ones backward made)"
        )
    if lives.retained.any():
        notes.append(
            f"before the trace: {held[lives.retained].sum() / MIB:,.1f} MiB freed only after this trace's forward "
            "began, in the sizes of its activations: the previous iteration's outputs and graph, still held"
        )
    return notes


def _texts(trace: MemoryTrace, stacks: np.ndarray) -> pd.Series:
    """The text of each stack in ``stacks`` (each distinct one read once)."""
    distinct, inverse = np.unique(stacks, return_inverse=True)
    texts = np.asarray([stack_text(trace, int(stack)) for stack in distinct], dtype=object)
    return pd.Series(texts[inverse], dtype=object)


def _in_zero_grad_annotation(trace: MemoryTrace, memory: DeviceMemory, ends: np.ndarray) -> np.ndarray:
    """Whether each allocation was freed inside a ``zero_grad`` annotation (``Optimizer.zero_grad#...``)
    of its device; False without timestamps or such annotations."""
    notes = trace.annotations
    mine = notes.loc[
        (notes["device"] == memory.device).to_numpy() & notes["name"].astype(str).str.contains("zero_grad")
    ]
    events = trace.events.loc[(trace.events["device"] == memory.device).to_numpy()]
    if mine.empty or not memory.has_time or not len(events):
        return np.zeros(len(ends), dtype=bool)
    starts = np.sort(mine.loc[mine["stage"] == "START", "time_us"].to_numpy(np.float64))
    stops = np.sort(mine.loc[mine["stage"] == "END", "time_us"].to_numpy(np.float64))
    pairs = min(len(starts), len(stops))
    if not pairs:
        return np.zeros(len(ends), dtype=bool)
    times = np.append(events["time_us"].to_numpy(np.float64), np.nan)[np.minimum(ends, len(events))]
    opened = np.searchsorted(starts[:pairs], times, side="right") - 1  # the last annotation begun by then
    return (opened >= 0) & (times <= stops[:pairs][np.maximum(opened, 0)])


def _retained(
    trace: MemoryTrace, memory: DeviceMemory, sizes: np.ndarray, parameter_sizes: np.ndarray, candidates: np.ndarray
) -> np.ndarray:
    """The retained previous iteration among ``candidates`` (before-trace allocations freed in the trace)."""
    allocations = memory.allocations
    traced = ~allocations["before_trace"].to_numpy()
    starts = allocations["start"].to_numpy(np.int64)
    texts = _texts(trace, allocations["stack"].to_numpy(np.int64))
    forward = traced & texts.str.contains(FORWARD).to_numpy() & ~texts.str.contains(BACKWARD).to_numpy()
    if not forward.any():
        return np.zeros(len(allocations), dtype=bool)
    backward = traced & texts.str.contains(BACKWARD).to_numpy()
    first_forward = starts[forward].min()
    first_backward = starts[backward].min() if backward.any() else np.iinfo(np.int64).max
    ends = allocations["end"].to_numpy(np.int64)
    in_forward = candidates & (ends > first_forward) & (ends < first_backward) & ~np.isin(sizes, parameter_sizes)
    matched = in_forward & np.isin(sizes, sizes[forward])
    held = allocations["size"].to_numpy(np.float64)
    if not matched.any() or held[matched].sum() < RETAINED_MATCH * held[in_forward].sum():
        return np.zeros(len(allocations), dtype=bool)
    return matched


def gradients_by_count(
    rounded: np.ndarray, freed: np.ndarray, ends: np.ndarray, copies: int, states: int
) -> np.ndarray:
    """Shares (parameters, optimizer state, gradients, ambiguous) of before-trace allocations read as
    ``copies`` = 1 + ``states`` + 1 per parameter (gradients kept) when frees carry no frames: per size
    of ``count`` allocations, the first ``count / copies`` freed in the trace are its gradients (whole),
    and the others share what is left: ``count / copies`` parameters, ``states * count / copies`` states
    and the gradients not freed. ``rounded``: sizes as the allocator rounds them; ``freed``: freed in the
    trace; ``ends``: when (event index)."""
    keys, inverse, counts = np.unique(rounded, return_inverse=True, return_counts=True)
    order = np.lexsort((ends, ~freed, inverse))  # per size: the freed first, earliest first
    rank = np.empty(len(rounded), dtype=np.int64)
    rank[order] = np.arange(len(rounded)) - np.searchsorted(inverse[order], inverse[order], side="left")
    per_parameter = counts[inverse] / copies
    freed_count = np.minimum(np.bincount(inverse, weights=freed.astype(float), minlength=len(keys)), counts / copies)
    gradient = freed & (rank < freed_count[inverse])
    rest = counts[inverse] - freed_count[inverse]
    shares = np.column_stack(
        [per_parameter / rest, states * per_parameter / rest, (per_parameter - freed_count[inverse]) / rest, 0 * rest]
    )
    shares[gradient] = [0.0, 0.0, 1.0, 0.0]
    return shares


def replacements(
    trace: MemoryTrace, everything: pd.DataFrame, shares: np.ndarray, events: int, lives: Lives
) -> pd.DataFrame:
    """Allocations an optimizer made and kept that replace memory from before the trace: a step that
    writes new parameter tensors (``p.data = p - lr * update``) frees the old ones. Per size, as many
    kept torch/optim allocations (earliest first) as before-trace allocations of that size were freed
    (not by ``zero_grad``, not a retained iteration) take the freed ones' split (rows of split shares by
    allocation index; the others absent). ``shares``: the split of the before-trace allocations, in order."""
    before = everything["before_trace"].to_numpy()
    before_all = everything.loc[before]
    freed = (before_all["end"].to_numpy(np.int64) <= events) & ~lives.decided[before]
    if not freed.any():
        return pd.DataFrame(columns=range(shares.shape[1]), dtype=np.float64)
    freed_sizes = allocator_size(asked_sizes(before_all)[freed])
    sizes, counts = np.unique(freed_sizes, return_counts=True)
    share_by_size = pd.DataFrame(shares[freed], index=freed_sizes).groupby(level=0).first()
    traced = everything.loc[~before & (everything["end"].to_numpy() > events)]
    stacks = traced["stack"].to_numpy(np.int64)
    optim = {int(stack) for stack in np.unique(stacks) if "torch/optim/" in stack_text(trace, int(stack))}
    candidates = traced.loc[np.isin(stacks, list(optim))].sort_values("start", kind="stable")
    rounded = pd.Series(allocator_size(asked_sizes(candidates)), index=candidates.index)
    rank = rounded.groupby(rounded).cumcount()
    allowed = pd.Series(counts, index=sizes).reindex(rounded.to_numpy()).fillna(0).to_numpy()
    chosen = rank.to_numpy() < allowed
    return pd.DataFrame(
        share_by_size.reindex(rounded.to_numpy()[chosen]).to_numpy(np.float64), index=candidates.index[chosen]
    )
