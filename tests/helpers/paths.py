"""Where the project and the real data beside it are (``../shared``: tests using it skip when absent)."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SHARED = ROOT.parent / "shared"
SHARED_TRACES = SHARED / "traces"
SHARED_MEMORY = SHARED / "memory"


def shared_export_paths() -> list[Path]:
    """Every nsys SQLite export in ../shared/traces (none when it is absent)."""
    return sorted(SHARED_TRACES.glob("*.sqlite")) if SHARED_TRACES.is_dir() else []


SHARED_KINETO = SHARED / "kineto"


def shared_kineto_paths() -> list[Path]:
    """Every torch.profiler trace in ../shared/kineto, one file per rank included (none when it is absent)."""
    if not SHARED_KINETO.is_dir():
        return []
    return sorted(SHARED_KINETO.glob("*.json.gz")) + sorted(SHARED_KINETO.glob("*/*.json"))
