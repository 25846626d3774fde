"""The options of every analysis command, in one place: one frozen dataclass per command, each field
declared with its kind, default, help and bounds (``model.options``), checked when made.

The Python API takes them as keyword arguments (``tracekit.kernels(path, top=5)``), the command line
derives its flags from them, many-input workers receive them whole. Analyses take the dataclass and
read its fields; rules between fields live in ``check``. Parameter names, never flags: the command
line maps one to the other (a help text names another option as ``{name}``, which each reader of
the help fills in: the command line with its flag). The standard library only (the command line reads these before pandas).
"""

from __future__ import annotations

from dataclasses import dataclass

from tracekit.model.options import OptionError, Options, choice, flag, named, number, specs, text, whole

DEFAULT_PHASES = ("forward", "backward", "optimizer")
DEFAULT_EXACT_LIMIT = 10_000

_TOP = "only the N rows with the most total time"
_NAME = "group by the full templated name or the base name"
_OPS = "kernels only (as nsys gpukernsum), or memcpy/memset too"
_SAME_THREAD = (
    "count only ops launched on the range's own thread (nsys nvtx_gpu_proj); default: any thread of the "
    "process, so backward gets autograd's kernels"
)
_DOMAIN = (
    "only ranges of this NVTX domain ('default' for the default one); specs then match names without the 'NAME:' prefix"
)
_DROP_LAST_STEP = (
    "leave out GPU work launched after the last ProfilerStep#N starts (HolisticTraceAnalysis's default: "
    "a profiler schedule's last step is often cut short)"
)
_STEP_RANGE = "the range that is one training step (default: ProfilerStep#N, else 'step')"
_PHASES = (
    "the phases: comma-separated range specs (names, paths, globs); default: forward, backward and optimizer, "
    "found by the range names traces use (a phase's word given, as in forward,backward, is found the same way)"
)


def _top(default: int | None = None, help: str = _TOP, one_input: bool = False):
    return whole(default, help, one_input=one_input)


@dataclass(frozen=True)
class KernelsOptions(Options):
    """``kernels``: nsys's kernel summary (gpukernsum), or GPU time per category or kernel type."""

    top: int | None = _top()
    name: str = choice("demangled", ("demangled", "short"), _NAME)
    by_launch_config: bool = flag("also split by grid and block dimensions (as nsys 2022.4)")
    by: str = choice("kernel", ("kernel", "category", "type"),
                     "one row per kernel, per category (matmul, elementwise, ...), or per kernel type and overlap "
                     "(computation, communication, memory, as HolisticTraceAnalysis)")  # fmt: skip
    ops: str = choice("kernels", ("kernels", "all"), _OPS)
    ranges: tuple[str, ...] = specs((), "only GPU ops launched inside these NVTX ranges: a name (forward), a path "
                                        "(step/backward) or a glob (layer.*); repeatable", repeat=True)  # fmt: skip
    domain: str | None = text(_DOMAIN)
    per_instance: bool = flag("divide totals and counts by the number of {ranges} instances", one_input=True)
    same_thread: bool = flag(_SAME_THREAD)
    drop_last_step: bool = flag(_DROP_LAST_STEP)

    def check(self) -> None:
        if self.per_instance and not self.ranges:
            raise OptionError(f"{named('per_instance')} divides by the instances of {named('ranges')}: "
                              f"give {named('ranges')} too")  # fmt: skip
        if self.per_instance and self.by == "type":
            raise OptionError(f"{named('per_instance')} does not apply to {named('by')} type (overlap is not a "
                              "per-instance sum)")  # fmt: skip


