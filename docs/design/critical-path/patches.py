"""pandas-3 workarounds for HTA 0.5.0 critical path analysis (used only with --patch).
P1: DataFrame.drop(axis=1, columns=[...]) raises in pandas 3 -> drop the redundant `axis`.
"""
import os
import pandas as pd

LEVEL = int(os.environ.get("CPA_PATCH_LEVEL", "9"))
APPLIED = []

def apply():
    if LEVEL >= 1:
        _orig_drop = pd.DataFrame.drop
        def drop(self, labels=None, *, axis=0, index=None, columns=None, **kw):
            if labels is None and (index is not None or columns is not None):
                return _orig_drop(self, index=index, columns=columns, **kw)
            return _orig_drop(self, labels, axis=axis, index=index, columns=columns, **kw)
        pd.DataFrame.drop = drop
        APPLIED.append("P1 DataFrame.drop axis+columns")

# P2: four chained in-place fillna calls in critical_path_analysis.py are silent no-ops
# under pandas 3 Copy-on-Write (the column keeps NaN), which makes every
# cudaStreamWaitEvent / cudaEventSynchronize match fail. Rewrite them as assignments.
P2_REPLACEMENTS = [
    ("comb.launch_id.fillna(-1, inplace=True)",
     'comb["launch_id"] = comb.launch_id.fillna(-1)'),
    ("cuda_record_calls.index_previous_launch.fillna(-1, inplace=True)",
     'cuda_record_calls["index_previous_launch"] = cuda_record_calls.index_previous_launch.fillna(-1)'),
    ("comb.launch_id.fillna(sys.maxsize, inplace=True)",
     'comb["launch_id"] = comb.launch_id.fillna(sys.maxsize)'),
    ("cuda_stream_wait_events.index_next_launch.fillna(-1, inplace=True)",
     'cuda_stream_wait_events["index_next_launch"] = cuda_stream_wait_events.index_next_launch.fillna(-1)'),
]

def apply_p2():
    import hta.analyzers.critical_path_analysis as m
    import hta.trace_analysis as ta
    src = open(m.__file__).read()
    for old, new in P2_REPLACEMENTS:
        assert src.count(old) == 1, old
        src = src.replace(old, new)
    exec(compile(src, m.__file__, "exec"), m.__dict__)
    ta.CriticalPathAnalysis = m.CriticalPathAnalysis
    ta.CPGraph = m.CPGraph
    APPLIED.append("P2 chained inplace fillna -> assignment (4 sites)")

_apply1 = apply
def apply():
    _apply1()
    if LEVEL >= 2:
        apply_p2()
