"""What a collective kernel is, from its name alone.

The names are real: tests/data/kernel_names.csv (each with the public trace it came from), the nsys
exports and torch.profiler traces in ../shared, kernel names quoted in public GitHub text, and names
NCCL's own generators write (src/device/generate.py, src/device/symmetric/generate.py, the 2.18 and 2.7
macros). The expected answers were labelled by hand from NCCL's sources: which kernel each version
launches for which functions decides which fields a name can pin.
"""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from helpers.shared_kernel_names import shared_kernel_names

from tracekit.analysis.hardware import collective_names as module
from tracekit.analysis.hardware.collective_names import (
    DTYPE_BYTES,
    NOT_COLLECTIVE,
    bus_factor,
    collective_kernel,
    collective_kernels,
)

LABELLED = Path(__file__).resolve().parents[2] / "data" / "kernel_names.csv"
ALL_REDUCTIONS = "NCCL launches this kernel for every protocol and reduction of the collective"
ALL_PROTOCOLS = "NCCL launches this kernel for every protocol of the collective"
DEV_REDUCTIONS = (
    "NCCL 2.19+ launches this kernel for every protocol and reduction and every algorithm but TREE of the collective"
)
DEV_PROTOCOLS = "NCCL 2.19+ launches this kernel for every protocol and every algorithm but TREE of the collective"
P2P = "a point-to-point kernel: its protocol is in its arguments"
GENERIC = "ncclDevKernel_Generic: the operation is in the kernel's arguments, not its name"
OTHER = "a collective of another library: the name says no algorithm or protocol"

