"""What a collective (communication) kernel is, from its name alone: the operation, the element type and,
where the name pins them, the reduction, algorithm and protocol.

A collective's bandwidth needs its operation (NCCL's bus-bandwidth factor, ``bus_factor``) and the bytes
it moved; the name is all a trace always has. NCCL writes its kernels' names from a fixed vocabulary,
but a name is the *kernel* NCCL launched, and NCCL launches one kernel for many functions (read in NCCL's
``src/device/generate.py``, ``src/enqueue.cc`` and ``common.h`` of each version):

- NCCL 2.8-2.18, ``ncclKernel_<coll>_<ALGO>_LL_Sum_<C type>``: one kernel per collective, algorithm and
  element type; the LL and Sum in it are the kernel's specialization, and NCCL launches the same kernel
  for LL128 and SIMPLE and for every reduction. Broadcast, AllGather and SendRecv move bytes: their
  ``Sum_int8_t`` (and SendRecv's ``RING_SIMPLE``) are placeholders.
- NCCL 2.19+, ``ncclDevKernel_<coll>[_Sum_<ty>]_<ALGO>_LL``: every function of a collective and type
  runs the ``RING_LL`` kernel, except AllReduce's TREE, which has its own; signed integers run the
  unsigned kernel (the element size is the same). ``ncclDevKernel_SendRecv`` serves every point-to-point
  operation (send, receive, all-to-all); ``ncclDevKernel_Generic`` any function (RCCL launches
  ``ncclDevKernel_Generic_<unroll>`` for everything).
- NCCL 2.4-2.7, ``nccl<Coll><Algo>LLKernel_<op>_<ty>`` (``ncclAllReduceRingLLKernel_sum_f32``): as 2.8.
- NCCL 2.27+ symmetric kernels, ``ncclSym[k]DevKernel_<coll>_<algorithm>[_<sum|avg>_<ty>]``: one kernel
  per reduction and type; their algorithms are their own (``RSxLD_AGxST``: reduce-scatter by loads,
  all-gather by stores; ``MC``: multimem, NVLink SHARP), kept as written; they have no NCCL protocol.
- MSCCL, ``mscclKernel_<redop>_<type>_<LL|LL128|Simple>[_<fullOps>]``: an interpreter of the loaded
  algorithm's program, so the name says the reduction, type and protocol but not the collective.
- Other libraries' all-reduce kernels (PyTorch's symmetric memory, vLLM's and SGLang's custom
  all-reduce): the operation from the name, the element type from the first template argument.

So a field is None when the name does not pin it, and ``why_unknown`` says what the name leaves out
(None when every field that applies to the operation is known: a Broadcast has no reduction, and its
element type is NCCL's bytes). One launch may carry the work of several grouped collectives: the name
is its first. RCCL keeps NCCL's names; ``library`` says RCCL where the name shows it (``rccl_`` and
``hip_`` types, Generic's unroll suffix), MSCCL for MSCCL's, "" for a kernel that is no collective.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, fields

import numpy as np
import pandas as pd

from tracekit.model.kernel_names import distinct_names, split_name

__all__ = ["DTYPE_BYTES", "POINT_TO_POINT", "CollectiveKernel", "bus_factor", "collective_kernel", "collective_kernels"]


@dataclass(frozen=True)
class CollectiveKernel:
    """What a kernel's name says of the collective it ran (None: the name does not say; see the module)."""

    operation: str | None  # NCCL's spelling: AllReduce, AllGather, ReduceScatter, Broadcast, Reduce, SendRecv ...
    reduction: str | None  # Sum, Prod, Min, Max, MinMax (either), Avg, PreMulSum, SumPostDiv
    dtype: str | None  # a key of DTYPE_BYTES
    algorithm: str | None  # RING, TREE, COLLNET(_DIRECT, _CHAIN), NVLS(_TREE), PAT; a symmetric kernel's own
    protocol: str | None  # LL, LL128, SIMPLE
    library: str  # NCCL, RCCL, MSCCL, another library's name, or "" (not a collective)
    why_unknown: str | None  # what the name does not say, or None


