"""Range specs: every character real range names hold, through --range, --phases and --within; globs
mean what fnmatch means, read from SQLite or from the cache alike; domains by option; emit_nvtx ops."""

from __future__ import annotations

import json

import pytest
from helpers.nsys_builder import ExportBuilder

from tracekit.errors import UsageError
from tracekit.model.range_specs import op_name, parse_spec, split_specs
from tracekit.sources import open_trace

GEMM = "ampere_sgemm_128x64_tn"
# Names of the kinds real traces hold: pyprof dict reprs, emit_nvtx ops, paths, globs' metacharacters,
# quotes, unicode.
NAMES = [
    "{'mod': 'Tensor', 'op': '__add__', 'args': [{'shape': (1, 64)}]}",
    "aten::linear, seq = 3, op_id = 17, sizes = [[4, 8], [8, 8]]",
    "aten::linear, seq = 4, op_id = 18, sizes = [[4, 8], [8, 8]]",
    "model/layer.0/attention",
    "50% done * [x?]",
    'say "hi", it\'s me',
    "données ∑ 日本語",
    "a\\b",
]


@pytest.fixture(params=["sqlite", "cache"])
def export(request, tmp_path, monkeypatch):
    """Each name a range around one kernel (kernel i runs 10*i + 1 ns), inside a 'step'; an NCCL domain
    range too. Read from SQLite, or from the table cache (the same answers either way)."""
    monkeypatch.setenv("TRACEKIT_CACHE_MIN_BYTES", "0" if request.param == "cache" else str(2**40))
    b = ExportBuilder("2026.2")
    b.domain(1, "NCCL")
    b.push_pop(0, 100_000, "step")
    for index, name in enumerate(NAMES):
        start = 1000 * (index + 1)
        b.push_pop(start, start + 500, name, registered=index % 2 == 0)
        b.kernel(start + 100, start + 100 + 10 * index + 1, GEMM, launch_at=start + 10)
    b.push_pop(20_000, 20_500, "allreduce", domain_id=1)
    b.kernel(20_100, 20_107, GEMM, launch_at=20_010)
    path = b.write(tmp_path / "names.sqlite")
    if request.param == "cache":
        assert len(open_trace(path).ranges) == len(NAMES) + 2  # cached whole: later selections read the cache
    return path


def kernel_time(cli, export, *specs, domain=None) -> int:
    args = [arg for spec in specs for arg in ("--range", spec)] + (["--domain", domain] if domain else [])
    result = cli("kernels", export, *args, "--format", "json")
    assert result.exit_code == 0, result.output
    return sum(row["Total Time (ns)"] for row in json.loads(result.stdout))


def duration(index: int) -> int:
    return 10 * index + 1


@pytest.mark.parametrize("index", range(len(NAMES)))
def test_any_name_is_selectable_literally(cli, export, index):
    assert kernel_time(cli, export, "=" + NAMES[index]) == duration(index)
    phases = json.loads(cli("breakdown", export, "--phases", "=" + NAMES[index], "--format", "json").stdout)
    row = next(row for row in phases["breakdown"] if row["Phase"] == "=" + NAMES[index])
    assert row["Instances"] == 1 and row["Kernel Time (ns)"] == duration(index)


def test_escapes_and_paths(cli, export):
    assert kernel_time(cli, export, r"model\/layer.0\/attention") == duration(3)  # "/" escaped: one name
    assert kernel_time(cli, export, r"step/model\/layer.0\/attention") == duration(3)  # a path to it
    assert kernel_time(cli, export, r"50% done \* \[x\?]") == duration(4)  # metacharacters literal
    assert kernel_time(cli, export, r"a\\b") == duration(7)
    with pytest.raises(UsageError, match="empty range spec"):
        parse_spec("//")


def test_globs_mean_what_fnmatch_means(cli, export):
    assert kernel_time(cli, export, "{*") == duration(0)
    assert kernel_time(cli, export, "[!a-z]*") == duration(0) + duration(4) + 7  # "{...", "50%...", "NCCL:..."
    assert kernel_time(cli, export, "*[日]*") == duration(6)
    assert kernel_time(cli, export, "say ?hi?*") == duration(5)
    missing = cli("kernels", export, "--range", "model/*")  # a path: no range is called "model"
    assert missing.exit_code == 1 and "no NVTX range matches model/*" in missing.output