# (name, where it was found, (operation, reduction, dtype, algorithm, protocol, library, why_unknown))
LABELLED_NAMES = [
    # tests/data/kernel_names.csv (the public traces it names)
    ("ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "csv: TraceLens b200 eager trace",
     ("AllGather", None, None, None, None, "NCCL", DEV_PROTOCOLS)),
    ("ncclDevKernel_Generic(ncclDevKernelArgsStorage<4096ul>)", "csv: TraceLens mi300 resnet",
     (None, None, None, None, None, "NCCL", GENERIC)),
    ("ncclDevKernel_Generic_1(ncclDevKernelArgsStorage<4096ul>)", "csv: TraceLens 256thread perf report (RCCL)",
     (None, None, None, None, None, "RCCL", GENERIC)),
    ("ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<(unsigned long)4096>)", "csv and shared: h100_videogen_2gpu_b",
     ("SendRecv", None, None, None, None, "NCCL", P2P)),
    ("ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)", "csv: HTA nccl_data; shared: "
     "a100_ddp, v100_dlrm", ("AllReduce", None, "float32", "RING", None, "NCCL", ALL_REDUCTIONS)),
    ("ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)", "csv: HTA df_index_resolver",
     ("AllReduce", None, "float32", "RING", None, "NCCL", ALL_REDUCTIONS)),
    ("ncclKernel_Broadcast_RING_LL_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)", "csv: HTA; shared: a100_ddp",
     ("Broadcast", None, None, "RING", None, "NCCL", ALL_PROTOCOLS)),
    ("ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)", "csv: param dlrm; shared: "
     "v100_dlrm", ("SendRecv", None, None, None, None, "NCCL", P2P)),
    ("ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclWorkElem)", "csv: HTA trace_diff",
     ("SendRecv", None, None, None, None, "NCCL", P2P)),
    ("mscclKernel_Sum_float_LL_false(ncclDevComm*, mscclAlgo*, mscclWork*)", "csv: TraceLens perf report",
     (None, "Sum", "float32", None, "LL", "MSCCL", module.MSCCL_WHY)),
    ("void (anonymous namespace)::multimem_all_reduce_kernel<c10::BFloat16, 16>(c10::BFloat16*, unsigned long, "
     "unsigned int**, unsigned long, unsigned long)", "csv: TraceLens b200 eager trace",
     ("AllReduce", None, "bfloat16", None, None, "PyTorch symmetric memory", OTHER)),
    # kernel names quoted in public GitHub text (profiles and notes of vLLM, SGLang, MoE and ROCm work)
    ("ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "text: a vLLM profile note",
     ("AllReduce", None, "bfloat16", None, None, "NCCL", DEV_REDUCTIONS)),
    ("ncclDevKernel_AllReduce_Sum_f32_TREE_LL(ncclDevComm *, unsigned long, ncclWork *)", "text: an nsys how-to",
     ("AllReduce", None, "float32", "TREE", None, "NCCL", DEV_REDUCTIONS)),
    ("ncclDevKernel_ReduceScatter_Sum_f32_RING_LL(ncclDevKernelArgsStorage<(unsigned long)4096>)", "text: an FSDP "
     "profile table", ("ReduceScatter", None, "float32", None, None, "NCCL", DEV_REDUCTIONS)),
    ("ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL", "text: an MoE profile script",
     ("ReduceScatter", None, "bfloat16", None, None, "NCCL", DEV_REDUCTIONS)),
    ("ncclSymDevKernel_AllReduce_RSxLD_AGxST_sum_bf16", "text: a vLLM PyNCCL symmetric-memory table",
     ("AllReduce", "Sum", "bfloat16", "RSxLD_AGxST", None, "NCCL", None)),
    ("ncclAllReduceRingLLKernel_sum_f32(ncclColl)", "text: a torch.autograd profiler summary (NCCL 2.4-2.7)",
     ("AllReduce", None, "float32", "RING", None, "NCCL", ALL_REDUCTIONS)),
    ("ncclDevKernel_Generic_4(ncclDevKernelArgsStorage<4096ul>)", "text: a ROCm hostcall log",
     (None, None, None, None, None, "RCCL", GENERIC)),
    ("void sglang::cross_device_reduce_2stage<__half, 8>(sglang::RankData*)", "text: an SGLang kernel summary",
     ("AllReduce", None, "float16", None, None, "SGLang", OTHER)),
    ("void vllm::cross_device_reduce_1stage<__nv_bfloat16, 8>(vllm::RankData*, vllm::RankSignals)", "text: a vLLM "
     "profile note", ("AllReduce", None, "bfloat16", None, None, "vLLM", OTHER)),
    # the names NCCL's generators write (a kernel each; the traces above have none of these forms)
    ("ncclKernel_AllReduce_NVLS_TREE_LL_Sum_half", "NCCL 2.18 common.h: IMPL_COLL4 per algorithm",
     ("AllReduce", None, "float16", "NVLS_TREE", None, "NCCL", ALL_REDUCTIONS)),
    ("ncclKernel_AllGather_COLLNET_DIRECT_LL_Sum_int8_t", "NCCL 2.18 common.h: IMPL_COLL_C",
     ("AllGather", None, None, "COLLNET_DIRECT", None, "NCCL", ALL_PROTOCOLS)),
    ("ncclBroadcastTreeLLKernel_copy_i8", "NCCL 2.7 common.h: IMPL_COLL_C",
     ("Broadcast", None, None, "TREE", None, "NCCL", ALL_PROTOCOLS)),
    ("ncclDevKernel_Reduce_Sum_u64_RING_LL", "NCCL 2.19+ generate.py: best_kernel",
     ("Reduce", None, "uint64", None, None, "NCCL", DEV_REDUCTIONS)),
    ("ncclDevKernel_AllReduce_Sum_f8e4m3_RING_LL", "NCCL 2.24+ generate.py: FP8 types",
     ("AllReduce", None, "float8_e4m3", None, None, "NCCL", DEV_REDUCTIONS)),
    ("ncclSymkDevKernel_ReduceScatter_LDMC_avg_f8e5m2", "NCCL 2.28+ symmetric/generate.py",
     ("ReduceScatter", "Avg", "float8_e5m2", "LDMC", None, "NCCL", None)),
    ("ncclSymkDevKernel_AllGather_LLMC", "NCCL 2.28+ symmetric/generate.py",
     ("AllGather", None, None, "LLMC", None, "NCCL", None)),
    ("mscclKernel_MinMax_rccl_bfloat16_Simple_true", "RCCL msccl_kernel_impl.h (MSCCL inside RCCL)",
     (None, "MinMax", "bfloat16", None, "SIMPLE", "MSCCL", module.MSCCL_WHY)),
]  # fmt: skip


def fields_of(name: str) -> tuple:
    found = collective_kernel(name)
    return (
        found.operation,
        found.reduction,
        found.dtype,
        found.algorithm,
        found.protocol,
        found.library,
        found.why_unknown,
    )


@pytest.mark.parametrize(("name", "where", "expected"), LABELLED_NAMES, ids=[n[:60] for n, _, _ in LABELLED_NAMES])
def test_hand_labelled_names(name, where, expected):
    assert fields_of(name) == expected, where


def test_a_name_is_read_before_its_parameters():
    """Short (nsys's shortName, torch.profiler's) and demangled names say the same."""
    short = collective_kernel("ncclKernel_AllReduce_RING_LL_Sum_float")
    assert short == collective_kernel("ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)")


def test_not_a_collective():
    for name in (
        "ampere_sgemm_128x64_nn",
        "void at::native::reduce_kernel<512, 1>(at::native::ReduceOp<float>)",
        "triton_red_fused_sum_0",
        "Memcpy HtoD (Pageable -> Device)",
    ):
        assert collective_kernel(name) == NOT_COLLECTIVE
    assert NOT_COLLECTIVE.library == "" and NOT_COLLECTIVE.why_unknown == "not a collective kernel"


