"""The timing harness: warm-up, measured steps timed per phase with device synchronisation, raw samples
kept, statistics derived from them; out-of-memory configurations recorded as rows, not crashes.

A step is forward (model + loss), backward, optimizer (AdamW step + zero_grad); ``mode`` picks how
much of it runs. On a CUDA device each phase is timed with CUDA events recorded between phases and
read after the step's last event completes; on the CPU with ``perf_counter`` (CPU ops finish before
they return); on MPS with ``perf_counter`` after ``torch.mps.synchronize()``.
"""

from __future__ import annotations

import gc
import statistics
import time
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import asdict, dataclass, field

import torch

from tracekit import run_config as fields
from tracekit.annotate import CaptureWindow
from tracekit.errors import UsageError
from tracekit.run_config import EAGER_FALLBACK, MODES, PHASES, STATS, RunConfig
from workloads.annotate import BACKEND, nvtx_range
from workloads.compiled import CompileReport, CompileWatch, compile_function
from workloads.hardware import device_name, environment, peak_flops
from workloads.models import build_model, flops_per_step, model_config, parameter_count

DTYPES = {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}


@dataclass
class RunResult:
    """What one configuration produced: raw per-step samples (ms) per phase, or why it failed."""

    config: RunConfig
    status: str = "ok"  # ok | oom | error | eager-fallback (compiled, but dynamo ran it eager)
    error: str | None = None
    device: str = ""
    device_type: str = ""
    samples_ms: dict[str, list[float]] = field(default_factory=dict)
    peak_memory_bytes: int | None = None
    compiled: CompileReport | None = None  # what torch.compile did, for compiled configurations


def resolve_device(name: str) -> torch.device:
    """ "auto" is CUDA when present, else MPS, else the CPU."""
    if name == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda")
        if getattr(torch.backends, "mps", None) and torch.backends.mps.is_available():
            return torch.device("mps")
        return torch.device("cpu")
    device = torch.device(name)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise UsageError(
            f"--device cuda: this torch ({torch.__version__}) sees no CUDA device "
            "(a CPU build, or no GPU visible); use --device cpu or auto"
        )
    if device.type == "mps" and not (getattr(torch.backends, "mps", None) and torch.backends.mps.is_available()):
        raise UsageError("--device mps: no Apple GPU here; use --device cpu or auto")
    return device


