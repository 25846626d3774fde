"""HolisticTraceAnalysis 0.5's critical path and call graph analyses made to run under pandas 3, for the
parity tests.

Three fixes, applied in this process only (nothing installed is edited), as docs/design/critical-path
describes the first two: ``DataFrame.drop(axis=1, columns=[...])`` raises under pandas 3 (the redundant
``axis`` is dropped while HTA runs); four chained ``X.col.fillna(v, inplace=True)`` calls do nothing under
Copy-on-Write, which silently loses every stream-wait and event-sync edge (HTA's module is re-executed
with them written as assignments). The third: the call graph (``get_frequent_cuda_kernel_sequences``)
turns "ts"/"end" labels into -1/1 with ``replace``, which leaves an object column under pandas 3, and
``np.unique(axis=0)`` refuses the object array made of it (the method is recompiled with
``infer_objects()`` after the replace: the numeric array pandas 2 made).
"""

from __future__ import annotations

import importlib
import inspect
import textwrap
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


CALL_STACK_FIX = ('.replace({"ts": -1, "end": 1})', '.replace({"ts": -1, "end": 1}).infer_objects()')


def _fix_call_stack() -> None:
    module: Any = importlib.import_module("hta.common.trace_call_stack")
    graph = module.CallStackGraph
    if getattr(graph, "_tracekit_fixed", False) or int(pd.__version__.split(".")[0]) < 3:
        return
    source = textwrap.dedent(inspect.getsource(graph._construct_call_stack_graph))
    old, new = CALL_STACK_FIX
    assert source.count(old) == 1, f"HTA's source changed: {old}"
    namespace: dict[str, Any] = {}
    exec(compile(source.replace(old, new), str(module.__file__), "exec"), module.__dict__, namespace)
    graph._construct_call_stack_graph = namespace["_construct_call_stack_graph"]
    graph._tracekit_fixed = True


@contextmanager
def hta_under_pandas_3():
    """HTA's critical path and call graph analyses runnable (and right) while the block runs."""
    _fix_fillna()
    _fix_call_stack()
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
