"""``tracekit bandwidth``: the bandwidth memory copies and sets achieved, per direction, and over time, as
HolisticTraceAnalysis 0.5 measures it (``get_memory_bw_summary``, ``get_memory_bw_time_series``).

Per op: its bandwidth, as the profiler recorded it (torch.profiler's "memory bandwidth (GB/s)", from the
device's exact duration where the trace writes whole µs), else bytes / duration (bytes per ns = GB/s);
an op of 0 ns counts as lasting 1 µs in the series. Directions: "Memcpy HtoD",
"Memcpy DtoH", "Memcpy DtoD", "Memcpy PtoP", ..., "Memset" (the copy table's direction: nsys's columns, or
torch.profiler's names).
Per GPU and direction (HTA adds a trace's GPUs together):
- Ops, Bytes, Time (ns, summed durations), Busy (ns, the union of their intervals) and Achieved (GB/s):
  the bytes over the busy time.
- the series: the sum of the bandwidths of the direction's ops running at each moment (+ at each start,
  - at each end, in time order; at one time, starts before ends, in table order), and HTA's statistics
  of its positive values (Points, Mean, StdDev, Min, 25%, Median, 75%, Max; not weighted by time).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from tracekit.analysis.kernels.bandwidth_command import BandwidthOptions
from tracekit.analysis.primitives.copies import copy_details
from tracekit.analysis.primitives.hta import hta_rounded
from tracekit.analysis.primitives.intervals import column_peaks, merge_intervals
from tracekit.analysis.primitives.op_selection import kernel_mask
from tracekit.analysis.primitives.step_window import last_step_start, launched_before_last_step
from tracekit.errors import NoGpuDataError
from tracekit.model.result import Chart, Result, Table
from tracekit.model.trace import Trace

RESIDUE = 1e-9  # GB/s: a running sum this close to 0 is 0
ZERO_AS_NS = 1000  # HTA: an op of 0 µs lasts 1 µs in the series (its end after its start)
STATISTICS = ("Mean (GB/s)", "StdDev (GB/s)", "Min (GB/s)", "25% (GB/s)", "Median (GB/s)", "75% (GB/s)", "Max (GB/s)")


def copy_ops(trace: Trace, drop_last_step: bool = False) -> pd.DataFrame:
    """Each copy and set: its direction label, start, end (ns), bytes and bandwidth (GB/s)."""
    copies = copy_details(trace).assign(rate=_recorded_rates(trace))
    cutoff = last_step_start(trace) if drop_last_step else None
    if cutoff is not None:  # HTA's window: ops whose launching call started before the last step
        calls = trace.launches
        launched = pd.DataFrame(
            {
                "pid": calls["pid"].to_numpy(),
                "correlation_id": calls["correlation_id"].to_numpy(),
                "call": calls["start"].to_numpy(),
            }
        )
        launched = launched.loc[launched["correlation_id"] >= 0].drop_duplicates(["pid", "correlation_id"])
        joined = copies[["pid", "correlation_id"]].merge(launched, on=["pid", "correlation_id"], how="left")
        copies = copies.loc[(joined["call"].to_numpy() < cutoff)].reset_index(drop=True)
    label = _direction_labels(copies)
    duration = copies["duration"].to_numpy()
    byte_count = copies["bytes"].to_numpy()
    # an op of 0 ns lasts 1 µs, as in the series
    measured = np.where(duration > 0, byte_count / np.maximum(duration, 1), byte_count / ZERO_AS_NS)
    rate = copies["rate"].to_numpy()
    bandwidth = np.where(np.isfinite(rate), rate, measured)
    return pd.DataFrame(
        {
            "direction": label,
            "start": copies["start"].to_numpy(),
            "end": copies["end"].to_numpy(),
            "bytes": byte_count,
            "bandwidth": bandwidth,
            "device": copies["device"].to_numpy(),
        }
    )


def _direction_labels(copies: pd.DataFrame) -> pd.Categorical:
    """Per copy or set: "Memset", or "Memcpy " and its direction; categorical (a few labels for up to a
    million ops), labelled once per distinct (kind, direction)."""
    memset = (copies["kind"].astype(str) == "memset").to_numpy()
    direction = copies["direction"].astype("category")
    key = np.where(memset, -1, direction.cat.codes.to_numpy().astype(np.int64))
    codes, distinct = pd.factorize(key, sort=True)
    names = [str(category) for category in direction.cat.categories]
    labels = ["Memset" if value < 0 else f"Memcpy {names[value]}" for value in distinct.tolist()]
    order = np.argsort(labels, kind="stable")  # categories sorted by name, as the tables list them
    rank = np.empty(len(order), dtype=np.int64)
    rank[order] = np.arange(len(order))
    return pd.Categorical.from_codes(rank[codes], categories=[labels[index] for index in order])


def _recorded_rates(trace: Trace) -> np.ndarray:
    """Per row of ``copy_details``: the bandwidth the profiler recorded (GB/s), NaN where none. Only a
    torch.profiler trace records one; its copy details are its GPU ops' copies and sets, in order."""
    copies = copy_details(trace)
    rates = trace.optional("copy_rates")
    found = np.full(len(copies), np.nan)
    if rates is None or rates.empty or trace.optional("copies") is not None:
        return found
    kind = trace.columns("gpu_ops", ("kind",))["kind"]
    rows = np.flatnonzero(kind.isin(["memcpy", "memset"]).to_numpy())
    by_op = np.full(len(kind), np.nan)
    by_op[rates["op"].to_numpy()] = rates["bandwidth"].to_numpy()
    if len(rows) == len(copies):
        found = by_op[rows]
    return found


