"""The column contract: one declared schema per table, the one agreement between readers and analyses.

Every reader (nsys SQLite today, torch.profiler JSON next) fills these tables with exactly these
columns, in this order, with these dtypes; what a source cannot provide is left empty and said so in
the trace's metadata, never invented. Times are int64 nanoseconds from the trace's own time zero
(memory snapshots keep torch's float microseconds), sizes are bytes. ``Schema.check`` runs once when a
table loads: O(columns) for names and dtypes, one vector comparison for ``end >= start`` and one sum of durations.
"""

from __future__ import annotations

from tracekit.model.columns import Column, Schema
from tracekit.model.columns import times as _times

GPU_OP_KINDS = ("kernel", "memcpy", "memset")
RANGE_STYLES = ("pushpop", "startend")


_LAUNCH_CONFIG = tuple(
    Column(f"{axis}_{dim}", "int32", "", f"{axis} dimension {dim} (0 for memcpy/memset)")
    for axis in ("grid", "block")
    for dim in ("x", "y", "z")
)


# A GPU op's launching process when the export does not record it (every op is matched to its call by
# correlation id alone), and when the value recorded is unusable (the op matches no call at all).
UNKNOWN_PID = -1
UNREADABLE_PID = -2

GPU_OPS = Schema(
    "gpu_ops",
    (
        *_times("GPU operation"),
        Column("kind", "category", "", "kernel, memcpy or memset: an analysis of kernels selects them", GPU_OP_KINDS),
        Column("name", "category", "", 'demangled kernel name; "[CUDA memcpy HtoD]", "[CUDA memset]"'),
        Column("short_name", "category", "", "base kernel name (the name itself for memcpy/memset)"),
        Column("device", "int16", "", "GPU index"),
        Column("stream", "int32", "", "stream id"),
        Column("correlation_id", "int64", "", "joins the host call that launched it (-1 when unknown)"),
        Column("pid", "int32", "", "process that launched it (UNKNOWN_PID -1: not recorded; UNREADABLE_PID -2)"),
        *_LAUNCH_CONFIG,
        Column(
            "registers_per_thread",
            "int32",
            "",
            "a kernel's registers per thread (-1 not recorded; 0 for memcpy/memset)",
        ),
        Column(
            "shared_memory",
            "int64",
            "bytes",
            "a kernel's shared memory per block, static + dynamic (-1 not recorded; 0 for memcpy/memset)",
        ),
        Column("bytes", "int64", "bytes", "bytes copied or set (0 for kernels)"),
    ),
    "Kernels, memory copies and memory sets on the GPUs.",
    interval=True,
)

LAUNCHES = Schema(
    "launches",
    (
        *_times("host API call"),
        Column("name", "category", "", 'API function, e.g. "cudaLaunchKernel_v7000"'),
        Column("correlation_id", "int64", "", "joins the GPU operations it launched (-1 when none)"),
        Column("pid", "int64", "", "process"),
        Column("tid", "int64", "", "thread"),
    ),
    "Host calls of the CUDA runtime and driver (launches, copies, synchronisations).",
    interval=True,
)

RANGES = Schema(
    "ranges",
    (
        Column("range_id", "int64", "", "stable id of the range within its source"),
        *_times("range"),
        Column("name", "category", "", '"domain:text" outside the default domain, else the text (as nsys names it)'),
        Column("domain", "category", "", 'domain name, "" for the default domain'),
        Column("style", "category", "", "pushpop or startend", RANGE_STYLES),
        Column("pid", "int64", "", "process"),
        Column("tid", "int64", "", "thread that opened the range"),
        Column("end_tid", "int64", "", "thread that closed it (tid unless a start/end range crossed threads)"),
        Column("depth", "int32", "", "0 for an outermost range on its thread"),
        Column("parent", "int64", "", "range_id of the tightest enclosing range on the thread, -1 if none"),
    ),
    "NVTX ranges (or record_function annotations); an unclosed range ends at the trace's last timestamp.",
    interval=True,
)

# What an occupancy calculation and a roofline need of a GPU, where the trace records it (nsys's
# TARGET_INFO_GPU records all; torch.profiler's deviceProperties the occupancy limits, no clocks).
_GPU_LIMITS = (
    ("clock_hz", "Hz", "SM clock the profiler recorded"),
    ("memory_bandwidth", "bytes/s", "device memory bandwidth the profiler recorded"),
    ("max_threads_per_sm", "", "resident threads per SM"),
    ("max_threads_per_block", "", "threads per block"),
    ("max_blocks_per_sm", "", "resident blocks per SM"),
    ("registers_per_sm", "", "32-bit registers per SM"),
    ("registers_per_block", "", "32-bit registers per block"),
    ("warp_size", "", "threads per warp"),
    ("shared_memory_per_sm", "bytes", "shared memory per SM"),
    ("shared_memory_per_block", "bytes", "shared memory per block without opting in"),
    ("shared_memory_per_block_optin", "bytes", "shared memory per block a kernel may opt in to"),
)
GPU_LIMIT_COLUMNS = tuple(name for name, _, _ in _GPU_LIMITS)
# torch.profiler's deviceProperties fields by the GPUS column they fill (it records no clocks)
TORCH_DEVICE_FIELDS = {
    "max_threads_per_sm": "maxThreadsPerMultiprocessor",
    "max_threads_per_block": "maxThreadsPerBlock",
    "registers_per_sm": "regsPerMultiprocessor",
    "registers_per_block": "regsPerBlock",
    "warp_size": "warpSize",
    "shared_memory_per_sm": "sharedMemPerMultiprocessor",
    "shared_memory_per_block": "sharedMemPerBlock",
    "shared_memory_per_block_optin": "sharedMemPerBlockOptin",
}

