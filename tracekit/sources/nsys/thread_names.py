"""The names nsys recorded of host processes and threads (``schema.THREAD_NAMES``), for the timeline's tracks.

``PROCESSES`` names each process by its ``globalPid``; ``ThreadNames`` names each thread by its ``globalTid``
through a string id. Both hold the pid in bits 24-47 and the tid in the low 24 bits (``thread_ids``). Small
tables (one row per process or thread the machine ran, a few hundred), read with plain SQL; a table or column
an export lacks reads as no names, rows of the wrong type are left out.
"""

from __future__ import annotations

from contextlib import closing
from pathlib import Path

import pandas as pd

from tracekit.model.schema import THREAD_NAMES
from tracekit.sources.nsys.sqlite_columns import connect_readonly

# (table, the columns it needs, the query of its (pid, tid, name) rows in the order nsys wrote them)
QUERIES = (
    (
        "PROCESSES",
        {"globalPid", "name"},
        "SELECT (globalPid >> 24) & 16777215, -1, name FROM PROCESSES "
        "WHERE typeof(globalPid) = 'integer' AND typeof(name) = 'text' AND name != '' ORDER BY rowid",
    ),
    (
        "ThreadNames",
        {"globalTid", "nameId"},
        "SELECT (t.globalTid >> 24) & 16777215, t.globalTid & 16777215, s.value FROM ThreadNames AS t "
        "JOIN StringIds AS s ON s.id = t.nameId "
        "WHERE typeof(t.globalTid) = 'integer' AND typeof(s.value) = 'text' AND s.value != '' ORDER BY t.rowid",
    ),
)


def read_thread_names(path: Path, tables: frozenset[str]) -> pd.DataFrame:
    """Every named process (tid -1) and thread of the export; a thread named twice keeps its last name."""
    rows: list[tuple] = []
    with closing(connect_readonly(path)) as connection:
        for table, needed, query in QUERIES:
            if table in tables and needed <= {row[1] for row in connection.execute(f"PRAGMA table_info({table})")}:
                rows += connection.execute(query).fetchall()
    if not rows:
        return THREAD_NAMES.empty()
    frame = pd.DataFrame(rows, columns=["pid", "tid", "name"]).drop_duplicates(["pid", "tid"], keep="last")
    return pd.DataFrame(
        {
            "pid": frame["pid"].to_numpy(dtype="int64"),
            "tid": frame["tid"].to_numpy(dtype="int64"),
            "name": pd.Categorical(frame["name"].to_numpy(dtype=object)),
        }
    )
