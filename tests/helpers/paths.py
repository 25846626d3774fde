"""Where the project and the real data beside it are (``../shared``: tests using it skip when absent)."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SHARED = ROOT.parent / "shared"
SHARED_TRACES = SHARED / "traces"
SHARED_MEMORY = SHARED / "memory"
SHARED_KINETO = SHARED / "kineto"


def shared_export_paths() -> list[Path]:
    """Every nsys SQLite export in ../shared/traces (none when it is absent)."""
    return sorted(SHARED_TRACES.glob("*.sqlite")) if SHARED_TRACES.is_dir() else []


def shared_kineto_paths() -> list[Path]:
    """Every torch.profiler trace in ../shared/kineto, gzipped or not, one file per rank included (none when it
    is absent)."""
    return sorted(SHARED_KINETO.rglob("*.json*")) if SHARED_KINETO.is_dir() else []
