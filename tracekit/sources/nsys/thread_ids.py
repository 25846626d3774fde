"""nsys's global thread ids: one int64 holding the process and the thread (and hardware and VM bits)."""

from __future__ import annotations

import numpy as np

# Low 24 bits of a global thread id are the tid, the next 24 the pid; the top 16 bits (hardware,
# VM) are non-zero in real files, so mask rather than shift alone.
ID_BITS = 0xFFFFFF
PID_TID_MASK = (1 << 48) - 1


def pid_of(global_id: np.ndarray) -> np.ndarray:
    """The process ids in global thread ids."""
    return (global_id >> 24) & ID_BITS
