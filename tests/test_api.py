"""The public Python API (``import tracekit``): the one-liner of the issue, its functions' keywords equal to
the registry's options, and, for every command of the registry, the API's tables equal to what the
command line writes with ``--format parquet`` (adding a command to the registry adds it here)."""

from __future__ import annotations

import dataclasses
import inspect
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from helpers.nsys_builder import ExportBuilder
from helpers.paths import ROOT, SHARED_TRACES
from helpers.snapshot_builder import two_snapshots
from helpers.steps import build_step

import tracekit
from tracekit.cli import main
from tracekit.commands.registry import COMMANDS
from tracekit.model.option_fields import ManyOptions
from tracekit.model.options import declared_fields
from tracekit.render import tables as renderer

MIB = 2**20
NCCL = "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)"


def build_rich(b: ExportBuilder, offset: int) -> None:
    """Two training steps, an all-reduce half hidden behind compute, a blocking sync and a copy."""
    build_step(b, offset)
    build_step(b, offset + 2000)
    b.kernel(offset + 600, offset + 900, NCCL, stream=8, launch_at=offset + 420)
    b.push_pop(offset + 400, offset + 450, "aten::all_reduce, seq = 1, op_id = 1")  # an emit_nvtx op: for ops
    b.runtime(offset + 960, offset + 990, "cudaStreamSynchronize_v3020", 9000 + offset)
    b.memcpy(offset + 1500, offset + 1600, copy_kind=1, size=4096, launch_at=offset + 1490)


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    """Two built exports (two ranks or two runs, unequal) and two built snapshots."""
    folder = tmp_path_factory.mktemp("api")
    a, b = ExportBuilder("2026.2"), ExportBuilder("2022.4")
    build_rich(a, 0)
    build_rich(b, 0)
    b.kernel(5000, 5400, "ampere_sgemm_128x64_tn", launch_at=4990)  # b: one more GEMM, outside the steps
    small, large = two_snapshots(folder)
    return {
        "a": a.write(folder / "a.sqlite"),
        "b": b.write(folder / "b.sqlite"),
        "m1": small,
        "m2": large,
    }


def inputs_of(kind: str, paths: dict, many: bool) -> list:
    """What a command of input ``kind`` is given: one input, or (``many``) several to merge or compare."""
    if kind == "snapshots":
        return [paths["m1"], paths["m2"]] if many else [paths["m1"]]
    if kind in ("pair", "many") or many:
        return [paths["a"], paths["b"]]
    return [paths["b"]]


CASES = [(name, False) for name in COMMANDS] + [(name, True) for name, c in COMMANDS.items() if c.takes_many]


@pytest.mark.parametrize(("name", "many"), CASES, ids=[f"{n}-{'many' if m else 'one'}" for n, m in CASES])
def test_the_api_equals_the_command_line_in_parquet(cli, inputs, tmp_path, name, many):
    """Every table the API returns equals, value for value and column for column, the Parquet the command
    line writes for the same inputs (in ns: --unit ns where the command has it)."""
    command = COMMANDS[name]
    given = inputs_of(command.inputs, inputs, many)
    function = getattr(tracekit, COMMANDS[name].api_name)
    if command.inputs == "pair":
        result = function(*given)
    else:
        result = function(given if len(given) > 1 else given[0], **({"workers": 1} if command.takes_many else {}))
    assert isinstance(result, tracekit.Result) and result.tables, name
    out = tmp_path / "out.parquet"
    flags = {param.name for param in main.commands[name].params}  # type: ignore[attr-defined]
    args = [name, *given, "-o", out] + (["--unit", "ns"] if "unit" in flags else [])
    args += ["--workers", "1"] if command.takes_many else []
    run = cli(*args)
    assert run.exit_code == 0, run.output
    several = len(result.tables) > 1
    for table in result.tables:
        path = out.with_name(f"out.{table.name}.parquet") if several else out
        read = pd.read_parquet(path)
        expected = renderer.in_unit(table.frame, "ns")
        assert list(read.columns) == [str(column) for column in expected.columns], table.name
        assert len(read) == len(expected), table.name
        for column in expected.columns:
            got, want = read[str(column)], expected[column]
            if pd.api.types.is_numeric_dtype(want) and not pd.api.types.is_bool_dtype(want):
                assert got.astype("float64").fillna(-1.0).tolist() == want.astype("float64").fillna(-1.0).tolist()
            else:
                assert got.astype(str).tolist() == want.astype(str).tolist(), (table.name, column)
    assert not (several and out.exists())


