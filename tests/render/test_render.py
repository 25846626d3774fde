"""The renderer: each column's format decided once (rendering is linear in the rows), numbers as people
read them, units converted in one place, files written whole."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from tracekit.errors import UsageError
from tracekit.model.result import Result, Table
from tracekit.render import tables as renderer

ROWS = 20_000


def big_table() -> pd.DataFrame:
    """A ranges-like table: counts, ns times, rounded and unrounded floats, names."""
    numbers = np.arange(ROWS)
    return pd.DataFrame(
        {
            "Time (%)": np.round(numbers / ROWS * 100, 1),
            "Total Time (ns)": numbers * 1_000,
            "Avg (ns)": numbers * 2.5,
            "Share": numbers / 7.0,
            "Style": ["PushPop"] * ROWS,
            "Range": [f"aten::op_{i % 500}, seq = {i}" for i in numbers],
        }
    )


@pytest.mark.parametrize("fmt", ["table", "md"])
def test_each_column_format_is_decided_once(monkeypatch, fmt):
    decided = []
    real = renderer.column_format
    monkeypatch.setattr(renderer, "column_format", lambda series: decided.append(series.name) or real(series))
    frame = big_table()
    text = renderer.render_text(Result.of("ranges", frame), fmt)
    assert decided == list(frame.columns)  # once per column, not once per cell
    lines = text.splitlines()
    assert len(lines) == ROWS + 2
    assert "19,999,000" in lines[-1] and "aten::op_499, seq = 19999" in lines[-1]


def test_numbers_as_people_read_them():
    frame = pd.DataFrame(
        {
            "Total Time (ns)": [1_234_567, 0],
            "Avg (ns)": [1234.5, 0.25],
            "Ratio": [np.nan, 2.0],
            "Rows": pd.array([3, None], dtype="Int64"),
            "Ok": [True, False],
            "Name": ["x" * 200, None],
        }
    )
    rows = renderer.terminal_table(frame).splitlines()
    # ns statistics to one decimal as nsys prints them (halves away from zero), whatever the values
    assert rows[2].split()[:2] == ["1,234,567", "1,234.5"] and rows[3].split()[:3] == ["0", "0.3", "2.0"]
    assert rows[2].rstrip().endswith("x" * 109 + "…")  # long names shortened in the terminal only
    assert "yes" in rows[2] and "no" in rows[3]
    assert renderer.markdown_table(frame).splitlines()[2].endswith("x" * 200 + " |")


def test_process_thread_device_and_stream_ids_print_as_ids():
    """Identifiers are not quantities: advise's nsys rules printed "PID 5,738  TID 5,738" beside its
    evidence's "pid 5738 tid 5738"."""
    frame = pd.DataFrame(
        {
            "Duration (ns)": [1_234_567, 2_000],
            "PID": [4_194_304, 5_738],
            "TID": pd.array([5_764, None], dtype="Int64"),
            "Device": [0, 1],
            "Stream": [7, 13],
        }
    )
    rows = renderer.terminal_table(frame).splitlines()
    assert rows[2].split() == ["1,234,567", "4194304", "5764", "0", "7"]
    assert rows[3].split() == ["2,000", "5738", "1", "13"]
    assert renderer.markdown_table(frame).splitlines()[2] == "| 1,234,567 | 4194304 | 5764 | 0 | 7 |"


def test_one_precision_per_unit_across_a_table():
    """Columns of one unit print with one precision (a row never shows 6,507.85604 beside 6,507.856041);
    shares one decimal; sizes to the KiB; halves away from zero."""
    frame = pd.DataFrame(
        {
            "Total (ms)": [6507.856041, 12.0],
            "Min (ms)": [0.000012, 1.0],
            "Share (%)": [0.25, 99.75],
            "Size (MiB)": [0.0000001, 3.0977],
            "Ratio": [1.23456, 2.0],
        }
    )
    rows = renderer.terminal_table(frame).splitlines()
    assert rows[2].split() == ["6,507.856041", "0.000012", "0.3", "0.000", "1.23"]
    assert rows[3].split() == ["12.000000", "1.000000", "99.8", "3.098", "2.00"]


def test_time_units_are_converted_once_here():
    frame = pd.DataFrame({"Total Time (ns)": [1_500_000], "GPU (%)": [50.0], "Size (MiB)": [3.0]})
    converted = renderer.in_unit(frame, "ms")
    assert list(converted.columns) == ["Total Time (ms)", "GPU (%)", "Size (MiB)"]
    assert converted["Total Time (ms)"].tolist() == [1.5] and converted["Size (MiB)"].tolist() == [3.0]
    assert renderer.in_unit(converted, "us") is converted  # already converted: left alone


def test_several_tables_go_to_one_file_each(tmp_path):
    result = Result([Table("first", pd.DataFrame({"a": [1]})), Table("second", pd.DataFrame({"b": [2.5]}))])
    written = renderer.write(result, "csv", tmp_path / "out.csv")
    assert [path.name for path in written] == ["out.first.csv", "out.second.csv"]
    assert (tmp_path / "out.second.csv").read_text() == "b\n2.5\n"
    folder = tmp_path / "tables"
    folder.mkdir()
    written = renderer.write(result, "parquet", folder)
    assert sorted(path.name for path in written) == ["first.parquet", "second.parquet"]
    assert pd.read_parquet(folder / "first.parquet")["a"].tolist() == [1]
    assert not [path for path in tmp_path.rglob("*") if "partial" in path.name]  # temporary files are gone


