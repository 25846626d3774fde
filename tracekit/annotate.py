"""Mark your own training script for ``tracekit capture``: ranges and steps that nsys and torch.profiler
both see, and that cost next to nothing when no profiler is attached.

    from tracekit import annotate

    for batch in annotate.steps(loader, warmup=3):      # each measured step is a "step" range
        with annotate.range("forward"):                 # an NVTX range and a record_function
            loss = model(batch)
        ...

    @annotate.range("optimizer")                        # as a decorator
    def update(): ...

``range(name)`` emits an NVTX push/pop range (for nsys) and a torch.profiler ``record_function`` (for
torch.profiler) of the same name, so both sources show the same ranges. ``steps(iterable, warmup=N)``
yields the iterable's items: the first N are warm-up (no ranges, outside the capture), then each item
is one measured step. ``tracekit capture`` tells the program which profiler records it through
environment variables: under nsys the measured steps are the NVTX capture range ``tracekit-capture``
(nsys records only inside it); under torch.profiler, ``steps`` starts the profiler after the warm-up and
writes its trace when the steps end (``TRACEKIT_TORCH_TRACE``); with ``--memory`` a CUDA memory
snapshot of the measured steps is written too (``TRACEKIT_MEMORY_SNAPSHOT``).

Without a profiler (neither variable set, no torch.profiler running), ``range`` checks two flags and
returns: under a microsecond (``benchmarks/bench_annotate.py``). Inside code that ``torch.compile``
traces it does nothing (a Python call there would break the graph). This module imports only the
standard library; torch and the NVTX package are imported when a profiler needs them.
"""

from __future__ import annotations

import builtins
import functools
import os
import sys
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar

CAPTURE_RANGE = "tracekit-capture"  # the NVTX range `tracekit capture` asks nsys to record
ENV_PROFILER = "TRACEKIT_PROFILER"  # "nsys" or "torch": set by `tracekit capture`
ENV_TORCH_TRACE = "TRACEKIT_TORCH_TRACE"  # where the torch.profiler trace goes (.json or .json.gz)
ENV_MEMORY = "TRACEKIT_MEMORY_SNAPSHOT"  # where a CUDA memory snapshot of the measured steps goes
ENV_FACTS = "TRACEKIT_PROGRAM_FACTS"  # where the program's facts go (steps, torch, devices: ``write_facts``)
# "0": record no operator shapes (torch.profiler's record_shapes, emit_nvtx's under nsys); they give each
# operator its FLOPs and bytes (``tracekit efficiency``) for a few microseconds per operator
ENV_SHAPES = "TRACEKIT_SHAPES"
T = TypeVar("T")


class _State:
    """What the process is recorded with, decided once; ``warming`` is on during warm-up steps."""

    def __init__(self):
        profiler, switch = os.environ.get(ENV_PROFILER, ""), os.environ.get("TRACEKIT_NVTX", "")
        # NVTX ranges when nsys records: told by `tracekit capture`, or any NVTX tool attached (nsys sets
        # the NVTX injection library); TRACEKIT_NVTX=1/0 forces them on/off.
        attached = profiler == "nsys" or (profiler == "" and "NVTX_INJECTION64_PATH" in os.environ)
        self.nvtx = switch == "1" or (switch != "0" and attached)
        self.warming = False
        self.windows = 0  # capture windows opened so far: only the first records
        self.steps_open = 0  # steps() loops running, one inside another
        self.whole_program: Any = None  # a torch.profiler the launcher started (for a program without steps)
        self._backend: tuple | None = None

    @property
    def backend(self) -> str:
        """Which NVTX implementation the ranges use: "nvtx", "torch.cuda.nvtx" or "off"."""
        if not self.nvtx:
            return "off"
        if self._backend is None:
            self._backend = _nvtx_backend()
        return self._backend[0]

    def push(self, name: str) -> None:
        """An NVTX range pushed (whatever the flags say: the caller decided)."""
        if self._backend is None:
            self._backend = _nvtx_backend()
        self._backend[1](name)

    def pop(self) -> None:
        if self._backend is not None:
            self._backend[2]()


STATE = _State()