def test_parquet_carries_the_raw_integers(inputs, tmp_path, cli):
    """Total Time in ns stays an integer column through the API and Parquet (never display-rounded)."""
    result = tracekit.kernels(inputs["b"])
    frame = result["kernels"]
    assert pd.api.types.is_integer_dtype(frame["Total Time (ns)"])
    assert frame["Total Time (ns)"].sum() == 2 * (100 + 40 + 20 + 10 + 200 + 50 + 30) + 300 + 400
    assert frame["Avg (ns)"].dtype == "float64"
    assert result.units()["Total Time (ns)"] == "ns"


@pytest.mark.parametrize("name", list(COMMANDS))
def test_each_function_takes_its_options_as_keywords(name):
    """The API function's keyword-only parameters are the options dataclass's fields, with the same defaults, plus how many inputs are read for commands that take many."""
    command = COMMANDS[name]
    parameters = inspect.signature(getattr(tracekit, COMMANDS[name].api_name)).parameters
    keywords = {key: p.default for key, p in parameters.items() if p.kind is inspect.Parameter.KEYWORD_ONLY}
    expected = {field.name: _default(field) for field, _ in declared_fields(command.options)}
    if command.takes_many:
        expected |= {field.name: _default(field) for field in dataclasses.fields(ManyOptions)}
    assert keywords == expected
    assert (
        getattr(tracekit, COMMANDS[name].api_name).__doc__
        and "Example" in getattr(tracekit, COMMANDS[name].api_name).__doc__
    )


def _default(field: dataclasses.Field):
    if field.default is not dataclasses.MISSING:
        return field.default
    return field.default_factory()  # type: ignore[misc]


def test_all_names_are_the_commands_and_the_readers():
    commands = {command.api_name for command in COMMANDS.values()}
    assert commands <= set(tracekit.__all__)
    assert set(tracekit.__all__) - commands == {
        "OptionError",
        "Result",
        "Session",
        "Settings",
        "TracekitError",
        "UsageError",
        "__version__",
        "current_session",
        "open_snapshot",
        "open_trace",
        "timeline",
    }
    for name in tracekit.__all__:
        assert hasattr(tracekit, name), name


def test_an_open_trace_gives_what_its_path_gives(inputs):
    trace = tracekit.open_trace(inputs["b"])
    opened = tracekit.ranges(trace)
    by_path = tracekit.ranges(inputs["b"])
    assert opened.names == by_path.names
    for mine, theirs in zip(opened.tables, by_path.tables):
        pd.testing.assert_frame_equal(mine.frame, theirs.frame)


def test_several_paths_merge_as_the_command_line_does(inputs):
    result = tracekit.kernels([inputs["a"], inputs["b"]], workers=1)
    assert result.names == ["kernels", "kernels_by_run"]
    merged = result["kernels"].set_index("Name")
    one = tracekit.kernels(inputs["a"])["kernels"].set_index("Name")["Total Time (ns)"]
    two = tracekit.kernels(inputs["b"])["kernels"].set_index("Name")["Total Time (ns)"]
    assert merged["Total Time (ns)"].to_dict() == one.add(two, fill_value=0).astype("int64").to_dict()


def test_options_are_checked_before_any_file_is_read(tmp_path):
    with pytest.raises(tracekit.OptionError, match=r"^by 'kernels' is not one of kernel, category, type"):
        tracekit.kernels(tmp_path / "absent.sqlite", by="kernels")  # type: ignore[arg-type]
    with pytest.raises(tracekit.OptionError, match=r"^top is at least 1, not -1"):
        tracekit.kernels(tmp_path / "absent.sqlite", top=-1)
    with pytest.raises(tracekit.TracekitError, match="absent.sqlite: no such file"):
        tracekit.kernels(tmp_path / "absent.sqlite")


