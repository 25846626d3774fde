"""Typed per-trace memoization: a table derived from a trace's tables is computed once per trace and
per choice of its real inputs, and handed out so that no caller can change it for the next.

``per_trace`` turns a function ``(trace, *inputs) -> value`` into its one accessor: the value is
stored on the trace (``Trace.derived``) under the function and its inputs as bound to its signature
(defaults filled in, so ``f(trace, True)`` and ``f(trace, per_stream=True)`` are one entry), never
under a wording. What is stored is frozen (``frozen``) once; each access hands out:

- a DataFrame or Series: a new shallow object over the stored one (pandas' copy-on-write, the default
  from pandas 3: a caller's ``df.loc[...] = x`` or ``df[col] = ...`` copies what it changes, the stored
  frame stays as it was; no data is copied on access). Its ``to_numpy()`` arrays are read-only views.
  Under pandas 2 without copy-on-write turned on (tracekit does not turn on a process-wide option), a
  whole copy instead: as safe, not as cheap;
- a numpy array, or one held in a dataclass, tuple or mapping: made read-only once (``flags.writeable``
  False; an assignment raises ValueError), no copy;
- a mapping: a read-only view of it (``MappingProxyType``).
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
from collections.abc import Callable, Hashable, Mapping
from types import MappingProxyType
from typing import Any, Concatenate, ParamSpec, Protocol, TypeVar

import numpy as np
import pandas as pd


class Memo(Protocol):
    """What holds the values: a ``Trace`` (``Trace.derived``; named here by what it does, so that trace
    and this module do not import each other)."""

    def derived(self, key: Hashable, compute: Callable[[], Any]) -> Any: ...


P = ParamSpec("P")
T = TypeVar("T")
Holder = TypeVar("Holder", bound=Memo)


def per_trace(compute: Callable[Concatenate[Holder, P], T]) -> Callable[Concatenate[Holder, P], T]:
    """The memoized accessor of ``compute`` (see the module docstring); its inputs must be hashable."""
    signature = inspect.signature(compute)
    name = f"{compute.__module__}.{compute.__qualname__}"

    @functools.wraps(compute)
    def accessor(trace: Holder, *args: P.args, **kwargs: P.kwargs) -> T:
        bound = signature.bind(trace, *args, **kwargs)
        bound.apply_defaults()
        key = (name, *list(bound.arguments.values())[1:])
        return handed_out(trace.derived(key, lambda: frozen(compute(trace, *args, **kwargs))))

    return accessor


PERSISTED: dict[str, Callable] = {}  # accessors whose values a large export's cache keeps, by key name


def kept_per_trace(compute: Callable[Concatenate[Holder, P], T]) -> Callable[Concatenate[Holder, P], T]:
    """``per_trace``, and the value kept between commands in a large export's cache
    (``sources.derived_cache``): for values every command on a large trace starts with, whose inputs are
    plain values and whose value is an array, a frame of numbers and categories or a dataclass of arrays."""
    PERSISTED[f"{compute.__module__}.{compute.__qualname__}"] = compute
    return per_trace(compute)


def frozen(value: T) -> T:
    """``value`` made read-only where it can be without a copy: its arrays (also inside a dataclass, a
    tuple or a mapping) not writeable. A DataFrame is guarded on access instead (``handed_out``)."""
    if isinstance(value, np.ndarray):
        value.flags.writeable = False
    elif isinstance(value, tuple):
        for item in value:
            frozen(item)
    elif isinstance(value, Mapping):
        for item in value.values():
            frozen(item)
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        for field in dataclasses.fields(value):
            frozen(getattr(value, field.name))
    return value


def handed_out(value: Any) -> Any:
    """What one access gets of a stored ``value``: a frame of its own (no data copied), a read-only
    view of a mapping, else the value itself (frozen already)."""
    if isinstance(value, (pd.DataFrame, pd.Series)):
        return value.copy(deep=not _copy_on_write())
    if isinstance(value, Mapping):
        return MappingProxyType(value)  # type: ignore[arg-type]  # read only: any mapping's items
    return value


def _copy_on_write() -> bool:
    """Whether pandas copies a frame's data only when it is changed (always from pandas 3; an option in 2)."""
    return int(pd.__version__.split(".")[0]) >= 3 or pd.get_option("mode.copy_on_write") is True
