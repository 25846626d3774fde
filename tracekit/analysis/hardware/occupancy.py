"""Theoretical occupancy of kernels: how many warps an SM can hold for each, from its registers per thread,
shared memory per block and block size against the GPU's limits: CUDA's occupancy calculator
(``cuda_occupancy.h``, ``cudaOccMaxActiveBlocksPerMultiprocessor``) in numpy, one vector per limit.

Two answers. ``theoretical_occupancy`` is Nsight Compute's: resident warps / the SM's warp slots, with the
shared memory a kernel may opt in to (a kernel using 100 KB of it ran, so it had opted in). ``torch_estimate``
is torch.profiler's "est. achieved occupancy %" exactly as Kineto computes it: the calculator at its default
per-block shared-memory limit (48 KB: a kernel over it reads 0 %, an artifact of that default), capped by
the blocks the grid gives each SM (grid / SMs), times threads per block over threads per SM, rounded as
Kineto's ``(int)(0.5 + x * 100)``. The estimate is what a trace's own column can be checked against; the
theoretical occupancy is the one tracekit shows.

Per architecture constants (allocation granularities, sub-partitions, blocks per SM) are the calculator's;
a trace records the rest (nsys's TARGET_INFO_GPU all of it, torch.profiler's deviceProperties all but the
blocks per SM). AMD GPUs have other limits (wavefronts of 64, no CUDA calculator): not computed.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np

from tracekit.model.schema import compute_capability

# Resident blocks per SM by compute capability (CUDA C++ Programming Guide, "Compute Capabilities" table;
# cuda_occupancy.h's cudaOccMaxBlocksPerMultiprocessor). Used where the trace does not record it.
_BLOCKS_PER_SM = {(3, None): 16, (7, 5): 16, (8, 6): 16, (8, 7): 16, (8, 9): 24}
_DEFAULT_BLOCKS_PER_SM = 32
# Shared memory each block loses to the driver from Ampere on (cudaDeviceProp.reservedSharedMemPerBlock).
RESERVED_SHARED_MEMORY = 1024  # bytes
REGISTER_GRANULARITY = 256  # registers per warp are allocated in units of this


@dataclass(frozen=True)
class DeviceLimits:
    """What the calculator needs of one GPU. Sizes in bytes, registers as 32-bit registers."""

    major: int
    minor: int
    sm_count: int
    max_threads_per_sm: int
    max_threads_per_block: int
    max_blocks_per_sm: int
    registers_per_sm: int
    registers_per_block: int
    warp_size: int
    shared_memory_per_sm: int
    shared_memory_per_block: int
    shared_memory_per_block_optin: int

    @property
    def reserved_shared_memory(self) -> int:
        return RESERVED_SHARED_MEMORY if self.major >= 8 else 0

    @property
    def shared_memory_granularity(self) -> int:
        return 128 if self.major >= 8 else 256

    @property
    def sub_partitions(self) -> int:
        return 2 if (self.major, self.minor) == (6, 0) else 4

    @property
    def max_registers_per_thread(self) -> int:
        return 255 if self.major < 7 else 256

    @property
    def max_warps_per_sm(self) -> int:
        return self.max_threads_per_sm // self.warp_size


def device_limits(gpu: dict) -> tuple[DeviceLimits | None, str | None]:
    """The limits of one GPU (a record of ``schema.GPUS``), or None and why not: an AMD GPU, or a limit the
    trace does not record. Blocks per SM come from the compute capability where not recorded."""
    name = gpu.get("name") or ""
    if "AMD" in name or "Radeon" in name or "Instinct" in name or _known(gpu.get("warp_size")) == 64:
        return None, "AMD GPU: CUDA's occupancy calculator does not apply"
    capability = compute_capability(gpu.get("compute_capability"))
    if capability is None:
        return None, "compute capability not recorded"
    major, minor = capability
    if major < 5:
        return None, f"compute capability {major}.{minor} predates the calculator's tables"
    values: dict[str, int | None] = {
        "major": major,
        "minor": minor,
        "max_blocks_per_sm": _known(gpu.get("max_blocks_per_sm"))
        or _BLOCKS_PER_SM.get((major, minor), _BLOCKS_PER_SM.get((major, None), _DEFAULT_BLOCKS_PER_SM)),
    }
    for field in fields(DeviceLimits):
        if field.name not in values:  # the compute capability's two are known: 0 is a valid minor
            values[field.name] = _known(gpu.get(field.name))
    missing = [name for name, value in values.items() if value is None]
    if missing:
        return None, f"the trace does not record the GPU's {', '.join(missing)}"
    return DeviceLimits(**{name: int(value or 0) for name, value in values.items()}), None


def _known(value) -> int | None:
    """A recorded positive count, else None (<NA>, None, 0)."""
    try:
        number = int(value)
    except (TypeError, ValueError):
        return None
    return number if number > 0 else None


def active_blocks(
    limits: DeviceLimits,
    registers: np.ndarray,
    shared_memory: np.ndarray,
    block_size: np.ndarray,
    optin: bool = True,
) -> np.ndarray:
    """Resident blocks per SM of each kernel (int64; -1 where a value is not recorded: registers or shared
    memory -1, block size 0). ``optin``: a block may use the opt-in shared memory (what ran); else the
    default per-block limit, as Kineto's calculator call has it."""
    registers = np.asarray(registers, dtype=np.int64)
    shared_memory = np.asarray(shared_memory, dtype=np.int64)
    block_size = np.asarray(block_size, dtype=np.int64)
    known = (registers >= 0) & (shared_memory >= 0) & (block_size > 0)
    block = np.where(known, block_size, 1)
    warps_per_block = -(-block // limits.warp_size)
    limit = np.minimum(
        _register_limit(limits, np.where(known, registers, 0), warps_per_block),
        _shared_memory_limit(limits, np.where(known, shared_memory, 0), optin),
    )
    by_warps = np.where(block > limits.max_threads_per_block, 0, limits.max_warps_per_sm // warps_per_block)
    limit = np.minimum(np.minimum(limit, by_warps), limits.max_blocks_per_sm)
    return np.where(known, limit, -1)


def _register_limit(limits: DeviceLimits, registers: np.ndarray, warps_per_block: np.ndarray) -> np.ndarray:
    """Blocks per SM the register file allows: registers are allocated per warp (rounded up to 256) within
    each sub-partition of the SM (cudaOccMaxBlocksPerSMRegsLimit, partitioned global caching off)."""
    blocks = _registers_fit(limits, limits.sub_partitions, registers, warps_per_block)
    if limits.sub_partitions == 2:  # GP100: a block that cannot run on GP10x (4 sub-partitions) runs on none
        blocks = np.where(_registers_fit(limits, 4, registers, warps_per_block) == 0, 0, blocks)
    return blocks


def _registers_fit(limits: DeviceLimits, partitions: int, registers: np.ndarray, warps: np.ndarray) -> np.ndarray:
    per_warp = -(-(registers * limits.warp_size) // REGISTER_GRANULARITY) * REGISTER_GRANULARITY
    per_block = per_warp * warps
    assumed = per_warp * (-(-warps // partitions) * partitions)  # the hardware's check rounds warps up
    fits = (per_block <= limits.registers_per_block) & (assumed <= limits.registers_per_block)
    fits &= registers <= limits.max_registers_per_thread
    warps_per_partition = (limits.registers_per_sm // partitions) // np.maximum(per_warp, 1)
    blocks = (warps_per_partition * partitions) // warps
    unlimited = np.iinfo(np.int64).max
    return np.where(~fits, 0, np.where(per_warp == 0, unlimited, blocks))


def _shared_memory_limit(limits: DeviceLimits, shared_memory: np.ndarray, optin: bool) -> np.ndarray:
    """Blocks per SM the shared memory allows (cudaOccMaxBlocksPerSMSmemLimit, default carveout: the SM's
    whole shared memory)."""
    granularity = limits.shared_memory_granularity
    per_block = -(-(shared_memory + limits.reserved_shared_memory) // granularity) * granularity
    default_limit = limits.shared_memory_per_block + limits.reserved_shared_memory
    if optin and limits.major >= 7:
        optin_limit = limits.shared_memory_per_block_optin + limits.reserved_shared_memory
        per_block_limit = np.where(shared_memory > limits.shared_memory_per_block, optin_limit, default_limit)
    else:
        per_block_limit = np.full(len(per_block), default_limit)
    blocks = limits.shared_memory_per_sm // np.maximum(per_block, 1)
    unlimited = np.iinfo(np.int64).max
    return np.where(per_block > per_block_limit, 0, np.where(per_block == 0, unlimited, blocks))


def theoretical_occupancy(
    limits: DeviceLimits, registers: np.ndarray, shared_memory: np.ndarray, block_size: np.ndarray
) -> np.ndarray:
    """Resident warps over the SM's warp slots (0-1; NaN where not recorded, or where no block would fit: a
    kernel that ran had room for one, so its recorded values or the GPU's limits are wrong): Nsight Compute's
    theoretical occupancy."""
    blocks = active_blocks(limits, registers, shared_memory, block_size, optin=True)
    warps = -(-np.asarray(block_size, dtype=np.int64) // limits.warp_size)
    return np.where(blocks > 0, blocks * warps / limits.max_warps_per_sm, np.nan)


def torch_estimate(
    limits: DeviceLimits,
    registers: np.ndarray,
    shared_memory: np.ndarray,
    block_size: np.ndarray,
    grid_size: np.ndarray,
) -> np.ndarray:
    """torch.profiler's "est. achieved occupancy %" (float64 whole percents; NaN where not recorded)."""
    blocks = active_blocks(limits, registers, shared_memory, block_size, optin=False)
    # Kineto's arithmetic: the occupancy in float32 (blocks per SM of the grid, the product, the quotient),
    # then (int)(0.5 + x * 100.0) in double; float32 all the way reads 22.5 where Kineto wrote 22
    per_sm = np.asarray(grid_size, dtype=np.float32) / np.float32(limits.sm_count)
    resident = np.minimum(blocks.astype(np.float32), per_sm)
    fraction = resident * np.asarray(block_size, dtype=np.float32) / np.float32(limits.max_threads_per_sm)
    percent = np.trunc(0.5 + fraction.astype(np.float64) * 100.0)
    return np.where(blocks >= 0, percent, np.nan)
