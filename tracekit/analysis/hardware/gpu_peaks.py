"""Dense peak FLOP/s per precision and unit, and memory bandwidth, of the GPUs users have, and which of them a
trace's device is.

The table is data (``gpu_peaks.json`` beside this module), one entry per GPU with its sources: datasheet or
whitepaper figures, the Tensor Core ones halved where the vendor gives them with 2:4 sparsity. A user's file
of the same format (``load_peaks_file``) corrects an entry or adds a GPU; its entries are matched first.

A device is matched by its name as nsys and torch.profiler record it ("NVIDIA H100 80GB HBM3"), checked against
its SM count, memory and compute capability where both the trace and the entry know them. A name several
entries share ("NVIDIA H100", "AMD Instinct MI250X / MI250") is decided by those; a generic name shared with
unrelated devices ("AMD Radeon Graphics") matches only when all three are recorded and agree. Anything else is
unknown (None): no guess across models or generations.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field, replace
from functools import cache
from importlib import resources
from pathlib import Path

from tracekit.errors import InputNotFoundError, PeaksFileError

PRECISIONS = ("FP64", "FP32", "TF32", "FP16", "BF16", "FP8", "INT8")
# NVIDIA's units, then AMD's for the same two kinds: an ask in one vendor's words finds the other's.
UNITS = ("CUDA cores", "tensor cores", "vector units", "matrix cores")
EQUIVALENT_UNIT = {
    "CUDA cores": "vector units",
    "vector units": "CUDA cores",
    "tensor cores": "matrix cores",
    "matrix cores": "tensor cores",
}
MAX_FILE_BYTES = 1_000_000
# A device's recorded memory (bytes / 2**30) over the entry's nominal GiB: drivers reserve a few percent.
MEMORY_RATIO = (0.85, 1.05)
BUILT_IN = "built-in table"


@dataclass(frozen=True)
class GpuPeaks:
    """One GPU's dense peaks: ``flops`` maps (precision, unit) to FLOP/s (op/s for INT8), ``memory_bandwidth``
    is bytes/s, ``source`` the URLs and notes the figures come from, ``matched_by`` how a device was found to be
    this GPU (empty in the table). The remaining fields identify the GPU: device ``names`` (and ``generic_names``,
    shared with unrelated devices), ``sm_count`` (SMs, or CUs on AMD, per device), ``memory_gb`` (nominal GiB),
    ``compute_capability`` ("9.0"), ``boost_clock_mhz`` (MHz, None where no source gives it) and ``origin``
    (the built-in table or the user's file)."""

    key: str
    flops: dict[tuple[str, str], float]
    memory_bandwidth: float
    source: str
    matched_by: str
    names: tuple[str, ...] = ()
    generic_names: tuple[str, ...] = ()
    sm_count: int | None = None
    memory_gb: float | None = None
    compute_capability: str | None = None
    boost_clock_mhz: float | None = None
    origin: str = field(default=BUILT_IN, compare=False)

    def peak(self, precision: str, unit: str | None = None) -> float | None:
        """Dense peak FLOP/s of ``precision`` ("BF16") on ``unit`` ("tensor cores"; an AMD unit is found by its
        NVIDIA name and the reverse); ``unit`` None: the precision's fastest unit. None when the GPU has no
        figure for it."""
        precision = precision.upper()
        if unit is None:
            rates = [rate for (name, _), rate in self.flops.items() if name == precision]
            return max(rates) if rates else None
        rate = self.flops.get((precision, unit))
        if rate is None and unit in EQUIVALENT_UNIT:
            rate = self.flops.get((precision, EQUIVALENT_UNIT[unit]))
        return rate


def match_gpu(
    name: str | None,
    sm_count: int | None = None,
    memory_bytes: int | None = None,
    compute_capability: str | None = None,
    user: list[GpuPeaks] | None = None,
) -> GpuPeaks | None:
    """The GPU a device is (``user`` entries first, then the built-in table), with ``matched_by`` saying how;
    None when the name is unknown, contradicted by the SM count, memory (bytes) or compute capability, or shared
    by several GPUs these do not tell apart. Missing values (None, pandas' NA) are simply not checked."""
    wanted = _comparable(name) if isinstance(name, str) else ""
    if not wanted:
        return None
    device = (_whole(sm_count), _whole(memory_bytes), _capability(compute_capability))
    for table in (user or [], builtin_peaks()):
        fitting = [gpu for gpu in table if _named(gpu, wanted, device) and _fits(gpu, device)]
        if len(fitting) == 1:
            return replace(fitting[0], matched_by=_how(fitting[0], str(name).strip(), device))
        if fitting:
            return None  # several GPUs, and nothing recorded that tells them apart
    return None


def load_peaks_file(path: str | Path) -> list[GpuPeaks]:
    """A user's peaks file (the built-in format, ``docs/reference/gpu-peaks.md``): its GPUs, ready for
    ``match_gpu(user=...)``. An entry with a built-in GPU's key changes the fields it gives (and the
    (precision, unit) pairs it gives) of that GPU; any other key is a new GPU and needs every field.
    Raises ``InputNotFoundError`` or ``PeaksFileError`` (one line naming the file and the entry)."""
    path = Path(path)
    if path.is_dir():
        raise PeaksFileError(f"{path} is a folder, not a peaks file")
    if not path.is_file():
        raise InputNotFoundError(f"{path}: no such peaks file")
    size = path.stat().st_size
    if size > MAX_FILE_BYTES:
        raise PeaksFileError(f"{path}: {size:,} bytes; a peaks file is at most {MAX_FILE_BYTES:,} bytes")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise PeaksFileError(f"{path}: cannot be read as UTF-8 text ({error})") from None
    built_in = {gpu.key: gpu for gpu in builtin_peaks()}
    return _parse(text, str(path), f"user file {path}", built_in)


@cache
def builtin_peaks() -> tuple[GpuPeaks, ...]:
    """The built-in table (``gpu_peaks.json``), read once."""
    text = resources.files("tracekit.analysis.hardware").joinpath("gpu_peaks.json").read_text(encoding="utf-8")
    return tuple(_parse(text, "gpu_peaks.json", BUILT_IN, {}))


def _comparable(name: str) -> str:
    """A device name compared as drivers vary it: case, runs of spaces, an "NVIDIA " prefix that older drivers
    leave out ("TITAN RTX" / "NVIDIA TITAN RTX")."""
    text = " ".join(name.split()).casefold()
    return text.removeprefix("nvidia ")


def _whole(value: object) -> int | None:
    """A recorded count as an int; None when not recorded (None, NaN, pandas' NA) or not a number."""
    try:
        return int(value)  # type: ignore[arg-type]  # NA and NaN raise: unknown
    except (TypeError, ValueError):
        return None


def _capability(value: object) -> str | None:
    """ "9.0" from "9.0", "9" or " 9.0 "; None when not recorded or not of that form."""
    if not isinstance(value, str) or not re.fullmatch(r"\s*\d+(\.\d+)?\s*", value):
        return None
    major, _, minor = value.strip().partition(".")
    return f"{int(major)}.{int(minor or 0)}"


def _named(gpu: GpuPeaks, wanted: str, device: tuple[int | None, int | None, str | None]) -> bool:
    """Whether ``gpu`` goes by the name; a generic name counts only with the SM count, memory and compute
    capability all recorded (they are then all checked by ``_fits``)."""
    if wanted in {_comparable(name) for name in gpu.names}:
        return True
    return None not in device and wanted in {_comparable(name) for name in gpu.generic_names}


def _fits(gpu: GpuPeaks, device: tuple[int | None, int | None, str | None]) -> bool:
    """No recorded property contradicts ``gpu``."""
    sms, memory, capability = device
    if gpu.sm_count is not None and sms is not None and sms != gpu.sm_count:
        return False
    if gpu.memory_gb is not None and memory is not None:
        low, high = MEMORY_RATIO
        if not low <= memory / 2**30 / gpu.memory_gb <= high:
            return False
    return gpu.compute_capability is None or capability is None or capability == gpu.compute_capability


def _how(gpu: GpuPeaks, name: str, device: tuple[int | None, int | None, str | None]) -> str:
    """ "name 'NVIDIA H100 80GB HBM3' + 132 SMs + 80 GiB", and the file when it is the user's."""
    sms, memory, capability = device
    parts = [f"name '{name}'"]
    if gpu.sm_count is not None and sms is not None:
        parts.append(f"{sms} SMs")
    if gpu.memory_gb is not None and memory is not None:
        parts.append(f"{memory / 2**30:.0f} GiB")
    if gpu.compute_capability is not None and capability is not None:
        parts.append(f"compute capability {capability}")
    text = " + ".join(parts)
    return text if gpu.origin == BUILT_IN else f"{text} ({gpu.origin})"


TOP_FIELDS = {"format", "version", "units", "gpus"}
REQUIRED = ("names", "memory_bandwidth_gbs", "tflops", "source")
OPTIONAL = ("generic_names", "sm_count", "memory_gb", "compute_capability", "boost_clock_mhz")
FIELDS = {"key", *REQUIRED, *OPTIONAL}


def _parse(text: str, where: str, origin: str, built_in: dict[str, GpuPeaks]) -> list[GpuPeaks]:
    """The GPUs of a peaks document; ``built_in``: the entries a same-keyed entry changes."""
    try:
        document = json.loads(text)
    except RecursionError:
        raise PeaksFileError(f"{where}: nested deeper than a peaks file is") from None
    except json.JSONDecodeError as error:
        raise PeaksFileError(
            f"{where}: not valid JSON (line {error.lineno}, column {error.colno}: {error.msg})"
        ) from None
    if not isinstance(document, dict) or not isinstance(document.get("gpus"), list):
        raise PeaksFileError(f'{where}: expected an object with a "gpus" list')
    if unknown := sorted(set(document) - TOP_FIELDS):
        raise PeaksFileError(f"{where}: unknown field {unknown[0]!r} (allowed: {', '.join(sorted(TOP_FIELDS))})")
    gpus: list[GpuPeaks] = []
    for index, entry in enumerate(document["gpus"], 1):
        gpu = _entry(entry, f"{where}: GPU {index}", origin, built_in)
        if any(known.key == gpu.key for known in gpus):
            raise PeaksFileError(f"{where}: GPU {index}: key {gpu.key!r} appears twice")
        gpus.append(gpu)
    return gpus


def _entry(entry: object, where: str, origin: str, built_in: dict[str, GpuPeaks]) -> GpuPeaks:
    """One GPU of a peaks document, checked field by field."""
    if not isinstance(entry, dict) or not isinstance(entry.get("key"), str) or not entry["key"].strip():
        raise PeaksFileError(f"{where}: expected an object with a \"key\" (the GPU's name in tracekit's output)")
    key = entry["key"].strip()
    where = f"{where} ({key!r})"
    if unknown := sorted(set(entry) - FIELDS):
        raise PeaksFileError(f"{where}: unknown field {unknown[0]!r} (allowed: {', '.join(sorted(FIELDS))})")
    base = built_in.get(key)
    if base is None and (missing := [name for name in REQUIRED if name not in entry]):
        raise PeaksFileError(f"{where}: field {missing[0]!r} is missing (required for a GPU not in the built-in table)")
    changes: dict[str, object] = {"origin": origin, "matched_by": ""}
    if "names" in entry:
        changes["names"] = _names(entry["names"], f"{where}: names", empty_ok=False)
    if "generic_names" in entry:
        changes["generic_names"] = _names(entry["generic_names"], f"{where}: generic_names", empty_ok=True)
    if "memory_bandwidth_gbs" in entry:
        changes["memory_bandwidth"] = _positive(entry["memory_bandwidth_gbs"], f"{where}: memory_bandwidth_gbs") * 1e9
    if "tflops" in entry:
        flops = _flops(entry["tflops"], f"{where}: tflops")
        changes["flops"] = flops if base is None else {**base.flops, **flops}
    if "source" in entry:
        if not isinstance(entry["source"], str) or not entry["source"].strip():
            raise PeaksFileError(f"{where}: source must be text (where the figures come from)")
        changes["source"] = entry["source"].strip()
    if "sm_count" in entry:
        changes["sm_count"] = _count(entry["sm_count"], f"{where}: sm_count")
    if "memory_gb" in entry:
        changes["memory_gb"] = _positive(entry["memory_gb"], f"{where}: memory_gb")
    if "boost_clock_mhz" in entry:
        changes["boost_clock_mhz"] = _positive(entry["boost_clock_mhz"], f"{where}: boost_clock_mhz")
    if "compute_capability" in entry:
        capability = _capability(entry["compute_capability"])
        if capability is None:
            raise PeaksFileError(f'{where}: compute_capability must be text like "9.0"')
        changes["compute_capability"] = capability
    empty = GpuPeaks(key=key, flops={}, memory_bandwidth=0.0, source="", matched_by="")
    gpu = replace(base if base is not None else empty, **changes)  # type: ignore[arg-type]
    if ("FP32", "CUDA cores") not in gpu.flops and ("FP32", "vector units") not in gpu.flops:
        raise PeaksFileError(f'{where}: tflops needs "FP32" on "CUDA cores" (or AMD\'s "vector units")')
    if gpu.generic_names and None in (gpu.sm_count, gpu.memory_gb, gpu.compute_capability):
        raise PeaksFileError(
            f"{where}: generic_names need sm_count, memory_gb and compute_capability to tell devices apart"
        )
    return gpu


def _names(value: object, where: str, empty_ok: bool) -> tuple[str, ...]:
    """A list of device names as text."""
    if not isinstance(value, list) or not all(isinstance(name, str) and name.strip() for name in value):
        raise PeaksFileError(f'{where}: expected a list of device names, e.g. ["NVIDIA H100 80GB HBM3"]')
    if not value and not empty_ok:
        raise PeaksFileError(f"{where}: at least one device name is needed to match a trace's GPU")
    return tuple(name.strip() for name in value)


def _flops(value: object, where: str) -> dict[tuple[str, str], float]:
    """``{"BF16": {"tensor cores": 989.4}}`` (TFLOP/s) as {("BF16", "tensor cores"): 989.4e12} (FLOP/s)."""
    if not isinstance(value, dict) or not value:
        raise PeaksFileError(
            f'{where}: expected {{precision: {{unit: TFLOP/s}}}}, e.g. {{"BF16": {{"tensor cores": 989.4}}}}'
        )
    flops = {}
    for precision, units in value.items():
        if precision not in PRECISIONS:
            raise PeaksFileError(f"{where}: unknown precision {precision!r} (known: {', '.join(PRECISIONS)})")
        if not isinstance(units, dict) or not units:
            raise PeaksFileError(f"{where}: {precision}: expected {{unit: TFLOP/s}}")
        for unit, rate in units.items():
            if unit not in UNITS:
                raise PeaksFileError(f"{where}: {precision}: unknown unit {unit!r} (known: {', '.join(UNITS)})")
            flops[(precision, unit)] = _positive(rate, f"{where}: {precision} on {unit}") * 1e12
    return flops


def _positive(value: object, where: str) -> float:
    """A number above zero."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0 or value == float("inf"):
        raise PeaksFileError(f"{where}: expected a number above 0, got {json.dumps(value)}")
    return float(value)


def _count(value: object, where: str) -> int:
    """A whole number above zero."""
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise PeaksFileError(f"{where}: expected a whole number above 0, got {json.dumps(value)}")
    return value