def test_emit_nvtx_ops_are_selected_and_grouped_by_op(cli, export):
    assert op_name(NAMES[1]) == "aten::linear"
    assert kernel_time(cli, export, "aten::linear") == duration(1) + duration(2)  # both instances of the op
    assert kernel_time(cli, export, "=" + NAMES[2]) == duration(2)  # one raw name
    grouped = {row["Range"]: row for row in json.loads(cli("ranges", export, "--format", "json").stdout)}
    assert grouped["aten::linear"]["Instances"] == 2 and NAMES[1] not in grouped
    raw = {row["Range"] for row in json.loads(cli("ranges", export, "--raw-names", "--format", "json").stdout)}
    assert {NAMES[1], NAMES[2]} <= raw and "aten::linear" not in raw
    within = json.loads(cli("ranges", export, "--within", "step", "--format", "json").stdout)
    assert next(row for row in within if row["Range"] == "aten::linear")["Instances"] == 2


def test_within_takes_any_name(cli, export):
    result = cli("ranges", export, "--within", "=" + NAMES[0], "--format", "json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)[-1]["Range"] == "(in =" + NAMES[0] + " itself)"


def test_domains_by_option(cli, export):
    assert kernel_time(cli, export, "allreduce", domain="NCCL") == 7
    assert kernel_time(cli, export, "NCCL:allreduce") == 7  # the full name as nsys shows it
    missing = cli("kernels", export, "--range", "allreduce", "--domain", "default")
    assert missing.exit_code == 1 and "in domain default" in missing.output
    assert kernel_time(cli, export, "step", domain="default") == sum(duration(i) for i in range(len(NAMES))) + 7
    nccl = json.loads(cli("ranges", export, "--domain", "NCCL", "--format", "json").stdout)
    assert [row["Range"] for row in nccl] == ["NCCL:allreduce"]


def test_phase_lists():
    assert split_specs("forward,backward, optimizer") == ["forward", "backward", "optimizer"]
    assert split_specs(r"aten::mm\, seq = 3,step") == ["aten::mm, seq = 3", "step"]
    assert split_specs("forward,=aten::mm, seq = 3, op_id = 7") == ["forward", "=aten::mm, seq = 3, op_id = 7"]
    # every escape but "\," travels to parse_spec whole, so a list and a single spec read names alike
    assert split_specs(r"a\\,b") == [r"a\\", "b"] and parse_spec(r"a\\")[0].exact == "a\\"
    assert split_specs(r"x\*y,z") == [r"x\*y", "z"] and parse_spec(r"x\*y")[0].exact == "x*y"
    assert split_specs("a, =b,c") == ["a", "=b,c"]  # spaces before "=" do not hide it
    for empty in (",", " , ", ""):
        with pytest.raises(UsageError, match="no range spec"):
            split_specs(empty)


@pytest.mark.parametrize(
    "args",
    [
        ("breakdown", "--phases", ","),
        ("diff", "--phases", " "),
        ("ranges", "--within", ""),
        ("ranges", "--domain", ""),
        ("kernels", "--range", ""),
        ("kernels", "--range", " "),
    ],
)
def test_empty_specs_are_errors_not_defaults(cli, export, args):
    command, *options = args
    inputs = [export, export] if command == "diff" else [export]
    result = cli(command, *inputs, *options)
    assert result.exit_code == 2
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert lines[-1].startswith("Error") and ("empty" in lines[-1] or "no range spec" in lines[-1])


def test_domain_reaches_every_view(cli, export):
    """--domain keeps its ranges in the table's note, the tree and --within, and its hint names only them."""
    tree = cli("ranges", export, "--tree", "--domain", "NCCL", "--format", "json")
    assert tree.exit_code == 0, tree.output
    assert [row["Range"] for row in json.loads(tree.stdout)] == ["allreduce"]  # named by text in the domain
    whole = json.loads(cli("ranges", export, "--tree", "--format", "json").stdout)
    assert whole[0]["Range"] == "step" and len(whole) == len(NAMES) + 2  # the NCCL range is inside step
    assert "  NCCL:allreduce" in [row["Range"] for row in whole]
    hint = cli("ranges", export, "--within", "nothing", "--domain", "NCCL")
    assert hint.exit_code == 1 and "its ranges in domain NCCL include: allreduce" in hint.output
    assert "step" not in hint.output.split("include:")[1]
    table = cli("ranges", export, "--domain", "NCCL")
    assert "grouped by op" not in table.output  # the emit_nvtx names of the default domain are not counted
    grouped = cli("ranges", export, "--domain", "default")
    assert f"{len(NAMES) + 1} names in {len(NAMES)} rows" in grouped.output  # two aten::linear names, one op


def test_an_unnamed_domain_is_not_the_default_one(cli, tmp_path):
    b = ExportBuilder("2026.2")
    b.push_pop(0, 1_000, "step")
    b.kernel(100, 150, GEMM, launch_at=10)
    b.push_pop(2_000, 3_000, "mystery", domain_id=5)  # domain 5 was never created (no name)
    b.kernel(2_100, 2_120, GEMM, launch_at=2_010)
    path = b.write(tmp_path / "unnamed.sqlite")
    default = json.loads(cli("ranges", path, "--domain", "default", "--format", "json").stdout)
    assert [row["Range"] for row in default] == ["step"]
    everything = json.loads(cli("ranges", path, "--format", "json").stdout)
    assert sorted(row["Range"] for row in everything) == ["mystery", "step"]  # no prefix, as nsys shows it
    unnamed = cli("ranges", path, "--domain", "nope")
    assert unnamed.exit_code == 1 and "its domains: (unnamed domain), default" in unnamed.output


def test_all_nvtx_rows_unusable_says_so(cli, tmp_path):
    b = ExportBuilder("2026.2")
    b.push_pop(900, 800, "forward")  # ends before it starts
    b.kernel(100, 150, GEMM, launch_at=10)
    path = b.write(tmp_path / "bad-nvtx.sqlite")
    for args in (("ranges",), ("breakdown", "--phases", "forward"), ("kernels", "--range", "forward")):
        result = cli(*args[:1], path, *args[1:])
        assert result.exit_code == 1, (args, result.output)
        assert "left out: unusable values" in result.output and "Traceback" not in result.output, args
        assert len([line for line in result.output.splitlines() if line.strip()]) == 1


def test_ranges_without_a_message_are_selectable(cli, tmp_path, monkeypatch):
    """A range pushed with no message is named "(unnamed)" in tables, and that name selects it, whether
    the read filters in SQL (no cache) or not."""
    monkeypatch.setenv("TRACEKIT_CACHE_MIN_BYTES", str(2**40))
    b = ExportBuilder("2026.2")
    b.push_pop(0, 1_000, None)
    b.kernel(100, 133, GEMM, launch_at=10)
    b.push_pop(2_000, 3_000, "named")
    b.kernel(2_100, 2_107, GEMM, launch_at=2_010)
    path = b.write(tmp_path / "unnamed.sqlite")
    assert kernel_time(cli, path, "(unnamed)") == 33
    table = cli("breakdown", path, "--phases", "(unnamed),named", "--format", "json")
    rows = {row["Phase"]: row["Kernel Time (ns)"] for row in json.loads(table.stdout)["breakdown"]}
    assert rows == {"(unnamed)": 33, "named": 7, "(whole trace)": 40}


def test_names_matching_tests_each_name_as_the_patterns_do():
    """The one-regex matcher agrees with ``Pattern.matches`` on each name, its op name and, loosely, the text
    after a "domain:" prefix, for names full of characters that mean something to a regex or a glob."""
    import itertools

    import pandas as pd

    from tracekit.model.range_names import names_matching
    from tracekit.model.range_specs import op_name, spec_patterns

    names = [
        "forward",
        "forward pass",
        "## forward ##",
        "aten::mm, seq = 3, op_id = 7",
        "a.b+c(d)",
        "x[1]",
        "cpu_op:Optimizer.step#SGD.step",
        "gpu:ProfilerStep#2",
        "NCCL:ncclAllReduce",
        "multi\nline",
        "autograd::engine::evaluate_function: MmBackward0, seq = 9",
        "",
        "a\\b",
        "*",
        "?x",
    ]
    specs = [
        "forward",
        "*forward*",
        "aten::mm",
        "a.b+c(d)",
        "x\\[1]",
        "x[[]1]",
        "Optimizer.step#*",
        "*#*",
        "cpu_op:*",
        "*Backward0",
        "?x",
        "\\*",
        "a\\\\b",
        "multi*",
        "ProfilerStep#?",
    ]
    column = pd.Series(names, dtype="category")
    for count in (1, 2, 3):
        for chosen in itertools.combinations(specs, count):
            patterns = spec_patterns(list(chosen))
            for loose in (False, True):
                expected = []
                for name in names:
                    text = name.split(":", 1)[1] if ":" in name else name
                    candidates = (name, op_name(name)) + ((text, op_name(text)) if loose else ())
                    expected.append(any(p.matches(c) for p in patterns for c in candidates))
                assert names_matching(column, patterns, loose).tolist() == expected, (chosen, loose)
