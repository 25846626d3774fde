"""Which GPU ops a command reads: kernels or every op (``kernel_mask``), and the column each form of a
kernel's name is in. Free of numpy and pandas at import: the command line reads ``NAME_COLUMNS`` to start
reading an export before they have loaded (``kernels.columns``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tracekit.errors import NoGpuDataError
from tracekit.model.options import OptionError, named

if TYPE_CHECKING:
    import numpy as np

    from tracekit.model.trace import Trace

NAME_COLUMNS = {"demangled": "name", "short": "short_name"}
OPS_CHOICES = ("kernels", "all")


def kernel_mask(trace: Trace, which_ops: str = "kernels") -> np.ndarray | None:
    """Which GPU operations to summarize: a boolean mask (None = all of them).

    Raises NoGpuDataError, with what to do, when the trace recorded none.
    """
    if which_ops not in OPS_CHOICES:
        raise OptionError(f"{named('ops')} {which_ops!r} is not one of {', '.join(OPS_CHOICES)}")
    kinds = trace.columns("gpu_ops", ["kind"])["kind"]
    rows = (kinds == "kernel").to_numpy() if which_ops == "kernels" else None
    if not (rows.any() if rows is not None else len(kinds)):
        dropped = trace.dropped("gpu_ops")
        if dropped:
            raise NoGpuDataError(
                f"{trace.name}: none of its GPU operations is usable: all {dropped:,} rows read hold unusable values "
                "(end before start, negative or out-of-range numbers, or NULL, REAL or TEXT where integers belong)"
            )
        if len(kinds):  # CUDA was traced: its GPU work is copies and sets only
            what = (
                "GPU operation is a memory copy or set"
                if len(kinds) == 1
                else "GPU operations are memory copies and sets"
            )
            raise NoGpuDataError(
                f"{trace.name} has no CUDA kernels: its {len(kinds):,} {what}: {named('ops')} all summarizes them "
                "(bandwidth measures them)"
            )
        raise NoGpuDataError(
            f"{trace.name} has no CUDA {'kernels' if which_ops == 'kernels' else 'GPU operations'}: the capture "
            "traced no CUDA activity (a CPU-only run, or nsys without its CUDA trace). Capture on an NVIDIA GPU "
            "with `nsys profile -t cuda,nvtx ...` or `tracekit capture MODEL`"
        )
    return None if rows is not None and rows.all() else rows
