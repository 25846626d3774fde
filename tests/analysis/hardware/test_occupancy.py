"""Occupancy: CUDA's calculator against torch.profiler's own estimate on every real kernel that has one,
and hand-worked cases of each limit (registers, shared memory, warps, blocks, opt-in shared memory)."""

from __future__ import annotations

import numpy as np
import pytest
from helpers.paths import ROOT, shared_export_paths, shared_kineto_paths

from tracekit.analysis.hardware.occupancy import (
    DeviceLimits,
    active_blocks,
    device_limits,
    theoretical_occupancy,
    torch_estimate,
)
from tracekit.sources import open_trace

A100 = {  # deviceProperties of the A100s in ../shared/kineto (torch.profiler records no blocks per SM)
    "name": "NVIDIA A100-SXM4-40GB",
    "compute_capability": "8.0",
    "sm_count": 108,
    "max_threads_per_sm": 2048,
    "max_threads_per_block": 1024,
    "registers_per_sm": 65536,
    "registers_per_block": 65536,
    "warp_size": 32,
    "shared_memory_per_sm": 167936,
    "shared_memory_per_block": 49152,
    "shared_memory_per_block_optin": 166912,
}
OWN_H100 = ROOT / "tests" / "data" / "gpu" / "h100_small_ctx256_train.pt.trace.json.gz"


def a100() -> DeviceLimits:
    limits, why = device_limits(A100)
    assert why is None and limits is not None
    return limits


def test_the_a100s_limits_with_blocks_per_sm_from_its_compute_capability():
    limits = a100()
    assert (limits.max_blocks_per_sm, limits.max_warps_per_sm, limits.reserved_shared_memory) == (32, 64, 1024)


@pytest.mark.parametrize(
    ("registers", "shared", "threads", "blocks", "why"),
    [
        # 64 registers x 32 threads = 2048 per warp; 16384 per sub-partition hold 8 warps, x4 = 32 warps,
        # 4 warps a block: 8 blocks (warps alone would allow 64 / 4 = 16)
        (64, 0, 128, 8, "registers"),
        # 30 registers -> 960 per warp, rounded up to 1024: 16 warps a sub-partition, 64 an SM: 16 blocks of 4
        (30, 0, 128, 16, "registers, rounded per warp"),
        # 40 KB + 1 KB reserved = 41,984 bytes (a multiple of 128): 167,936 // 41,984 = 4 blocks
        (32, 40 * 1024, 256, 4, "shared memory"),
        # 32 threads, few registers, no shared memory: 32 blocks per SM is the cap (warps would allow 64)
        (16, 0, 32, 32, "blocks per SM"),
        # 1024 threads = 32 warps: 64 // 32 = 2 blocks
        (16, 0, 1024, 2, "warps"),
        # 256 registers per thread: over the block's register file with 1024 threads (256 x 32 x 32 > 65536)
        (256, 0, 1024, 0, "registers per block"),
        # a block of 2048 threads cannot launch
        (16, 0, 2048, 0, "threads per block"),
    ],
)
def test_each_limit_by_hand(registers, shared, threads, blocks, why):
    assert active_blocks(a100(), np.array([registers]), np.array([shared]), np.array([threads])).tolist() == [blocks]


def test_opt_in_shared_memory_is_what_ran_and_torch_reads_it_as_zero():
    """100 KB a block: over the 48 KB default, so the kernel opted in (it ran). One block fits an SM:
    (102,400 + 1,024) <= 167,936 < 2 x 103,424; 8 warps of 64 = 12.5 %. Kineto's call of the calculator keeps
    the default limit and reads 0 %, as the real traces show for every kernel over 48 KB."""
    limits = a100()
    args = np.array([64]), np.array([100 * 1024]), np.array([256])
    assert active_blocks(limits, *args).tolist() == [1]
    assert theoretical_occupancy(limits, *args).tolist() == [0.125]
    assert torch_estimate(limits, *args, np.array([10_000])).tolist() == [0.0]