def _nvtx_backend() -> tuple[str, Callable[[str], object], Callable[[], object]]:
    """NVTX push/pop: the ``nvtx`` package (0.2.8-0.2.11 record under nsys 2022.4), else torch.cuda.nvtx
    on a CUDA build (it does nothing in a CPU build), else nothing."""
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
    return "off", (lambda name: None), (lambda: None)


def _torch_profiling() -> bool:
    """Whether a torch.profiler records right now (a flag read, when torch is imported at all)."""
    profiler = sys.modules.get("torch.autograd.profiler")
    return profiler is not None and profiler._is_profiler_enabled


def _compiling() -> bool:
    torch = sys.modules.get("torch")
    return bool(torch is not None and torch.compiler.is_compiling())


class range:
    """An NVTX range and a torch.profiler record_function named ``name``, around a block (``with``) or
    a function (decorator); nothing at all when no profiler records."""

    __slots__ = ("name", "_open")

    def __init__(self, name: str):
        self.name = name
        self._open: list = []  # what each __enter__ opened, for its __exit__ (re-entrant, recursive)

    def __enter__(self) -> range:
        state = STATE
        # The cheap flags first: with no profiler this is all a range costs.
        if state.warming or not (state.nvtx or _torch_profiling()) or _compiling():
            self._open.append(None)
            return self
        record = None
        if _torch_profiling():
            import torch

            record = torch.autograd.profiler.record_function(self.name)
            record.__enter__()
        if state.nvtx:
            state.push(self.name)
        self._open.append((record, state.nvtx))
        return self

    def __exit__(self, *exc) -> None:
        opened = self._open.pop()
        if opened is None:
            return
        record, pushed = opened
        if pushed:
            STATE.pop()
        if record is not None:
            record.__exit__(*exc)

    def __call__(self, function: Callable[..., T]) -> Callable[..., T]:
        @functools.wraps(function)
        def wrapper(*args, **kwargs):
            with range(self.name):
                return function(*args, **kwargs)

        return wrapper


def steps(iterable: Iterable[T], warmup: int = 0, name: str = "step") -> Iterator[T]:
    """The items of ``iterable``; the first ``warmup`` are warm-up (no ranges, not captured), each
    later one a measured step: a range ``name`` around the loop body, all of them inside the capture
    window (see the module docstring). A ``steps`` loop inside another one only marks its steps: the
    outer loop decides what is warm-up and what is captured."""
    outermost = STATE.steps_open == 0
    items = iter(iterable)
    STATE.steps_open += 1
    try:
        if outermost:
            STATE.warming = warmup > 0
            try:
                for _ in builtins.range(warmup):
                    try:
                        item = next(items)
                    except StopIteration:
                        return
                    yield item
            finally:
                STATE.warming = False
        window = CaptureWindow() if outermost else None
        measured = 0
        try:
            for item in items:
                with range(name):
                    measured += 1
                    yield item
        finally:
            if window is not None:
                recorded = window.recording  # only a program's first window records: its steps are the facts
                window.close()
                if recorded:
                    write_facts(steps=measured, warmup=warmup)
    finally:
        STATE.steps_open -= 1


def write_facts(steps: int | None = None, warmup: int | None = None, replace: bool = True) -> None:
    """What ``tracekit capture`` cannot see from outside, written where it said (TRACEKIT_PROGRAM_FACTS):
    the measured steps and warm-up (``steps``), torch's and CUDA's versions and the devices, when torch
    is imported. Nothing without the variable; a file already there is kept unless ``replace``."""
    path = os.environ.get(ENV_FACTS)
    if not path or (not replace and os.path.exists(path)):
        return
    import json

    facts: dict[str, Any] = {"steps": steps, "warmup": warmup}
    torch = sys.modules.get("torch")
    if torch is not None:
        facts["torch"] = str(getattr(torch, "__version__", "")) or None
        facts["cuda"] = getattr(getattr(torch, "version", None), "cuda", None)
        try:
            if torch.cuda.is_available():
                names = [torch.cuda.get_device_name(index) for index in builtins.range(torch.cuda.device_count())]
                facts["device"] = {"type": "cuda", "name": ", ".join(dict.fromkeys(names))}
        except Exception:  # a broken CUDA setup must not fail the user's program at its end
            pass
    facts.setdefault("device", {"type": "cpu", "name": _cpu_name()})
    partial = f"{path}.partial"
    with builtins.open(partial, "w") as handle:
        json.dump(facts, handle)
    os.replace(partial, path)


