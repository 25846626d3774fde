"""``memory`` by role: what the memory live at the peak is for: parameters, optimizer state,
gradients, activations, temporaries, and the allocator's rounding.

Rules, in this order, for each allocation live at the peak:
- Allocated before the trace began (no frames): a model's parameters, their optimizer states and, when
  the last step kept them (``zero_grad`` without ``set_to_none``), their gradients are made once and
  share shapes, so every parameter size appears k = 1 + s + g times: s the optimizer's states per
  parameter, g 1 when gradients were live. The optimizer comes from the snapshot's frames
  (``torch/optim/adamw.py``) and annotations (``Optimizer.step#AdamW.step``): Adam, AdamW, Adamax,
  NAdam, RAdam, Adadelta keep 2 states, Adagrad and RMSprop 1, SGD 1 with momentum and 0 without (the
  frames cannot say which; Adam's amsgrad and RMSprop's momentum or centered variants, which keep
  more, are not told apart: their extra state would read as gradients); without any optimizer in the
  snapshot, all of it is parameters. Of the
  readings (s, g) the optimizer allows, those under which at least 90 % of the bytes come in whole
  multiples of k fit; one whose k divides another fitting one's is implied by it (a count divisible
  by 4 is divisible by 2) and the more specific stands; of the rest, the one that explains the most
  bytes (AdamW with sizes repeating 216 and 288 times fits k = 4 too, but k = 3 explains more). When
  two readings with the same k remain (an optimizer of unknown kind: k = 3 is Adam without gradients
  or SGD with momentum and gradients), the split beyond the parameters' 1/k is "optimizer state or
  gradients"; with different k (every count divisible by 12), gradients are taken as freed
  (``zero_grad``'s default); a note lists the readings either way. In each
  matched size, 1/k of the bytes are parameters, s/k optimizer state, g/k gradients; sizes whose
  counts are not multiples are "other (before the trace)". Sizes are the bytes asked for (the
  allocator's rounding is its own role); where the trace shows which sizes parameters have (gradients,
  tensors the optimizer step makes), only those sizes can be parameters: buffers and cuBLAS workspaces
  are "other".
- Frames naming AccumulateGrad (autograd writing a .grad): gradients.
- Frames in torch/optim/ and still allocated at the end of the trace: a replacement of memory from before
  the trace when the trace freed as many of that size (a step that writes new parameter tensors frees the
  old ones): it takes their split; else optimizer state (made by a step). Freed ones are temporaries.
- Frames in a forward (a ``forward`` function, no ``backward`` frame) still live at the peak:
  activations (saved for backward).
- Everything else: temporaries.
- The allocator's rounding (block size - requested size, where the snapshot records it) is its own role,
  for allocations from before the trace too.
Roles with no bytes at the peak are left out of the table.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from tracekit.analysis.memory.frames import stack_text
from tracekit.analysis.memory.lifetimes import (
    Lives,
    before_trace_lives,
    gradients_by_count,
    lifetime_notes,
    replacements,
)
from tracekit.analysis.memory.replay import MIB, DeviceMemory, allocator_size, asked_sizes
from tracekit.model.memory import MemoryTrace
from tracekit.model.result import Chart

ROLES = (
    "parameters",
    "optimizer state",
    "gradients",
    "optimizer state or gradients",
    "activations",
    "previous iteration (retained)",
    "temporaries",
    "other (before the trace)",
    "allocator rounding",
)
COVERAGE = 0.9  # share of the before-trace bytes a reading must explain
# Optimizer states per parameter, by torch.optim module (SGD: with momentum 1, without 0).
STATES = {
    "adam": (2,),
    "adamw": (2,),
    "adamax": (2,),
    "nadam": (2,),
    "radam": (2,),
    "adadelta": (2,),
    "adagrad": (1,),
    "rmsprop": (1,),
    "sgd": (1, 0),
}
ANNOTATED = re.compile(r"Optimizer\.(?:step|zero_grad)#(\w+)\.")


@dataclass(frozen=True)
class Optimizer:
    """The optimizer a snapshot shows: its name ("AdamW"; "" when frames show one of no known kind) and
    the states per parameter it may keep; None for a snapshot without one."""

    name: str
    states: tuple[int, ...]


def optimizer_of(trace: MemoryTrace) -> Optimizer | None:
    """The optimizer the snapshot's frames (torch/optim/<module>.py) and annotations (Optimizer.step#AdamW.step)
    name; of unknown kind (states 2 or 1) when only torch/optim/optimizer.py or an unknown module shows."""
    modules = {
        str(frame.get("filename", "")).rsplit("torch/optim/", 1)[1].removesuffix(".py").lower()
        for stack in trace.stacks
        for frame in stack
        if "torch/optim/" in str(frame.get("filename", ""))
    }
    texts = trace.annotations.select_dtypes(include=["object", "string", "category"]).astype(str)
    named = {match.lower() for column in texts for text in texts[column].unique() for match in ANNOTATED.findall(text)}
    known = sorted((modules | named) & set(STATES))
    if known:
        states = tuple(sorted({state for name in known for state in STATES[name]}, reverse=True))
        return Optimizer("/".join(_display(name) for name in known), states)
    if modules or named or texts.apply(lambda column: column.str.contains("Optimizer")).to_numpy().any():
        return Optimizer("", (2, 1))
    return None


def _display(module: str) -> str:
    return {
        "adamw": "AdamW",
        "adam": "Adam",
        "sgd": "SGD",
        "rmsprop": "RMSprop",
        "nadam": "NAdam",
        "radam": "RAdam",
    }.get(module, module.capitalize())


@dataclass
class BeforeTrace:
    """How the memory allocated before the trace splits: per allocation, the shares of its bytes that are
    parameters, optimizer state, gradients and "optimizer state or gradients" (rows of NaN: sizes that do
    not come in multiples); the reading taken (states s, gradients g, copies k = 1 + s + g) and the
    readings that fit equally well (more than one: ambiguous)."""

    shares: np.ndarray
    states: int = 0
    gradients: int = 0
    readings: list[tuple[int, int]] = field(default_factory=list)

    @property
    def parameter_share(self) -> np.ndarray:
        return self.shares[:, 0]

    @property
    def ambiguous(self) -> bool:
        return len(self.readings) > 1


def split_before_trace(
    sizes: np.ndarray, optimizer: Optimizer | bool | None = True, parameter_sizes: np.ndarray | None = None
) -> BeforeTrace:
    """The split of the allocations made before the trace (the module docstring's first rule).
    ``optimizer``: what ``optimizer_of`` found (True: one of unknown kind, False or None: none).
    ``parameter_sizes`` (``parameter_size_evidence``, when the trace has any): only sizes among them can
    be parameters, so that buffers that happen to come in threes (a RoPE table per layer) are not read
    as a parameter and its states."""
    if optimizer is True:
        optimizer = Optimizer("", (2, 1))
    if not optimizer or not len(sizes):  # no optimizer, or nothing from before the trace to split
        return BeforeTrace(np.tile([1.0, 0.0, 0.0, 0.0], (len(sizes), 1)))
    rounded = allocator_size(sizes)
    keys, inverse, counts = np.unique(rounded, return_inverse=True, return_counts=True)
    eligible = np.ones(len(keys), dtype=bool)
    if parameter_sizes is not None and len(parameter_sizes):
        eligible = np.isin(keys, allocator_size(parameter_sizes))
    totals = np.bincount(inverse, weights=np.asarray(sizes, dtype=float))
    readings = sorted({(s, g) for s in optimizer.states for g in (1, 0)}, key=lambda r: (-(1 + sum(r)), -r[1]))
    explained = {reading: totals[eligible & (counts % (1 + sum(reading)) == 0)].sum() for reading in readings}
    fitting = [r for r in readings if explained[r] >= COVERAGE * totals[eligible].sum()]
    # A reading whose k divides a fitting reading's k is implied by it (a count of 4 is also one of 2):
    # the more specific stands. Of the rest, the one that explains the most bytes.
    fitting = [
        r for r in fitting if not any(1 + sum(o) > 1 + sum(r) and (1 + sum(o)) % (1 + sum(r)) == 0 for o in fitting)
    ]
    if not fitting:  # no reading explains the sizes: the optimizer's own, for the sizes that fit it
        fitting = [(optimizer.states[0], 0)]
    best = max(explained[r] for r in fitting)
    taken = [r for r in fitting if explained[r] == best]
    copies = 1 + sum(taken[0])
    same_copies = [r for r in taken if 1 + sum(r) == copies]
    states, gradients = next((r for r in taken if r[1] == 0), taken[0])  # different k: gradients not kept
    copies = 1 + states + gradients
    matched = (eligible & (counts % copies == 0))[inverse]
    if len(same_copies) > 1 and (states, gradients) in same_copies:
        row = [1 / copies, 0.0, 0.0, (copies - 1) / copies]
    else:
        row = [1 / copies, states / copies, gradients / copies, 0.0]
    shares = np.where(matched[:, None], np.asarray(row)[None, :], np.nan)
    return BeforeTrace(shares, states, gradients, taken)


def parameter_size_evidence(trace: MemoryTrace, allocations: pd.DataFrame) -> np.ndarray:
    """Sizes (bytes asked) the trace shows parameters have: tensors allocated with AccumulateGrad in
    their frames (gradients) or by the optimizer step (torch/optim/ frames: foreach and single-tensor
    optimizers make one per parameter). Empty when the trace allocated neither (a fused optimizer, a
    forward pass)."""
    traced = allocations.loc[~allocations["before_trace"].to_numpy()]
    stacks = traced["stack"].to_numpy(np.int64)
    texts = {int(stack): stack_text(trace, int(stack)) for stack in np.unique(stacks)}
    chosen = [stack for stack, text in texts.items() if "AccumulateGrad" in text or "torch/optim/" in text]
    return asked_sizes(traced.loc[np.isin(stacks, chosen)])


SPLIT_ROLES = ("parameters", "optimizer state", "gradients", "optimizer state or gradients")


def role_bytes(trace: MemoryTrace, memory: DeviceMemory, rows: pd.DataFrame) -> tuple[np.ndarray, Reading]:
    """Bytes per role (columns in ``ROLES`` order) of each allocation in ``rows`` (rows of
    ``DeviceMemory.allocations``), by the module's rules; and how the memory from before the trace read."""
    everything = memory.allocations
    reading = before_trace_reading(trace, memory)
    shares = reading.shares.reindex(rows.index).to_numpy(np.float64)
    result = np.zeros((len(rows), len(ROLES)))
    role = {name: index for index, name in enumerate(ROLES)}
    columns = np.asarray([role[name] for name in SPLIT_ROLES])
    events = int(memory.timeline["index"].max())
    blocks = rows["size"].to_numpy(np.float64)
    size = asked_sizes(rows).astype(np.float64)
    result[:, role["allocator rounding"]] = blocks - size  # 0 where the snapshot records no requested size
    before = rows["before_trace"].to_numpy()
    retained = (
        pd.Series(reading.lives.retained, index=everything.index).reindex(rows.index).fillna(False).to_numpy(bool)
    )
    result[retained, role["previous iteration (retained)"]] = size[retained]
    matched = before & ~retained & ~np.isnan(shares[:, 0])
    result[np.ix_(matched, columns)] = size[matched, None] * shares[matched]
    result[before & ~matched & ~retained, role["other (before the trace)"]] = size[before & ~matched & ~retained]
    # One role per distinct stack (stacks repeat), then per allocation by lookup.
    stacks = rows["stack"].to_numpy(np.int64)
    kept = rows["end"].to_numpy(np.int64) > events
    before_all = everything.loc[everything["before_trace"].to_numpy()]
    replacing = replacements(
        trace, everything, reading.shares.reindex(before_all.index).to_numpy(), events, reading.lives
    )
    replaced = replacing.reindex(rows.index).to_numpy(np.float64)
    swapped = ~np.isnan(replaced[:, 0]) if len(replaced) else np.zeros(len(rows), dtype=bool)
    result[np.ix_(swapped, columns)] = size[swapped, None] * replaced[swapped]
    before = before | swapped  # decided: the frame rules below leave them alone
    for stack in np.unique(stacks[~before]):
        text = stack_text(trace, int(stack))
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
    return result, reading


@dataclass(frozen=True)
class Reading:
    """How the memory from before the trace reads: ``SPLIT_ROLES`` shares per allocation (indexed as
    ``DeviceMemory.allocations``; rows of NaN: neither split nor freed by ``zero_grad``), the size split
    and what their lifetimes said (``lifetimes``)."""

    shares: pd.DataFrame
    split: BeforeTrace
    lives: Lives


def before_trace_reading(trace: MemoryTrace, memory: DeviceMemory) -> Reading:
    """The module's first rule, after ``lifetimes`` took out the gradients ``zero_grad`` freed and a
    retained previous iteration; frees without frames are read by count (``gradients_by_count``)."""
    everything = memory.allocations
    before = everything["before_trace"].to_numpy()
    evidence = parameter_size_evidence(trace, everything)
    rounded = allocator_size(asked_sizes(everything))
    lives = before_trace_lives(trace, memory, rounded, allocator_size(evidence))
    splitting = before & ~lives.decided
    split = split_before_trace(asked_sizes(everything.loc[splitting]), optimizer_of(trace), evidence)
    shares = split.shares
    events = int(memory.timeline["index"].max())
    ends = everything["end"].to_numpy(np.int64)[splitting]
    freed = ends <= events
    unframed = freed.any() and not everything["free_stack"].to_numpy(np.int64)[splitting][freed].any()
    matched = ~np.isnan(shares[:, 0])
    if unframed and split.gradients and not split.ambiguous and not _optimizer_keeps(trace, everything, events):
        shares = shares.copy()
        copies = 1 + split.states + split.gradients
        shares[matched] = gradients_by_count(
            rounded[splitting][matched], freed[matched], ends[matched], copies, split.states
        )
    frame = pd.DataFrame(shares, index=everything.index[splitting])
    cleared = pd.DataFrame([[0.0, 0.0, 1.0, 0.0]] * int(lives.zero_grad.sum()), index=everything.index[lives.zero_grad])
    return Reading(pd.concat([frame, cleared]).reindex(everything.index), split, lives)


def _optimizer_keeps(trace: MemoryTrace, everything: pd.DataFrame, events: int) -> bool:
    """Whether the trace's optimizer kept allocations (a step writing new parameter tensors frees old ones:
    such frees are not gradients)."""
    kept = everything.loc[~everything["before_trace"].to_numpy() & (everything["end"].to_numpy() > events)]
    return any("torch/optim/" in stack_text(trace, int(stack)) for stack in np.unique(kept["stack"].to_numpy()))


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
    rows = np.unique(
        np.append(
            np.linspace(0, len(timeline) - 1, min(points, len(timeline))).astype(np.int64),
            int(np.flatnonzero(timeline["index"].to_numpy() == memory.peak_index)[0]),
        )
    )
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
    """Role, Size (MiB), Share (%) of the memory live at the peak (roles with bytes only); notes stating
    the inferences."""
    weights, reading = role_bytes(trace, memory, memory.live_at_peak)
    totals = {name: value for name, value in zip(ROLES, weights.sum(axis=0).tolist()) if value}
    total = sum(totals.values())
    table = pd.DataFrame({"Role": list(totals), "Size (MiB)": [value / MIB for value in totals.values()]})
    table["Share (%)"] = 100 * table["Size (MiB)"] * MIB / total if total else 0.0
    return table, [before_trace_note(trace, memory, reading.split), *lifetime_notes(memory, reading.lives)]


READING = {(2, 0): "a parameter and 2 optimizer states (Adam, AdamW)",
           (2, 1): "a parameter, its gradient and 2 optimizer states (Adam, AdamW)",
           (1, 0): "a parameter and 1 optimizer state (SGD with momentum, Adagrad, RMSprop)",
           (1, 1): "a parameter, its gradient and 1 optimizer state (SGD with momentum, Adagrad, RMSprop)",
           (0, 1): "a parameter and its gradient (SGD without momentum)",
           (0, 0): "a parameter alone"}  # fmt: skip


def before_trace_note(trace: MemoryTrace, memory: DeviceMemory, split: BeforeTrace) -> str:
    """What the memory from before the trace was read as, and why."""
    before_bytes = float(memory.allocations.loc[memory.allocations["before_trace"].to_numpy(), "size"].sum())
    if not before_bytes:
        return "nothing was allocated before the trace began: every allocation has its frames"
    head = f"before the trace: {before_bytes / MIB:,.1f} MiB allocated with no frames"
    optimizer = optimizer_of(trace)
    if optimizer is None:
        return (
            f"{head}; no optimizer in the snapshot (no torch/optim frames or Optimizer annotation), so all of "
            "it counts as parameters (and buffers)"
        )
    copies = 1 + split.states + split.gradients
    shown = (
        f"the snapshot shows {optimizer.name}" if optimizer.name else "the snapshot shows an optimizer of unknown kind"
    )
    reading = READING[(split.states, split.gradients)]
    if split.ambiguous and np.nan_to_num(split.shares[:, 3]).any():
        readings = " or ".join(READING[other] for other in split.readings)
        return (
            f"{head}; {shown}; their sizes repeat {copies} times, which fits {readings}: the split is "
            f"ambiguous, so 1/{copies} counts as parameters and the rest as optimizer state or gradients"
        )
    if split.ambiguous:
        others = "; ".join(
            f"{1 + sum(other)} copies ({READING[other]})"
            for other in split.readings
            if other != (split.states, split.gradients)
        )
        return (
            f"{head}; {shown}; read as {copies} copies of each size ({reading}: gradients freed, zero_grad's "
            f"default), but the sizes fit {others} as well: the split is ambiguous"
        )
    return f"{head}; {shown}; their sizes repeat {copies} times ({reading}), so 1/{copies} of each counts as parameters"