def bandwidth_series(ops: pd.DataFrame, as_hta: bool = False) -> pd.DataFrame:
    """Per GPU and direction, the summed bandwidth of its running ops after each start and end (GB/s)."""
    start, end = ops["start"].to_numpy(), ops["end"].to_numpy()
    if as_hta:
        start, end = hta_rounded(start, end)
    end = np.where(end - start == 0, start + ZERO_AS_NS, end)
    time = np.concatenate([start, end])
    change = np.concatenate([ops["bandwidth"].to_numpy(), -ops["bandwidth"].to_numpy()])
    labels = ops["direction"].astype("category")
    codes = np.tile(labels.cat.codes.to_numpy().astype(np.int64), 2)  # categories in name order
    device = np.concatenate([ops["device"].to_numpy(), ops["device"].to_numpy()]).astype(np.int64)
    # HTA sorts float µs (its ends are start + a float duration) with numpy's quicksort: the same array here
    by_time = np.argsort(time / 1000.0, kind="quicksort") if as_hta else np.argsort(time, kind="stable")
    order = by_time[np.lexsort((np.arange(len(by_time)), codes[by_time], device[by_time]))]
    direction = pd.Categorical.from_codes(codes[order], categories=labels.cat.categories)
    series = pd.DataFrame(
        {"device": device[order], "direction": direction, "time": time[order], "change": change[order]}
    )
    # in order, as HTA adds (HTA adds every GPU's together: one GPU per trace in its examples)
    summed = series.groupby(["device", "direction"], sort=False, observed=True)["change"].cumsum().to_numpy()
    # adding and taking away floats leaves residues (1e-16 GB/s) where nothing runs: they are 0 (HTA counts them)
    series["bandwidth"] = np.where(np.abs(summed) < RESIDUE, 0.0, summed)
    return series.drop(columns="change")


def bandwidth_table(trace: Trace, options: BandwidthOptions | None = None) -> Result:
    """Per GPU and direction, the copies' totals, achieved bandwidth and HTA's statistics of the series."""
    options = options or BandwidthOptions()
    kernel_mask(trace, "all")  # a trace without GPU work (a CPU run): say so, and how to capture it
    ops = copy_ops(trace, options.drop_last_step)
    if ops.empty:
        raise NoGpuDataError(f"{trace.name}: no memory copy or set in the trace: no bandwidth to measure")
    series = bandwidth_series(ops, options.as_hta)
    rows = []
    positive = (series["bandwidth"] > 0).to_numpy()
    for key, mine in ops.groupby(["device", "direction"], sort=True, observed=True):
        device, direction = key  # pyright: ignore[reportGeneralTypeIssues]  (a pair: two keys)
        low, high = merge_intervals(mine["start"].to_numpy(), mine["end"].to_numpy())
        busy = int((high - low).sum())
        chosen = (series["device"] == device).to_numpy() & (series["direction"] == direction).to_numpy() & positive
        stats = series.loc[chosen, "bandwidth"].describe()
        rows.append(
            {
                "GPU": f"cuda:{int(device)}",
                "Direction": direction,
                "Ops": len(mine),
                "Bytes (MiB)": mine["bytes"].sum() / 2**20,
                "Time (ns)": int((mine["end"] - mine["start"]).sum()),
                "Busy (ns)": busy,
                "Achieved (GB/s)": mine["bytes"].sum() / busy if busy else 0.0,
                "Points": int(stats["count"]),
                **{
                    name: float(stats[column])
                    for name, column in zip(STATISTICS, ("mean", "std", "min", "25%", "50%", "75%", "max"), strict=True)
                },
            }
        )
    tables = [Table("bandwidth", pd.DataFrame(rows), f"Memory copy and set bandwidth per direction: {trace.name}")]
    if options.series:
        tables.append(
            Table(
                "series",
                series.rename(columns={"time": "Time (ns)", "bandwidth": "Bandwidth (GB/s)"}),
                "Summed bandwidth after each start and end",
            )
        )
    notes = [
        "bandwidth of an op: as the profiler recorded it (torch.profiler's memory bandwidth), else its bytes "
        "over its duration (GB/s); the series sums the ops of one GPU and direction running at once, and its "
        "statistics are HolisticTraceAnalysis's (its positive values, one per change)"
    ]
    unknown = int((ops["bytes"] == 0).sum())
    if unknown:
        notes.append(
            f"{unknown:,} copies and sets record no byte count (nor a bandwidth): they count 0 bytes and 0 GB/s"
        )
    if options.drop_last_step:
        notes.append(launched_before_last_step(trace)[1])
    result = Result(tables, notes + list(trace.warnings))
    result.charts["bandwidth"] = _chart(series, trace.name)
    return result


def _chart(series: pd.DataFrame, name: str, bins: int = 1500) -> Chart:
    """Per direction, the largest summed bandwidth in each of ``bins`` columns of time (GB/s)."""
    origin = int(series["time"].min())
    span = max(int(series["time"].max()) - origin, 1)
    lines = {}
    several = series["device"].nunique() > 1
    for key, mine in series.groupby(["device", "direction"], sort=True, observed=True):
        device, direction = key  # pyright: ignore[reportGeneralTypeIssues]  (a pair: two keys)
        values = np.maximum(mine["bandwidth"].to_numpy(), 0.0)
        lines[f"cuda:{device} {direction}" if several else str(direction)] = column_peaks(
            mine["time"].to_numpy(), values, origin, span, bins
        )
    return Chart(
        "bandwidth_lines",
        f"Memory bandwidth per direction: {name}",
        {"x_ms": (np.arange(bins) * span / bins / 1e6).tolist(), "lines": lines},
    )
