"""A benchmark configuration, importable without torch (``tracekit capture`` builds one in a process
that never imports torch: it only passes it to the workload it profiles)."""

from __future__ import annotations

from dataclasses import dataclass

MODES = ("forward", "forward-backward", "train")
DTYPE_NAMES = ("fp32", "bf16", "fp16")


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
        return words + (["--compile"] if self.compile else [])
