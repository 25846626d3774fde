"""NVTX ranges of an nsys SQLite export, named and nested as nsys names and nests them.

A range's name is its registered string (``textId``, as the ``nvtx`` package interns names) or its
``text`` (C ASCII calls), prefixed "domain:" outside the default domain; domains are created per
process by an event of type 75 whose text is the domain name. A start/end range may end on another
thread (``endGlobalTid``); such ranges take no part in nesting.
"""

from __future__ import annotations

from collections.abc import Collection
from contextlib import closing
from pathlib import Path

import numpy as np
import pandas as pd

from tracekit.model.nesting import nest_ranges
from tracekit.model.range_names import names_matching
from tracekit.model.range_specs import Pattern
from tracekit.model.schema import RANGE_STYLES, RANGES
from tracekit.sources.nsys.checks import (
    NVTX_OPTIONAL,
    TIME_LIMIT,
    keep_rows,
    low_bits,
    missing_notes,
    with_dropped,
    with_notes,
    with_unknown,
)
from tracekit.sources.nsys.sqlite_columns import (
    DROPPED,
    MISSING,
    are_integers,
    connect_readonly,
    read_columns,
    stand_in,
    text_among,
)
from tracekit.sources.nsys.string_ids import present_ids, read_strings, resolve_ids
from tracekit.sources.nsys.thread_ids import ID_BITS, pid_of

NVTX_TABLE = "NVTX_EVENTS"
# NVTX_EVENTS.eventType values (ENUM_NSYS_EVENT_TYPE); 70/71 are ranges imported from NVTXT files.
NVTX_PUSHPOP, NVTX_STARTEND, NVTXT_PUSHPOP, NVTXT_STARTEND, NVTX_DOMAIN_CREATE = 59, 60, 70, 71, 75
RANGE_EVENT_TYPES = (NVTX_PUSHPOP, NVTX_STARTEND, NVTXT_PUSHPOP, NVTXT_STARTEND)
# The name of a range pushed without a message (neither text nor a registered string).
UNNAMED_RANGE = "(unnamed)"
# The name of a range without text whose registered-string id is unusable or names no string.
UNREADABLE_RANGE = "[unreadable range name]"
NO_TEXT_ID, UNUSABLE_TEXT_ID = -1, -2  # textId NULL (named by its text); textId unusable
# The domain of ranges whose domain has no name (nsys shows their names without a prefix).
UNNAMED_DOMAIN = "(unnamed domain)"


