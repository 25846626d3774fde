"""The GPU-op columns each form of ``tracekit kernels`` reads (its side of the column contract).

Kept apart from ``kernels`` and free of pandas: the command line names these columns to start reading
the export before pandas has finished importing (``sources.nsys.read_ahead``).
"""

from __future__ import annotations

from tracekit.analysis.primitives.op_selection import NAME_COLUMNS
from tracekit.model.options import OptionError, named

LAUNCH_CONFIG = ("grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z")
# by category: the category rules read the name; the note on unclassified kernels names them short.
CATEGORY_COLUMNS = ["kind", "duration", "name", "short_name"]


def summary_columns(name: str = "demangled", by_launch_config: bool = False) -> list[str]:
    """The GPU-op columns a kernel summary reads: nothing else is fetched."""
    if name not in NAME_COLUMNS:
        raise OptionError(f"{named('name')} {name!r} is not one of demangled, short")
    return ["kind", "duration", NAME_COLUMNS[name], *(LAUNCH_CONFIG if by_launch_config else ())]


def command_columns(by: str, name: str, by_launch_config: bool, ranges: bool, drop_last_step: bool) -> list[str] | None:
    """The GPU-op columns a ``tracekit kernels`` command reads; None for the whole table (a range filter,
    a step window and the type split use launches, devices and streams)."""
    if ranges or drop_last_step or by not in ("kernel", "category"):
        return None
    return summary_columns(name, by_launch_config) if by == "kernel" else CATEGORY_COLUMNS