def test_a_failed_write_leaves_no_file(tmp_path, monkeypatch):
    def fail(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(pd.DataFrame, "to_parquet", fail)
    target = tmp_path / "k.parquet"
    with pytest.raises(OSError, match="No space left"):
        renderer.write(Result.of("k", pd.DataFrame({"a": [1]})), "parquet", target)
    assert list(tmp_path.iterdir()) == []  # neither the file nor a half-written temporary one


def test_written_files_have_ordinary_permissions_and_follow_links(tmp_path):
    import os
    import stat

    old = os.umask(0o022)
    try:
        plain = renderer.write(Result.of("k", pd.DataFrame({"a": [1]})), "csv", tmp_path / "k.csv")[0]
        assert stat.S_IMODE(plain.stat().st_mode) == 0o644  # as any file the user writes
        kept = tmp_path / "kept.csv"
        kept.write_text("old\n")
        kept.chmod(0o640)
        renderer.write(Result.of("k", pd.DataFrame({"a": [2]})), "csv", kept)
        assert stat.S_IMODE(kept.stat().st_mode) == 0o640 and kept.read_text() == "a\n2\n"
        link = tmp_path / "link.csv"
        link.symlink_to(kept)
        renderer.write(Result.of("k", pd.DataFrame({"a": [3]})), "csv", link)
        assert link.is_symlink() and kept.read_text() == "a\n3\n"  # written through the link
    finally:
        os.umask(old)


def test_a_missing_folder_is_named(cli, tmp_path):
    frame = Result.of("k", pd.DataFrame({"a": [1]}))
    with pytest.raises(UsageError, match=r"missing/k.csv: the folder .*missing does not exist"):
        renderer.write(frame, "csv", tmp_path / "missing" / "k.csv")
    with pytest.raises(UsageError, match="is a folder: give a file name"):
        renderer.write(frame, "json", tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_a_device_or_pipe_is_written_into_never_replaced(tmp_path):
    """`-o /dev/null` (or a FIFO) gets the bytes; a rename would replace the device node with a file."""
    import os
    import stat
    import threading
    import time

    from tracekit.errors import UsageError

    renderer.write(Result.of("k", pd.DataFrame({"a": [1]})), "csv", "/dev/null")
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    received = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_text()))
    reader.start()
    for _ in range(200):  # until the reader's thread has the FIFO open (a busy machine starts it late)
        try:
            renderer.write(Result.of("k", pd.DataFrame({"a": [7]})), "csv", fifo)
            break
        except UsageError:
            time.sleep(0.05)
    reader.join(timeout=10)
    assert received == ["a\n7\n"] and stat.S_ISFIFO(fifo.stat().st_mode)
    assert sorted(path.name for path in tmp_path.iterdir()) == ["pipe"]  # no temporary left beside it


def test_rows_of_sentences_show_as_cards_in_a_terminal_and_as_tables_in_files():
    frame = pd.DataFrame(
        {
            "Rank": [1, 2],
            "Finding": ["host stall", "launch-bound"],
            "What": ["a " * 70 + "end", "short"],
            "Time (ns)": [1_500_000, 0],
            "Fix": ["do this", None],
        }
    )
    result = Result([Table("findings", frame, "Findings", cards=2)])
    text = renderer.render_text(result, "table", unit="ms")
    card, second = text.split("\n\n")[1:]
    lines = card.splitlines()
    assert lines[0] == "1  host stall"
    assert lines[1].startswith("  What:      a a ") and all(len(line) <= 110 for line in lines)
    assert lines[2].startswith("             a a ")  # wrapped under the value, not the label
    assert lines[-2] == "  Time (ms): 1.5" and lines[-1] == "  Fix:       do this"
    assert second.splitlines() == ["2  launch-bound", "  What:      short", "  Time (ms): 0.0"]  # no Fix: no line
    assert renderer.render_text(result, "csv").splitlines()[0] == "Rank,Finding,What,Time (ns),Fix"
    assert "| Rank | Finding |" in renderer.render_text(result, "md")


def test_a_table_of_no_rows_reads_the_same_in_every_output_for_people(tmp_path):
    """report.md printed a header over nothing where the terminal and report.html say "(no rows)" (a trace
    whose one kernel leaves no gap: its idle-by-cause table), so the two pages of one report differed."""
    from tracekit.render.html import table_html

    empty = pd.DataFrame({"GPU": pd.Series([], dtype=object), "Idle (ms)": pd.Series([], dtype=float)})
    assert renderer.terminal_table(empty) == "(no rows)"
    assert renderer.markdown_table(empty) == "(no rows)"
    assert table_html(empty) == "<p>(no rows)</p>"
    assert renderer.render_text(Result.of("idle", empty, "Idle by cause"), "md") == "**Idle by cause**\n\n(no rows)"
