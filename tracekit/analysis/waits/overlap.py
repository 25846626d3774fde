"""``tracekit overlap``: how much of each GPU's communication ran under computation, and how much was
exposed (nothing else hid it), for the whole trace and per step.

Per device, GPU ops are typed as HolisticTraceAnalysis types them (``kernel_types``: NCCL kernels are
communication, other kernels computation, copies and sets memory). In ns:
- Communication: the union of the device's communication ops (overlapping collectives count once).
- Overlapped: the part of it during which a computation op also ran on the device.
- Exposed: Communication - Overlapped: communication time nothing else hid (memory ops do not hide it).
- Overlap (%): Overlapped / Communication.
With steps (``steps.step_rows``), ops count in the step whose CPU range their launch call started in.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from tracekit.analysis.primitives.busy import known_devices
from tracekit.analysis.primitives.joins import op_launches
from tracekit.analysis.primitives.kernel_types import TYPES, type_segments
from tracekit.analysis.primitives.op_selection import kernel_mask
from tracekit.analysis.primitives.step_window import launched_before_last_step, step_of, step_rows
from tracekit.analysis.waits.overlap_command import OverlapOptions
from tracekit.model.options import named
from tracekit.model.result import Result
from tracekit.model.trace import Trace

COMMUNICATION = 1 << TYPES.index("communication")
COMPUTATION = 1 << TYPES.index("computation")
WHOLE_TRACE = "(whole trace)"  # the Step of a device's row over the whole trace (with per_step)
COMM, OVERLAPPED, EXPOSED, SHARE = "Communication (ns)", "Overlapped (ns)", "Exposed (ns)", "Overlap (%)"


def overlap_of(ops: pd.DataFrame, rows: np.ndarray) -> tuple[int, int]:
    """(communication union, the part of it overlapped by computation) of the ``rows`` of ``ops``, ns."""
    masks, durations = type_segments(ops, rows)
    communicating = (masks & COMMUNICATION) != 0
    hidden = communicating & ((masks & COMPUTATION) != 0)
    return int(durations[communicating].sum()), int(durations[hidden].sum())


def overlap_table(trace: Trace, options: OverlapOptions | None = None) -> Result:
    """Per device (and per step with ``per_step``): Communication, Overlapped, Exposed, Overlap (%).
    ``drop_last_step``: only GPU work launched before the last ProfilerStep began (HTA's window)."""
    options = options or OverlapOptions()
    per_step, step_range, drop_last_step = options.per_step, options.step_range, options.drop_last_step
    kernel_mask(trace, "all")  # a clear error for a trace without GPU work
    ops = trace.gpu_ops
    devices = ops["device"].to_numpy()
    notes = list(trace.warnings)
    window = np.ones(len(ops), dtype=bool)
    if drop_last_step:
        kept, note = launched_before_last_step(trace)
        window = window if kept is None else kept
        notes.append(note)
    step_index = None
    if per_step:
        steps = step_rows(trace, step_range).reset_index(drop=True)
        if steps.empty:
            notes.append(f"no step ranges (ProfilerStep#N, step or {named('step_range')}): the whole trace only")
        else:
            launches = op_launches(trace)
            step_index = np.where(launches.found, step_of(steps, launches.pid, launches.start), -1)
            names = steps["name"].astype(str).to_numpy()
    rows = []
    for device in known_devices(devices[window]):
        on_device = (devices == device) & window
        groups = [(WHOLE_TRACE, on_device)]
        if step_index is not None:
            groups += [
                (names[step], on_device & (step_index == step))
                for step in np.unique(step_index[on_device])
                if step >= 0
            ]
        for label, chosen in groups:
            communication, overlapped = overlap_of(ops, chosen)
            rows.append(
                {
                    "GPU": f"cuda:{int(device)}",
                    "Step": label,
                    COMM: communication,
                    OVERLAPPED: overlapped,
                    EXPOSED: communication - overlapped,
                }
            )
    table = pd.DataFrame(rows, columns=["GPU", "Step", COMM, OVERLAPPED, EXPOSED])
    if step_index is None:
        table = table.drop(columns=["Step"])
    communication = table[COMM].to_numpy(float)
    with np.errstate(divide="ignore", invalid="ignore"):
        table[SHARE] = np.where(communication > 0, table[OVERLAPPED] * 100 / communication, 0.0)
    if not (table[COMM] > 0).any():
        notes.append("no communication kernels (NCCL) in this trace: nothing to overlap")
    return Result.of("overlap", table, f"Communication overlapped by computation: {trace.name}", notes)