# Bytes per element of each normalized element type.
# fmt: off
DTYPE_BYTES: dict[str, int] = {
    "int8": 1, "uint8": 1, "int32": 4, "uint32": 4, "int64": 8, "uint64": 8,
    "float16": 2, "bfloat16": 2, "float32": 4, "float64": 8, "float8_e4m3": 1, "float8_e5m2": 1,
}
# fmt: on
# Each spelling a name uses -> (normalized dtype, whether only RCCL spells it so). NCCL's C types and
# short forms, RCCL's types, and the C++ types other libraries' template arguments name.
_DTYPES: dict[str, tuple[str, bool]] = {
    **{s: ("int8", False) for s in ("int8_t", "i8", "signed char")},
    **{s: ("uint8", False) for s in ("uint8_t", "u8", "unsigned char")},
    **{s: ("int32", False) for s in ("int32_t", "i32", "int")},
    **{s: ("uint32", False) for s in ("uint32_t", "u32", "unsigned int")},
    **{s: ("int64", False) for s in ("int64_t", "i64")},
    **{s: ("uint64", False) for s in ("uint64_t", "u64")},
    **{s: ("float16", False) for s in ("half", "f16", "__half", "c10::Half")},
    **{s: ("float32", False) for s in ("float", "f32")},
    **{s: ("float64", False) for s in ("double", "f64")},
    **{s: ("bfloat16", False) for s in ("__nv_bfloat16", "bf16", "b16", "c10::BFloat16")},
    **{s: ("float8_e4m3", False) for s in ("__nv_fp8_e4m3", "f8e4m3", "c10::Float8_e4m3fn")},
    **{s: ("float8_e5m2", False) for s in ("__nv_fp8_e5m2", "f8e5m2", "c10::Float8_e5m2")},
    **{s: ("bfloat16", True) for s in ("rccl_bfloat16", "hip_bfloat16", "__hip_bfloat16")},
    "rccl_float8": ("float8_e4m3", True),
    "rccl_bfloat8": ("float8_e5m2", True),
}
REDUCING = frozenset({"AllReduce", "Reduce", "ReduceScatter"})
POINT_TO_POINT = frozenset({"SendRecv", "Send", "Recv"})
_COLLECTIVES = "AllReduce|AllGatherV|AllGather|ReduceScatter|Broadcast|Reduce|SendRecv|AllToAllPivot|AllToAll"
_ALGORITHMS = "COLLNET_DIRECT|COLLNET_CHAIN|COLLNET|NVLS_TREE|NVLS|TREE|RING|PAT"

NOT_COLLECTIVE = CollectiveKernel(None, None, None, None, None, "", "not a collective kernel")
NO_NAME = CollectiveKernel(None, None, None, None, None, "", "no name")
GENERIC = "ncclDevKernel_Generic: the operation is in the kernel's arguments, not its name"
LAUNCHED_FOR_ALL = "NCCL launches this kernel for every protocol{} of the collective"
DEV_LAUNCHED_FOR_ALL = (
    "NCCL 2.19+ launches this kernel for every protocol{} and every algorithm but TREE of the collective"
)
POINT_TO_POINT_WHY = "a point-to-point kernel: its protocol is in its arguments"
MSCCL_WHY = "MSCCL: the collective is the loaded algorithm's program, not the kernel's name"
NCCL_OTHER = "an NCCL kernel name of no form known here"
OTHER_WHY = "a collective of another library: the name says no algorithm or protocol"