def test_torch_estimate_is_capped_by_the_grid_and_rounded_as_kineto():
    """576 blocks on 80 SMs (a V100) = 7.2 per SM, fewer than the 8 the registers allow: 7.2 x 64 / 2048.
    In float32 that is 0.22499999; Kineto adds 0.5 to x 100.0 in double and truncates: 22, not 23."""
    v100 = {**A100, "compute_capability": "7.0", "sm_count": 80, "shared_memory_per_sm": 98304}
    limits, _ = device_limits({**v100, "shared_memory_per_block_optin": 98304})
    assert limits is not None
    assert torch_estimate(limits, np.array([126]), np.array([8448]), np.array([64]), np.array([576])).tolist() == [22.0]


def test_unknown_values_and_gpus_are_said_not_guessed():
    limits = a100()
    assert active_blocks(limits, np.array([-1, 32]), np.array([0, -1]), np.array([128, 128])).tolist() == [-1, -1]
    assert np.isnan(theoretical_occupancy(limits, np.array([-1]), np.array([0]), np.array([128]))).all()
    amd = {"name": "AMD Radeon Graphics", "compute_capability": "9.0", "warp_size": 64}
    assert device_limits(amd) == (None, "AMD GPU: CUDA's occupancy calculator does not apply")
    limits, why = device_limits({**A100, "registers_per_sm": None})
    assert limits is None and why == "the trace does not record the GPU's registers_per_sm"


def _kernel_inputs(trace, rows):
    ops = trace.gpu_ops.iloc[rows]
    block = (ops["block_x"].astype("int64") * ops["block_y"] * ops["block_z"]).to_numpy()
    grid = (ops["grid_x"].astype("int64") * ops["grid_y"] * ops["grid_z"]).to_numpy()
    return ops["registers_per_thread"].to_numpy(), ops["shared_memory"].to_numpy(), block, grid


@pytest.mark.shared
@pytest.mark.parametrize("path", [*shared_kineto_paths(), OWN_H100], ids=lambda path: path.name)
def test_equal_to_the_profilers_own_estimate_on_every_kernel(path):
    """Every kernel of every torch.profiler trace that records an estimate: equal to the whole percent (the
    bar is within 1 point). Traces without one (torch 1.8, ROCm) have no kernel to check."""
    if not path.exists():
        pytest.skip(f"{path} is absent (../shared not beside the project)")
    trace = open_trace(path)
    estimates = trace.optional("occupancy_estimates")
    assert estimates is not None
    if not len(estimates):
        assert "occupancy" not in str(path)  # nothing recorded: nothing to compare
        return
    registers, shared, block, grid = _kernel_inputs(trace, estimates["op"].to_numpy())
    # (after the GPU ops: a trace may describe its GPUs after its events)
    limits, why = device_limits(trace.meta.gpus.iloc[0].to_dict())
    assert why is None and limits is not None
    mine = torch_estimate(limits, registers, shared, block, grid)
    assert np.abs(mine - estimates["percent"].to_numpy()).max() == 0


@pytest.mark.shared
@pytest.mark.parametrize("path", shared_export_paths(), ids=lambda path: path.name)
def test_nsys_exports_give_every_kernel_an_occupancy_from_their_target_info(path):
    """nsys records the limits (TARGET_INFO_GPU) and each kernel's registers and shared memory: every kernel
    of an export with a GPU description gets a theoretical occupancy in (0, 1]."""
    trace = open_trace(path)
    if not len(trace.meta.gpus) or trace.meta.gpus["max_threads_per_sm"].isna().all():
        pytest.skip(f"{path.name} describes no GPU limits (TARGET_INFO_GPU absent)")
    ops = trace.gpu_ops
    gpus = trace.meta.gpus.set_index("id")
    for device in np.unique(ops["device"].to_numpy()).tolist():
        mine = (ops["kind"] == "kernel").to_numpy() & (ops["device"] == device).to_numpy()
        limits, why = device_limits({**gpus.loc[device].to_dict(), "id": device})
        assert why is None and limits is not None
        block = np.prod([ops[f"block_{dim}"].to_numpy(np.int64)[mine] for dim in "xyz"], axis=0)
        registers, shared = (ops[column].to_numpy()[mine] for column in ("registers_per_thread", "shared_memory"))
        occupancy = theoretical_occupancy(limits, registers, shared, block)
        assert ((occupancy > 0) & (occupancy <= 1)).all(), ops["name"].to_numpy()[mine][~(occupancy > 0)][:3]
