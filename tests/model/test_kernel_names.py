"""Kernels' short names (``--name short``): the base name as nsys shows it, but never one row for two
kernels, CUTLASS configurations above all, that nsys's shortName folds into "Kernel" or "Kernel2"."""

from __future__ import annotations

import csv
import re
from functools import cache
from pathlib import Path

import pytest
from helpers.kineto_builder import KinetoBuilder
from helpers.nsys_builder import ExportBuilder
from helpers.paths import SHARED

import tracekit
from tracekit.model.kernel_names import GENERIC_BASES, short_name, split_name
from tracekit.sources import open_trace

LABELLED = Path(__file__).resolve().parents[1] / "data" / "kernel_names.csv"
# two bmm kernels of one model that nsys's shortName both calls "Kernel2"
BMM_TN = "void cutlass::Kernel2<cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_32x32_128x2_tn_align8>(T1::Params)"
BMM_NN = "void cutlass::Kernel2<cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_16x16_64x1_nn_align8>(T1::Params)"
SGEMM = "cutlass_80_simt_sgemm_128x32_8x5_nn_align1"


def cutlass3(tile: int, spaced: bool = False) -> str:
    """A CUTLASS 3 GEMM as nsys demangles it (torch's demangler closes templates with "> >")."""
    close = "> >" if spaced else ">>"
    shape = f"cute::tuple<cute::C<{tile}>, cute::C<128>, cute::C<64>{close[:-1]}"
    return (
        "void cutlass::device_kernel<cutlass::gemm::kernel::GemmUniversal<cute::tuple<int, int, int, int>, "
        "cutlass::gemm::collective::CollectiveMma<cutlass::gemm::MainloopSm90TmaGmmaWarpSpecialized<4, "
        f"cute::tuple<cute::C<1>, cute::C<1>, cute::C<1>{close[:-1]}, cutlass::gemm::KernelTmaWarpSpecialized>, "
        f"{shape}, cutlass::bfloat16_t>, void{close}(T1::Params)"
    )


@pytest.mark.parametrize(
    "name, short",
    [
        (BMM_TN, "Kernel2<cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_32x32_128x2_tn_align8>"),
        (f"void cutlass::Kernel<{SGEMM}>({SGEMM}::Params)", f"Kernel<{SGEMM}>"),
        (f"void cutlass::Kernel2<{SGEMM}>(T1::Params)", f"Kernel2<{SGEMM}>"),  # another entry point: apart
        ("ampere_sgemm_128x64_tn", "ampere_sgemm_128x64_tn"),  # cuBLAS: its own name
        (
            "void gemv2T_kernel_val<int, int, float, float, float, float, 128, 16, 4, 4, false, false, "
            "cublasGemvParamsEx<int, cublasGemvTensorStridedBatched<float const>, float>, float>(float)",
            "gemv2T_kernel_val",
        ),  # an instantiation of one template: its data types and sizes stay out
        (
            "void flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128, 64, 64, 4, false, false, cutlass::bfloat16_t>, "
            "true, false>(Flash_fwd_params)",
            "flash_fwd_kernel",
        ),
        (
            "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, "
            "at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3>)",
            "vectorized_elementwise_kernel<CUDAFunctor_add>",
        ),
        (
            "void at::native::vectorized_elementwise_kernel<4, at::native::BinaryFunctor<float, float, float, "
            "at::native::binary_internal::MulFunctor<float> >, at::detail::Array<char*, 3> >(int, T2, T3)",
            "vectorized_elementwise_kernel<MulFunctor>",
        ),  # through the binary-op adaptor
        # a lambda: its function, as nsys and torch.profiler demangle it
        (
            "void at::native::unrolled_elementwise_kernel<at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)"
            "::{lambda()#2}::operator()() const::{lambda()#7}::operator()() const::{lambda(float)#1}, "
            "at::detail::Array<char*, 2> >(int, T1, T2)",
            "unrolled_elementwise_kernel<direct_copy_kernel_cuda>",
        ),
        (
            "void at::native::unrolled_elementwise_kernel<at::native::direct_copy_kernel_cuda(at::TensorIteratorBase &)"
            "::[lambda() (instance 3)]::operator ()() const::[lambda() (instance 7)]::operator ()() const::"
            "[lambda(float) (instance 1)], at::detail::Array<char *, 2>>(int, T1, T2)",
            "unrolled_elementwise_kernel<direct_copy_kernel_cuda>",
        ),
        (
            "void at::native::elementwise_kernel<128, 4, at::native::gpu_kernel_impl_nocast<at::native::"
            "(anonymous namespace)::CompareEqFunctor<long> >(at::TensorIteratorBase&, at::native::(anonymous "
            "namespace)::CompareEqFunctor<long> const&)::{lambda(int)#1}>(int, T3)",
            "elementwise_kernel<CompareEqFunctor>",
        ),
        (
            "void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous namespace)::"
            "TensorListMetadata<2>, at::native::(anonymous namespace)::UnaryOpFunctor<float, 2, 1, 1>, "
            "at::native::Sqrt<float> >(T1, T2, T3)",
            "multi_tensor_apply_kernel<UnaryOpFunctor>",
        ),
        (
            "void (anonymous namespace)::elementwise_kernel_with_index<int, at::native::arange_cuda_out(at::Tensor const&,"
            " c10::Scalar const&, c10::Scalar const&, c10::Scalar const&, at::Tensor&)::{lambda()#1}::operator()() "
            "const::{lambda()#4}::operator()() const::{lambda(long)#1}>(int, long, T2)",
            "elementwise_kernel_with_index<arange_cuda_out>",
        ),  # a data type first: the work is the next one
        ("[CUDA memcpy HtoD]", "[CUDA memcpy HtoD]"),  # nsys's labels of copies: not C++ names
    ],
)
def test_short_names(name, short):
    assert short_name(name) == short


