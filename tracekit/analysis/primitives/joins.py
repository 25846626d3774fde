"""The op-launch join: each GPU op (or any GPU-side row: a sync) joined to the CUDA API call that
launched it, by (process, correlation id), one implementation (``CallIndex``) for every table.

An export without the ops' process ids (``schema.UNKNOWN_PID``) joins by correlation id alone; an op
whose process could not be read (``schema.UNREADABLE_PID``) joins nothing. Sorting and ``searchsorted``
over one int64 key per pair, no loop over rows.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from tracekit.model.derived import kept_per_trace
from tracekit.model.schema import UNKNOWN_PID, UNREADABLE_PID
from tracekit.model.trace import Trace

# The GPU-op columns the join reads (the column contract: nothing else is fetched).
ATTRIBUTION_COLUMNS = ("start", "end", "duration", "correlation_id", "pid")


@dataclass
class OpLaunches:
    """For each GPU op of a trace (row order of ``trace.gpu_ops``), the call that launched it."""

    found: np.ndarray  # bool: a launching call was recorded
    row: np.ndarray  # int64: the call's row in trace.launches (-1 when not found)
    start: np.ndarray  # int64 ns: call start (-1 when not found)
    end: np.ndarray  # int64 ns: call end
    pid: np.ndarray  # int64
    tid: np.ndarray  # int64


def op_launches(trace: Trace) -> OpLaunches:
    """Join every GPU op to its launching CUDA API call on (pid, correlation id); once per trace."""
    launches = _join_launches(trace)
    unmatched = int((~launches.found).sum())
    if unmatched:  # said wherever ranges are asked about: these ops count in no range
        trace.note_found(
            f"{unmatched:,} of {len(launches.found):,} GPU operations have no recorded launching call (no correlation "
            "id, or the call is not in the capture): no range owns them (they count only in whole-trace figures) and what follows launches (launch delays, queues, ops) leaves them out"
        )
    return launches


@kept_per_trace
def _join_launches(trace: Trace) -> OpLaunches:
    ops, calls = trace.columns("gpu_ops", ATTRIBUTION_COLUMNS), trace.launches
    n = len(ops)
    none = OpLaunches(np.zeros(n, bool), *(np.full(n, -1, np.int64) for _ in range(5)))
    if n == 0 or calls.empty:
        return none
    op_pid, op_correlation = ops["pid"].to_numpy(), ops["correlation_id"].to_numpy()
    row = CallIndex(calls, [(op_pid, op_correlation)]).match(0)
    unknown_pid = op_pid == UNKNOWN_PID  # an export without the ops' process ids: correlation alone
    if unknown_pid.any():
        row = np.where(unknown_pid, CallIndex(calls, [(op_pid, op_correlation)], by_pid=False).match(0), row)
    found = (row >= 0) & (op_pid != UNREADABLE_PID)  # an unreadable process matches no call
    row = np.where(found, row, -1)
    pick = lambda column: np.where(found, calls[column].to_numpy(np.int64)[np.maximum(row, 0)], -1)
    return OpLaunches(found, row, pick("start"), pick("end"), pick("pid"), pick("tid"))


def match_calls(calls: pd.DataFrame, pid: np.ndarray, correlation: np.ndarray) -> np.ndarray:
    """Per (pid, correlation id): the row in ``calls`` of the call with them (the first such), -1 for none
    (a correlation id below 0 matches nothing): GPU-side rows joined to their calls as GPU ops are."""
    return CallIndex(calls, [(pid, correlation)]).match(0)


class CallIndex:
    """The one join of GPU-side rows to the calls that launched them: the calls' (pid, correlation id)
    pairs sorted once, for joining several GPU-side tables to them (``sides``: each one's pid and
    correlation id arrays; ``by_pid`` False: by correlation id alone, for rows whose process the
    export does not say). ``match`` pairs each row with its first call, ``every`` with each call,
    ``repeated`` says whether a pair is recorded twice. A correlation id below 0 matches nothing."""

    def __init__(self, calls: pd.DataFrame, sides: list[tuple[np.ndarray, np.ndarray]], by_pid: bool = True):
        self.correlation = calls["correlation_id"].to_numpy()
        self.sides = sides
        call_pid = calls["pid"].to_numpy()
        if not by_pid:
            call_pid, sides = np.zeros_like(call_pid), [(np.zeros_like(pid), correlation) for pid, correlation in sides]
        call_key, self.keys = _keys(call_pid, self.correlation, sides)
        self.order = np.argsort(call_key, kind="stable")
        self.sorted_key = call_key[self.order]

    def match(self, side: int) -> np.ndarray:
        """Per row of ``sides[side]``: the row of its call (the first such), -1 for none."""
        key, correlation = self.keys[side], np.asarray(self.sides[side][1])
        if not len(self.sorted_key) or not len(key):
            return np.full(len(key), -1, dtype=np.int64)
        position = np.minimum(np.searchsorted(self.sorted_key, key), len(self.sorted_key) - 1)
        found = (self.sorted_key[position] == key) & (correlation >= 0)
        return np.where(found, self.order[position], -1)

    def repeated(self) -> bool:
        """Whether two calls have one (pid, correlation id), the correlation id at least 0."""
        same = self.sorted_key[1:] == self.sorted_key[:-1]
        return bool((same & (self.correlation[self.order[1:]] >= 0)).any())

    def every(self, side: int) -> tuple[np.ndarray, np.ndarray]:
        """Every (row of ``sides[side]``, call) pair with one key, as an SQL join pairs them: two arrays,
        the row's index and the call's row."""
        key, correlation = self.keys[side], np.asarray(self.sides[side][1])
        chosen = np.flatnonzero(correlation >= 0)
        low = np.searchsorted(self.sorted_key, key[chosen], "left")
        counts = np.searchsorted(self.sorted_key, key[chosen], "right") - low
        rows = np.repeat(chosen, counts)
        within = np.arange(len(rows)) - np.repeat(np.cumsum(counts) - counts, counts)
        return rows, self.order[np.repeat(low, counts) + within]


def every_op_launch(trace: Trace, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Every (GPU op, launching call) pair with the same pid and correlation id, for the ops ``rows``
    (a mask): two arrays, the op's index and the call's row. An op matched by several calls (an export
    that records a call twice) is paired with each, as an SQL join pairs them (nsys's reports do)."""
    ops, calls = trace.columns("gpu_ops", ATTRIBUTION_COLUMNS), trace.launches
    # an op whose process is unreadable matches no call
    chosen = np.flatnonzero(rows & (ops["correlation_id"].to_numpy() >= 0) & (ops["pid"].to_numpy() != UNREADABLE_PID))
    if calls.empty or not len(chosen):
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    op_pid = ops["pid"].to_numpy()[chosen]
    # an export without the ops' process ids: correlation alone (one process)
    index = CallIndex(
        calls, [(op_pid, ops["correlation_id"].to_numpy()[chosen])], by_pid=not (op_pid == UNKNOWN_PID).any()
    )
    op_index, call_row = index.every(0)
    return chosen[op_index], call_row


