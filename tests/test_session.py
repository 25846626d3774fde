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


def test_two_threads_each_see_their_own_session():
    """``with Session(...)`` holds for the thread that entered it: two threads inside their own at the same
    time (a barrier makes them overlap) each see their own session and settings, and leave the default."""
    barrier = threading.Barrier(2, timeout=10)
    seen: dict[str, tuple] = {}

    def work(nsys: str) -> None:
        session = tracekit.Session(tracekit.Settings(nsys=nsys, decode_workers=len(nsys)))
        with session:
            barrier.wait()  # both sessions entered
            current = tracekit.current_session()
            seen[nsys] = (current is session, current.settings.nsys, current.settings.decode_workers)
            barrier.wait()  # both looked before either leaves

    threads = [threading.Thread(target=work, args=(name,)) for name in ("/opt/a/nsys", "/b/nsys")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert seen == {"/opt/a/nsys": (True, "/opt/a/nsys", 11), "/b/nsys": (True, "/b/nsys", 7)}
    assert tracekit.current_session().settings.nsys == tracekit.Settings.from_environment().nsys


def test_two_asyncio_tasks_each_see_their_own_session():
    import asyncio

    async def work(nsys: str) -> str | None:
        with tracekit.Session(tracekit.Settings(nsys=nsys)):
            await asyncio.sleep(0.01)  # the other task enters its own meanwhile
            return tracekit.current_session().settings.nsys

    async def both() -> list:
        return list(await asyncio.gather(work("/a/nsys"), work("/b/nsys")))

    # on a thread of its own: a session-scoped browser (Playwright's sync API) may hold this thread's loop
    results: list = []
    runner = threading.Thread(target=lambda: results.append(asyncio.run(both())))
    runner.start()
    runner.join()
    assert results == [["/a/nsys", "/b/nsys"]]


def test_open_trace_nsys_holds_for_that_call_only(export, monkeypatch):
    monkeypatch.delenv("TRACEKIT_NSYS", raising=False)
    trace = tracekit.open_trace(export, nsys="/somewhere/nsys")
    assert trace.meta.source == str(export)
    assert tracekit.current_session().settings.nsys is None  # the shared session was not rewritten
    with tracekit.Session() as session:
        tracekit.open_trace(export, nsys="/elsewhere/nsys")
        assert session.settings.nsys is None


def test_overriding_changes_the_settings_of_this_context_only():
    from tracekit.session import current, overriding

    before = current().settings
    barrier = threading.Barrier(2, timeout=10)
    other: list = []

    def look() -> None:
        barrier.wait()
        other.append(current().settings.nsys)

    thread = threading.Thread(target=look)
    thread.start()
    with overriding(nsys="/x/nsys"):
        assert current().settings == before.replace(nsys="/x/nsys")
        barrier.wait()
        thread.join()
    assert other == [before.nsys] and current().settings == before


def test_the_threads_tracekit_starts_read_in_the_callers_session(export, tmp_path):
    """Reads ahead, chunk readers, loads behind and cache writers run in the context that started them: a
    command inside ``with Session()`` starts its reading threads in that session, none in the default one."""
    tracekit.current_session().close()
    default = tracekit.current_session()
    settings = tracekit.Settings(cache_min_bytes=0, cache_home=str(tmp_path / "home"))
    with tracekit.Session(settings, write_behind=True) as session:
        kernels = tracekit.kernels(export)
        ranges = tracekit.ranges(export)
        assert "read_pool" in session.resources
    assert default.resources == {} and default.reads_ahead == {} and default.pending_writes == []
    assert kernels["kernels"]["Instances"].sum() == 14 and "step" in set(ranges["ranges"]["Range"])


def test_work_that_outlives_its_session_stops_what_it_started():
    """A load behind still running when its command's ``with Session()`` ends: what it starts in the
    ended session (reading threads) is stopped when it finishes, not left running for the process."""
    from tracekit.session import in_this_context

    class Readers:
        closed = False

        def close(self) -> None:
            self.closed = True

    ended, started = threading.Event(), []

    def load_behind() -> None:
        ended.wait(5)
        started.append(tracekit.current_session().resource("readers", Readers))

    with tracekit.Session() as session:
        thread = threading.Thread(target=in_this_context(load_behind))
        thread.start()
    ended.set()  # the with-block has closed the session; the load goes on
    thread.join()
    assert started and started[0].closed and session.resources == {}