_DEV = re.compile(
    rf"ncclDevKernel_(?P<coll>{_COLLECTIVES})(?:_(?P<redop>[A-Za-z]+)_(?P<ty>[a-z0-9]+))?"
    rf"(?:_(?P<algo>{_ALGORITHMS})_(?P<proto>LL128|LL|SIMPLE))?"
)
_KERNEL = re.compile(
    rf"ncclKernel_(?P<coll>{_COLLECTIVES})_(?P<algo>{_ALGORITHMS})_(?P<proto>LL128|LL|SIMPLE)"
    r"_(?P<redop>[A-Za-z]+)_(?P<ty>\w+)"
)
_LEGACY = re.compile(
    r"nccl(?P<coll>AllReduce|AllGather|ReduceScatter|Broadcast|Reduce|SendRecv)(?P<algo>Tree|Ring|CollNet)?"
    r"(?:LL128|LL)?Kernel_(?P<redop>sum|prod|min|max|copy)_(?P<ty>\w+)"
)
_SYMMETRIC = re.compile(r"ncclSymk?DevKernel_(?P<coll>AllReduce|AllGather|ReduceScatter)_(?P<rest>\w+)")
_MSCCL = re.compile(r"mscclKernel_(?P<redop>[A-Za-z]+)_(?P<ty>\w+?)_(?P<proto>LL128|LL|Simple)(?:_(?:true|false))?")
# Other libraries' collectives, by what the (scoped) base name says; the scope names the library.
_OTHER_OPERATIONS = [
    ("AllReduce", re.compile(r"all_?reduce|cross_device_reduce", re.IGNORECASE)),
    ("AllGather", re.compile(r"all_?gather", re.IGNORECASE)),
    ("ReduceScatter", re.compile(r"reduce_?scatter", re.IGNORECASE)),
    ("AllToAll", re.compile(r"all_?to_?all", re.IGNORECASE)),
]
_OTHER_LIBRARIES = [
    ("vLLM", re.compile(r"^vllm::")),
    ("SGLang", re.compile(r"^sglang::")),
    ("FlashInfer", re.compile(r"^flashinfer::")),
    ("AITER", re.compile(r"^aiter::")),
    ("PyTorch symmetric memory", re.compile(r"^(?:c10d::|\(anonymous namespace\)::multimem_)")),
]


def collective_kernel(name: str) -> CollectiveKernel:
    """What ``name`` (demangled or short; its parameter list is ignored) says of its collective."""
    return _from_name(name)


@functools.lru_cache(maxsize=1 << 16)
def _from_name(name: str) -> CollectiveKernel:
    text = name.split("(", 1)[0].strip().removeprefix("void ").strip()
    for family in (_nccl_dev, _nccl_kernel, _nccl_legacy, _nccl_symmetric, _msccl):
        found = family(text)
        if found is not None:
            return found
    return _other(name)


def _dtype(spelling: str | None) -> tuple[str | None, bool]:
    """(normalized dtype or None, whether the spelling is RCCL's)."""
    return _DTYPES.get(spelling or "", (None, False))


def _nccl_dev(text: str) -> CollectiveKernel | None:
    if text == "ncclDevKernel_Generic" or re.fullmatch(r"ncclDevKernel_Generic_\d+", text):
        return CollectiveKernel(None, None, None, None, None, "NCCL" if text.endswith("Generic") else "RCCL", GENERIC)
    match = _DEV.fullmatch(text)
    if match is None:
        return None
    operation = match["coll"]
    if operation in POINT_TO_POINT:
        return CollectiveKernel(operation, None, None, None, None, "NCCL", POINT_TO_POINT_WHY)
    dtype, rccl = _dtype(match["ty"]) if operation in REDUCING else (None, False)
    algorithm = "TREE" if match["algo"] == "TREE" else None
    why = DEV_LAUNCHED_FOR_ALL.format(" and reduction" if operation in REDUCING else "")
    return CollectiveKernel(operation, None, dtype, algorithm, None, "RCCL" if rccl else "NCCL", why)


def _nccl_kernel(text: str) -> CollectiveKernel | None:
    match = _KERNEL.fullmatch(text)
    if match is None:
        return None
    return _launched_for_all(match["coll"], match["algo"], match["ty"])


def _nccl_legacy(text: str) -> CollectiveKernel | None:
    match = _LEGACY.fullmatch(text)
    if match is None:
        return None
    algorithm = {"Tree": "TREE", "Ring": "RING", "CollNet": "COLLNET"}.get(match["algo"] or "")
    return _launched_for_all(match["coll"], algorithm, match["ty"])


