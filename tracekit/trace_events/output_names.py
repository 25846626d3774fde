"""The timeline's file: which names it may have (the suffix picks the format), and the one it gets when none is
given: the first input's name in the current folder, ``.pftrace`` past ``PROTOBUF_ABOVE`` GPU ops, else
``.json.gz``; never a file that exists.
"""

from __future__ import annotations

import os
from pathlib import Path

from tracekit.errors import UsageError

JSON_SUFFIXES = (".json", ".json.gz")
PERFETTO_SUFFIXES = (".pftrace", ".perfetto-trace")
SUFFIXES = PERFETTO_SUFFIXES + JSON_SUFFIXES


def check_output(path: str | os.PathLike) -> Path:
    if not isinstance(path, (str, os.PathLike)) or not os.fspath(path).strip():
        raise UsageError(f"the timeline's output is a file name ending in {_SAID}, not {path!r}")
    target = Path(path)
    if not target.name.endswith(SUFFIXES):
        raise UsageError(
            f"{target} must end in {_SAID} (Perfetto's protobuf format, or the Chrome trace-event JSON it opens)"
        )
    return target


_SAID = ", ".join(SUFFIXES[:-1]) + " or " + SUFFIXES[-1]
PROTOBUF_ABOVE = 100_000  # GPU ops past which the default output is .pftrace (the JSON passes ~60 MB)
_INPUT_SUFFIXES = (".sqlite", ".nsys-rep", ".gz", ".json", ".trace", ".pt", ".pickle")  # torch: .pt.trace.json.gz


def default_output(label: str, gpu_ops: int) -> Path:
    """The file written when none is named: ``<input>.pftrace`` for ``gpu_ops`` past ``PROTOBUF_ABOVE``, else
    ``<input>.json.gz``, in the current folder (the first input's name without its suffixes); one that
    exists is never written over."""
    stem = Path(label).name
    while stem.endswith(_INPUT_SUFFIXES):
        stem = stem[: stem.rindex(".")]
    target = Path(f"{stem or 'trace'}.{'pftrace' if gpu_ops > PROTOBUF_ABOVE else 'json.gz'}")
    if target.exists() or target.is_symlink():
        raise UsageError(f"{target} exists: name the timeline's file with -o (it is not written over)")
    return target
