"""A notebook's session: several commands in one process leave nothing behind once the session closes
(reading threads, reads started ahead, cache writes, inputs protected from -o), and workers read
with the settings they are handed, never through the environment."""

from __future__ import annotations

import os
import threading

import pytest
from helpers.nsys_builder import ExportBuilder
from helpers.steps import build_step

import tracekit
from tracekit import files
from tracekit.analysis.kernels.kernels_command import KernelsOptions
from tracekit.errors import UsageError


def tracekit_threads() -> list[str]:
    return sorted(thread.name for thread in threading.enumerate() if thread.name.startswith("tracekit-"))


@pytest.fixture
def export(tmp_path):
    b = ExportBuilder("2026.2")
    build_step(b, 0)
    build_step(b, 2000)
    return b.write(tmp_path / "steps.sqlite")


def test_three_commands_then_close_leave_nothing_behind(export, tmp_path):
    tracekit.current_session().close()  # what earlier tests in this process left in the default session
    assert tracekit_threads() == []
    # Every export cached, its tables written behind (as the command line does): the most state there is.
    settings = tracekit.Settings(cache_min_bytes=0, cache_home=str(tmp_path / "home"))
    session = tracekit.Session(settings, write_behind=True)
    with session:
        assert tracekit.current_session() is session
        kernels = tracekit.kernels(export)
        ranges = tracekit.ranges(export)
        steps = tracekit.steps(export)
        assert session.inputs == {os.path.realpath(export)}
        assert session.resources  # the reading threads were started
        with pytest.raises(UsageError, match="input"):  # an input is protected from being written over
            files.check_target(export)
    assert session.closed
    assert tracekit_threads() == []
    assert (session.inputs, session.input_ids, session.reads_ahead, session.pending_writes, session.resources) == (
        set(),
        set(),
        {},
        [],
        {},
    )
    assert tracekit.current_session() is not session  # the default session is back in use
    assert list(tracekit.current_session().inputs) == []  # and it never saw those inputs
    assert kernels["kernels"]["Instances"].sum() == 14 and len(steps["steps"]) == 2
    assert {"step", "forward", "backward", "optimizer"} <= set(ranges["ranges"]["Range"])
    cache = export.with_name(export.name + ".tracekit-cache")
    assert {path.name for path in cache.iterdir()} >= {"gpu_ops", "launches", "ranges"}  # written before close returned


def test_the_default_session_can_be_closed_and_used_again(export):
    first = tracekit.kernels(export)
    tracekit.current_session().close()
    assert tracekit_threads() == [] and not tracekit.current_session().inputs
    again = tracekit.kernels(export)
    assert again["kernels"].equals(first["kernels"])
    tracekit.current_session().close()


def test_a_worker_reads_with_the_settings_it_is_handed(export, monkeypatch):
    """read_part (what pool and Dask workers run) leaves os.environ as it found it and reads with the
    client's settings, one decoding process per file."""
    from tracekit.analysis.many.pool import read_part
    from tracekit.session import Settings

    monkeypatch.setenv("TRACEKIT_WORKERS", "7")
    before = dict(os.environ)
    seen = []
    import tracekit.analysis.many.tables as many_tables

    original = many_tables.kernels_part

    def spy(trace, part, options, limit):
        seen.append(tracekit.current_session().settings)
        return original(trace, part, options, limit)

    monkeypatch.setattr(many_tables, "kernels_part", spy)
    settings = Settings(decode_workers=3, cache=False)
    part = read_part(str(export), "a", "tracekit.analysis.many.tables:kernels_part", KernelsOptions(), 10, settings)
    assert dict(os.environ) == before
    assert seen == [settings.replace(decode_workers=1)]
    assert part.label == "a"  # type: ignore[union-attr]
