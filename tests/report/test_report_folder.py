"""The folder ``report`` writes by default, ``reports/<name>``: a name made from the inputs' names is a
plain folder inside ``reports``, whatever the file is called (a stem of dots would name ``reports`` itself,
or the working folder, which the report would then replace whole)."""

from __future__ import annotations

import os

import pytest
from helpers.small_export import build_small


@pytest.mark.parametrize(
    ("file_name", "folder"),
    [("..sqlite", "report"), ("...sqlite", "report"), (".hidden.sqlite", "hidden"), ("..x.sqlite", "x")],
)
def test_a_default_report_folder_is_a_plain_folder_inside_reports(cli, tmp_path, monkeypatch, file_name, folder):
    trace = build_small("2022.4", tmp_path / file_name)
    work = tmp_path / "work"
    work.mkdir()
    before = os.stat(work).st_ino
    monkeypatch.chdir(work)
    result = cli("report", trace)
    assert result.exit_code == 0, result.output
    assert os.stat(work).st_ino == before  # the working folder itself was not replaced
    assert sorted(os.listdir(work)) == ["reports"]
    assert os.listdir(work / "reports") == [folder]
    assert (work / "reports" / folder / "report.md").is_file()