def test_a_result_in_a_notebook(inputs):
    result = tracekit.memory(inputs["m1"], top=5)
    html = result._repr_html_()
    assert html.count("<table") == len(result.tables) and "Size (MiB)" in html
    assert repr(result).startswith("<tracekit.Result: summary (") and "note" in repr(result)
    assert str(result).startswith(result.tables[0].title)
    frame = result.to_pandas("allocations")
    assert frame.attrs["units"]["Size (MiB)"] == "MiB" and list(frame.columns) == list(result["allocations"].columns)
    with pytest.raises(KeyError, match="no table 'nope'; this result has summary, allocations"):
        result["nope"]


def test_html_escapes_what_the_trace_names(tmp_path):
    b = ExportBuilder("2026.2")
    b.push_pop(0, 1000, "<script>alert(1)</script>")
    b.kernel(100, 200, "void k<float>()", launch_at=10)
    html = tracekit.ranges(b.write(tmp_path / "x.sqlite"))._repr_html_()
    assert "<script>" not in html and "&lt;script&gt;" in html and "void k&lt;float&gt;()" not in html


@pytest.mark.shared
def test_the_one_liner_of_the_issue():
    """`python -c "import tracekit; r = tracekit.kernels(PATH, top=5); print(r)"` prints what
    `tracekit kernels PATH --top 5` prints."""
    path = SHARED_TRACES / "h100_videogen_2gpu_a_nsys2026.2.sqlite"
    if not path.exists():
        pytest.skip(f"{path} is absent")
    program = f"import tracekit; r = tracekit.kernels({str(path)!r}, top=5); print(r)"
    api = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert api.returncode == 0, api.stderr
    command = [sys.executable, "-m", "tracekit.cli", "kernels", str(path), "--top", "5"]
    cli = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert cli.returncode == 0, cli.stderr
    assert api.stdout == cli.stdout
    rows = api.stdout.strip().splitlines()[-5:]
    assert len(rows) == 5 and rows[0].split()[0] == "69.4"  # the top kernel's share, as nsys stats prints it


def test_a_script_without_a_main_guard_reads_many_on_the_pool(inputs, tmp_path):
    """Spawned workers do not run the caller's script again: its top level runs once, in this process,
    even without ``if __name__ == "__main__"``."""
    script = tmp_path / "notebook_like.py"
    script.write_text(
        "import tracekit\n"
        "print('top level ran')\n"
        f"result = tracekit.kernels([{str(inputs['a'])!r}, {str(inputs['b'])!r}], workers=2)\n"
        "print(int(result['kernels']['Total Time (ns)'].sum()))\n"
    )
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert run.returncode == 0, run.stderr
    one_step = 100 + 40 + 20 + 10 + 200 + 50 + 30
    assert run.stdout.splitlines() == ["top level ran", str(2 * (2 * one_step + 300) + 400)]
    main = sys.modules["__main__"]
    before = (main.__dict__.get("__file__"), main.__dict__.get("__spec__"))
    tracekit.kernels([inputs["a"], inputs["b"]], workers=2)
    assert (main.__dict__.get("__file__"), main.__dict__.get("__spec__")) == before  # put back as it was


def test_a_result_iterates_over_its_table_names():
    import pandas as pd

    from tracekit.model.result import Result, Table

    result = Result([Table("a", pd.DataFrame()), Table("b", pd.DataFrame())])
    assert list(result) == ["a", "b"] and dict((name, len(result[name])) for name in result) == {"a": 0, "b": 0}


def test_notes_of_many_inputs_name_options_as_the_command_line_does(cli, tmp_path):
    from helpers.nsys_builder import ExportBuilder

    paths = []
    for name in ("a", "b"):
        b = ExportBuilder("2026.2")
        b.push_pop(0, 1_000, "train_step")
        b.kernel(100, 200, "gemm", launch_at=10)
        paths.append(b.write(tmp_path / f"{name}.sqlite"))
    result = cli("compare", *paths, "--workers", "2")
    assert result.exit_code == 0, result.output
    assert "name its phases with --phases" in result.output + result.stderr
    assert "name its phases with phases" in " ".join(tracekit.compare(paths).notes)  # the API's own names