def read_ranges(path: Path, tables: frozenset[str], names: Collection[Pattern] | None = None) -> pd.DataFrame:
    """NVTX push/pop and start/end ranges, named and nested as nsys does (``schema.RANGES``).

    A name is built once per distinct (domain, text) pair, not once per row: PyTorch traces repeat
    a few hundred names over millions of ranges. With ``names`` (patterns of range specs), only ranges
    those patterns can match are read (a superset filtered in SQL, then matched exactly as
    ``selection.names_matching`` matches), and depth/parent describe the nesting among them.
    """
    if NVTX_TABLE not in tables:
        return RANGES.empty()
    is_range = f"eventType IN ({','.join(str(t) for t in RANGE_EVENT_TYPES)})"
    named = f"{is_range} AND ({_name_filter(names)})" if names is not None else is_range
    columns = read_columns(
        path,
        NVTX_TABLE,
        {
            "range_id": "rowid",
            "start": "start",
            "end": "ifnull(end, -1)",
            "event_type": "eventType",
            "text_id": "ifnull(textId, -1)",
            "domain_id": "ifnull(domainId, 0)",
            # pid and tid only: the hardware/VM bits above them make every value 15 digits long (arithmetic
            # rather than &, so that a REAL stays REAL and fails to parse)
            "global_tid": low_bits("ifnull(globalTid, 0)", 48),
            "end_global_tid": f"ifnull({low_bits('endGlobalTid', 48)}, -1)",
        },
        texts={"text": "text"},
        where=named,
        guard=text_among(nullable=("globalTid", "endGlobalTid")),
        careful=are_integers("start", nullable=("end", "textId", "domainId", "globalTid", "endGlobalTid")),
        dtypes={"event_type": "int16"},
        optional=NVTX_OPTIONAL,
    )
    missing = columns.pop(MISSING)
    notes = [missing_notes(NVTX_TABLE, missing, str(path))]  # type: ignore[arg-type]
    dropped = int(columns.pop(DROPPED)) + _keep_usable(columns)
    text_id = columns["text_id"]
    text_id[(text_id < NO_TEXT_ID) | (text_id >= 2**31)] = UNUSABLE_TEXT_ID  # read as unknown, counted by name
    columns["text_id"] = text_id.astype(np.int32)
    if len(columns["start"]) == 0:
        return with_notes(with_dropped(RANGES.empty(), dropped), notes)
    text_codes, texts = columns.pop("text")
    unclosed = columns["end"] < 0
    if unclosed.any():  # nsys closes an unclosed range at the last NVTX timestamp; do the same
        with closing(connect_readonly(path)) as connection:
            last = connection.execute(
                # integers only: a TEXT or REAL time (a damaged row, left out) sorts above every number
                "SELECT max(coalesce(max(CASE WHEN typeof(start) = 'integer' THEN start END), 0), "
                f"coalesce(max(CASE WHEN typeof(end) = 'integer' THEN end END), 0)) FROM {NVTX_TABLE}"
            ).fetchone()[0]
        columns["end"][unclosed] = last
    domains = []
    if (columns["domain_id"] != 0).any():
        with closing(connect_readonly(path)) as connection:
            stand_ins = {column: NVTX_OPTIONAL[column] for column in missing}  # type: ignore[union-attr]
            query = (
                "SELECT ifnull(globalTid, 0), domainId, "  # thread 0 for NULL, as the ranges themselves read it
                f"CAST(coalesce(text, (SELECT value FROM StringIds WHERE id = textId)) AS TEXT) "
                f"FROM {NVTX_TABLE} WHERE eventType = {NVTX_DOMAIN_CREATE} ORDER BY start"
            )
            domains = connection.execute(stand_in(query, stand_ins)).fetchall()

    global_tid = columns["global_tid"]
    pid = pid_of(global_tid)
    domain_codes, domain_names = _domain_codes(pid, columns["domain_id"], domains)
    range_names, unreadable = _range_names(path, columns.pop("text_id"), text_codes, texts, domain_codes, domain_names)
    if names is not None:  # the SQL filter matched texts; keep rows whose full "domain:text" name matches
        keep = names_matching(pd.Series(range_names), names, loose=True)
        columns = {key: value[keep] for key, value in columns.items()}
        global_tid, pid, domain_codes, range_names = global_tid[keep], pid[keep], domain_codes[keep], range_names[keep]
        unreadable = unreadable[keep]  # counted among the ranges read, as a read of them all would count them
    end_global = columns["end_global_tid"]
    same_thread = (end_global < 0) | (end_global == global_tid)
    parent_row, depth = nest_ranges(global_tid, columns["start"], columns["end"], same_thread)
    range_id = columns["range_id"]
    style_codes = np.isin(columns["event_type"], (NVTX_STARTEND, NVTXT_STARTEND)).astype(np.int8)
    frame = pd.DataFrame(
        {
            "range_id": range_id,
            "start": columns["start"],
            "end": columns["end"],
            "duration": columns["end"] - columns["start"],
            "name": range_names,
            "domain": pd.Categorical.from_codes(domain_codes, categories=pd.Index(domain_names, dtype=object)),
            "style": pd.Categorical.from_codes(style_codes, categories=RANGE_STYLES),
            "pid": pid,
            "tid": global_tid & ID_BITS,
            "end_tid": np.where(same_thread, global_tid, end_global) & ID_BITS,
            "depth": depth,
            "parent": np.where(parent_row >= 0, range_id[np.maximum(parent_row, 0)], -1),
        },
        copy=False,  # every array here is new and the table's own: no second copy of millions of rows
    )
    unknown = {"text_id": int(np.count_nonzero(unreadable))} if unreadable.any() else {}
    return with_notes(with_unknown(with_dropped(frame, dropped), unknown), notes)


def _keep_usable(columns: dict) -> int:
    """Leave out, in place, ranges whose values cannot be right; returns how many. Times must lie in
    [0, TIME_LIMIT) with end >= start (an unclosed range, end NULL, read as -1, is closed later), thread
    ids must not be negative. (An unusable registered-name id leaves its row in: its name is unknown.)"""
    start, end = columns["start"], columns["end"]
    usable = (start >= 0) & (start < TIME_LIMIT) & ((end == -1) | ((end >= start) & (end < TIME_LIMIT)))
    usable &= (columns["global_tid"] >= 0) & (columns["end_global_tid"] >= -1)
    return keep_rows(columns, usable)


def _name_filter(patterns: Collection[Pattern]) -> str:
    """SQL condition on NVTX_EVENTS keeping every range ``patterns`` can match, and a few more: a row
    whose text (or registered string) holds all the literal pieces of some pattern, and every range of
    a named domain (its "domain:" prefix is not in its text). The exact match follows in Python, with
    the same code the cached and the in-memory paths use."""
    if any(not pattern.chunks for pattern in patterns):
        return "1"  # a pattern of wildcards alone can match any name

    def on(column: str) -> str:
        return " OR ".join(f"({_pattern_test(column, pattern)})" for pattern in patterns) or "0"

    condition = f"ifnull(domainId, 0) != 0 OR {on('text')} OR textId IN (SELECT id FROM StringIds WHERE {on('value')})"
    if any(pattern.matches(UNNAMED_RANGE) for pattern in patterns):  # ranges without a message, named so here
        condition += " OR (ifnull(text, '') = '' AND textId IS NULL)"
    return condition