@dataclass(frozen=True)
class RangesOptions(Options):
    """``ranges``: nsys's range summary (nvtxsum) plus the GPU work launched inside each range."""

    top: int | None = _top(help="only the N range names with the most time")
    tree: bool = flag("one instance of the outermost range as an indented tree", one_input=True)
    root: str | None = text("with {tree}: the range to draw (default: the outermost range with the most time)",
                            one_input=True)  # fmt: skip
    instance: int | None = whole(None, "with {tree}: which instance, 0-based in time order (default: the one of "
                                       "median duration)", minimum=0, one_input=True)  # fmt: skip
    max_depth: int | None = whole(None, "with {tree}: levels below the root", minimum=0, one_input=True)
    within: str | None = text("the children of these ranges, with their share of the parents' CPU and GPU time",
                              metavar="SPEC", one_input=True)  # fmt: skip
    raw_names: bool = flag("one row per distinct name, as nsys's nvtxsum (default: emit_nvtx ranges "
                           "'aten::mm, seq = 3, op_id = 7' grouped by op; {tree} always shows each range's own name)")  # fmt: skip
    domain: str | None = text(_DOMAIN)
    same_thread: bool = flag(_SAME_THREAD)
    gpu_side: bool = flag("also each range's GPU time measured on the GPU side: the union of the GPU ops it launched "
                          "(GPU Busy), and torch.profiler's GPU-side spans of its name", one_input=True)  # fmt: skip

    def check(self) -> None:
        if self.gpu_side and (self.tree or self.within):
            raise OptionError(f"{named('gpu_side')} adds columns to the range table: not with "
                              f"{named('tree' if self.tree else 'within')}")  # fmt: skip


@dataclass(frozen=True)
class BreakdownOptions(Options):
    """``breakdown``: kernel time by category per phase, copies beside it, each GPU's busy and idle time."""

    phases: tuple[str, ...] = specs(DEFAULT_PHASES, _PHASES)
    domain: str | None = text(_DOMAIN)
    ops: str = choice("kernels", ("kernels", "all"), _OPS)
    same_thread: bool = flag(_SAME_THREAD)
    drop_last_step: bool = flag(_DROP_LAST_STEP)


@dataclass(frozen=True)
class StepsOptions(Options):
    """``steps``: one row per training step."""

    step_range: str | None = text(_STEP_RANGE)
    phases: tuple[str, ...] = specs(DEFAULT_PHASES, "range specs whose time per step gets a column")


@dataclass(frozen=True)
class LaunchesOptions(Options):
    """``launches``: launch delays as nsys's kernexecsum."""

    top: int | None = _top()
    name: str = choice("demangled", ("demangled", "short"), _NAME)
    drop_last_step: bool = flag(_DROP_LAST_STEP)


@dataclass(frozen=True)
class IdleOptions(Options):
    """``idle``: every gap of each GPU with its cause."""

    top: int = whole(15, "longest gaps listed")
    per_stream: bool = flag("each stream's gaps (as HolisticTraceAnalysis counts them)")
    overhead_max_us: float = number(30.0, "a gap before a queued op shorter than this is launch overhead (us); "
                                          "longer ones waited on something", unit="us", metavar="US")  # fmt: skip
    drop_last_step: bool = flag(_DROP_LAST_STEP)


@dataclass(frozen=True)
class OverlapOptions(Options):
    """``overlap``: per GPU, communication time, the part computation hid, and the exposed rest."""

    per_step: bool = flag("also one row per step and GPU")
    step_range: str | None = text("with {per_step}: " + _STEP_RANGE)
    drop_last_step: bool = flag(_DROP_LAST_STEP)


@dataclass(frozen=True)
class SyncsOptions(Options):
    """``syncs``: blocking host calls, how long the CPU waited and the GPU idle that followed."""

    top: int = whole(15, "longest calls listed")


@dataclass(frozen=True)
class AdviseOptions(Options):
    """``advise``: findings ranked by the time they could recover, and nsys's expert rules."""

    gap_ms: float = number(500, "gpu-starv: list GPU gaps longer than this (ms; nsys's gap option)", unit="ms",
                           metavar="MS")  # fmt: skip
    threshold: float = number(50, "gpu-low-util: list chunks of a GPU's span used less than this (%; nsys's "
                                  "threshold option)", metavar="PERCENT")  # fmt: skip
    chunks: int = whole(30, "gpu-low-util: chunks a GPU's span is cut into (1 to 1000; nsys's chunks option)")
    rows: int = whole(50, "rows of each nsys rule's table (nsys's rows option)")
    memory: str | None = text("a CUDA memory snapshot (pickle) to read out-of-memory errors, activations and "
                              "fragmentation from (default: a run folder's own)", metavar="SNAPSHOT",
                              one_input=True)  # fmt: skip

    def check(self) -> None:
        if not 1 <= self.chunks <= 1000:
            raise OptionError(f"{named('chunks')} must be between 1 and 1000 (nsys's bounds), not {self.chunks}")


