"""What a tool call may read and write (``tracekit.mcp.confine``), and the setting that keeps caches and report
exports out of the inputs' folders (``Settings.beside_inputs``)."""

from __future__ import annotations

import pytest
from helpers.nsys_builder import ExportBuilder

from tracekit.mcp.confine import MIB, Confinement, ConfinementError
from tracekit.session import Session, Settings
from tracekit.sources import open_trace
from tracekit.sources.cache import SUFFIX, TableCache


@pytest.fixture
def tree(tmp_path):
    """root/ with a trace, a link to a trace outside and a folder of traces; outside/; out/ with a link out."""
    root, outside, out = tmp_path / "root", tmp_path / "outside", tmp_path / "out"
    for folder in (root / "many", outside, out):
        folder.mkdir(parents=True)
    builder = ExportBuilder("2026.2")
    builder.kernel(0, 1_000, "gemm")
    builder.write(root / "a.sqlite")
    builder.write(root / "many" / "rank0.sqlite")
    builder.write(root / "many" / "rank1.sqlite")
    builder.write(outside / "secret.sqlite")
    (root / "link.sqlite").symlink_to(outside / "secret.sqlite")
    (out / "away").symlink_to(outside)
    return root, outside, out


def test_inputs_resolve_under_the_roots(tree, monkeypatch):
    root, _, out = tree
    confinement = Confinement.of([root], out, 100)
    monkeypatch.chdir(root)
    assert confinement.inputs(["a.sqlite"]) == [str(root / "a.sqlite")]
    assert confinement.inputs([str(root / "many")]) == [str(root / "many" / f"rank{i}.sqlite") for i in (0, 1)]
    assert confinement.inputs([f"{root}/many/../a.sqlite"]) == [str(root / "a.sqlite")]


OUTSIDE = [
    "{outside}/secret.sqlite",
    "{root}/../outside/secret.sqlite",
    "{root}/link.sqlite",
    "{root}/*.sqlite",
    "{root}",
    "/etc/passwd",
    "{root}/../outside/none.sqlite",
]


@pytest.mark.parametrize("given", OUTSIDE)
def test_an_input_outside_every_root_is_refused(tree, given):
    root, outside, out = tree
    confinement = Confinement.of([root], out, 100)
    with pytest.raises(ConfinementError, match="is outside the folders this server may read"):
        confinement.inputs([given.format(root=root, outside=outside)])


def test_a_second_root_is_read_too(tree):
    root, outside, out = tree
    confinement = Confinement.of([root, outside], out, 100)
    assert confinement.inputs([str(root / "link.sqlite")]) == [str(outside / "secret.sqlite")]


def test_the_inputs_of_one_call_are_bounded(tree):
    root, _, out = tree
    size = (root / "a.sqlite").stat().st_size
    with pytest.raises(ConfinementError, match=r"in one call \(--max-input-mb\)"):
        Confinement.of([root], out, 1.5 * size / MIB).inputs([str(root / "many")])


@pytest.mark.parametrize("given", ["../x.csv", "{outside}/x.csv", "away/x.csv", "/etc/x.csv", "."])
def test_an_output_outside_out_is_refused(tree, given):
    root, outside, out = tree
    with pytest.raises(ConfinementError, match="outside the folder this server writes"):
        Confinement.of([root], out, 100).writable(given.format(outside=outside))


def test_outputs_land_in_out_and_without_out_nothing_is_written(tree):
    root, _, out = tree
    assert Confinement.of([root], out, 100).writable("tables/k.csv") == out / "tables" / "k.csv"
    assert (out / "tables").is_dir()
    with pytest.raises(ConfinementError, match="this server writes no files: start it with --out DIR"):
        Confinement.of([root], None, 100).writable("k.csv")


def test_a_report_that_needs_exporting_is_refused_without_out(tree):
    root, _, _ = tree
    (root / "run.nsys-rep").write_bytes(b"not really a report")
    with pytest.raises(ConfinementError, match="exported to SQLite on first read, which writes a file"):
        Confinement.of([root], None, 100).inputs([str(root / "run.nsys-rep")])


def test_caches_go_under_cache_home_when_not_beside_the_inputs(tree, tmp_path):
    root, _, _ = tree
    home = tmp_path / "home"
    with Session(Settings(cache_min_bytes=0, cache_home=str(home), beside_inputs=False)):
        cache = TableCache.for_export(root / "a.sqlite")
        assert cache is not None and home in cache.folder.parents
        assert len(open_trace(root / "a.sqlite").gpu_ops) == 1
    assert not (root / f"a.sqlite{SUFFIX}").exists()
    assert (cache.folder / "gpu_ops").is_dir()