def _pattern_test(column: str, pattern: Pattern) -> str:
    """SQL true for every text ``pattern`` can match (and some more). Comparisons on a literal prefix
    are much cheaper than searching the text (SQLite compares TEXT bytewise, in code point order)."""
    if pattern.exact is not None:  # the name, or the name of an emit_nvtx op: "aten::mm, seq = 1, ..."
        name = _quote(pattern.exact)
        return f"{column} = {name} OR ({column} >= {_quote(pattern.exact + ', ')} AND {column} < {_quote(pattern.exact + ',!')})"
    tests = [f"instr({column}, {_quote(chunk)}) > 0" for chunk in pattern.chunks if chunk != pattern.prefix]
    if pattern.prefix:
        upper = pattern.prefix[:-1] + chr(ord(pattern.prefix[-1]) + 1)
        tests.insert(0, f"{column} >= {_quote(pattern.prefix)} AND {column} < {_quote(upper)}")
    return " AND ".join(tests)


def _quote(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _range_names(
    path: Path,
    text_ids: np.ndarray,
    text_codes: np.ndarray,
    texts: list[str],
    domain_codes: np.ndarray,
    domain_names: list[str],
) -> tuple[pd.Categorical, np.ndarray]:
    """nsys's range name: registered string (textId) else text, prefixed "domain:" outside the default
    domain; and which ranges have a registered-name id that resolves to nothing and no text to fall back
    on (named UNREADABLE_RANGE)."""
    strings = read_strings(path, text_ids) if len(present_ids(text_ids)) else {}
    positions, registered = resolve_ids(text_ids, strings)
    labels = [text or UNNAMED_RANGE for text in texts] + registered + [UNREADABLE_RANGE]
    label = text_codes.astype(np.int64)
    has_id = positions >= 0
    label[has_id] = len(texts) + positions[has_id]
    without_text = np.fromiter((not text for text in texts), dtype=bool, count=len(texts))
    unreadable = (text_ids != NO_TEXT_ID) & ~has_id
    if len(texts):
        unreadable &= without_text[text_codes]
    label[unreadable] = len(labels) - 1
    pairs, unique_pairs = pd.factorize(domain_codes.astype(np.int64) * len(labels) + label)
    pair_domain, pair_label = np.divmod(np.asarray(unique_pairs), len(labels))
    pair_names = [
        f"{domain_names[domain]}:{labels[text]}" if domain and domain_names[domain] != UNNAMED_DOMAIN else labels[text]
        for domain, text in zip(pair_domain, pair_label)
    ]
    # Different pairs can spell the same name ("a:b" in the default domain, "b" in domain "a").
    name_codes, names = pd.factorize(pd.Series(pair_names, dtype=object))
    names_by_row = pd.Categorical.from_codes(
        name_codes.astype(np.int32)[pairs], categories=pd.Index(names, dtype=object)
    )
    return names_by_row, unreadable


def _domain_codes(pid: np.ndarray, domain_id: np.ndarray, domains: list[tuple]) -> tuple[np.ndarray, list[str]]:
    """Per row, an index into the returned domain names ("" = the default domain, UNNAMED_DOMAIN for a
    domain created without a name or never created in the capture), resolved per process."""
    codes = np.zeros(len(pid), dtype=np.int32)
    names = [""]
    custom = np.flatnonzero(domain_id != 0)
    if not len(custom):
        return codes, names
    created: dict[tuple[int, int], str] = {}
    for global_tid, domain, name in domains:  # ordered by time: the first creation of an id wins
        if not (isinstance(global_tid, int) and isinstance(domain, int)):
            continue  # a damaged row (REAL or TEXT ids) names no domain
        created.setdefault(((int(global_tid) >> 24) & ID_BITS, int(domain)), name or "")
    # (pid, domain id) pairs as a MultiIndex: domain ids are not guaranteed small, so no packing
    keys, unique_keys = pd.MultiIndex.from_arrays([pid[custom], domain_id[custom]]).factorize()
    known = [created.get((int(p), int(d))) for p, d in unique_keys]
    names_index = {name: index for index, name in enumerate(names)}
    # An unnamed domain is not the default one: --domain default must not take its ranges.
    key_to_code = np.array(
        [names_index.setdefault(name or UNNAMED_DOMAIN, len(names_index)) for name in known], dtype=np.int32
    )
    names = list(names_index)
    codes[custom] = key_to_code[keys]
    return codes, names