GPUS = Schema(
    "gpus",
    (
        Column("id", "int64", "", "device index as the GPU ops' device column uses it"),
        Column("name", "text", "", 'e.g. "NVIDIA H100 80GB HBM3" (None when not recorded)'),
        Column("sm_count", "Int64", "", "streaming multiprocessors (<NA> when not recorded)"),
        Column("memory_bytes", "Int64", "bytes", "device memory (<NA> when not recorded)"),
        Column("compute_capability", "text", "", '"9.0" (None when not recorded)'),
        *(Column(name, "Int64", unit, f"{doc} (<NA> when not recorded)") for name, unit, doc in _GPU_LIMITS),
    ),
    "The GPUs a trace describes (may be empty: some sources carry no description). Every column but the id "
    "is optional: an export may record a GPU's id and name alone.",
)


def compute_capability(value: object) -> tuple[int, int] | None:
    """A GPU's ``compute_capability`` ("9.0") as (major, minor); None when not recorded or not of that form
    (a hand-edited manifest, a ROCm "gfx90a")."""
    if not isinstance(value, str):
        return None
    major, dot, minor = value.strip().partition(".")
    if not (major.isdigit() and (minor.isdigit() or not dot)) or not major.isascii() or not minor.isascii():
        return None
    return int(major), int(minor or 0)


MEMORY_KINDS = ("Pageable", "Pinned", "Device", "Array", "Managed", "Device Static", "Managed Static", "Unknown")

COPIES = Schema(
    "copies",
    (
        Column("kind", "category", "", "memcpy or memset", ("memcpy", "memset")),
        *_times("copy or set"),
        Column("bytes", "int64", "bytes", "bytes copied or set"),
        Column("pid", "int64", "", "process"),
        Column("device", "int16", "", "GPU index"),
        Column("context", "int64", "", "CUDA context (-1 when not recorded)"),
        Column("stream", "int32", "", "stream id"),
        Column("correlation_id", "int64", "", "joins the host call that issued it (-1 when unknown)"),
        Column("direction", "category", "", '"HtoD", "DtoH", "DtoD", "PtoP", ... ("" for memset)'),
        Column("src_kind", "category", "", "source memory (memcpy; Unknown for memset)", MEMORY_KINDS),
        Column("dst_kind", "category", "", "destination memory (memset: the memory set)", MEMORY_KINDS),
        Column("same_device", "bool", "", "a copy whose source and destination are the same device's memory"),
    ),
    "Memory copies and sets with their memory kinds, from readers that record them (nsys exports; "
    "torch.profiler names such as 'Memcpy HtoD (Pageable -> Device)').",
    interval=True,
)

PROFILER_OVERHEAD = Schema(
    "profiler_overhead",
    (*_times("profiler overhead"), Column("pid", "int64", "", "process"), Column("name", "text", "", "what it was")),
    "Time the profiler itself spent (nsys's PROFILER_OVERHEAD), which its expert rules count as GPU use.",
    interval=True,
)

SYNC_KINDS = ("stream_sync", "context_sync", "event_sync", "stream_wait_event", "unknown")

GPU_SYNCS = Schema(
    "gpu_syncs",
    (
        Column(
            "kind",
            "category",
            "",
            "what was synchronized: a stream, the context, an event, or a stream made to wait for an event",
            SYNC_KINDS,
        ),
        *_times("synchronization"),
        Column("device", "int16", "", "GPU index"),
        Column("stream", "int32", "", "stream synchronized, or made to wait (-1 for the context)"),
        Column("correlation_id", "int64", "", "joins the host call that synchronized (-1 when unknown)"),
        Column("pid", "int64", "", "process of that call (-1 when unknown)"),
        Column("event_stream", "int32", "", "event syncs and waits: the stream that recorded the event (-1 unknown)"),
        Column(
            "event_correlation_id",
            "int64",
            "",
            "event syncs and waits: the correlation id of the cudaEventRecord call that recorded it (-1 unknown)",
        ),
    ),
    "The GPU side of synchronizations (CUPTI's synchronization records: torch.profiler's cuda_sync events, "
    "nsys's CUPTI_ACTIVITY_KIND_SYNCHRONIZATION), from readers that record them.",
    interval=True,
)