def synchronize(device: torch.device) -> None:
    """Wait for the device's queued work (CPU ops finish before they return)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    elif device.type == "mps":
        torch.mps.synchronize()


class PhaseClock:
    """Marks phase boundaries; durations in ms once the step is over."""

    def __init__(self, device: torch.device):
        self.device = device
        self.marks: list = []

    def mark(self) -> None:
        if self.device.type == "cuda":
            event = torch.cuda.Event(enable_timing=True)
            event.record()
            self.marks.append(event)
            return
        if self.device.type == "mps":
            torch.mps.synchronize()
        self.marks.append(time.perf_counter())

    def durations_ms(self) -> list[float]:
        if self.device.type == "cuda":
            self.marks[-1].synchronize()
            return [start.elapsed_time(end) for start, end in zip(self.marks, self.marks[1:])]
        return [(end - start) * 1e3 for start, end in zip(self.marks, self.marks[1:])]


def make_batch(config: RunConfig, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """Random token ids and next-token targets (benchmarks need shapes, not text)."""
    generator = torch.Generator().manual_seed(config.seed)
    tokens = torch.randint(
        0, model_config(config.model).vocab_size, (config.batch, config.context + 1), generator=generator
    )
    tokens = tokens.to(device)
    return tokens[:, :-1], tokens[:, 1:]


def is_out_of_memory(error: BaseException) -> bool:
    if isinstance(error, getattr(torch, "OutOfMemoryError", torch.cuda.OutOfMemoryError)):
        return True
    text = str(error).lower()
    return isinstance(error, RuntimeError) and ("out of memory" in text or "can't allocate memory" in text)


def run(config: RunConfig, capture_range: bool = False, memory_snapshot: str | None = None) -> RunResult:
    """Run one configuration; out-of-memory becomes status "oom" (memory released), not an exception.

    With ``capture_range``, the measured steps run inside the NVTX range ``tracekit-capture`` that
    `tracekit capture` tells nsys to record, so warm-up stays out of the trace. With
    ``memory_snapshot`` (CUDA only), allocator history is recorded over the measured steps and
    dumped to that path (a ``torch.cuda.memory._dump_snapshot`` pickle).
    """
    if config.mode not in MODES:
        raise UsageError(f"unknown mode {config.mode!r}; choose one of {', '.join(MODES)}")
    if config.dtype not in DTYPES:
        raise UsageError(f"unknown dtype {config.dtype!r}; choose one of {', '.join(DTYPES)}")
    device = resolve_device(config.device)
    result = RunResult(config, device=device_name(device), device_type=device.type)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    watch = CompileWatch() if config.compile else None  # a clean compiler state per configuration
    try:
        with tf32_allowed(config.tf32):
            result.samples_ms = _measure(config, device, capture_range, memory_snapshot, watch)
        if device.type == "cuda":
            result.peak_memory_bytes = torch.cuda.max_memory_allocated(device)
        if watch is not None:
            result.compiled = watch.report()
            if result.compiled.fell_back:  # never a row labelled compiled that ran eager
                result.status, result.error = EAGER_FALLBACK, result.compiled.note
    except Exception as error:
        if not is_out_of_memory(error):
            result.status, result.error = "error", f"{type(error).__name__}: {error}".splitlines()[0][:300]
        else:
            result.status, result.error = "oom", str(error).splitlines()[0][:300]
    finally:
        release_memory(device)
    return result


@contextmanager
def tf32_allowed(allowed: bool) -> Iterator[None]:
    """TF32 tensor cores allowed (or not) for float32 matmuls and cuDNN convolutions inside; PyTorch's
    own settings (matmuls off, convolutions on by default) are restored after."""
    previous = (bool(torch.backends.cuda.matmul.allow_tf32), bool(torch.backends.cudnn.allow_tf32))
    torch.backends.cuda.matmul.allow_tf32 = allowed
    torch.backends.cudnn.allow_tf32 = allowed
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = previous


def _measure(
    config: RunConfig,
    device: torch.device,
    capture_range: bool,
    memory_snapshot: str | None,
    watch: CompileWatch | None = None,
) -> dict[str, list[float]]:
    model = build_model(config.model, config.context, config.attention, device, config.seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    step_model = compile_function(model) if config.compile else model
    inputs, targets = make_batch(config, device)
    autocast = (
        torch.autocast(device.type, dtype=DTYPES[config.dtype]) if DTYPES[config.dtype] is not None else nullcontext()
    )

    def step() -> list[float]:
        """One step; its phase durations (ms)."""
        clock = PhaseClock(device)
        with nvtx_range("step"):
            clock.mark()
            with nvtx_range("forward"), autocast:
                logits = step_model(inputs)
                loss = torch.nn.functional.cross_entropy(
                    logits.reshape(-1, logits.shape[-1]).float(), targets.reshape(-1)
                )
            clock.mark()
            if config.mode != "forward":
                with nvtx_range("backward"):
                    loss.backward()
                clock.mark()
            if config.mode == "train":
                with nvtx_range("optimizer"):
                    optimizer.step()
                    optimizer.zero_grad(set_to_none=True)
                clock.mark()
        if config.mode == "forward-backward":
            optimizer.zero_grad(set_to_none=True)  # outside the timed phases: not part of this mode
        return clock.durations_ms()

    if watch is not None:  # the compiling step: timed apart, in neither warm-up nor samples
        watch.first_call(step, lambda: synchronize(device))
    samples: dict[str, list[float]] = {phase: [] for phase in PHASES}
    window = None
    for index in range(config.warmup + config.steps):
        if index == config.warmup:
            window = _start_measuring(device, capture_range, memory_snapshot)
        durations = step()
        if index >= config.warmup:
            for phase, duration in zip(PHASES, durations):
                samples[phase].append(duration)
            samples["step"].append(sum(durations))
    _stop_measuring(device, window, memory_snapshot)
    return {phase: values for phase, values in samples.items() if values}


def _start_measuring(device: torch.device, capture_range: bool, memory_snapshot: str | None) -> CaptureWindow | None:
    """The capture window of the measured steps (the NVTX capture range under nsys, the torch.profiler
    window under ``--profiler torch``: ``tracekit.annotate``), and the memory history."""
    if memory_snapshot and device.type == "cuda":
        torch.cuda.memory._record_memory_history(max_entries=1_000_000)
    return CaptureWindow() if capture_range else None


def _stop_measuring(device: torch.device, window: CaptureWindow | None, memory_snapshot: str | None) -> None:
    if window is not None:
        window.close()
    if memory_snapshot and device.type == "cuda":
        torch.cuda.memory._dump_snapshot(memory_snapshot)
        torch.cuda.memory._record_memory_history(enabled=None)


def release_memory(device: torch.device) -> None:
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()


# Student's t, 97.5th percentile, for 1..30 degrees of freedom (standard tables).
T_975 = (
    12.706,
    4.303,
    3.182,
    2.776,
    2.571,
    2.447,
    2.365,
    2.306,
    2.262,
    2.228,
    2.201,
    2.179,
    2.160,
    2.145,
    2.131,
    2.120,
    2.110,
    2.101,
    2.093,
    2.086,
    2.080,
    2.074,
    2.069,
    2.064,
    2.060,
    2.056,
    2.052,
    2.048,
    2.045,
    2.042,
)


def t_975(degrees: int) -> float:
    """The two-sided 95 % quantile of Student's t: the table up to 30, then the Cornish-Fisher expansion
    around the normal's 1.96 (within 0.001 of the exact value from 31 on)."""
    if degrees <= len(T_975):
        return T_975[degrees - 1]
    z = statistics.NormalDist().inv_cdf(0.975)
    return z + (z**3 + z) / (4 * degrees) + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * degrees**2)