def launch_less(path: Path) -> Path:
    """Two kernels, one launched by a recorded call, one with no call in the capture."""
    b = ExportBuilder("2026.2")
    b.push_pop(0, 10_000, "step")
    b.kernel(1_000, 2_000, "gemm", launch_at=500)
    b.kernel(3_000, 4_000, "gemm")
    return b.write(path)


LAUNCH_NOTE = "1 of 2 GPU operations have no recorded launching call"


def test_a_command_s_notes_are_its_own_whatever_ran_before_on_the_trace(tmp_path):
    """What one analysis finds (ops with no launching call) is said by the commands that use it, not by every
    command run later on the same Trace: `kernels` said it only after `ranges` had run, so a Trace
    shared by calls (or by threads) gave each call notes that depended on what ran before."""
    trace = tracekit.open_trace(launch_less(tmp_path / "t.sqlite"))
    fresh = tracekit.kernels(launch_less(tmp_path / "u.sqlite")).notes
    assert not any(LAUNCH_NOTE in note for note in fresh)
    assert tracekit.kernels(trace).notes == fresh
    assert any(LAUNCH_NOTE in note for note in tracekit.ranges(trace).notes)
    assert tracekit.kernels(trace).notes == fresh  # after ranges: the same as before it
    assert any(LAUNCH_NOTE in note for note in tracekit.ranges(trace).notes)  # said again, the join cached


def test_a_value_an_earlier_command_computed_still_brings_its_notes(tmp_path):
    """A value derived from the join once per trace (the ranges' GPU attribution) is reused by the next
    command without joining again: that command must still say what the join found."""
    from helpers.small_export import build_small

    trace = tracekit.open_trace(build_small("2026.2", tmp_path / "small.sqlite"))
    first = tracekit.breakdown(trace, phases="forward").notes
    assert any("2 of 5 GPU operations have no recorded launching call" in note for note in first)
    assert tracekit.breakdown(trace, phases="forward").notes == first


def test_eight_threads_on_one_trace_get_the_notes_of_one_thread(tmp_path):
    import threading

    trace = tracekit.open_trace(launch_less(tmp_path / "t.sqlite"))
    expected = {
        name: getattr(tracekit, name)(launch_less(tmp_path / f"{name}.sqlite")).notes
        for name in ("kernels", "launches", "steps", "ranges", "breakdown")
    }
    got: list[tuple[str, list[str]]] = []
    start = threading.Barrier(8)

    def calls(index: int) -> None:
        start.wait()
        for name in list(expected)[index % 5 :] + list(expected)[: index % 5]:
            got.append((name, getattr(tracekit, name)(trace).notes))

    threads = [threading.Thread(target=calls, args=(index,)) for index in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(got) == 40
    assert [(name, notes) for name, notes in got if notes != expected[name]] == []


def test_python_dash_m_tracekit_is_the_command():
    """``python -m tracekit`` (what a newcomer tries first) runs the command line, as ``tracekit`` does."""
    ran = subprocess.run([sys.executable, "-m", "tracekit", "--version"], capture_output=True, text=True, cwd=ROOT)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.strip().endswith(tracekit.__version__)


def test_the_generated_functions_are_what_the_commands_declare():
    """api/commands.py is checked in so that type checkers see each function's signature: it must be what
    ``python -m tracekit.api.generate`` writes from the commands' declarations now."""
    from tracekit.api.generate import GENERATED, module_source

    assert GENERATED.read_text() == module_source(COMMANDS.values())


def test_the_generator_s_check_says_a_stale_file(tmp_path, monkeypatch, capsys):
    from tracekit.api import generate

    stale = tmp_path / "commands.py"
    stale.write_text(generate.GENERATED.read_text().replace("top: int = 15", "top: int = 16", 1))
    monkeypatch.setattr(generate, "GENERATED", stale)
    assert generate.main(["--check"]) == 1 and "python -m tracekit.api.generate" in capsys.readouterr().out
    assert generate.main([]) == 0 and generate.main(["--check"]) == 0
    assert stale.read_text() == generate.module_source(COMMANDS.values())
