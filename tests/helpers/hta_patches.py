"""HolisticTraceAnalysis 0.5's critical path analysis made to run under pandas 3, for the parity tests.

Two fixes, applied in this process only (nothing installed is edited), as docs/design/critical-path
describes them: ``DataFrame.drop(axis=1, columns=[...])`` raises under pandas 3 (the redundant ``axis``
is dropped while HTA runs); four chained ``X.col.fillna(v, inplace=True)`` calls do nothing under
Copy-on-Write, which silently loses every stream-wait and event-sync edge (HTA's module is re-executed
with them written as assignments).
"""

from __future__ import annotations

import importlib
from contextlib import contextmanager
from typing import Any

import pandas as pd

FILLNA_FIXES = [
    ("comb.launch_id.fillna(-1, inplace=True)", 'comb["launch_id"] = comb.launch_id.fillna(-1)'),
    ("cuda_record_calls.index_previous_launch.fillna(-1, inplace=True)",
     'cuda_record_calls["index_previous_launch"] = cuda_record_calls.index_previous_launch.fillna(-1)'),
    ("comb.launch_id.fillna(sys.maxsize, inplace=True)", 'comb["launch_id"] = comb.launch_id.fillna(sys.maxsize)'),
    ("cuda_stream_wait_events.index_next_launch.fillna(-1, inplace=True)",
     'cuda_stream_wait_events["index_next_launch"] = cuda_stream_wait_events.index_next_launch.fillna(-1)'),
]  # fmt: skip
_fixed: list[bool] = []


def _fix_fillna() -> None:
    # Any: the lint step runs before HTA (the parity extra) is installed, so its types are unknown there
    module: Any = importlib.import_module("hta.analyzers.critical_path_analysis")
    analysis: Any = importlib.import_module("hta.trace_analysis")

    if _fixed:
        return
    with open(module.__file__) as handle:
        source = handle.read()
    if int(pd.__version__.split(".")[0]) >= 3:
        for old, new in FILLNA_FIXES:
            assert source.count(old) == 1, f"HTA's source changed: {old}"
            source = source.replace(old, new)
    exec(compile(source, module.__file__, "exec"), module.__dict__)
    analysis.CriticalPathAnalysis = module.CriticalPathAnalysis
    analysis.CPGraph = module.CPGraph
    _fixed.append(True)


@contextmanager
def hta_under_pandas_3():
    """HTA's critical path analysis runnable (and right) while the block runs."""
    _fix_fillna()
    original = pd.DataFrame.drop

    def drop(self, labels=None, *, axis=0, index=None, columns=None, **keywords):
        if labels is None and (index is not None or columns is not None):
            return original(self, index=index, columns=columns, **keywords)
        return original(self, labels, axis=axis, index=index, columns=columns, **keywords)

    pd.DataFrame.drop = drop  # pyright: ignore[reportAttributeAccessIssue]  (a looser signature, for HTA only)
    try:
        yield
    finally:
        pd.DataFrame.drop = original