def _cpu_name() -> str | None:
    try:
        with builtins.open("/proc/cpuinfo") as handle:
            for line in handle:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None


class CaptureWindow:
    """The measured steps' capture, from creation to ``close()``: the NVTX capture range (nsys), a
    torch.profiler writing its trace where ``tracekit capture`` said (torch), the CUDA memory history
    (--memory). ``steps`` opens one; a harness with its own loop (the workloads) opens one itself.
    Only a program's first window records (nsys stops at the end of its capture range; a second
    torch.profiler would overwrite the trace): a later or nested one does nothing."""

    def __init__(self):
        self.profiler = None
        self.memory = None
        self.shapes = None
        self.recording = not STATE.windows
        STATE.windows += 1
        if not self.recording:
            return
        self.memory = os.environ.get(ENV_MEMORY)
        if STATE.nvtx:
            STATE.push(CAPTURE_RANGE)
            self.shapes = _operator_ranges()
        trace = os.environ.get(ENV_TORCH_TRACE)
        if os.environ.get(ENV_PROFILER) == "torch" and trace:
            import torch

            if STATE.whole_program is not None:  # started by the launcher: the steps decide instead
                STATE.whole_program.stop()
                STATE.whole_program = None
            activities = [torch.profiler.ProfilerActivity.CPU]
            if torch.cuda.is_available():
                activities.append(torch.profiler.ProfilerActivity.CUDA)
            self.profiler = torch.profiler.profile(activities=activities, record_shapes=shapes_wanted())
            self.profiler.start()
            self.trace = trace
            # The same outer range as nsys's capture range, so both sources nest the steps alike.
            self.window_range = torch.autograd.profiler.record_function(CAPTURE_RANGE)
            self.window_range.__enter__()
        if self.memory:
            self.memory = _start_memory_history()

    def close(self) -> None:
        if not self.recording:
            return
        self.recording = False  # closed once, however often it is called
        if self.shapes is not None:
            self.shapes.__exit__(None, None, None)
        if STATE.nvtx:
            STATE.pop()
        if self.profiler is not None:
            self.window_range.__exit__(None, None, None)
            self.profiler.stop()
            write_trace(self.profiler, self.trace)
        if self.memory:
            _dump_memory(self.memory)


def shapes_wanted() -> bool:
    """Whether operators' input shapes are recorded (on unless TRACEKIT_SHAPES=0)."""
    return os.environ.get(ENV_SHAPES, "1") != "0"


def _operator_ranges():
    """Under nsys, an NVTX range per operator with its input shapes (emit_nvtx(record_shapes=True): "aten::mm,
    seq = 3, op_id = 7, sizes = [[8, 4], [4, 2]]"), entered; None when shapes are off, torch is not in use
    (a program without torch) or has no CUDA (emit_nvtx needs it; a CPU run has no kernels to measure)."""
    torch = sys.modules.get("torch")
    if torch is None or not shapes_wanted() or os.environ.get(ENV_PROFILER) != "nsys":
        return None
    if not torch.cuda.is_available():
        return None
    ranges = torch.autograd.profiler.emit_nvtx(record_shapes=True)
    ranges.__enter__()
    return ranges


def write_trace(profiler, path: str) -> None:
    """The profiler's Chrome trace at ``path``, written whole (a temporary name, then renamed)."""
    partial = f"{path}.partial{'.gz' if path.endswith('.gz') else '.json'}"
    profiler.export_chrome_trace(partial)
    os.replace(partial, path)


def _start_memory_history() -> str | None:
    import torch

    if not torch.cuda.is_available():
        return None
    torch.cuda.memory._record_memory_history(max_entries=1_000_000)
    return os.environ.get(ENV_MEMORY)


def _dump_memory(path: str) -> None:
    import torch

    partial = f"{path}.partial"
    torch.cuda.memory._dump_snapshot(partial)
    torch.cuda.memory._record_memory_history(enabled=None)
    os.replace(partial, path)
