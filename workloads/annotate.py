"""The workloads' NVTX ranges: ``tracekit.annotate``'s, under the names the workload code uses.

``nvtx_range(name)`` is ``tracekit.annotate.range``: an NVTX range when nsys records (``tracekit
capture`` says so, or any NVTX tool is attached; TRACEKIT_NVTX=1/0 forces it), a record_function under
torch.profiler, nothing otherwise (0.45 us) and nothing inside ``torch.compile``d code. ``push``/``pop``
open and close a range unconditionally (the harness's capture range). See ``tracekit.annotate``.
"""

from __future__ import annotations

from tracekit.annotate import CAPTURE_RANGE, STATE
from tracekit.annotate import range as nvtx_range

BACKEND = STATE.backend  # reported with the results: "nvtx", "torch.cuda.nvtx" or "off"
push = STATE.push
pop = STATE.pop

__all__ = ["BACKEND", "CAPTURE_RANGE", "nvtx_range", "pop", "push"]
