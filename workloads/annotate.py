"""NVTX ranges that nsys records from CPU and CUDA runs alike, and that cost next to nothing otherwise.

The ``nvtx`` package works on any build of torch (``torch.cuda.nvtx`` does nothing in a CPU build);
versions 0.2.8-0.2.11 are the ones nsys 2022.4 records (newer ones ask ``nvtxDomainIsEnabled``, which
2022.4's injection predates, and emit nothing there). Without the package, CUDA builds fall back to
``torch.cuda.nvtx``; otherwise ranges are no-ops. Set TRACEKIT_NVTX=0 to switch them off.

Measured on this project's 2-core CPU machine with no profiler attached: ``with nvtx_range(...)``
costs about 2 us through the ``nvtx`` package (a 48-layer forward pushes about 200 ranges).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager

# The NVTX capture range `tracekit capture` asks nsys to record: the measured steps, not warm-up.
CAPTURE_RANGE = "tracekit-capture"


def _backend() -> tuple[str, Callable[[str], object], Callable[[], object]]:
    # push/pop return whatever the backend does (torch.cuda.nvtx gives the nesting depth); callers ignore it.
    if os.environ.get("TRACEKIT_NVTX", "1") == "0":
        return "off", lambda name: None, lambda: None
    try:
        import nvtx

        return "nvtx", nvtx.push_range, nvtx.pop_range
    except ImportError:
        pass
    try:
        import torch

        if torch.cuda.is_available():
            return "torch.cuda.nvtx", torch.cuda.nvtx.range_push, torch.cuda.nvtx.range_pop
    except ImportError:
        pass
    return "off", lambda name: None, lambda: None


BACKEND, push, pop = _backend()


def _compiling() -> Callable[[], bool]:
    try:
        import torch

        return getattr(torch.compiler, "is_compiling", lambda: False)
    except ImportError:
        return lambda: False


is_compiling = _compiling()


@contextmanager
def nvtx_range(name: str) -> Iterator[None]:
    """A push/pop NVTX range around the block (default domain, so nsys names it just ``name``).

    Inside code that ``torch.compile`` traces it does nothing: a Python call to NVTX there would split
    the compiled graph at every range (and the compiled kernels no longer follow the layer structure).
    """
    if is_compiling():
        yield
        return
    push(name)
    try:
        yield
    finally:
        pop()