@dataclass(frozen=True)
class QueuesOptions(Options):
    """``queues``: each stream's launch queue, as HolisticTraceAnalysis measures it."""

    max_queue: int = whole(1024, "a queue this long or longer counts as full (the CUDA driver's launch queue holds "
                                 "1,024 entries)")  # fmt: skip
    series: bool = flag("also the queue length after each change, per stream (a table: for programs)")
    drop_last_step: bool = flag(_DROP_LAST_STEP)
    as_hta: bool = flag("round times to whole microseconds as HolisticTraceAnalysis 0.5 reads a trace (to compare)")


@dataclass(frozen=True)
class OpsOptions(Options):
    """``ops``: per CPU operator, its kernels and the delay to the first, as HolisticTraceAnalysis measures it."""

    top: int = whole(15, "operators (and kernel sequences) listed")
    name: str = choice("short", ("demangled", "short"), "kernels by their base name (templated variants together) or "
                                                        "the full templated name (as HolisticTraceAnalysis)")  # fmt: skip
    drop_last_step: bool = flag(_DROP_LAST_STEP)


MAX_SEQUENCE_LENGTH = 64  # kernels in a sliding window: the windows of a million-kernel trace stay in memory


@dataclass(frozen=True)
class SequencesOptions(Options):
    """``sequences``: the kernel sequences a trace repeats (worth fusing), and HolisticTraceAnalysis's per operator."""

    length: int = whole(3, "kernels in a sequence; with {operator}: the fewest GPU ops an operator instance "
                           "launched to count (HolisticTraceAnalysis's min_pattern_len)")  # fmt: skip
    min_count: int = whole(2, "only sequences seen at least this many times")
    top: int = whole(15, "sequences listed, the most frequent first")
    operator: str | None = text("instead: per outermost operator or range whose name contains NAME, the GPU ops "
                                "launched inside it, in GPU order (HolisticTraceAnalysis's "
                                "get_frequent_cuda_kernel_sequences)")  # fmt: skip
    name: str = choice("short", ("demangled", "short"), "kernels by their base name (templated variants together) or "
                                                        "the full templated name (as HolisticTraceAnalysis)")  # fmt: skip
    drop_last_step: bool = flag(_DROP_LAST_STEP)
    as_hta: bool = flag("with {operator}: HolisticTraceAnalysis 0.5's instances (only those at the smallest call depth, "
                        "the backward thread counted under its step) and GPU rows (stream synchronizations too)")  # fmt: skip

    def check(self) -> None:
        if self.operator is None and self.length > MAX_SEQUENCE_LENGTH:
            raise OptionError(f"{named('length')} is at most {MAX_SEQUENCE_LENGTH} kernels (without "
                              f"{named('operator')}), not {self.length}")  # fmt: skip
        if self.as_hta and self.operator is None:
            raise OptionError(f"{named('as_hta')} applies to {named('operator')} (HolisticTraceAnalysis's "
                              "sequences start at an operator): give it too")  # fmt: skip


@dataclass(frozen=True)
class BandwidthOptions(Options):
    """``bandwidth``: memory copies' and sets' bandwidth per direction, as HolisticTraceAnalysis measures it."""

    series: bool = flag("also the summed bandwidth after each start and end, per direction (a table: for programs)")
    drop_last_step: bool = flag(_DROP_LAST_STEP)
    as_hta: bool = flag("round times to whole microseconds as HolisticTraceAnalysis 0.5 reads a trace (to compare)")


