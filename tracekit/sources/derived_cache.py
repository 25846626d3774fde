"""What analyses derive from a large export's tables, kept in its table cache (``cache``) beside the tables,
so that the next command skips the work: the GPU-op-to-launch join, the ops' categories, the idle gaps (the
first ~1.3 s of every ``timeline``, ``idle``, ``advise`` and ``report`` on a million kernels; ~50 ms to read).

Which values: the accessors declared ``kept_per_trace`` (``model.derived``), whose inputs are plain
values (flags, numbers). A value is kept under the accessor's name, its inputs, a digest of tracekit's own
source code, numpy's and pandas' versions (``code_digest``) and the table cache's key (the export's
identity): a change to any code that computes it, or to the export, is a new key, never a stale answer. Each value is
written whole (a partial folder renamed into place), on the session's write-behind thread, with the notes
its computing found (told again when it is read). A kept value that cannot be read is computed again.

Format: ``<cache>/derived/<accessor>-<inputs digest>-<code and export digest>/``: a ``.npy`` per array (categoricals as codes), and
``layout.json`` (kind: array, frame or dataclass; columns, categories, rows, checksums, notes).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import os
import shutil
import threading
import typing
import uuid
from collections.abc import Callable, Hashable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from tracekit.errors import TracekitError
from tracekit.model.derived import PERSISTED, frozen
from tracekit.session import current, in_this_context

FOLDER = "derived"
_WRITING = threading.Lock()


@functools.cache
def code_digest() -> str:
    """A digest of every tracekit source file and the versions of numpy and pandas (~10 ms, once)."""
    root = Path(__file__).resolve().parents[1]  # the tracekit package
    digest = hashlib.sha256(f"numpy {np.__version__} pandas {pd.__version__}".encode())
    for path in sorted(root.rglob("*.py")):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:20]


class DerivedCache:
    """The kept values of one export, in its table cache's ``folder`` while ``usable()`` (the folder is the
    cache's own, its key the export's now); ``checksum``: the table cache's checksum of an array's bytes."""

    def __init__(self, folder: Path, usable: Callable[[], bool], checksum: Callable[[np.ndarray], str], identity: dict):
        self.folder, self.usable, self.checksum = folder, usable, checksum
        # the export's identity (the table cache's key) is part of every value's name: a value a process
        # writes after the export changed and the cache was rebuilt for it is never read for the new export
        self.identity = json.dumps(identity, sort_keys=True)

    def _folder(self, key: tuple) -> Path:
        """``<accessor>-<its inputs' digest>-<the code's and export's digest>``: the values of other inputs
        are other folders, kept beside it; those of older code or another export, stale, share the first
        two parts."""
        name, *inputs = key
        given = hashlib.sha256(repr((name, tuple(inputs))).encode()).hexdigest()[:12]
        made = hashlib.sha256(f"{code_digest()} {self.identity}".encode()).hexdigest()[:20]
        return self.folder / FOLDER / f"{name.rsplit('.', 1)[-1].lstrip('_')}-{given}-{made}"

    def load(self, key: Hashable) -> tuple[Any, list[str]] | None:
        """(value, notes) kept under ``key``, or None (none kept, or not readable: computed again)."""
        if not isinstance(key, tuple) or key[0] not in PERSISTED:
            return None
        if not self.usable():
            return None
        folder = self._folder(key)
        try:
            layout = json.loads((folder / "layout.json").read_text())
            arrays = {}
            for index, (name, stored) in enumerate(layout["arrays"].items()):
                # the file this writer names by position, never a path the layout names (a foreign layout
                # could name a pipe, a device or a file elsewhere)
                values = np.load(folder / f"{index}.npy", allow_pickle=False)
                if values.ndim != 1 or not _plain(values) or self.checksum(values) != stored["checksum"]:
                    raise ValueError(f"{name}: not the column written (its shape, type or checksum)")
                categories = stored.get("categories")
                arrays[name] = (
                    values
                    if categories is None
                    else pd.Categorical.from_codes(values, categories=pd.Index(categories, dtype=stored["texts"]))
                )
            value = _value(layout["kind"], arrays, layout, PERSISTED[key[0]])
            notes = layout["notes"]
            if not isinstance(notes, list) or not all(isinstance(note, str) for note in notes):
                raise ValueError("the notes are not texts")
            return frozen(value), notes
        except FileNotFoundError:
            return None
        except Exception:  # a damaged or foreign file: only a slower start, as in the table cache
            return None

    def store(self, key: Hashable, value: Any, notes: list[str]) -> None:
        """Keep ``value`` (an array, a frame of numbers and categories, or a dataclass of arrays), written on
        the session's write-behind thread; a value of another shape, or a cache that cannot be written, is
        not kept."""
        if not isinstance(key, tuple) or key[0] not in PERSISTED or not self.usable():
            return
        parts = _parts(value)
        if parts is None:
            return
        kind, arrays, extra = parts
        folder = self._folder(key)

        def write() -> None:
            with _WRITING:
                _write(folder, kind, arrays, extra, notes, self.checksum)

        session = current()
        if not session.write_behind:
            write()
            return
        writer = threading.Thread(target=in_this_context(write), name="tracekit-cache-derived")
        session.pending_writes.append(writer)
        writer.start()


def _parts(value: Any) -> tuple[str, dict[str, np.ndarray | pd.Categorical], dict] | None:
    """(kind, arrays by name, what else rebuilds it) of a value that can be kept, else None."""
    if isinstance(value, np.ndarray):
        return ("array", {"value": value}, {}) if _plain(value) else None
    if isinstance(value, pd.DataFrame):
        if not isinstance(value.index, pd.RangeIndex) or value.index.start != 0 or value.index.step != 1:
            return None
        arrays: dict[str, np.ndarray | pd.Categorical] = {}
        for column in value.columns:
            series = value[column]
            if isinstance(series.dtype, pd.CategoricalDtype):
                arrays[str(column)] = pd.Categorical(series)
            elif isinstance(series.dtype, np.dtype) and _plain(series.to_numpy()):
                arrays[str(column)] = series.to_numpy()
            else:
                return None
        attrs = {key: item for key, item in value.attrs.items() if isinstance(item, (int, float, str))}
        return "frame", arrays, {"rows": len(value), "attrs": attrs}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = {field.name: getattr(value, field.name) for field in dataclasses.fields(value)}
        if all(isinstance(item, np.ndarray) and _plain(item) for item in fields.values()):
            return "dataclass", fields, {}
    return None


def _plain(values: np.ndarray) -> bool:
    return values.dtype.kind in "biuf"


def _value(kind: str, arrays: dict, layout: dict, compute: Callable) -> Any:
    """The value ``arrays`` make, of the kind the accessor ``compute`` declares it returns (never one a
    layout claims: a foreign one could make a value of another shape)."""
    made = typing.get_type_hints(compute)["return"]
    declared = "array" if made is np.ndarray else "frame" if made is pd.DataFrame else "dataclass"
    if kind != declared:
        raise ValueError(f"a {kind}, where {compute.__qualname__} makes a {declared}")
    if kind == "array":
        return arrays["value"]
    if kind == "frame":
        if not arrays or any(len(values) != layout["rows"] for values in arrays.values()):
            raise ValueError("no columns, or a column's length differs from the frame's")
        frame = pd.DataFrame(arrays, index=pd.RangeIndex(layout["rows"]), copy=False)
        frame.attrs.update(layout.get("attrs", {}))
        return frame
    if kind == "dataclass":
        if not dataclasses.is_dataclass(made) or set(arrays) != {item.name for item in dataclasses.fields(made)}:
            raise ValueError(f"not the fields of {made.__name__}")
        return made(**arrays)
    raise ValueError(f"unknown kind {kind!r}")


def _write(
    folder: Path, kind: str, arrays: dict, extra: dict, notes: list[str], checksum: Callable[[np.ndarray], str]
) -> None:
    partial = folder.parent / f".{folder.name}.{uuid.uuid4().hex[:8]}.partial"
    try:
        partial.mkdir(parents=True)
        stored = {}
        for index, (name, values) in enumerate(arrays.items()):
            categorical = isinstance(values, pd.Categorical)
            data = np.asarray(values.codes) if categorical else np.asarray(values)
            np.save(partial / f"{index}.npy", data, allow_pickle=False)
            stored[name] = {
                "file": f"{index}.npy",
                "checksum": checksum(data),
                "categories": [str(item) for item in values.categories] if categorical else None,
                "texts": str(values.categories.dtype) if categorical else None,  # object, or pandas' str
            }
        layout = {"kind": kind, "arrays": stored, "notes": list(notes), **extra}
        (partial / "layout.json").write_text(json.dumps(layout))
        for stale in folder.parent.glob(f"{folder.name.rsplit('-', 1)[0]}-*"):  # older code's or export's
            if stale.is_dir() and not stale.is_symlink():
                shutil.rmtree(stale, ignore_errors=True)
        os.replace(partial, folder)
    except (OSError, TracekitError):  # a cache that cannot be written is only a slower next start
        shutil.rmtree(partial, ignore_errors=True)
