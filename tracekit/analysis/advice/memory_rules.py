"""Findings from a CUDA memory snapshot (given, or the run folder's), on the device with the highest peak:

- out of memory: every out-of-memory event the snapshot recorded, with the size it asked for and the
  frames of the failed allocation (critical);
- activations dominate the peak: activations (``memory`` by role) hold ``ACTIVATION_SHARE`` % or
  more of the memory live at the peak (warning; critical from ``ACTIVATION_CRITICAL`` %). Recoverable:
  half the activations, an estimate (activation checkpointing keeps a layer's inputs, not its insides;
  ``bench activations`` gives the model's formula);
- optimizer temporaries at the peak: blocks a foreach or single-tensor optimizer step allocated in the trace
  (``_multi_tensor_adam`` -> ``_foreach_sqrt``) live at the peak, ``OPTIMIZER_SHARE`` % of it or more
  (warning); the fix, a fused step, makes none. Recoverable: their bytes;
- retained previous iteration: memory made before the trace and freed only after its forward began, in the
  sizes of its activations (``memory.lifetimes``): the previous iteration's outputs and graph, live at the
  peak beside the new ones; ``RETAINED_SHARE`` % of the peak or more (warning; critical from
  ``RETAINED_CRITICAL`` %). Recoverable: their bytes;
- reserved far above allocated: at the peak, the allocator holds ``FRAGMENTATION_SHARE`` % or more of
  its reserved memory unallocated, and at least ``FRAGMENTATION_MIN_BYTES`` (fragmentation: freed blocks
  of the wrong sizes). Recoverable: those bytes, an upper bound (expandable segments return most).

Recoverable memory is in bytes, not time: these findings rank by severity among the time findings.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from tracekit.analysis.advice.finding import Finding, evidence
from tracekit.analysis.memory.replay import replay
from tracekit.model.memory import MemoryTrace

MIB = 2**20
ACTIVATION_SHARE, ACTIVATION_CRITICAL = 50.0, 75.0
FRAGMENTATION_SHARE, FRAGMENTATION_MIN_BYTES = 20.0, 1 << 30
EVIDENCE_ROWS = 5
RETAINED_SHARE, RETAINED_CRITICAL = 5.0, 20.0  # % of the peak
OPTIMIZER_SHARE = 10.0  # % of the peak: temporaries this large are worth a finding
OPTIMIZER_FRAME = re.compile(r"^_(?:multi|single)_tensor_(?:adam|adamw|sgd|adagrad|rmsprop|adamax|nadam|radam|lion)")


def memory_findings(snapshot: MemoryTrace) -> list[Finding]:
    """The memory findings of ``snapshot`` (each with its severity set: ``Finding.level``)."""
    found = _out_of_memory(snapshot)
    if not len(snapshot.events):
        return found
    from tracekit.analysis.memory.roles import memory_by_role

    memory = replay(snapshot)
    roles, _ = memory_by_role(snapshot, memory)
    found += [
        finding
        for finding in (
            _activations(roles, memory),
            _retained_iteration(roles, memory),
            _optimizer_temporaries(snapshot, memory),
            _fragmentation(memory),
        )
        if finding
    ]
    return found


def _frames(snapshot: MemoryTrace, stack: int) -> str:
    """The innermost three Python frames of a stack outside torch: the user's code that asked."""
    frames = snapshot.stacks[stack] if 0 <= stack < len(snapshot.stacks) else []
    named = [
        f"{frame.get('name', '?')} ({str(frame.get('filename', '?')).rsplit('/', 1)[-1]}:{frame.get('line', '?')})"
        for frame in frames
        if str(frame.get("filename", "")).endswith(".py") and "torch/" not in str(frame.get("filename", ""))
    ]
    return " < ".join(named[:3]) or "no frames recorded"


