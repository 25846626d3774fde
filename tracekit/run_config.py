"""The run vocabulary, importable without torch (tracekit's, so that capture, report and the analyses of a
run folder need nothing of ``workloads``): what can be run (models and their sizes, modes, dtypes,
attention and optimizer implementations), one configuration (``RunConfig``), and the columns a run
produces (``Field``: the key a program reads, the label a person reads).

``tracekit capture`` builds a ``RunConfig`` in a process that never imports torch (it only passes it
to the workload it profiles), and the CLI offers these names as choices without importing torch.
Results are keyed by ``Field.key`` everywhere (rows, the results database, run.json); labels are for
display only and never parsed back. ``workloads`` builds its models to these sizes.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from tracekit.errors import MissingExtraError, UsageError

WORKLOADS_EXTRA = "tracekit[workloads]"  # pyproject's optional dependencies that run the workloads (torch)
MODEL_NAMES = ("tiny", "small", "medium", "large", "xl", "2.7B")
MODES = ("forward", "forward-backward", "train")
DTYPE_NAMES = ("fp32", "bf16", "fp16")
ATTENTIONS = ("naive", "sdpa")  # in the models
# `bench attention` also has the naive one with its softmax written out (workloads/attention.py).
ATTENTION_IMPLEMENTATIONS = ("naive", "explicit", "sdpa")
OPTIMIZERS = ("single-tensor", "foreach", "fused", "compiled")
PHASES = ("forward", "backward", "optimizer", "step")
RESULTS_TABLE = "runs"  # the table of a results database (`tracekit bench --db`)
STATS = ("mean", "std", "median", "min", "max", "ci95")  # ci95: half-width of the 95 % confidence interval
STAT_LABELS = {"ci95": "95% CI ±"}
NOISY_CV_PCT = 5.0  # a step time whose coefficient of variation is above this is flagged
EAGER_FALLBACK = "eager-fallback"  # the status of a compiled configuration that dynamo ran eager


VOCAB_SIZE = 10_000


@dataclass(frozen=True)
class ModelConfig:
    """Sizes of one model of the GPT-2 family (``workloads.models`` builds it). ``d_ff`` is the SwiGLU
    hidden width."""

    name: str
    d_model: int
    d_ff: int
    num_layers: int
    num_heads: int
    vocab_size: int = VOCAB_SIZE
    context_length: int = 1024

    @property
    def head_dim(self) -> int:
        return self.d_model // self.num_heads


SIZES = {
    "tiny": ModelConfig("tiny", d_model=64, d_ff=256, num_layers=2, num_heads=4),
    "small": ModelConfig("small", d_model=768, d_ff=3072, num_layers=12, num_heads=12),
    "medium": ModelConfig("medium", d_model=1024, d_ff=4096, num_layers=24, num_heads=16),
    "large": ModelConfig("large", d_model=1280, d_ff=5120, num_layers=36, num_heads=20),
    "xl": ModelConfig("xl", d_model=1600, d_ff=6400, num_layers=48, num_heads=25),
    "2.7B": ModelConfig("2.7B", d_model=2560, d_ff=10240, num_layers=32, num_heads=32),
}
assert tuple(SIZES) == MODEL_NAMES


def model_config(name: str, context_length: int | None = None) -> ModelConfig:
    """The named size, with room for ``context_length`` tokens."""
    if name not in SIZES:
        raise UsageError(f"unknown model {name!r}; choose one of {', '.join(SIZES)}")
    config = SIZES[name]
    return replace(config, context_length=max(context_length or 0, config.context_length))


@dataclass(frozen=True)
class RunConfig:
    """One benchmark configuration. ``dtype`` other than fp32 means autocast to it (weights stay fp32)."""

    model: str
    context: int = 128
    batch: int = 4
    mode: str = "train"
    dtype: str = "fp32"
    compile: bool = False
    attention: str = "naive"
    warmup: int = 5
    steps: int = 10
    device: str = "auto"
    seed: int = 0
    tf32: bool = False  # allow TF32 tensor cores for float32 matmuls and convolutions (CUDA, Ampere+)

    def arguments(self) -> list[str]:
        """The configuration as ``python -m workloads`` arguments."""
        words = [
            self.model,
            "--ctx",
            str(self.context),
            "--batch",
            str(self.batch),
            "--mode",
            self.mode,
            "--dtype",
            self.dtype,
            "--attention",
            self.attention,
            "--warmup",
            str(self.warmup),
            "--steps",
            str(self.steps),
            "--device",
            self.device,
        ]
        return words + (["--compile"] if self.compile else []) + (["--tf32"] if self.tf32 else [])


@dataclass(frozen=True)
class Field:
    """One column of a benchmark result: ``key`` in rows, the results database and run.json
    ("step_mean_ms"); ``label`` in tables for people ("Step Mean (ms)")."""

    key: str
    label: str


def phase_field(phase: str, stat: str) -> Field:
    """The column of one statistic of one phase's step times, in ms."""
    return Field(f"{phase}_{stat}_ms", f"{phase.capitalize()} {STAT_LABELS.get(stat, stat.capitalize())} (ms)")


