"""``advise`` on the evaluation set (benchmarks/evalset/manifest.json): real public traces, each labelled
by hand with what an expert fixes first, so that the rules are tested on their ranking, on workloads no
rule was written for. Each trace's first finding must be its label (None: advise finds nothing); where
tracekit disagrees today the test is xfail(strict=True) with the manifest's reason, so fixing the rule turns
it into a failure to clean up. The traces are materialised by ``python benchmarks/evalset/fetch.py``; a
test skips when its file is absent."""

import pytest
from helpers.evalset import fetch_module

import tracekit

fetch = fetch_module()
TRACES = fetch.load_manifest()


def labelled(trace):
    marks = [pytest.mark.xfail(strict=True, reason=trace.xfail)] if trace.xfail else []
    return pytest.param(trace, id=trace.name, marks=marks)


@pytest.mark.parametrize("trace", [labelled(trace) for trace in TRACES])
def test_the_first_finding_is_what_an_expert_fixes_first(trace):
    path = fetch.DATA / trace.name
    if not path.is_file():
        pytest.skip(f"{path} is absent: python benchmarks/evalset/fetch.py materialises it")
    result = tracekit.advise(path)
    findings = result["findings"]["Finding"]
    assert (findings.iloc[0] if len(findings) else None) == trace.first, trace.reason
    # no finding without evidence
    assert set(result["findings"]["Rank"]) <= set(result["evidence"]["Rank"])