def _out_of_memory(snapshot: MemoryTrace) -> list[Finding]:
    events = snapshot.events
    ooms = events.loc[(events["action"] == "oom").to_numpy()]
    if ooms.empty:
        return []
    sizes = ooms["size"].to_numpy(np.int64)
    proof = evidence(
        [
            f"cuda:{int(device)} asked for {size / MIB:,.1f} MiB at event {int(index):,}: {_frames(snapshot, int(stack))}"
            for device, size, index, stack in zip(ooms["device"], sizes, ooms["index"], ooms["stack"])
        ][:EVIDENCE_ROWS],
        np.zeros(min(len(ooms), EVIDENCE_ROWS), dtype=np.int64),
        np.zeros(min(len(ooms), EVIDENCE_ROWS), dtype=np.int64),
        [f"cuda:{int(device)}" for device in ooms["device"]][:EVIDENCE_ROWS],
    )
    return [
        Finding(
            "out of memory",
            f"{len(ooms)} out-of-memory {'error' if len(ooms) == 1 else 'errors'} in the snapshot, the largest asking for "
            f"{sizes.max() / MIB:,.1f} MiB",
            0,
            "the run failed: no time to recover, the memory it asked for is the figure",
            "lower the peak: a smaller micro-batch with gradient accumulation, activation checkpointing, bf16 "
            "activations; PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True when reserved memory sits unused",
            proof,
            recoverable_bytes=int(sizes.max()),
            level="critical",
            first=True,
        )
    ]


def _role_share(roles: pd.DataFrame, role: str) -> tuple[float, float]:
    """(bytes, % of the peak) of ``role`` at the peak (0, 0 when it holds none)."""
    row = roles.loc[(roles["Role"] == role).to_numpy()]
    return (float(row["Size (MiB)"].iloc[0]) * MIB, float(row["Share (%)"].iloc[0])) if len(row) else (0.0, 0.0)


def _roles_evidence(roles: pd.DataFrame, device: int) -> pd.DataFrame:
    """Each role at the peak, as evidence rows."""
    return evidence(
        [
            f"{role}: {mib:,.1f} MiB ({percent:.1f} %)"
            for role, mib, percent in zip(roles["Role"], roles["Size (MiB)"], roles["Share (%)"])
        ],
        np.zeros(len(roles), dtype=np.int64),
        np.zeros(len(roles), dtype=np.int64),
        [f"cuda:{device} at the peak"] * len(roles),
    )


def _activations(roles: pd.DataFrame, memory) -> Finding | None:
    size, share = _role_share(roles, "activations")
    if share < ACTIVATION_SHARE:
        return None
    proof = _roles_evidence(roles, memory.device)
    return Finding(
        "activations dominate the peak",
        f"activations hold {size / MIB:,.1f} MiB, {share:.1f} % of the {memory.peak_allocated / MIB:,.1f} MiB live at "
        f"cuda:{memory.device}'s peak",
        0,
        "estimate: half the activations (checkpointing keeps each block's inputs and recomputes the rest)",
        "activation checkpointing (torch.utils.checkpoint on each transformer block), a smaller micro-batch with "
        "gradient accumulation, bf16 autocast (half the bytes per activation)",
        proof,
        recoverable_bytes=round(size / 2),
        level="critical" if share >= ACTIVATION_CRITICAL else "warning",
    )


def _retained_iteration(roles: pd.DataFrame, memory) -> Finding | None:
    size, share = _role_share(roles, "previous iteration (retained)")
    if share < RETAINED_SHARE:
        return None
    return Finding(
        "retained previous iteration",
        f"{size / MIB:,.1f} MiB ({share:.1f} % of cuda:{memory.device}'s {memory.peak_allocated / MIB:,.1f} MiB peak) "
        "were made before this iteration and freed only after its forward had run, in its activations' sizes: the "
        "previous iteration's outputs and the graph they hold, kept alive by a variable until reassigned",
        0,
        "upper bound: their bytes at the peak",
        "for inference run under torch.inference_mode() (no graph is kept); else drop the reference before the "
        "next forward (del out, loss), and keep numbers, not tensors (loss.item(), out.detach())",
        _roles_evidence(roles, memory.device),
        recoverable_bytes=round(size),
        level="critical" if share >= RETAINED_CRITICAL else "warning",
    )


