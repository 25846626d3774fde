"""op_counts on recorded arguments written out as torch.profiler and emit_nvtx record them (copied from real
traces): hand-counted FLOPs and bytes, what stays unknown and why, the NVTX name parser, the table form
with one computation per distinct signature, and odd input that must never raise."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tracekit.analysis.hardware import op_counts
from tracekit.analysis.hardware.op_count_matmul import einsum_matmul
from tracekit.analysis.hardware.op_counts import RULES, OpCount, count_op, count_ops, shapes_from_nvtx_name
from tracekit.errors import UsageError

BF16 = 2

# aten::addmm of the Qwen1.5-0.5B trace (h100_qwen0.5b_inference.json.gz): bias [1024], [8944, 1024] x [1024, 1024]
ADDMM = (
    "aten::addmm",
    [[1024], [8944, 1024], [1024, 1024], [], []],
    ["c10::BFloat16", "c10::BFloat16", "c10::BFloat16", "Scalar", "Scalar"],
    ["", "", "", "1", "1"],
)
# its causal flash attention: [batch 16, seq 559, heads 16, dim 64]
FLASH = (
    "aten::_flash_attention_forward",
    [[16, 559, 16, 64]] * 3 + [[]] * 12,
    ["c10::BFloat16"] * 3 + ["", "", "Scalar", "Scalar", "Scalar", "Scalar", "Scalar", "Scalar", "", "", "", ""],
    ["", "", "", "", "", "559", "559", "0.", "True", "False", "0.125", "", "", "", ""],
)


def test_a_recorded_addmm():
    result = count_op(*ADDMM)
    assert result.flops == 2 * 8944 * 1024 * 1024  # the bias' addition is not counted (flop_counter's rule)
    assert result.bytes == (1024 + 8944 * 1024 + 1024 * 1024 + 8944 * 1024) * BF16
    assert (result.family, result.why_unknown) == ("matmul", None)


def test_a_causal_attention_counts_half_its_products():
    result = count_op(*FLASH)
    products = 16 * 16 * 559 * 559  # batch x heads x query rows x key rows
    assert result.flops == 2 * products * (64 + 64) / 2
    q = 16 * 559 * 16 * 64
    assert result.bytes == (3 * q + q) * BF16 + 16 * 16 * 559 * 4  # q, k, v read; out, float32 log-sum-exp written


def test_attention_that_cannot_be_counted_still_moves_its_bytes():
    window = list(FLASH[3])
    window[11] = "128"  # window_size_left: sliding-window attention
    result = count_op(FLASH[0], FLASH[1], FLASH[2], window)
    assert (result.flops, result.why_unknown) == (None, "sliding-window attention")
    assert result.bytes == count_op(*FLASH).bytes
    varlen = [[8944, 16, 64]] * 3 + [[17], [17]] + [[]] * 10  # [tokens, heads, dim] with cumulative lengths
    types = ["c10::BFloat16"] * 3 + ["int", "int"] + FLASH[2][5:]
    result = count_op(FLASH[0], varlen, types, FLASH[3])
    assert result.why_unknown == "variable-length attention: sequence lengths not recorded"


def test_convolution_backward_computes_what_its_mask_asks():
    dims = [[2, 8, 8, 8], [2, 3, 16, 16], [8, 3, 3, 3]] + [[]] * 8
    types = ["float"] * 3 + ["ScalarList"] * 4 + ["Scalar", "ScalarList", "Scalar", "ScalarList"]
    concrete = ["", "", "", "[8]", "[2, 2]", "[1, 1]", "[1, 1]", "False", "[0, 0]", "1"]
    forward = 2 * 2 * 8 * 8 * 3 * 3 * 8 * 3  # 2·N·output positions·kernel·C_out·C_in
    full = count_op("aten::convolution_backward", dims, types, [*concrete, "[True, True, True]"])
    assert full.flops == 2 * forward
    # grad_output [2, 8, 8, 8] read; weight [8, 3, 3, 3] read and input gradient [2, 3, 16, 16] written; input
    # read and weight gradient written; bias gradient [8] written
    assert full.bytes == (1024 + 216 + 1536 + 1536 + 216 + 8) * 4
    weight_only = count_op("aten::convolution_backward", dims, types, [*concrete, "[False, True, False]"])
    assert (weight_only.flops, weight_only.bytes) == (forward, (1024 + 1536 + 216) * 4)


def test_what_is_not_recorded_is_unknown_and_said():
    assert count_op("aten::addmm", None, None) == OpCount(None, None, "no shapes recorded", "matmul")
    assert count_op("aten::frobnicate", [[2]], ["float"]).why_unknown == "unknown op aten::frobnicate"
    # torch.profiler records no string: an einsum's equation is lost
    einsum = count_op("aten::einsum", [[], [[4, 8], [8, 5]], []], ["", "TensorList", ""], ["", "", ""])
    assert einsum == OpCount(None, None, "einsum equation not recorded", "matmul")
    # torch < 2.4 writes [] for every TensorList
    cat = count_op("aten::cat", [[], []], ["TensorList", "Scalar"], None)
    assert cat.why_unknown == "TensorList shapes not recorded"
    # a dtype this table does not know: the FLOPs stand, the bytes do not
    odd = count_op("aten::relu", [[4, 4]], ["c10::Float6_e3m2"], [""])
    assert (odd.flops, odd.bytes, odd.why_unknown) == (16, None, "dtype 'c10::Float6_e3m2' not known")
    # traces without Concrete Inputs (torch < 2.1): a reduction's output shape is unknown, its FLOPs are not
    mean = count_op("aten::mean", [[16], []], ["float", ""], None)
    assert (mean.flops, mean.bytes, mean.why_unknown) == (16, None, "reduction dims not recorded")


@pytest.mark.parametrize(
    ("equation", "shapes", "flops"),
    [
        ("bij,bjk->bik", ((2, 3, 4), (2, 4, 5)), 2 * 2 * 3 * 4 * 5),
        ("ij,jk", ((3, 4), (4, 5)), 2 * 3 * 4 * 5),  # implicit output "ik"
        ("bhqd,bhkd->bhqk", ((2, 4, 8, 16), (2, 4, 9, 16)), 2 * 2 * 4 * 8 * 9 * 16),
        ("i,j->ij", ((3,), (4,)), 2 * 3 * 4),  # an outer product
    ],
)
def test_an_einsum_that_is_a_matmul(equation, shapes, flops):
    assert einsum_matmul(equation, shapes)[0] == flops
    recorded = count_op("aten::einsum", [[], [list(s) for s in shapes], []], ["", "TensorList", ""], [equation, "", ""])
    assert recorded.flops == flops


@pytest.mark.parametrize("equation", ["ii,ij->j", "bij,bjk->bi", "ij,jk,kl->il", "...ij,...jk->...ik", "ij->ji"])
def test_an_einsum_that_is_not_a_matmul(equation):
    with pytest.raises(Exception, match="einsum"):
        einsum_matmul(equation, ((3, 3), (3, 3)))


def test_a_dtype_code_sets_the_written_bytes():
    result = count_op(
        "aten::_to_copy", [[4, 8]] + [[]] * 6, ["c10::BFloat16", "Scalar"] + [""] * 5, ["", "24"] + [""] * 5
    )
    assert result.bytes == 32 * BF16 + 32 * 1  # to float8_e4m3fn (code 24)


NVTX = "aten::addmm, seq = 12, op_id = 5, sizes = [[768], [32, 768], [768, 768]], input_op_ids = [(3,0), (4,0)]"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (NVTX, ("aten::addmm", [[768], [32, 768], [768, 768]])),
        ("aten::mm, seq = 3, sizes = [[16, 8], [8, 4]]", ("aten::mm", [[16, 8], [8, 4]])),  # torch 1.x: no op_id
        ("aten::add, op_id = 7, sizes = [[2, 3], [], []]", ("aten::add", [[2, 3], [], []])),  # no sequence number
        (
            "aten::cat, seq = 4, op_id = 9, sizes = [[2, 3], [4, 3], []], input_op_ids = [(1,0)]",
            ("aten::cat", [[2, 3], [4, 3], []]),
        ),  # a TensorList flattened into one entry per tensor
        ("aten::empty, op_id = 2, sizes = []", ("aten::empty", [])),
        ("aten::addmm, seq = 12, op_id = 5", None),  # emit_nvtx without record_shapes
        ("forward", None),
        ("my range, sizes = oops", None),
    ],
)
def test_shapes_from_nvtx_names(text, expected):
    assert shapes_from_nvtx_name(text) == expected


def test_an_nvtx_op_counts_flops_and_bytes_only_with_an_element_size():
    name, dims = shapes_from_nvtx_name(NVTX)  # type: ignore[misc]
    blind = count_op(name, dims, None)
    assert (blind.flops, blind.bytes, blind.why_unknown) == (2 * 32 * 768 * 768, None, "dtype not recorded")
    assert count_op(name, dims, None, element_bytes=2).bytes == (768 + 32 * 768 + 768 * 768 + 32 * 768) * 2
    foreach = count_op("aten::_foreach_add_", [[4, 4], [4], [4, 4], [4], []], None, element_bytes=4)
    assert foreach.why_unknown == "TensorList inputs are flattened in NVTX sizes"
    conv = count_op("aten::convolution", [[1, 3, 8, 8], [4, 3, 3, 3], [4], [], [], [], [], [], []], None)
    assert conv.why_unknown == "scalar arguments not recorded"  # stride and padding are lost


def test_count_ops_computes_each_distinct_signature_once():
    rows = pd.DataFrame(
        {
            "name": ["aten::addmm", "aten::mm", "aten::addmm", "aten::frobnicate", "aten::mm"] * 20_000,
            "dims": [
                "[[1024], [8944, 1024], [1024, 1024], [], []]",
                "[[32, 768], [768, 768]]",
                "[[1024], [8944, 1024], [1024, 1024], [], []]",
                "[[2]]",
                "not json",
            ]
            * 20_000,
            "types": [
                '["c10::BFloat16", "c10::BFloat16", "c10::BFloat16", "Scalar", "Scalar"]',
                None,
                '["c10::BFloat16", "c10::BFloat16", "c10::BFloat16", "Scalar", "Scalar"]',
                None,
                None,
            ]
            * 20_000,
            "concrete": ['["", "", "", "1", "1"]', None, '["", "", "", "1", "1"]', None, None] * 20_000,
        },
        index=pd.RangeIndex(7, 100_007),
    )
    op_counts._count.cache_clear()
    result = count_ops(rows, element_bytes=2)
    assert op_counts._count.cache_info().misses == 3  # addmm, mm, frobnicate; "not json" never gets that far
    assert list(result.columns) == ["flops", "bytes", "why_unknown", "family"]
    assert result.index.equals(rows.index) and result["flops"].dtype == result["bytes"].dtype == np.float64
    first = result.iloc[:5]
    assert first["flops"].tolist()[:3] == [2.0 * 8944 * 1024 * 1024, 2.0 * 32 * 768 * 768, 2.0 * 8944 * 1024 * 1024]
    assert first["bytes"].iloc[1] == (32 * 768 + 768 * 768 + 32 * 768) * 2  # element_bytes for the untyped mm
    assert math.isnan(first["flops"].iloc[3]) and first["why_unknown"].iloc[3] == "unknown op aten::frobnicate"
    assert first["why_unknown"].iloc[4] == "shapes not understood"
    assert first["why_unknown"].iloc[0] is None and first["family"].tolist() == ["matmul"] * 3 + ["other", "matmul"]


def test_count_ops_on_an_empty_table_and_a_table_without_types():
    empty = count_ops(pd.DataFrame({"name": [], "dims": []}))
    assert len(empty) == 0 and list(empty.columns) == ["flops", "bytes", "why_unknown", "family"]
    untyped = count_ops(pd.DataFrame({"name": ["aten::relu"], "dims": ["[[4, 4]]"]}))
    assert untyped["flops"].tolist() == [16.0] and untyped["why_unknown"].tolist() == ["dtype not recorded"]
    with pytest.raises(UsageError, match="name and dims"):
        count_ops(pd.DataFrame({"name": ["aten::mm"]}))


def test_results_are_cached_per_signature():
    assert count_op(*ADDMM) is count_op(*ADDMM)
    # 1, 1.0 and True are equal keys to a dict: a bool or a float size must not reuse an int's result
    assert count_op("aten::relu", [[True, 4]], ["float"]).why_unknown == "shapes not understood"
    assert count_op("aten::relu", [[1.0, 4]], ["float"]).why_unknown == "shapes not understood"
    assert count_op("aten::relu", [[np.int64(1), 4]], ["float"]).flops == 4


ODD_DIMS = [
    [],
    [[]],
    [[-1, 4], [4, 4]],
    [[2**62, 2**62], [2**62, 2**62]],
    [[10**400]],
    [[1, [2]], [3]],
    [[[[1]]]],
    "[[2, 3]]",
    [None, None],
    [[2, 3]] * 5000,
    [[0, 4], [4, 0], [0], [], []],
    [[3, 4], [5, 6], [7], [], [], [], [], [], [], [], [], [], [], [], [], [], [], [], [], []],
]
ODD_TYPES = [None, ["float"], ["TensorList"] * 2, [3, 4], "float", ["float"] * 20]
ODD_CONCRETE = [None, [""] * 20, ["[", "[[1]]", "nan", "-inf", "1e999", "9" * 5000, "[True, 2.5, x]"] * 3, [1, 2]]


@pytest.mark.parametrize("dims", ODD_DIMS, ids=range(len(ODD_DIMS)))
def test_no_op_raises_on_odd_input(dims):
    """Every op known, fed odd input: an OpCount comes back, and never the formulas' last resort (which
    would mean a formula met input it did not check)."""
    for name in RULES:
        for types in ODD_TYPES:
            for concrete in ODD_CONCRETE:
                result = count_op(name, dims, types, concrete, element_bytes=4)
                assert isinstance(result, OpCount)
                assert not (result.why_unknown or "").startswith("inputs not understood"), (name, dims, types, concrete)


sizes = st.lists(st.integers(min_value=-3, max_value=2**50), max_size=5)
recorded_dims = st.lists(st.one_of(sizes, st.lists(sizes, max_size=3)), max_size=12)
type_names = st.sampled_from(["float", "c10::BFloat16", "long int", "bool", "Scalar", "ScalarList", "TensorList", ""])
texts = st.sampled_from(["", "0", "1", "-1", "2", "True", "False", "0.5", "[1, 1]", "[0]", "[True, False, True]", "6"])


@settings(max_examples=300, deadline=None)
@given(name=st.sampled_from(sorted(RULES)), dims=recorded_dims, data=st.data())
def test_no_op_raises_on_random_input(name, dims, data):
    types = data.draw(st.one_of(st.none(), st.lists(type_names, min_size=len(dims), max_size=len(dims))))
    concrete = data.draw(st.one_of(st.none(), st.lists(texts, min_size=len(dims), max_size=len(dims))))
    result = count_op(name, dims, types, concrete, data.draw(st.sampled_from([None, 2, 4])))
    assert not (result.why_unknown or "").startswith("inputs not understood"), (name, dims, types, concrete)
    for value in (result.flops, result.bytes):
        assert value is None or (math.isfinite(value) and value >= 0)


def test_scalar_arguments_of_another_form_do_not_hide_a_matmul():
    """Concrete Inputs that are not a list of texts read as not recorded: mm needs none and is counted."""
    count = count_op("aten::mm", [[64, 32], [32, 16]], ["float", "float"], "hello")  # type: ignore[arg-type]
    assert count.flops == 2 * 64 * 32 * 16 and count.why_unknown is None