def _launched_for_all(operation: str, algorithm: str | None, spelling: str) -> CollectiveKernel:
    """NCCL 2.4-2.18: a kernel per collective, algorithm and type, launched for every reduction and
    protocol; byte-moving collectives' types and point-to-point's algorithm are placeholders."""
    dtype, rccl = _dtype(spelling)
    library = "RCCL" if rccl else "NCCL"
    if operation in POINT_TO_POINT:
        return CollectiveKernel(operation, None, None, None, None, library, POINT_TO_POINT_WHY)
    dtype = dtype if operation in REDUCING else None
    why = LAUNCHED_FOR_ALL.format(" and reduction" if operation in REDUCING else "")
    return CollectiveKernel(operation, None, dtype, algorithm, None, library, why)


def _nccl_symmetric(text: str) -> CollectiveKernel | None:
    match = _SYMMETRIC.fullmatch(text)
    if match is None:
        return None
    operation, parts = match["coll"], match["rest"].split("_")
    reduction = dtype = None
    if len(parts) > 2 and parts[-2] in ("sum", "avg") and parts[-1] in _DTYPES:
        reduction, dtype, parts = parts[-2].capitalize(), _dtype(parts[-1])[0], parts[:-2]
    why = "a symmetric kernel name without its reduction and type" if operation in REDUCING and dtype is None else None
    return CollectiveKernel(operation, reduction, dtype, "_".join(parts), None, "NCCL", why)


def _msccl(text: str) -> CollectiveKernel | None:
    match = _MSCCL.fullmatch(text)
    if match is None:
        return None
    dtype, _ = _dtype(match["ty"])
    return CollectiveKernel(None, match["redop"], dtype, None, match["proto"].upper(), "MSCCL", MSCCL_WHY)


def _other(name: str) -> CollectiveKernel:
    base, arguments = split_name(name)
    lowered = base.lower()
    if any(marker in lowered for marker in ("nccl", "rccl", "msccl")):
        library = "RCCL" if "rccl" in lowered else "MSCCL" if "msccl" in lowered else "NCCL"
        return CollectiveKernel(None, None, None, None, None, library, NCCL_OTHER)
    operation = next((operation for operation, pattern in _OTHER_OPERATIONS if pattern.search(base)), None)
    if operation is None:
        return NOT_COLLECTIVE
    library = next((library for library, pattern in _OTHER_LIBRARIES if pattern.search(base)), "other")
    dtype = _dtype(arguments[0])[0] if arguments else None
    return CollectiveKernel(operation, None, dtype, None, None, library, OTHER_WHY)


COLUMNS = [field.name for field in fields(CollectiveKernel)]


def collective_kernels(names: pd.Series) -> pd.DataFrame:
    """Per row of ``names``: the CollectiveKernel fields as columns (categoricals), aligned with its index.

    Each distinct name is read once (a categorical's categories, else the factorized values) and rows
    are filled by position, so a million kernels cost what their few hundred names cost. Missing names
    are "no name"."""
    codes, uniques = distinct_names(names)
    answers = [_from_name(str(name)) for name in uniques] + [NO_NAME]
    rows = np.where(codes < 0, len(answers) - 1, codes)
    columns = {}
    for column in COLUMNS:
        per_answer = pd.Categorical([getattr(found, column) for found in answers])
        columns[column] = pd.Categorical.from_codes(per_answer.codes[rows], categories=per_answer.categories)
    return pd.DataFrame(columns, index=names.index)


# NCCL's bus-bandwidth factor per operation, of the rank count n (nccl-tests' PERFORMANCE.md): the share
# of the data each rank's busiest link carries, so bus bandwidth = algorithm bandwidth x factor.
_ALL_TO_ALL_SHARE = ("AllGather", "AllGatherV", "ReduceScatter", "AllToAll", "AllToAllPivot")
_ONCE = ("Broadcast", "Reduce", "SendRecv", "Send", "Recv")


def bus_factor(operation: str, ranks: int) -> float | None:
    """NCCL's bus-bandwidth factor for ``operation`` over ``ranks`` ranks: AllReduce 2(n-1)/n; AllGather,
    ReduceScatter, AllToAll (n-1)/n; Broadcast, Reduce and point-to-point 1. None for an unknown operation
    or fewer than one rank."""
    if ranks < 1:
        return None
    if operation == "AllReduce":
        return 2 * (ranks - 1) / ranks
    if operation in _ALL_TO_ALL_SHARE:
        return (ranks - 1) / ranks
    return 1.0 if operation in _ONCE else None