def labelled_communication_names() -> list[str]:
    with open(LABELLED, newline="", encoding="utf-8") as handle:
        return sorted({row["name"] for row in csv.DictReader(handle) if row["category"] == "communication"})


def assert_each_said_or_explained(names: list[str]) -> pd.DataFrame:
    """Every name has an operation or says why not, and is a collective of some library."""
    table = collective_kernels(pd.Series(names, dtype=object))
    unexplained = table["operation"].isna() & table["why_unknown"].isna()
    assert not unexplained.any(), [names[i] for i in np.flatnonzero(unexplained)]
    assert (table["library"] != "").all(), [names[i] for i in np.flatnonzero(table["library"] == "")]
    return table


def test_every_communication_name_in_the_labelled_list():
    """The CSV's 11 communication names: 8 with their operation; the 3 without are 2 ncclDevKernel_Generic
    (NCCL's and RCCL's) and an MSCCL interpreter kernel."""
    names = labelled_communication_names()
    table = assert_each_said_or_explained(names)
    assert len(names) == 11
    assert sorted(table["why_unknown"][table["operation"].isna()]) == sorted([GENERIC, GENERIC, module.MSCCL_WHY])


@pytest.mark.shared
def test_every_communication_name_in_the_shared_traces(shared_traces):
    """../shared's 4 distinct communication names (ncclDevKernel_SendRecv of the 2-GPU H100 exports; NCCL
    2.17's AllReduce, Broadcast and SendRecv kernels of the DDP and DLRM traces) all have an operation;
    none of the other kernels is a collective."""
    names = shared_kernel_names()
    communication = sorted(name for name, category in names.items() if category == "communication")
    table = assert_each_said_or_explained(communication)
    assert len(communication) == 4 and table["operation"].notna().all()
    others = pd.Series(sorted(set(names) - set(communication)), dtype=object)
    assert (collective_kernels(others)["library"] == "").all()


def test_bus_factor_by_hand():
    assert bus_factor("AllReduce", 2) == 1.0 and bus_factor("AllReduce", 8) == 1.75  # 2 * 7 / 8
    for operation in ("AllGather", "ReduceScatter", "AllToAll"):
        assert bus_factor(operation, 2) == 0.5 and bus_factor(operation, 8) == 0.875  # 7 / 8
    for operation in ("Broadcast", "Reduce", "SendRecv", "Send", "Recv"):
        assert bus_factor(operation, 2) == 1.0 and bus_factor(operation, 8) == 1.0
    assert bus_factor("AllReduce", 1) == 0.0  # one rank moves nothing
    assert bus_factor("AllReduce", 0) is None and bus_factor("Gather", 8) is None


def test_dtype_bytes_cover_every_normalized_dtype():
    assert {dtype for dtype, _ in module._DTYPES.values()} == set(DTYPE_BYTES)
    assert DTYPE_BYTES["bfloat16"] == DTYPE_BYTES["float16"] == 2 and DTYPE_BYTES["float8_e4m3"] == 1
    for dtype, size in DTYPE_BYTES.items():  # the width the name says: float32 4, uint64 8, int8 1
        bits = int("".join(filter(str.isdigit, dtype.split("_")[0])))
        assert size == bits // 8, dtype


def test_a_column_per_row_read_once_per_distinct_name(monkeypatch):
    names = [LABELLED_NAMES[4][0], "ampere_sgemm_128x64_nn", LABELLED_NAMES[0][0]]
    rows = pd.Series(np.array(names, dtype=object)[np.arange(30_000) % 3], index=np.arange(30_000) * 2)
    read: list[str] = []
    original = module._from_name.__wrapped__

    def counting(name: str):
        read.append(name)
        return original(name)

    monkeypatch.setattr(module, "_from_name", counting)
    for series in (rows, rows.astype("category")):
        read.clear()
        table = collective_kernels(series)
        assert sorted(read) == sorted(names)
        assert list(table.columns) == [
            "operation",
            "reduction",
            "dtype",
            "algorithm",
            "protocol",
            "library",
            "why_unknown",
        ]
        assert table.index.equals(series.index)
        assert all(isinstance(table[column].dtype, pd.CategoricalDtype) for column in table.columns)
        assert table["operation"].iloc[:3].tolist() == ["AllReduce", np.nan, "AllGather"]
        assert table["library"].iloc[:3].tolist() == ["NCCL", "", "NCCL"]


def test_missing_names_and_an_empty_column():
    table = collective_kernels(pd.Series([None, LABELLED_NAMES[3][0]], dtype=object))
    assert table["why_unknown"].tolist() == ["no name", P2P]
    assert table["operation"].tolist() == [np.nan, "SendRecv"]
    empty = collective_kernels(pd.Series([], dtype=object))
    assert empty.empty and list(empty.columns) == module.COLUMNS