@dataclass(frozen=True)
class CriticalPathOptions(Options):
    """``critical-path``: the chain of dependent work that sets each step's time, as HolisticTraceAnalysis."""

    step: str | None = text("only this step: its label as `tracekit steps` prints it (ProfilerStep#5) or its "
                            "number (5)", metavar="STEP")  # fmt: skip
    step_range: str | None = text(_STEP_RANGE)
    top: int = whole(15, "operators and kernels on the path listed")
    as_hta: bool = flag("round every event inward to whole microseconds as HolisticTraceAnalysis 0.5 reads a "
                        "trace (to compare with it; default: exact nanoseconds)")  # fmt: skip


@dataclass(frozen=True)
class DiffOptions(Options):
    """``diff``: where GPU time moved from A to B."""

    phases: tuple[str, ...] = specs(DEFAULT_PHASES, "range specs compared besides the whole trace")
    by: str | None = choice(None, (None, "category", "kernel", "step"),
                            "only one table: per phase and category, the kernels that changed most, or step by step")  # fmt: skip
    top: int = whole(15, "kernels listed")
    ops: str = choice("kernels", ("kernels", "all"), _OPS)
    domain: str | None = text(_DOMAIN)
    same_thread: bool = flag(_SAME_THREAD)
    step_range: str | None = text("with {by} step: " + _STEP_RANGE)


@dataclass(frozen=True)
class RanksOptions(Options):
    """``ranks``: per rank of a distributed job (or per run), steps, busy/idle, compute vs communication."""

    step_range: str | None = text(_STEP_RANGE)
    drop_last_step: bool = flag(_DROP_LAST_STEP)
    top: int | None = _top(help="kernels listed that differ most between ranks (default 15)")


@dataclass(frozen=True)
class CompareOptions(Options):
    """``compare``: many runs side by side, per run and phase, ordered by a configuration field."""

    phases: tuple[str, ...] = specs(DEFAULT_PHASES, _PHASES)
    order_by: str | None = text("order runs by this run.json config field (ctx, dtype, compile, model, batch, ...)",
                                metavar="FIELD")  # fmt: skip
    domain: str | None = text(_DOMAIN)
    ops: str = choice("kernels", ("kernels", "all"), _OPS)
    same_thread: bool = flag(_SAME_THREAD)
    step_range: str | None = text(_STEP_RANGE + "; each run's time per step beside its time per instance")


@dataclass(frozen=True)
class MemoryOptions(Options):
    """``memory``: the peak of a CUDA memory snapshot, what was live at it, who allocated it."""

    top: int = whole(20, "rows of the table")
    by: str = choice("allocation", ("allocation", "frame", "role", "all"),
                     "largest live allocations at the peak, their total per allocating frame, per role "
                     "(parameters, optimizer state, gradients, activations, temporaries), or all three")  # fmt: skip
    compare: bool = flag("two snapshots: peak delta and the frames that grew or shrank")
    device: int | None = whole(None, "CUDA device (default: highest peak)", minimum=0)
    timeline: bool = flag("also the timeline charts (Result.charts: the pictures the command line draws)", cli=False)


@dataclass(frozen=True)
class ManyOptions(Options):
    """How many inputs are read: on local processes or Dask, and how exact medians across them are."""

    workers: int | None = whole(None, "processes reading files at once (default and at most: one per CPU this "
                                      "process may use; with {use_dask}, the LocalCluster's)")  # fmt: skip
    use_dask: bool = flag("read the files on Dask (a LocalCluster for this command)")
    scheduler: str | None = text("read the files on this running Dask scheduler (tcp://host:8786); workers must "
                                 "see the same paths; the connection and handshake must complete within 20 s",
                                 metavar="ADDRESS", blank=True)  # fmt: skip
    strict: bool = flag("stop at the first input that cannot be read (default: report it, go on)")
    exact_median_limit: int = whole(DEFAULT_EXACT_LIMIT, "across inputs, a group's median is exact up to this "
                                    "many instances, else from a sketch", minimum=0)  # fmt: skip
