"""The GPU peaks table: devices as real traces and drivers name them find their GPU (and only theirs), the
figures are the datasheets' (sparse Tensor Core figures halved), a user's file corrects or adds GPUs, a bad
file is one line, and the whole table holds together."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
import pytest
from helpers.paths import ROOT, SHARED

from tracekit.analysis.hardware.gpu_peaks import (
    EQUIVALENT_UNIT,
    PRECISIONS,
    UNITS,
    builtin_peaks,
    load_peaks_file,
    match_gpu,
)
from tracekit.errors import InputNotFoundError, PeaksFileError
from tracekit.sources import open_trace

T = 1e12
GIB = 2**30

# Every real file in ../shared with device descriptions, and the GPU each of its devices is. None: the file
# records no device (torch 1.8 traces, the nsys 2026.2 exports, TraceLens's H100 trace).
REAL = {
    "traces/a100_small_lm_trainstep_nsys2026.3.sqlite": "A100 SXM4 40GB",
    "traces/a100_video_sr_cudnn_conv_nsys2024.2.sqlite": "A100 SXM4 40GB",
    "traces/cuda_matmul_nsys2022.4.sqlite": "TITAN RTX",
    "traces/h100_videogen_2gpu_a_nsys2026.2.sqlite": None,
    "traces/h100_videogen_2gpu_b_nsys2026.2.sqlite": None,
    "traces/tiny_cuda_nsys2026.1.sqlite": "RTX 3080",
    "kineto/a100_alexnet_cuda_sync.json.gz": "A100 SXM4 40GB",  # "NVIDIA A100-PG509-200"
    "kineto/a100_ddp_rank0of2_nccl.json.gz": "A100 SXM4 40GB",
    "kineto/gp100_steps_gpu_user_annotation.json.gz": "Quadro GP100",
    "kineto/h100_qwen0.5b_inference.json.gz": None,
    "kineto/mi250_rocm6.2_toy.json.gz": "MI250 GCD",  # "AMD Radeon Graphics", 104 CUs, 64 GiB, 9.0
    "kineto/v100_resnet50_torch1.8.pt.trace.json.gz": None,
    "kineto/v100_resnet_torch2.3_ns_precision.pt.trace.json.gz": "V100 SXM2",
    **{f"kineto/v100_dlrm_8ranks/rank{rank}.pt.trace.json": "V100 SXM2" for rank in range(8)},
}


def real_files() -> list[str]:
    if not SHARED.is_dir():
        return []
    found = [*(SHARED / "traces").glob("*.sqlite"), *(SHARED / "kineto").rglob("*.json*")]
    return sorted(str(path.relative_to(SHARED)) for path in found)


@pytest.mark.shared
@pytest.mark.skipif(not SHARED.is_dir(), reason=f"real data not available: {SHARED} is absent")
@pytest.mark.parametrize("name", real_files())
def test_every_real_device_matches_its_gpu(name):
    assert name in REAL, f"{name}: a new real file; add the GPU its devices are to REAL"
    gpus = open_trace(SHARED / name).meta.gpus
    if REAL[name] is None:
        assert gpus.empty
        return
    assert not gpus.empty
    for gpu in gpus.to_dict(orient="records"):
        found = match_gpu(gpu["name"], gpu["sm_count"], gpu["memory_bytes"], gpu["compute_capability"])
        assert found is not None and found.key == REAL[name], (gpu["name"], found)


# Device names as drivers, nsys and torch write them, with the properties such devices record.
NAMED = [
    ("NVIDIA H100 80GB HBM3", 132, 85_520_809_984, "9.0", "H100 SXM"),
    ("NVIDIA H100 PCIe", 114, 85_520_809_984, "9.0", "H100 PCIe"),
    ("NVIDIA H100 NVL", 132, 100_485_038_080, "9.0", "H100 NVL"),
    ("NVIDIA H100", 132, 85_520_809_984, "9.0", "H100 SXM"),  # a generic name: told apart by the SM count
    ("NVIDIA H100", 114, 85_520_809_984, "9.0", "H100 PCIe"),
    ("NVIDIA H200", 132, 150_754_820_096, "9.0", "H200 SXM"),
    ("NVIDIA H200 NVL", None, 150_754_820_096, "9.0", "H200 NVL"),
    ("NVIDIA B200", 148, 191_537_135_616, "10.0", "B200"),
    ("NVIDIA GB200", None, None, None, "GB200"),
    ("NVIDIA A100-SXM4-40GB", 108, 42_297_786_368, "8.0", "A100 SXM4 40GB"),
    ("NVIDIA A100-PG509-200", 108, 42_297_524_224, "8.0", "A100 SXM4 40GB"),
    ("NVIDIA A100-SXM4-80GB", 108, 85_198_045_184, "8.0", "A100 SXM4 80GB"),
    ("NVIDIA PG509-210", 108, 85_198_045_184, "8.0", "A100 SXM4 80GB"),
    ("NVIDIA A100-PCIE-40GB", 108, 42_505_273_344, "8.0", "A100 PCIe 40GB"),
    ("NVIDIA A100 80GB PCIe", 108, 85_198_045_184, "8.0", "A100 PCIe 80GB"),
    ("Tesla V100-SXM2-16GB", 80, 16_945_512_448, "7.0", "V100 SXM2"),
    ("Tesla V100-SXM2-32GB", 80, 34_079_899_648, "7.0", "V100 SXM2"),
    ("Tesla V100-PCIE-32GB", 80, 34_089_730_048, "7.0", "V100 PCIe"),
    ("Tesla T4", 40, 15_843_721_216, "7.5", "T4"),
    ("NVIDIA A10", 72, 23_836_098_560, "8.6", "A10"),
    ("NVIDIA A40", 84, 47_842_000_896, "8.6", "A40"),
    ("NVIDIA L4", 58, 23_580_639_232, "8.9", "L4"),
    ("NVIDIA L40S", 142, 47_697_362_944, "8.9", "L40S"),
    ("NVIDIA GeForce RTX 3080", 68, 10_736_893_952, "8.6", "RTX 3080"),
    ("NVIDIA GeForce RTX 3090", 82, 25_447_170_048, "8.6", "RTX 3090"),
    ("NVIDIA GeForce RTX 4090", 128, 25_393_692_672, "8.9", "RTX 4090"),
    ("NVIDIA GeForce RTX 5090", 170, 33_668_005_888, "12.0", "RTX 5090"),
    ("NVIDIA TITAN RTX", 72, 25_396_838_400, "7.5", "TITAN RTX"),
    ("TITAN RTX", 72, 25_396_838_400, "7.5", "TITAN RTX"),  # older drivers leave "NVIDIA " out
    ("Quadro GP100", 56, 17_069_309_952, "6.0", "Quadro GP100"),
    ("AMD Instinct MI300X", 304, 205_822_885_888, "9.4", "MI300X"),
    ("AMD Instinct MI325X", 304, 274_877_906_944, "9.4", "MI325X"),
    ("AMD Instinct MI250X", 110, 68_702_699_520, "9.0", "MI250X GCD"),
    ("AMD Instinct MI250X / MI250", 104, 68_702_699_520, "9.0", "MI250 GCD"),  # libdrm's name for both
    ("AMD Instinct MI250X / MI250", 110, 68_702_699_520, "9.0", "MI250X GCD"),
    ("AMD Radeon Graphics", 104, 68_702_699_520, "9.0", "MI250 GCD"),  # older ROCm: only all three tell
    ("AMD Radeon Graphics", 304, 205_822_885_888, "9.4", "MI300X"),
    ("  nvidia  h100 80gb HBM3 ", 132, None, None, "H100 SXM"),  # case and spaces vary
]


@pytest.mark.parametrize(("name", "sms", "memory", "capability", "key"), NAMED)
def test_device_names_find_their_gpu(name, sms, memory, capability, key):
    found = match_gpu(name, sms, memory, capability)
    assert found is not None and found.key == key


@pytest.mark.parametrize(
    ("name", "sms", "memory", "capability"),
    [
        (None, 132, None, None),
        ("", 132, None, None),
        ("NVIDIA GeForce GTX 1080 Ti", 28, 11_721_506_816, "6.1"),  # not in the table: unknown, no guess
        ("NVIDIA GeForce RTX 3080", 70, 12_884_901_888, "8.6"),  # the 12 GB RTX 3080: other SMs, other peaks
        ("NVIDIA A100-SXM4-40GB", 108, 85_198_045_184, "8.0"),  # 80 GB recorded under a 40 GB name
        ("NVIDIA H100", None, 85_520_809_984, "9.0"),  # SXM or PCIe: nothing tells them apart
        ("NVIDIA H100", 132, 100_485_038_080, "9.0"),  # a 94 GB H100 is neither
        ("AMD Instinct MI250X / MI250", None, 68_702_699_520, "9.0"),
        ("AMD Radeon Graphics", 104, 68_702_699_520, None),  # a generic name needs all three
        ("AMD Radeon Graphics", 12, 16_106_127_360, "11.0"),  # an APU's integrated GPU
        ("AMD Instinct MI300X", 38, 25_769_803_776, "9.4"),  # a CPX partition: an eighth of the GPU
    ],
)
def test_unknown_ambiguous_or_contradicted_devices_match_nothing(name, sms, memory, capability):
    assert match_gpu(name, sms, memory, capability) is None


def test_matched_by_says_what_was_checked():
    found = match_gpu("NVIDIA H100 80GB HBM3", 132, 85_520_809_984, "9.0")
    assert found is not None
    assert found.matched_by == "name 'NVIDIA H100 80GB HBM3' + 132 SMs + 80 GiB + compute capability 9.0"
    assert match_gpu("NVIDIA GB200").matched_by == "name 'NVIDIA GB200'"  # type: ignore[union-attr]
    assert all(gpu.matched_by == "" for gpu in builtin_peaks())


def test_values_a_trace_does_not_record_are_not_checked():
    # The GPUs table's nullable columns: pandas' NA and NaN are "not recorded", as None is.
    found = match_gpu("NVIDIA A100-SXM4-40GB", pd.NA, float("nan"), None)  # type: ignore[arg-type]
    assert found is not None and found.key == "A100 SXM4 40GB" and found.matched_by == "name 'NVIDIA A100-SXM4-40GB'"


def gpu(key: str):
    return next(gpu for gpu in builtin_peaks() if gpu.key == key)


def test_figures_are_the_datasheets_dense_ones():
    h100 = gpu("H100 SXM")
    # Hopper whitepaper, H100 SXM5: BF16 Tensor 1978.9 with sparsity, 989.4 dense (printed so, 1978.9 / 2 rounded).
    assert h100.peak("BF16", "tensor cores") == 989.4 * T
    assert h100.peak("FP8", "tensor cores") == 1978.9 * T  # 3957.8 / 2
    assert h100.peak("FP32", "CUDA cores") == 66.9 * T
    assert h100.memory_bandwidth == 3.35e12
    a100 = gpu("A100 SXM4 80GB")
    assert a100.peak("BF16", "tensor cores") == 624 * T / 2  # A100 datasheet "312 | 624*"
    assert a100.peak("TF32", "tensor cores") == 312 * T / 2  # "156 | 312*"
    assert a100.peak("FP32", "CUDA cores") == 19.5 * T
    assert a100.peak("FP64", "tensor cores") == 19.5 * T
    assert a100.memory_bandwidth == 2039e9 and gpu("A100 SXM4 40GB").memory_bandwidth == 1555e9
    assert gpu("A100 PCIe 80GB").memory_bandwidth == 1935e9
    assert gpu("V100 SXM2").peak("FP16", "tensor cores") == 125 * T  # Volta: no sparsity, as printed
    assert gpu("H100 PCIe").peak("BF16", "tensor cores") == 1513 * T / 2  # 2022 datasheet "1,513*"
    assert gpu("H100 NVL").peak("BF16", "tensor cores") == 1671 * T / 2
    assert gpu("L4").peak("FP8", "tensor cores") == 485 * T / 2
    assert gpu("B200").peak("BF16", "tensor cores") == 4500 * T / 2  # "4.5 PFLOPS" with sparsity
    assert gpu("RTX 4090").peak("BF16", "tensor cores") == 165.2 * T  # FP32 accumulate, dense
    # AMD prints dense figures: MI300X BF16 1307.4 (2614.9 with sparsity).
    assert gpu("MI300X").peak("BF16", "matrix cores") == 1307.4 * T
    # MI250X: torch sees one GCD, half the card's 383 TFLOPS, 220 CUs and 3.2768 TB/s.
    mi250x = gpu("MI250X GCD")
    assert (mi250x.peak("BF16", "matrix cores"), mi250x.sm_count) == (383 * T / 2, 220 // 2)
    assert mi250x.memory_bandwidth == pytest.approx(3.2768e12 / 2)
    assert gpu("MI250 GCD").peak("FP64", "vector units") == pytest.approx(45.3 * T / 2)


def test_a_unit_by_either_vendor_s_name_and_the_fastest_unit_by_default():
    a100, mi300x = gpu("A100 SXM4 40GB"), gpu("MI300X")
    assert a100.peak("FP64") == 19.5 * T  # tensor cores beat the CUDA cores' 9.7
    assert a100.peak("bf16") == 312 * T
    assert a100.peak("FP8") is None and a100.peak("FP8", "tensor cores") is None  # Ampere has no FP8
    assert mi300x.peak("BF16", "tensor cores") == 1307.4 * T  # AMD's matrix cores asked in NVIDIA's words
    assert mi300x.peak("FP32", "CUDA cores") == 163.4 * T
    assert a100.peak("FP32", "vector units") == 19.5 * T


def write(path: Path, document: object) -> Path:
    path.write_text(json.dumps(document) if not isinstance(document, str) else document)
    return path


NEW_GPU = {
    "key": "ACME X1",
    "names": ["ACME X1 48GB"],
    "sm_count": 96,
    "memory_bandwidth_gbs": 1200,
    "tflops": {"FP32": {"CUDA cores": 50}, "BF16": {"tensor cores": 400}},
    "source": "measured with our GEMM benchmark",
}


def test_a_user_file_corrects_a_built_in_gpu_and_adds_one(tmp_path):
    # Clocks locked lower on our H100s: new BF16 and bandwidth figures, the rest as built in.
    override = {"key": "H100 SXM", "memory_bandwidth_gbs": 3000, "tflops": {"BF16": {"tensor cores": 800}}}
    path = write(tmp_path / "peaks.json", {"gpus": [override, NEW_GPU]})
    user = load_peaks_file(path)
    assert [gpu.key for gpu in user] == ["H100 SXM", "ACME X1"]
    h100 = match_gpu("NVIDIA H100 80GB HBM3", 132, user=user)
    assert h100 is not None and h100.key == "H100 SXM"
    assert (h100.peak("BF16", "tensor cores"), h100.memory_bandwidth) == (800 * T, 3000e9)
    assert h100.peak("FP32", "CUDA cores") == 66.9 * T  # not given: the built-in figure
    assert h100.matched_by == f"name 'NVIDIA H100 80GB HBM3' + 132 SMs (user file {path})"
    acme = match_gpu("ACME X1 48GB", 96, user=user)
    assert acme is not None and acme.key == "ACME X1" and acme.peak("BF16") == 400 * T
    assert match_gpu("ACME X1 48GB", 96) is None  # only the user's file knows it
    assert match_gpu("NVIDIA H100 80GB HBM3").peak("BF16", "tensor cores") == 989.4 * T  # type: ignore[union-attr]


BAD = [
    ("{not json", "not valid JSON (line 1, column 2"),
    ([1, 2], 'expected an object with a "gpus" list'),
    ({"gpus": [NEW_GPU], "gpu": []}, "unknown field 'gpu'"),
    ({"gpus": [{"names": ["X"]}]}, 'GPU 1: expected an object with a "key"'),
    (
        {"gpus": [{k: v for k, v in NEW_GPU.items() if k != "memory_bandwidth_gbs"}]},
        "field 'memory_bandwidth_gbs' is missing",
    ),
    ({"gpus": [{**NEW_GPU, "memory_bandwidth_gbs": -5}]}, "memory_bandwidth_gbs: expected a number above 0, got -5"),
    (
        {"gpus": [{**NEW_GPU, "tflops": {"BF16": {"tensor cores": 0}}}]},
        "BF16 on tensor cores: expected a number above 0",
    ),
    ({"gpus": [{**NEW_GPU, "sm_count": 9.5}]}, "sm_count: expected a whole number above 0, got 9.5"),
    ({"gpus": [{**NEW_GPU, "sm_count": True}]}, "sm_count: expected a whole number above 0, got true"),
    ({"gpus": [{**NEW_GPU, "tflops": {"FP4": {"tensor cores": 1}}}]}, "unknown precision 'FP4'"),
    ({"gpus": [{**NEW_GPU, "tflops": {"FP32": {"cores": 1}}}]}, "unknown unit 'cores'"),
    ({"gpus": [{**NEW_GPU, "tflops": {"BF16": {"tensor cores": 9}}}]}, 'tflops needs "FP32"'),
    ({"gpus": [{**NEW_GPU, "name": "x"}]}, "GPU 1 ('ACME X1'): unknown field 'name'"),
    ({"gpus": [{**NEW_GPU, "names": []}]}, "at least one device name"),
    ({"gpus": [{**NEW_GPU, "compute_capability": "sm_90"}]}, 'compute_capability must be text like "9.0"'),
    ({"gpus": [{**NEW_GPU, "generic_names": ["AMD Radeon Graphics"]}]}, "generic_names need sm_count, memory_gb"),
    ({"gpus": [NEW_GPU, NEW_GPU]}, "GPU 2: key 'ACME X1' appears twice"),
    ({"gpus": [{**NEW_GPU, "source": ""}]}, "source must be text"),
]


@pytest.mark.parametrize(("document", "message"), BAD, ids=[message for _, message in BAD])
def test_a_bad_peaks_file_is_one_line_naming_the_file(tmp_path, document, message):
    path = write(tmp_path / "peaks.json", document)
    with pytest.raises(PeaksFileError) as error:
        load_peaks_file(path)
    text = str(error.value)
    assert text.startswith(f"{path}: ") and message in text and "\n" not in text


def test_a_missing_or_huge_peaks_file_is_refused_before_reading(tmp_path):
    with pytest.raises(InputNotFoundError, match="no such peaks file"):
        load_peaks_file(tmp_path / "absent.json")
    huge = write(tmp_path / "huge.json", " " * 1_000_001)
    with pytest.raises(PeaksFileError, match="1,000,001 bytes; a peaks file is at most 1,000,000 bytes"):
        load_peaks_file(huge)


# The GPUs issue 40 asks for, and those seen in ../shared.
WANTED = {
    "V100 SXM2",
    "V100 PCIe",
    "T4",
    "A10",
    "A40",
    "A100 PCIe 40GB",
    "A100 PCIe 80GB",
    "A100 SXM4 40GB",
    "A100 SXM4 80GB",
    "L4",
    "L40S",
    "H100 PCIe",
    "H100 SXM",
    "H100 NVL",
    "H200 SXM",
    "H200 NVL",
    "B200",
    "GB200",
    "RTX 3090",
    "RTX 4090",
    "RTX 5090",
    "MI250X GCD",
    "MI300X",
    "MI325X",
    "Quadro GP100",
    "TITAN RTX",
    "RTX 3080",
    "MI250 GCD",
}
NVIDIA_UNITS = {"CUDA cores", "tensor cores"}


def test_the_table_holds_together():
    table = builtin_peaks()
    keys = [gpu.key for gpu in table]
    assert len(keys) == len(set(keys)) and set(keys) == WANTED
    for gpu in table:
        units = {unit for _, unit in gpu.flops}
        assert {precision for precision, _ in gpu.flops} <= set(PRECISIONS) and units <= set(UNITS), gpu.key
        assert units <= NVIDIA_UNITS or not units & NVIDIA_UNITS, gpu.key  # one vendor's words per GPU
        assert gpu.peak("FP32") is not None and 100e9 <= gpu.memory_bandwidth <= 10e12, gpu.key
        assert "https://" in gpu.source and gpu.names, gpu.key
        assert all(0.05 * T <= rate <= 10_000 * T for rate in gpu.flops.values()), gpu.key
        assert gpu.boost_clock_mhz is None or 1000 <= gpu.boost_clock_mhz <= 3000, gpu.key
        best = {precision: gpu.peak(precision) for precision in ("BF16", "TF32", "FP32", "FP16", "FP8")}
        ladder = [rate for rate in (best["FP8"], best["BF16"], best["TF32"], best["FP32"]) if rate is not None]
        assert ladder == sorted(ladder, reverse=True), gpu.key  # FP8 >= BF16 >= TF32 >= FP32
        if best["FP16"] and best["BF16"]:
            assert best["FP16"] == best["BF16"], gpu.key
    assert set(EQUIVALENT_UNIT) == set(UNITS)


def test_a_name_two_gpus_share_is_told_apart_by_what_devices_record():
    table = builtin_peaks()
    for index, one in enumerate(table):
        for other in table[index + 1 :]:
            if {name.casefold() for name in one.names} & {name.casefold() for name in other.names}:
                assert (one.sm_count, one.memory_gb) != (other.sm_count, other.memory_gb), (one.key, other.key)
                assert None not in (one.sm_count, other.sm_count) or None not in (one.memory_gb, other.memory_gb)


def test_the_table_ships_in_the_package():
    declared = re.search(r"^tracekit = \[(.*)\]$", (ROOT / "pyproject.toml").read_text(), re.M)
    assert declared is not None and '"analysis/hardware/*.json"' in declared.group(1)


def test_the_reference_page_lists_every_built_in_gpu():
    page = (ROOT / "docs" / "reference" / "gpu-peaks.md").read_text()
    rows = {line.split(" | ")[0].removeprefix("| ") for line in page.splitlines() if line.startswith("| ")}
    assert {gpu.key for gpu in builtin_peaks()} <= rows


def test_a_peaks_file_nested_too_deep_is_one_line(tmp_path):
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(PeaksFileError, match="nested deeper than a peaks file is"):
        load_peaks_file(deep)