def _keys(call_pid, call_correlation, sides) -> tuple[np.ndarray, list[np.ndarray]]:
    """One int64 key per (pid, correlation id) of the calls and of each side's rows, equal where equal."""
    pids = [np.asarray(call_pid, dtype=np.int64)] + [np.asarray(pid, dtype=np.int64) for pid, _ in sides]
    correlations = [np.asarray(call_correlation, dtype=np.int64)] + [
        np.asarray(correlation, dtype=np.int64) for _, correlation in sides
    ]
    if all(_within(pid, 2**31) for pid in pids) and all(_within(correlation, 2**32) for correlation in correlations):
        # CUPTI correlation ids are 32-bit and pids small: the pair packs into one int64.
        keys = [(pid << 32) | correlation for pid, correlation in zip(pids, correlations, strict=True)]
    else:  # A source that writes larger ids (a JSON trace can): dense codes of the pairs, no bits dropped.
        codes = pd.MultiIndex.from_arrays([np.concatenate(pids), np.concatenate(correlations)]).factorize()[0]
        bounds = np.cumsum([0, *(len(pid) for pid in pids)])
        keys = [codes[low:high].astype(np.int64) for low, high in zip(bounds[:-1], bounds[1:], strict=True)]
    return keys[0], keys[1:]


def _within(values: np.ndarray, limit: int) -> bool:
    return len(values) == 0 or (int(values.min()) >= -1 and int(values.max()) < limit)