TF32, WARMUP = Field("tf32", "TF32"), Field("warmup", "Warm-up")
MODEL, CTX, BATCH, MODE, DTYPE, COMPILE, ATTENTION, DEVICE, STATUS = (
    Field("model", "Model"),
    Field("ctx", "Ctx"),
    Field("batch", "Batch"),
    Field("mode", "Mode"),
    Field("dtype", "Dtype"),
    Field("compile", "Compile"),
    Field("attention", "Attention"),
    Field("device", "Device"),
    Field("status", "Status"),
)
PARAMS, GFLOP, STEPS = Field("params_m", "Params (M)"), Field("gflop_per_step", "GFLOP/step"), Field("steps", "Steps")
TOKENS, TFLOPS, MFU = Field("tokens_per_s", "Tokens/s"), Field("tflop_per_s", "TFLOP/s"), Field("mfu_pct", "MFU (%)")
# TFLOP/s and MFU count attention over the full context square (as naive attention computes it); this
# counts only the causal half (the useful work: what FlashAttention-style kernels compute).
TFLOPS_CAUSAL = Field("tflop_per_s_causal", "TFLOP/s (causal)")
PEAK_MEMORY, ERROR = Field("peak_memory_mib", "Peak Memory (MiB)"), Field("error", "Error")
# What torch.compile did (compiled configurations only): the first, compiling step (ms), graphs
# compiled, frames recompiled after it, graph breaks (dynamo's counters; see workloads.compiled).
COMPILE_MS, GRAPHS = Field("compile_ms", "Compile (ms)"), Field("graphs", "Graphs")
RECOMPILES, GRAPH_BREAKS = Field("recompiles", "Recompiles"), Field("graph_breaks", "Graph Breaks")

CONFIG_FIELDS = (MODEL, CTX, BATCH, MODE, DTYPE, COMPILE, ATTENTION, TF32, WARMUP, DEVICE, STATUS, PARAMS, GFLOP, STEPS)
PHASE_FIELDS = tuple(phase_field(phase, stat) for phase in PHASES for stat in STATS)
# How steady the step time was: std / mean (%), and "yes" when that is above NOISY_CV_PCT.
STEP_CV, NOISY = Field("step_cv_pct", "Step CV (%)"), Field("noisy", "Noisy")
RESULT_FIELDS = (
    STEP_CV,
    NOISY,
    TOKENS,
    TFLOPS,
    TFLOPS_CAUSAL,
    MFU,
    PEAK_MEMORY,
    COMPILE_MS,
    GRAPHS,
    RECOMPILES,
    GRAPH_BREAKS,
    ERROR,
)
FIELDS = CONFIG_FIELDS + PHASE_FIELDS + RESULT_FIELDS
LABELS = {field.key: field.label for field in FIELDS}


def mean_std(mean: float | None, std: float | None) -> str:
    """The one spelling of a "mean ± std" cell (ms); blank for a configuration that did not run."""
    return "" if mean is None or mean != mean else f"{mean:,.2f} ± {std or 0.0:,.2f}"


def require_torch(what: str) -> None:
    """Raises ``MissingExtraError`` unless torch can be imported: ``what`` (``tracekit bench``, capturing a
    built-in model) runs it, and tracekit itself never needs it."""
    import importlib.util

    try:
        found = importlib.util.find_spec("torch") is not None
    except (ImportError, ValueError):  # a torch import blocked, or a broken installation
        found = False
    if not found:
        raise MissingExtraError(f"{what} needs torch, which is not installed: pip install '{WORKLOADS_EXTRA}'")
