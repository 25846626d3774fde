"""Kernel summary: nsys's ``gpukernsum`` / ``cuda_gpu_kern_sum``, and category shares.

Definitions (see ``stats``): per kernel name, Total / Instances / Avg / Med / Min / Max / StdDev of
the kernel durations, Time (%) of the summed total, largest total first. nsys 2022.4 also splits a
name by grid and block dimensions (``by_launch_config``); 2023.1+ group by name only.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from tracekit.analysis import stats
from tracekit.analysis.categories import CATEGORIES, categorize_ops
from tracekit.errors import NoGpuDataError, UsageError
from tracekit.trace import Trace

NAME = "Name"
GRID = "GridXYZ"
BLOCK = "BlockXYZ"
CATEGORY = "Category"
KERNEL_COUNT = "Kernels"
NAME_COLUMNS = {"demangled": "name", "short": "short_name"}
OPS_CHOICES = ("kernels", "all")


def gpu_ops(trace: Trace, ops: str = "kernels") -> pd.DataFrame:
    """The trace's GPU operations to summarize: kernels only, or with memcpy/memset ("all").

    Raises NoGpuDataError, with what to do, when the trace recorded none.
    """
    if ops not in OPS_CHOICES:
        raise UsageError(f"unknown --ops {ops!r}; choose one of {', '.join(OPS_CHOICES)}")
    frame = trace.kernels
    if ops == "kernels":
        frame = frame[(frame["kind"] == "kernel").to_numpy()]
    if frame.empty:
        raise NoGpuDataError(
            f"{trace.name} has no CUDA {'kernels' if ops == 'kernels' else 'GPU operations'}: the capture "
            "traced no CUDA activity (a CPU-only run, or nsys without --trace=cuda). Capture on an NVIDIA GPU "
            "with `nsys profile --trace=cuda,nvtx ...` or `tracekit capture MODEL`")
    return frame


def summarize_kernels(ops: pd.DataFrame, name: str = "demangled", by_launch_config: bool = False) -> pd.DataFrame:
    """Per kernel (and launch configuration): the gpukernsum statistics.

    Columns: Time (%), Total Time (ns), Instances, Avg (ns), Med (ns), Min (ns), Max (ns),
    StdDev (ns), [GridXYZ, BlockXYZ,] Name. Launch configurations print as nsys does ("%4d %4d %4d").
    """
    if name not in NAME_COLUMNS:
        raise UsageError(f"unknown --name {name!r}; choose demangled or short")
    frame = pd.DataFrame({NAME: ops[NAME_COLUMNS[name]], "duration": ops["duration"]})
    keys = [NAME]
    if by_launch_config:
        # Pack each 3-D configuration into one integer key: grouping on 2 keys is far faster than on 6.
        frame["grid_key"] = _pack_dims(ops, "grid")
        frame["block_key"] = _pack_dims(ops, "block")
        keys = ["grid_key", "block_key", NAME]
    summary = stats.duration_stats(frame, keys)
    if by_launch_config:
        summary[GRID] = _format_dims(summary["grid_key"])
        summary[BLOCK] = _format_dims(summary["block_key"])
    summary[NAME] = summary[NAME].astype(object)
    return summary[stats.STAT_COLUMNS + ([GRID, BLOCK] if by_launch_config else []) + [NAME]]


def kernel_table(trace: Trace, top: int | None = None, name: str = "demangled", by_launch_config: bool = False,
                 ops: str = "kernels") -> pd.DataFrame:
    """``tracekit kernels``: the kernel summary of a whole trace, top N rows (Time % of all rows)."""
    summary = summarize_kernels(gpu_ops(trace, ops), name=name, by_launch_config=by_launch_config)
    return summary.head(top) if top else summary


def summarize_categories(ops: pd.DataFrame) -> pd.DataFrame:
    """Share of GPU time per kernel category. Columns: Category, Time (%), Total Time (ns), Instances, Kernels.

    Every category appears (zeros included) in the fixed category order, so tables of two traces line up.
    """
    categories = categorize_ops(ops)
    frame = pd.DataFrame({CATEGORY: categories, "duration": ops["duration"].to_numpy(),
                          "name_code": ops["name"].cat.codes.to_numpy()})
    grouped = frame.groupby(CATEGORY, observed=False)
    result = pd.DataFrame({
        stats.TOTAL: grouped["duration"].sum().astype("int64"),
        stats.INSTANCES: grouped["duration"].count().astype("int64"),
        KERNEL_COUNT: grouped["name_code"].nunique().astype("int64"),
    }).reindex(CATEGORIES, fill_value=0)
    result.insert(0, stats.TIME_PCT, stats.percent_of_total(result[stats.TOTAL]))
    result.index.name = CATEGORY
    return result.reset_index()


def category_table(trace: Trace, ops: str = "kernels") -> pd.DataFrame:
    """``tracekit kernels --by category``."""
    return summarize_categories(gpu_ops(trace, ops))


def _pack_dims(ops: pd.DataFrame, axis: str) -> np.ndarray:
    # CUDA limits: x < 2^31, y and z < 2^16 for grids (block dims are smaller still).
    x, y, z = (ops[f"{axis}_{dim}"].to_numpy(np.int64) for dim in "xyz")
    return (x << 32) | (y << 16) | z


def _format_dims(packed: pd.Series) -> list[str]:
    values = packed.to_numpy(np.int64)
    return [f"{x:4d} {y:4d} {z:4d}" for x, y, z in zip(values >> 32, (values >> 16) & 0xFFFF, values & 0xFFFF)]