def _optimizer_temporaries(snapshot: MemoryTrace, memory) -> Finding | None:
    """The optimizer step's temporaries live at the peak: blocks allocated in the trace by a foreach or
    single-tensor optimizer step (``_multi_tensor_adam`` -> ``_foreach_sqrt`` ...), a tenth of the peak or
    more. A fused step (``fused=True``) updates the parameters in place without them."""
    live = memory.live_at_peak
    live = live.loc[~live["before_trace"].to_numpy()]
    if live.empty:
        return None
    stacks = live["stack"].to_numpy()
    paths = {int(stack): _optimizer_path(snapshot, int(stack)) for stack in np.unique(stacks)}
    path = np.asarray([paths[int(stack)] for stack in stacks], dtype=object)
    chosen = path != ""
    size = int(live["size"].to_numpy()[chosen].sum())
    if size * 100 < OPTIMIZER_SHARE * max(memory.peak_allocated, 1):
        return None
    by_path = (
        pd.DataFrame({"path": path[chosen], "size": live["size"].to_numpy()[chosen]})
        .groupby("path", sort=False)
        .agg(total=("size", "sum"), blocks=("size", "size"))
        .sort_values("total", ascending=False, kind="stable")
    )
    top = by_path.index[0]
    return Finding(
        "optimizer temporaries at the peak",
        f"{size / MIB:,.1f} MiB ({size * 100 / memory.peak_allocated:.1f} % of cuda:{memory.device}'s peak) are "
        f"the optimizer step's temporaries, most from {top}",
        0,
        "upper bound: the temporaries' bytes at the peak (a fused step makes none)",
        "a fused optimizer step updates the parameters in place: torch.optim.AdamW(..., fused=True) (or "
        "apex.optimizers.FusedAdam); foreach=False trades them for a slow per-parameter loop",
        evidence(
            [
                f"{name}: {total / MIB:,.1f} MiB in {count:,} blocks"
                for name, total, count in zip(by_path.index, by_path["total"], by_path["blocks"])
            ][:EVIDENCE_ROWS],
            np.zeros(min(len(by_path), EVIDENCE_ROWS), dtype=np.int64),
            np.zeros(min(len(by_path), EVIDENCE_ROWS), dtype=np.int64),
            [f"cuda:{memory.device} at the peak"] * min(len(by_path), EVIDENCE_ROWS),
        ),
        recoverable_bytes=size,
        level="warning",
    )


def _optimizer_path(snapshot: MemoryTrace, stack: int) -> str:
    """ "_multi_tensor_adam -> _foreach_sqrt" when the stack is an optimizer step's (its innermost optimizer
    frame and the foreach op under it), else ""."""
    frames = snapshot.stacks[stack] if 0 <= stack < len(snapshot.stacks) else []
    names = [str(frame.get("name", "")) for frame in frames]
    steps = [name for name in names if OPTIMIZER_FRAME.search(name)]
    if not steps:
        return ""
    ops = [name for name in names if name.startswith("_foreach_") or name.startswith("torch._foreach_")]
    return f"{steps[0]} -> {ops[0]}" if ops else steps[0]


def _fragmentation(memory) -> Finding | None:
    timeline = memory.timeline
    at_peak = timeline.loc[(timeline["index"] == memory.peak_index).to_numpy()].iloc[0]
    reserved, allocated = int(at_peak["reserved"]), int(at_peak["allocated"])
    unused = reserved - allocated
    if reserved <= 0 or unused < FRAGMENTATION_MIN_BYTES or unused * 100 < FRAGMENTATION_SHARE * reserved:
        return None
    return Finding(
        "reserved far above allocated",
        f"at cuda:{memory.device}'s peak the allocator reserved {reserved / MIB:,.1f} MiB but only {allocated / MIB:,.1f} "
        f"MiB were allocated: {unused / MIB:,.1f} MiB ({unused * 100 / reserved:.1f} %) held unused",
        0,
        "upper bound: the unused reserved bytes at the peak",
        "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (segments grow in place instead of fragmenting); avoid "
        "tensors whose sizes change every step",
        evidence(
            [f"reserved {reserved / MIB:,.1f} MiB, allocated {allocated / MIB:,.1f} MiB"],
            [0],
            [0],
            [f"cuda:{memory.device} at the peak"],
        ),
        recoverable_bytes=unused,
        level="warning",
    )
