"""count_op on the operators of the real torch.profiler traces in ../shared/kineto (skipped when absent): the
Qwen inference trace's largest products equal a hand count from their dims, and what stays unknown in
each trace is what its recording lacks, nothing else."""

from __future__ import annotations

import gzip
import json
from collections import Counter
from pathlib import Path

import pytest
from helpers.paths import SHARED

from tracekit.analysis.hardware.op_counts import count_op

KINETO = SHARED / "kineto"
QWEN = KINETO / "h100_qwen0.5b_inference.json.gz"
DLRM = KINETO / "v100_dlrm_8ranks" / "rank0.pt.trace.json"
MI250 = KINETO / "mi250_rocm6.2_toy.json.gz"


def cpu_ops(path: Path) -> list[dict]:
    if not path.is_file():
        pytest.skip(f"{path} not available")
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as file:
        return [event for event in json.load(file)["traceEvents"] if event.get("cat") == "cpu_op"]


def counted(event: dict):
    args = event.get("args", {})
    return count_op(event["name"], args.get("Input Dims"), args.get("Input type"), args.get("Concrete Inputs"))


def test_the_largest_products_of_the_qwen_trace_equal_a_hand_count():
    products = [e for e in cpu_ops(QWEN) if e["name"] in ("aten::mm", "aten::addmm", "aten::bmm")]
    largest = sorted(products, key=lambda e: e["dur"], reverse=True)[:10]
    assert len(largest) == 10
    for event in largest:
        dims = event["args"]["Input Dims"]
        left, right = dims[1:3] if event["name"] == "aten::addmm" else dims[:2]
        *batch, m, k = left
        n = right[-1]
        hand = 2 * (batch[0] if batch else 1) * m * k * n
        result = counted(event)
        assert (result.flops, result.family, result.why_unknown) == (hand, "matmul", None), event["args"]
    # the MLP's up projection: 16 x 559 tokens through a 1024 -> 2816 linear without bias, in bf16
    up = [e for e in products if e["args"]["Input Dims"] == [[8944, 1024], [1024, 2816]]]
    assert len(up) == 48 and counted(up[0]).flops == 2 * 8944 * 1024 * 2816
    assert counted(up[0]).bytes == (8944 * 1024 + 1024 * 2816 + 8944 * 2816) * 2


def test_every_operator_of_the_qwen_trace_is_counted_but_cat():
    results = [(event["name"], counted(event)) for event in cpu_ops(QWEN)]
    assert all(result.flops is not None for _, result in results)
    missing = Counter((name, result.why_unknown) for name, result in results if result.bytes is None)
    assert set(missing) == {("aten::cat", "TensorList dtypes not recorded")}
    attention = [result for name, result in results if name == "aten::_flash_attention_forward"]
    assert attention and attention[0].flops == 2 * 16 * 16 * 559 * 559 * 128 / 2  # causal


def test_what_the_older_traces_leave_unknown_is_what_they_did_not_record():
    """The DLRM trace (torch ~2.0) has no Concrete Inputs and no TensorList shapes; its other unknowns are
    collectives, FBGEMM's ops and autograd's own nodes, which no formula here claims."""
    reasons = Counter()
    for event in cpu_ops(DLRM):
        result = counted(event)
        if result.why_unknown and event["name"].startswith("aten::"):
            reasons[result.why_unknown] += 1
    assert set(reasons) == {
        "scalar arguments not recorded",  # zeros, to, cumsum ...: sizes or target dtypes
        "reduction dims not recorded",
        "TensorList shapes not recorded",  # cat, concat
        "unknown op aten::_index_put_impl_",  # indexing and this loss: not covered
        "unknown op aten::index",
        "unknown op aten::binary_cross_entropy_with_logits",
    }
    mi250 = [counted(event) for event in cpu_ops(MI250) if event["name"].startswith("aten::")]
    assert {result.why_unknown for result in mi250} == {None, "TensorList dtypes not recorded"}  # _foreach_add_
