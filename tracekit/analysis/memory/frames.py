"""Who allocated: the line of user code (or the autograd node, or the ATen op) behind an allocation's
captured stack, found by skipping the allocator, the unwinder, the interpreter and libraries."""

from __future__ import annotations

import re
from functools import cache

import pandas as pd

from tracekit.model.memory import MemoryTrace

BEFORE_TRACE = "(allocated before the trace began)"
NO_STACK = "(no stack recorded)"
# Frames of the allocator and the unwinder say nothing about who allocated.
SKIP_FUNCTIONS = (
    "unwind::unwind",
    "CapturedTraceback::gather",
    "gather_with_cpp",
    "CUDACachingAllocator",
    "NativeCachingAllocator",
    "empty_generic",
    "empty_cuda",
    "empty_strided",
    "_start",
    "__libc_start_main",
    "Py_RunMain",
    "Py_BytesMain",
    "_PyEval",
    "PyEval_",
    "PyObject_",
    "PyFunction_",
    "PyMethod_",
    "PyCMethod_",
    "PyType_",
    "PyRun_",
    "_PyRun",
    "_Py",
    "__clone",
    "pthread_",
    "std::error_code",
)
SKIP_FILES = (
    "core/boxing",
    "/Register",
    "/Redispatch",
    "pythonrun.c",
    "Modules/main.c",
    "Objects/call.c",
    "ceval.c",
    "cpython/abstract.h",
)
LIBRARY_PATHS = ("/site-packages/", "/dist-packages/", "<frozen", "/lib/python3.")
AUTOGRAD_NODE = re.compile(r"torch::autograd::(?:generated::)?(\w+)::(?:apply|accumulateGrad)")
ATEN_OP = re.compile(r"at::_ops::(\w+)::call")


@cache
def _is_library(filename: str) -> bool:
    return any(marker in filename for marker in LIBRARY_PATHS)


def _short(filename: str) -> str:
    parts = filename.replace("\\", "/").split("/")
    return "/".join(parts[-2:])


def _kept(frame: dict) -> bool:
    name, filename = frame.get("name", ""), frame.get("filename", "")
    return not any(skip in name for skip in SKIP_FUNCTIONS) and not any(skip in filename for skip in SKIP_FILES)


def clean_stack(stack: list) -> list[dict]:
    """The stack as frames of the expected types: a snapshot is untrusted data, and a frame may be a
    number, a field None or a list nested thousands deep. Such parts read as "?" (line 0), never repr'd."""

    def text(value) -> str:
        return value if isinstance(value, str) else "?"

    def line(value) -> int:
        return value if type(value) is int and 0 <= value < 2**63 else 0

    return [
        {"filename": text(frame.get("filename")), "line": line(frame.get("line")), "name": text(frame.get("name"))}
        if isinstance(frame, dict)
        else {"filename": "?", "line": 0, "name": "?"}
        for frame in (stack if isinstance(stack, list) else [])
    ]


def user_frame(stack: list[dict]) -> str:
    """Who allocated: the first Python frame outside libraries ("model.py:39 forward"); else the first
    Python frame; else the autograd node (backward runs in C++: "BmmBackward0") or the ATen op."""
    stack = clean_stack(stack)
    if not stack:
        return NO_STACK
    python = [frame for frame in stack if str(frame.get("filename", "")).endswith(".py")]
    for frame in python:
        if not _is_library(frame["filename"]):
            return f"{_short(frame['filename'])}:{frame.get('line', 0)} {frame.get('name', '')}"
    if python:
        frame = python[0]
        return f"{_short(frame['filename'])}:{frame.get('line', 0)} {frame.get('name', '')}"
    for frame in stack:
        node = AUTOGRAD_NODE.search(frame.get("name", ""))
        if node:
            return node.group(1)
    for frame in stack:
        op = ATEN_OP.search(frame.get("name", ""))
        if op:
            return f"aten::{op.group(1)}"
    kept = [frame for frame in stack if _kept(frame)]
    return (kept or stack)[0].get("name", NO_STACK)[:120]


def short_stack(stack: list[dict], depth: int = 4) -> str:
    """A few frames that say where an allocation came from, innermost first, joined by " < ".

    Python frames when there are any; otherwise the ATen ops and autograd nodes of the C++ stack
    ("aten::mm < MmBackward0 < autograd engine"), not its template machinery.
    """
    stack = clean_stack(stack)
    if not stack:
        return ""
    python = [
        f"{_short(frame['filename'])}:{frame.get('line', 0)} {frame.get('name', '')}"
        for frame in stack
        if str(frame.get("filename", "")).endswith(".py")
    ]
    if python:
        return " < ".join(python[:depth])
    names: list[str] = []
    for frame in stack:
        name = frame.get("name", "")
        node, op = AUTOGRAD_NODE.search(name), ATEN_OP.search(name)
        label = (
            node.group(1)
            if node
            else f"aten::{op.group(1)}"
            if op
            else "autograd engine"
            if "autograd::Engine" in name
            else None
        )
        if label and (not names or names[-1] != label):
            names.append(label)
        if label == "autograd engine" or len(names) == depth:
            break
    return " < ".join(names)


def frames_of(trace: MemoryTrace, stacks: pd.Series, before: pd.Series) -> tuple[list[str], list[str]]:
    labels, chains = {}, {}
    frames, chains_out = [], []
    for stack, early in zip(stacks.tolist(), before.tolist()):
        if early and stack == 0:
            frames.append(BEFORE_TRACE)
            chains_out.append("")
            continue
        if stack not in labels:
            labels[stack] = user_frame(trace.stacks[stack])
            chains[stack] = short_stack(trace.stacks[stack])
        frames.append(labels[stack])
        chains_out.append(chains[stack])
    return frames, chains_out


def stack_text(trace: MemoryTrace, stack: int) -> str:
    """Stack ``stack`` of ``trace`` as "filename:function" lines (innermost first), for matching names in;
    "" for no stack."""
    frames = trace.stacks[stack] if 0 <= stack < len(trace.stacks) else []
    return "\n".join(f"{frame.get('filename', '')}:{frame.get('name', '')}" for frame in frames)