def cv_pct(values: list[float]) -> float | None:
    """Coefficient of variation (%): sample std over mean; None for fewer than two samples or a zero mean."""
    if len(values) < 2 or not statistics.fmean(values):
        return None
    return 100 * statistics.stdev(values) / statistics.fmean(values)


def noisy(cv: float | None) -> str | None:
    """ "yes" when the coefficient of variation is above NOISY_CV_PCT, "no" below, None when unknown."""
    return None if cv is None else ("yes" if cv > fields.NOISY_CV_PCT else "no")


def describe(values: list[float]) -> dict[str, float | None]:
    """mean, std (sample), median, min, max of raw samples, and ci95: the half-width of the 95 %
    confidence interval of the mean (t * std / sqrt(n); None for a single sample)."""
    std = statistics.stdev(values) if len(values) > 1 else 0.0
    return {
        "mean": statistics.fmean(values),
        "std": std,
        "median": statistics.median(values),
        "min": min(values),
        "max": max(values),
        "ci95": t_975(len(values) - 1) * std / len(values) ** 0.5 if len(values) > 1 else None,
    }


def summarize(result: RunResult) -> dict:
    """One row per configuration, keyed by ``config.Field.key``: configuration, status, size, per-phase
    statistics (ms), throughput."""
    config = result.config
    spec = model_config(config.model, config.context)
    flops = flops_per_step(spec, config.batch, config.context, backward=config.mode != "forward")
    row = {
        fields.MODEL.key: config.model,
        fields.CTX.key: config.context,
        fields.BATCH.key: config.batch,
        fields.MODE.key: config.mode,
        fields.DTYPE.key: config.dtype,
        fields.COMPILE.key: config.compile,
        fields.ATTENTION.key: config.attention,
        fields.TF32.key: "on" if config.tf32 else "off",
        fields.WARMUP.key: config.warmup,
        fields.DEVICE.key: result.device,
        fields.STATUS.key: result.status,
        fields.PARAMS.key: parameter_count(spec) / 1e6,
        fields.GFLOP.key: flops / 1e9,
        fields.STEPS.key: len(result.samples_ms.get("step", [])),
    }
    for phase in PHASES:
        values = result.samples_ms.get(phase)
        described = describe(values) if values else {}
        for stat in STATS:
            row[fields.phase_field(phase, stat).key] = described.get(stat)
    step_ms = row[fields.phase_field("step", "mean").key]
    cv = cv_pct(result.samples_ms.get("step", []))
    row[fields.STEP_CV.key] = cv
    row[fields.NOISY.key] = noisy(cv)
    tflops = flops / (step_ms / 1e3) / 1e12 if step_ms else None
    peak = peak_flops(result.device, config.dtype, tf32=config.tf32)
    row[fields.TOKENS.key] = config.batch * config.context / (step_ms / 1e3) if step_ms else None
    row[fields.TFLOPS.key] = tflops
    causal = flops_per_step(spec, config.batch, config.context, backward=config.mode != "forward", causal=True)
    row[fields.TFLOPS_CAUSAL.key] = causal / (step_ms / 1e3) / 1e12 if step_ms else None
    row[fields.MFU.key] = 100 * tflops * 1e12 / peak if peak and tflops else None
    row[fields.PEAK_MEMORY.key] = result.peak_memory_bytes / 2**20 if result.peak_memory_bytes else None
    compiled = result.compiled
    row[fields.COMPILE_MS.key] = compiled.compile_ms if compiled else None
    row[fields.GRAPHS.key] = compiled.graphs if compiled else None
    row[fields.RECOMPILES.key] = compiled.recompiles if compiled else None
    row[fields.GRAPH_BREAKS.key] = compiled.graph_breaks if compiled else None
    row[fields.ERROR.key] = result.error
    return row


def result_record(result: RunResult) -> dict:
    """The configuration, raw samples and environment, for the results database and run manifests."""
    return {
        "config": asdict(result.config),
        "status": result.status,
        "error": result.error,
        "device": result.device,
        "device_type": result.device_type,
        "samples_ms": result.samples_ms,
        "peak_memory_bytes": result.peak_memory_bytes,
        **environment(result.device_type),
        "nvtx_backend": BACKEND,
    }