def test_cutlass_configurations_stay_apart():
    assert short_name(BMM_TN) != short_name(BMM_NN)
    assert short_name(cutlass3(128)) != short_name(cutlass3(256))  # tile shapes differ: two kernels
    assert re.fullmatch(r"device_kernel<GemmUniversal#[0-9a-f]{6}>", short_name(cutlass3(128)))
    assert short_name(cutlass3(128)) == short_name(cutlass3(128, spaced=True))  # one kernel, two demanglers


@pytest.mark.parametrize("source", ["nsys", "kineto"])
def test_two_cutlass_bmm_kernels_are_two_rows(tmp_path, source):
    """nsys's shortName says "Kernel2" for both; torch.profiler traces have no short name of their own."""
    if source == "nsys":
        b = ExportBuilder("2026.2")
        b.kernel(0, 100, BMM_TN, short="Kernel2", launch_at=-10)
        b.kernel(200, 230, BMM_NN, short="Kernel2", launch_at=190)
        path = b.write(tmp_path / "bmm.sqlite")
    else:
        k = KinetoBuilder()
        k.launch("cudaLaunchKernel", 0, 5, 1).kernel(BMM_TN, 10, 100, 1)
        k.launch("cudaLaunchKernel", 200, 5, 2).kernel(BMM_NN, 210, 30, 2)
        path = k.write(tmp_path / "bmm.json")
    scale = 1 if source == "nsys" else 1_000  # torch.profiler's times are microseconds
    table = tracekit.kernels(path, name="short")["kernels"]
    assert dict(zip(table["Name"], table["Total Time (ns)"])) == {
        short_name(BMM_TN): 100 * scale,
        short_name(BMM_NN): 30 * scale,
    }


@cache
def real_kernel_names() -> frozenset[str]:
    """Every distinct kernel name of every export and torch.profiler trace in ../shared, and every name of
    tests/data/kernel_names.csv (real names from public traces)."""
    with LABELLED.open(newline="") as handle:
        names = {row["name"] for row in csv.DictReader(handle)}
    traces = sorted((SHARED / "traces").glob("*.sqlite")) + sorted((SHARED / "kineto").glob("*.json.gz"))
    traces += sorted((SHARED / "kineto" / "v100_dlrm_8ranks").glob("rank0.pt.trace.json"))
    for path in traces:
        ops = open_trace(path).columns("gpu_ops", ["kind", "name"])
        names |= set(ops.loc[(ops["kind"] == "kernel").to_numpy(), "name"].astype(str))
    return frozenset(names)


def configuration(name: str) -> str:
    """A CUTLASS entry point's template arguments, spelled alike by every demangler: its configuration."""
    spelled = re.sub(r"\s+", "", re.sub(r"\(anonymous namespace\)::|<unnamed>::", "", name))
    return ",".join(split_name(spelled)[1])


def test_no_short_name_folds_two_kernels_of_the_real_traces():
    if not SHARED.is_dir():
        pytest.skip(f"{SHARED} is absent")
    names = real_kernel_names()
    groups: dict[str, set[str]] = {}
    for name in names:
        groups.setdefault(short_name(name), set()).add(name)
    cutlass = 0
    for short, members in groups.items():
        bases = {split_name(name)[0].rsplit("::", 1)[-1] for name in members}
        assert len(bases) == 1, (short, bases)  # one template's instantiations, never two templates
        (base,) = bases
        if base in ("Kernel", "Kernel2", "device_kernel"):  # CUTLASS: the configuration is the kernel
            cutlass += len(members)
            assert len({configuration(name) for name in members}) == 1, (short, members)
        # short and readable: the base name, or the base with one identifier (and a digest) in brackets
        work = re.fullmatch(rf"{re.escape(base)}(?:<([A-Za-z_]\w*)(?:#[0-9a-f]{{6}})?>)?", short)
        assert work is not None and (work.group(1) is None or base in GENERIC_BASES), short
        assert work.group(1) is None or len(work.group(1)) <= 90, short
    assert cutlass >= 90  # the CUTLASS GEMMs, convolutions and reductions of the real traces
    # base names alone (nsys's shortName) give 870 rows for these 1,558 names: the short names keep 200 more apart
    assert len(groups) > len({split_name(name)[0].rsplit("::", 1)[-1] for name in names}) + 150


def test_a_work_argument_whose_name_cannot_be_read_is_told_apart_by_its_digest():
    first, second = (f"void at::native::elementwise_kernel<128, 4, (odd {n})::x>(int)" for n in (1, 2))
    assert re.fullmatch(r"elementwise_kernel<#[0-9a-f]{6}>", short_name(first))
    assert short_name(first) != short_name(second)
