"""Values analyses derive from a large export (the op-launch join, op categories, idle gaps) are kept in its
cache: the next process reads them instead of computing them, with the notes computing them found; a change
of tracekit's code, of the export, or a damaged file computes them again; a windowed trace never uses them."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from helpers.nsys_builder import ExportBuilder
from helpers.steps import build_step

from tracekit.analysis.primitives.categories import op_categories
from tracekit.analysis.primitives.joins import op_launches
from tracekit.analysis.primitives.trace_window import trace_window
from tracekit.analysis.waits import idle
from tracekit.analysis.waits.idle import idle_gaps
from tracekit.model.derived import PERSISTED
from tracekit.model.trace import command_notes
from tracekit.sources import derived_cache, open_trace
from tracekit.sources.cache import SUFFIX


@pytest.fixture
def export(tmp_path, monkeypatch):
    monkeypatch.setenv("TRACEKIT_CACHE_MIN_BYTES", "0")  # cache even tiny exports
    b = ExportBuilder("2026.2")
    build_step(b, 0)
    build_step(b, 2000)
    b.kernel(900_000, 901_000, "orphan_kernel")  # no launching call (no launch_at, no tid): a note
    return b.write(tmp_path / "steps.sqlite")


def _computed(monkeypatch) -> list[str]:
    """The names of the kept values computed (not read) from now on: each one computed is stored."""
    calls: list[str] = []
    store = derived_cache.DerivedCache.store

    def counting(self, key, value, notes):
        if key[0] in PERSISTED:
            calls.append(key[0].rsplit(".", 1)[-1])
        return store(self, key, value, notes)

    monkeypatch.setattr(derived_cache.DerivedCache, "store", counting)
    return calls


def _derived(trace) -> tuple[pd.DataFrame, object, np.ndarray, list[str]]:
    with command_notes() as found:
        gaps = idle_gaps(trace)
        launches = op_launches(trace)
        codes = op_categories(trace)
    return gaps, launches, codes, found.get(id(trace), [])


def test_a_second_process_reads_what_the_first_computed(export, monkeypatch):
    gaps, launches, codes, notes = _derived(open_trace(export))
    kept = export.with_name(export.name + SUFFIX) / "derived"
    assert sorted(path.name.split("-", 1)[0] for path in kept.iterdir()) == [
        "cached_gaps",
        "join_launches",
        "op_categories",
    ]
    computed = _computed(monkeypatch)
    again_gaps, again_launches, again_codes, again_notes = _derived(open_trace(export))
    assert computed == []  # nothing computed: every value read
    pd.testing.assert_frame_equal(again_gaps, gaps)
    assert list(again_gaps.dtypes.astype(str)) == list(gaps.dtypes.astype(str))
    assert len(gaps) and set(gaps["Cause"].astype(str)) <= set(idle.CAUSES)
    assert type(again_launches) is type(launches)
    for name in ("found", "row", "start", "end", "pid", "tid"):
        np.testing.assert_array_equal(getattr(again_launches, name), getattr(launches, name))
    np.testing.assert_array_equal(again_codes, codes)
    assert not again_codes.flags.writeable  # read-only, as computed values are
    assert any("no recorded launching call" in note for note in notes)
    assert again_notes == notes  # the notes computing them found are told again


def test_a_change_of_code_computes_again_and_replaces_the_old(export, monkeypatch):
    _derived(open_trace(export))
    kept = export.with_name(export.name + SUFFIX) / "derived"
    before = {path.name for path in kept.iterdir()}
    monkeypatch.setattr(derived_cache, "code_digest", lambda: "another version")
    computed = _computed(monkeypatch)
    _derived(open_trace(export))
    assert sorted(computed) == ["_cached_gaps", "_join_launches", "op_categories"]
    after = {path.name for path in kept.iterdir()}
    assert len(after) == 3 and not after & before  # the older code's values are gone


def test_a_damaged_value_is_computed_again(export, monkeypatch):
    gaps = _derived(open_trace(export))[0]
    kept = export.with_name(export.name + SUFFIX) / "derived"
    (folder,) = [path for path in kept.iterdir() if path.name.startswith("cached_gaps")]
    column = folder / "1.npy"
    data = bytearray(column.read_bytes())
    data[-1] ^= 0xFF  # a flipped byte in the last start time
    column.write_bytes(bytes(data))
    computed = _computed(monkeypatch)
    pd.testing.assert_frame_equal(_derived(open_trace(export))[0], gaps)
    assert "_cached_gaps" in computed


def test_a_changed_export_does_not_read_the_old_values(export, monkeypatch):
    _derived(open_trace(export))
    b = ExportBuilder("2026.2")
    build_step(b, 0)  # one step now
    b.write(export)
    computed = _computed(monkeypatch)
    gaps = _derived(open_trace(export))[0]
    assert "_cached_gaps" in computed and gaps["Start (ns)"].max() < 2_000_000


def test_a_windowed_trace_computes_its_own(export, monkeypatch):
    trace = open_trace(export)
    whole = _derived(trace)[0]
    window = trace_window(trace, 0, 2_000)
    assert window.kept_values is None
    assert len(_derived(window)[0]) < len(whole)


@pytest.mark.parametrize("forged", ["a file elsewhere", "a frame of no columns", "a 2-D array", "notes not texts"])
def test_a_foreign_layout_is_computed_again(export, tmp_path, forged, monkeypatch):
    """A layout.json another program wrote (or a damaged one that still parses) never makes a value of another
    shape, nor reads a file outside its folder (a pipe or a device would hang the command): the value is
    computed again."""
    import json

    from tracekit.sources.cache import checksum

    gaps, _, codes, notes = _derived(open_trace(export))
    kept = export.with_name(export.name + SUFFIX) / "derived"
    folders = {path.name.split("-", 1)[0]: path for path in kept.iterdir()}
    name = "cached_gaps" if forged in ("a frame of no columns", "notes not texts") else "op_categories"
    layout_file = folders[name] / "layout.json"
    layout = json.loads(layout_file.read_text())
    if forged == "a file elsewhere":
        elsewhere = np.zeros(len(codes), dtype=codes.dtype)
        np.save(tmp_path / "elsewhere.npy", elsewhere, allow_pickle=False)
        layout["arrays"]["value"].update(file=str(tmp_path / "elsewhere.npy"), checksum=checksum(elsewhere))
    elif forged == "a frame of no columns":
        layout["arrays"] = {}
    elif forged == "a 2-D array":
        square = np.zeros((2, 2), dtype=codes.dtype)
        np.save(folders[name] / "0.npy", square, allow_pickle=False)
        layout["arrays"]["value"]["checksum"] = checksum(square)
    else:
        layout["notes"] = "one text"
    layout_file.write_text(json.dumps(layout))
    computed = _computed(monkeypatch)
    again_gaps, _, again_codes, again_notes = _derived(open_trace(export))
    assert computed == ["_cached_gaps" if name == "cached_gaps" else name]
    pd.testing.assert_frame_equal(again_gaps, gaps)
    np.testing.assert_array_equal(again_codes, codes)
    assert again_notes == notes


def test_the_values_of_each_choice_of_options_are_kept_side_by_side(export, monkeypatch):
    """Keeping the gaps per stream does not remove the gaps per device (``timeline`` and ``idle --per-stream``
    in turn would compute them every time): only an older code's or export's values are removed."""
    trace = open_trace(export)
    per_device, per_stream = idle_gaps(trace), idle_gaps(trace, per_stream=True)
    computed = _computed(monkeypatch)
    again = open_trace(export)
    pd.testing.assert_frame_equal(idle_gaps(again), per_device)
    pd.testing.assert_frame_equal(idle_gaps(again, per_stream=True), per_stream)
    assert computed == []


def test_a_value_written_for_the_export_as_it_was_is_not_read_for_the_new_one(export, monkeypatch, tmp_path):
    """A process still writing a value when the export is replaced and its cache rebuilt (by another process)
    writes it into the new cache: its name holds the old export's identity, so it is never read."""
    import shutil

    _derived(open_trace(export))
    kept = export.with_name(export.name + SUFFIX) / "derived"
    shutil.copytree(kept, tmp_path / "late")  # what the first process writes late
    b = ExportBuilder("2026.2")
    build_step(b, 0)  # one step now
    b.write(export)
    new = open_trace(export)
    assert len(new.gpu_ops)  # read: the table cache rebuilt for the new export
    shutil.copytree(tmp_path / "late", kept, dirs_exist_ok=True)
    computed = _computed(monkeypatch)
    gaps = idle_gaps(new)
    assert "_cached_gaps" in computed and gaps["Start (ns)"].max() < 2_000_000