COPY_RATES = Schema(
    "copy_rates",
    (
        Column("op", "int64", "", "the copy's or set's row in gpu_ops"),
        Column("bandwidth", "float64", "", "GB/s as the profiler recorded it (torch.profiler's memory bandwidth)"),
    ),
    "The bandwidth a profiler recorded for each copy and set (torch.profiler: from the device's exact duration, "
    "where the trace writes whole µs).",
)

OCCUPANCY_ESTIMATES = Schema(
    "occupancy_estimates",
    (
        Column("op", "int64", "", "the kernel's row in gpu_ops"),
        Column("percent", "float64", "", "torch.profiler's 'est. achieved occupancy %' of the kernel"),
    ),
    "The occupancy a profiler estimated for each kernel (torch.profiler's, from CUDA's occupancy calculator).",
)

OP_SHAPES = Schema(
    "op_shapes",
    (
        Column("range_id", "int64", "", "the operator's range_id in ranges"),
        Column("dims", "category", "", "its inputs' shapes as the profiler wrote them (JSON text)"),
        Column("types", "category", "", "its inputs' dtypes as the profiler wrote them (JSON text; empty: none)"),
        Column("concrete", "category", "", "its scalar inputs as the profiler wrote them (JSON text; empty: none)"),
        Column("flops", "float64", "", "FLOPs the profiler counted (torch.profiler with_flops; NaN: none)"),
    ),
    "The recorded inputs of CPU operators (torch.profiler's record_shapes): one row per operator that has them.",
)

_COLLECTIVE_TEXTS = (
    ("collective", 'its name as torch records it ("allreduce", "all_to_all", "broadcast", ...)'),
    ("dtype", 'its dtype ("Float", "BFloat16", ...)'),
    ("in_split", "the input split sizes (all-to-all; JSON text)"),
    ("out_split", "the output split sizes (JSON text)"),
    ("group_name", "its process group's name"),
    ("group_desc", "its process group's description"),
    ("group_ranks", "its process group's ranks (JSON text; torch truncates past 30)"),
)
_COLLECTIVE_NUMBERS = (
    ("in_elements", "elements in its input message"),
    ("out_elements", "elements in its output message"),
    ("group_size", "ranks in its process group"),
    ("rank", "the recording rank"),
    ("src_rank", "a point-to-point's source rank"),
    ("dst_rank", "a point-to-point's destination rank"),
    ("seq", "its sequence number in its process group"),
)
COLLECTIVE_ARGS = Schema(
    "collective_args",
    (
        Column("source", "category", "", "what carries them: a range or a GPU op", ("range", "gpu_op")),
        Column("row", "int64", "", "the range's range_id, or the GPU op's row in gpu_ops"),
        *(Column(name, "category", "", doc) for name, doc in _COLLECTIVE_TEXTS),
        *(Column(name, "int64", "", f"{doc} (-1: not recorded)") for name, doc in _COLLECTIVE_NUMBERS),
    ),
    "What the profiler recorded of each collective (torch.profiler's record_param_comms args, and newer "
    'torch\'s NCCL kernels); texts as written, "" where not recorded.',
)

THREAD_NAMES = Schema(
    "thread_names",
    (
        Column("pid", "int64", "", "process"),
        Column("tid", "int64", "", "thread (-1: the row names the process itself)"),
        Column("name", "category", "", 'as the profiler recorded it ("python3", "pt_autograd_0")'),
    ),
    "The names the profiler recorded of host processes and threads (nsys's PROCESSES and ThreadNames, "
    "torch.profiler's process_name and thread_name metadata): one row per process or thread, the last name "
    "recorded where it was renamed.",
)

PYTHON_CALLS = Schema(
    "python_calls",
    (
        *_times("Python call"),
        Column("name", "category", "", 'the function as the profiler names it ("model.py(42): forward")'),
        Column("pid", "int64", "", "process"),
        Column("tid", "int64", "", "thread"),
        Column("python_id", "int64", "", "the profiler's id of the call ('Python id'; -1: not recorded)"),
        Column("parent_id", "int64", "", "the python_id of the call that made it (-1: none or not recorded)"),
        Column("module_id", "int64", "", "the nn.Module instance it runs ('Python module id'; -1: none)"),
    ),
    "The Python function calls torch.profiler recorded (with_stack=True: its python_function events), one row per "
    "call. Apart from ranges: no analysis counts them.",
    interval=True,
)

_OPTIONAL = (COPIES, PROFILER_OVERHEAD, GPU_SYNCS, COPY_RATES, OCCUPANCY_ESTIMATES, OP_SHAPES, COLLECTIVE_ARGS)
OPTIONAL_TABLES = {table.table: table for table in (*_OPTIONAL, THREAD_NAMES, PYTHON_CALLS)}

TRACE_TABLES = (GPU_OPS, LAUNCHES, RANGES)
