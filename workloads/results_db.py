"""The results database of `tracekit bench --db`: checked before a sweep starts, one committed row per
finished configuration.

A results database is an SQLite file whose ``application_id`` says tracekit (set when tracekit creates
it) holding the table ``runs``. ``ResultsDB.open`` refuses, before any configuration runs and without
writing a byte, a path whose folder does not exist or is not writable, a file that is not SQLite, and
an SQLite file of anything else (another application id, or other tables): appending to someone's
database would alter it. A database written by an older tracekit (no id, only a ``runs`` table with
our columns) is adopted. Each ``add`` is its own transaction, so an interrupted sweep keeps every
configuration that finished.
"""

from __future__ import annotations

import json
import os
import platform
import sqlite3
import subprocess
from datetime import datetime, timezone
from pathlib import Path

from tracekit.errors import UsageError
from tracekit.run_config import MODEL, RESULTS_TABLE

# SQLite's header field for "which application's file is this" (PRAGMA application_id): "TRKT".
APPLICATION_ID = 0x54524B54
SQLITE_MAGIC = b"SQLite format 3\x00"
# Columns every runs table tracekit wrote has had: how a database from before the application id is known.
OUR_COLUMNS = {MODEL.key, "time_utc", "tracekit_version", "samples_ms"}


class ResultsDB:
    """An open results database; ``rows`` is how many rows it holds."""

    def __init__(self, path: Path, connection: sqlite3.Connection):
        self.path = path
        self.connection = connection
        self.added = 0

    @classmethod
    def open(cls, path: str | Path) -> ResultsDB:
        """Check ``path`` (see the module docstring) and open it for appending; UsageError saying what
        is wrong, before anything runs or is written."""
        path = Path(path)
        if path.is_dir():
            raise UsageError(f"--db {path} is a folder: give a database file name, e.g. results.db")
        folder = path.parent if str(path.parent) else Path(".")
        if not folder.is_dir():
            raise UsageError(f"--db {path}: the folder {folder} does not exist")
        if path.exists() and not path.is_file():
            raise UsageError(f"--db {path} is not a regular file (a pipe or a device?): give a database file name")
        if path.exists():
            _check_ours(path)
        elif not os.access(folder, os.W_OK):
            raise UsageError(f"--db {path}: the folder {folder} is not writable")
        try:
            connection = sqlite3.connect(path)
            connection.execute(f"PRAGMA application_id = {APPLICATION_ID}")
            connection.commit()
        except sqlite3.Error as error:
            raise UsageError(f"--db {path} cannot be written: {error}") from None
        return cls(path, connection)

    @property
    def rows(self) -> int:
        if not _tables(self.connection):
            return 0
        return int(self.connection.execute(f"SELECT count(*) FROM {RESULTS_TABLE}").fetchone()[0])

    def add(self, summary: dict, samples_ms: dict, environment: dict) -> None:
        """Append one configuration's row (its summary, where and when it ran, with what: torch, CUDA,
        driver, Python and tracekit versions; its samples), committed."""
        import sqlite_utils

        row = {
            **summary,
            "time_utc": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "host": platform.node(),
            **environment,
            "git_revision": git_revision(),
            "samples_ms": json.dumps(samples_ms),
        }
        # .table(), not [name]: the results are a table (database[name] may also be a view).
        sqlite_utils.Database(self.connection).table(RESULTS_TABLE).insert(row, alter=True)
        self.connection.commit()  # this configuration is saved, whatever happens to the next
        self.added += 1

    def close(self) -> None:
        self.connection.close()


def _tables(connection: sqlite3.Connection) -> set[str]:
    rows = connection.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'view')").fetchall()
    return {name for (name,) in rows if not name.startswith("sqlite_")}


def _check_ours(path: Path) -> None:
    """UsageError unless the existing file is an empty SQLite file or a results database; read-only."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(len(SQLITE_MAGIC))
    except OSError as error:
        raise UsageError(f"--db {path} cannot be read: {error.strerror}") from None
    if head and head != SQLITE_MAGIC:
        raise UsageError(f"--db {path} exists and is not an SQLite database: refusing to touch it")
    if not head:
        return  # an empty file: SQLite makes it a new database
    if not os.access(path, os.W_OK):
        raise UsageError(f"--db {path} is not writable")
    try:
        connection = sqlite3.connect(f"file:{path.resolve()}?mode=ro", uri=True)
        try:
            application = connection.execute("PRAGMA application_id").fetchone()[0]
            tables = _tables(connection)
            info = (
                connection.execute(f"PRAGMA table_info({RESULTS_TABLE})").fetchall() if RESULTS_TABLE in tables else []
            )
            columns = {row[1] for row in info}
            # what an insert of our rows could trip over: a view, a trigger, a required column we never fill
            kind = connection.execute("SELECT type FROM sqlite_master WHERE name = ?", (RESULTS_TABLE,)).fetchone()
            triggers = connection.execute("SELECT count(*) FROM sqlite_master WHERE type = 'trigger'").fetchone()[0]
            required = {row[1] for row in info if row[3] and row[4] is None and not row[5]}
        finally:
            connection.close()
    except sqlite3.Error as error:
        raise UsageError(f"--db {path} is not a readable SQLite database ({error}): refusing to touch it") from None
    ours = application == APPLICATION_ID or (application == 0 and tables == {RESULTS_TABLE} and OUR_COLUMNS <= columns)
    if application == 0 and not tables:
        ours = True  # an empty database
    if ours and RESULTS_TABLE in tables and (kind != ("table",) or triggers or required):
        why = (
            f"{RESULTS_TABLE} is a view"
            if kind != ("table",)
            else "it has triggers"
            if triggers
            else f"{RESULTS_TABLE} has NOT NULL columns tracekit does not fill ({', '.join(sorted(required))})"
        )
        raise UsageError(
            f"--db {path}: {why}, so tracekit's rows cannot be added; refusing to alter it; give a new file"
        )
    if not ours or tables - {RESULTS_TABLE}:
        what = f"tables {', '.join(sorted(tables))}" if tables else f"application id {application:#x}"
        raise UsageError(
            f"--db {path} is another application's SQLite database ({what}): refusing to alter it; give a new "
            "file or a `tracekit bench --db` database"
        )


def git_revision() -> str | None:
    """Short commit of the tracekit checkout these workloads run from (None outside git)."""
    try:
        result = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=Path(__file__).parent,
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return result.stdout.strip() or None if result.returncode == 0 else None
