"""Phases and steps found without being told, one definition for every command."""

import pytest
from helpers.kineto_builder import KinetoBuilder
from helpers.nsys_builder import ExportBuilder
from helpers.paths import SHARED

import tracekit
from tracekit.analysis.primitives.phases import choose_phases
from tracekit.sources import open_trace

GEMM = "ampere_s16816gemm_bf16_128x64"


def labelled(path) -> dict[str, int]:
    table = tracekit.breakdown(path)["breakdown"]
    return dict(zip(table["Phase"], table["Kernel Time (ns)"]))


def test_the_words_themselves_come_first(tmp_path):
    b = ExportBuilder("2026.2")
    b.push_pop(0, 1_000, "forward")
    b.push_pop(0, 2_000, "## forward ##")  # more time, but "forward" itself is tracekit's name
    b.push_pop(2_000, 3_000, "backward")
    b.push_pop(3_000, 4_000, "optimizer")
    b.kernel(100, 200, GEMM, launch_at=10)
    b.kernel(2_100, 2_300, GEMM, launch_at=2_010)
    b.kernel(3_100, 3_400, GEMM, launch_at=3_010)
    path = b.write(tmp_path / "own.sqlite")
    assert choose_phases(open_trace(str(path)), None).chosen == (
        ("forward", "forward"),
        ("backward", "backward"),
        ("optimizer", "optimizer"),
    )
    result = tracekit.breakdown(path)
    assert result.notes == []  # the default names: nothing to say
    assert dict(zip(result["breakdown"]["Phase"], result["breakdown"]["Kernel Time (ns)"])) == {
        "forward": 100,
        "backward": 200,
        "optimizer": 300,
        "(whole trace)": 600,
    }


def test_torch_records_backward_and_optimizer_as_cpu_ops(tmp_path):
    """torch 1.8: the autograd engine's functions and Optimizer.step#... are cpu_op ranges; GPU-side
    annotations of the same name are not phases (their times are the GPU's)."""
    k = KinetoBuilder(old=True)
    k.annotation("ProfilerStep#3", 0, 1000, cat="Operator")
    k.annotation("autograd::engine::evaluate_function: MmBackward0", 100, 200, cat="Operator")
    k.annotation("Optimizer.step#SGD.step", 400, 100, cat="Operator")
    k.annotation("Optimizer.step#SGD.step", 600, 100, cat="gpu_user_annotation")
    k.launch("cudaLaunchKernel", 150, 5, 1).kernel("gemm", 160, 20, 1)
    k.launch("cudaLaunchKernel", 450, 5, 2).kernel("sgd", 460, 7, 2)
    k.launch("cudaLaunchKernel", 900, 5, 3).kernel("other", 910, 3, 3)
    path = k.write(tmp_path / "old.json")
    assert choose_phases(open_trace(str(path)), None).chosen == (
        ("backward", "cpu_op:autograd::engine::evaluate_function: *"),
        ("optimizer", "cpu_op:Optimizer.step#*"),
    )
    assert labelled(path) == {"backward": 20_000, "optimizer": 7_000, "(whole trace)": 30_000}
    steps = tracekit.steps(path)["steps"]  # ProfilerStep#N as a cpu_op (torch 1.8 and 1.9) is a step
    assert steps["Step"].tolist() == ["cpu_op:ProfilerStep#3"] and steps["Kernels"].tolist() == [3]


def test_two_traces_that_name_phases_differently_line_up(tmp_path):
    def built(name: str, forward: str, scale: int):
        b = ExportBuilder("2026.2")
        b.push_pop(0, 1_000, forward)
        b.push_pop(1_000, 2_000, "backward pass")
        b.kernel(100, 100 + 10 * scale, GEMM, launch_at=10)
        b.kernel(1_100, 1_100 + 20 * scale, GEMM, launch_at=1_010)
        return b.write(tmp_path / name)

    a, b = built("a.sqlite", "forward pass", 1), built("b.sqlite", "DistributedDataParallel.forward", 2)
    result = tracekit.diff(a, b, by="category")
    table = result["categories"]
    rows = {phase: (row["A (ns)"], row["B (ns)"]) for phase, row in zip(table["Phase"], table.to_dict("records"))}
    assert rows == {"(whole trace)": (30, 60), "forward": (10, 20), "backward": (20, 40)}
    assert any(
        note.startswith("A: phases found by their range names: forward = 'forward pass'") for note in result.notes
    )
    assert any("forward = 'DistributedDataParallel.forward'" in note for note in result.notes)
    # breakdown over both inputs says, per input, which names it took
    together = tracekit.breakdown([a, b], workers=1)
    said = [note for note in together.notes if "phases found by their range names" in note]
    assert len(said) == 2 and "forward = 'forward pass'" in said[0] and "DistributedDataParallel.forward" in said[1]


def test_a_given_phase_that_matches_nothing_is_said_not_shown_as_zeros(tmp_path):
    b = ExportBuilder("2026.2")
    b.push_pop(0, 1_000, "fwd")
    b.kernel(100, 200, GEMM, launch_at=10)
    path = b.write(tmp_path / "t.sqlite")
    result = tracekit.breakdown(path, phases="fwd,bwd")
    assert result["breakdown"]["Phase"].tolist() == ["fwd", "(whole trace)"]
    assert any(note.startswith("no range matches 'bwd'") for note in result.notes)
    with pytest.raises(tracekit.UsageError, match="no NVTX range matches bwd"):
        tracekit.breakdown(path, phases="bwd")


@pytest.mark.parametrize(
    "name, expected",
    [
        (
            "traces/a100_small_lm_trainstep_nsys2026.3.sqlite",
            {"forward": "forward pass", "backward": "backward pass", "optimizer": "optimizer step"},
        ),
        (
            "kineto/a100_ddp_rank0of2_nccl.json.gz",
            {"forward": "## forward ##", "backward": "## backward ##", "optimizer": "## optimizer ##"},
        ),
        (
            "kineto/v100_resnet_torch2.3_ns_precision.pt.trace.json.gz",
            {"forward": "## forward ##", "backward": "## backward ##", "optimizer": "## optimizer ##"},
        ),
    ],
)
def test_real_traces_have_their_phases_found(name, expected):
    path = SHARED / name
    if not path.exists():
        pytest.skip(f"{path} is absent")
    result = tracekit.breakdown(path)
    table = result["breakdown"].set_index("Phase")
    for phase, range_name in expected.items():
        assert table.loc[phase, "Instances"] > 0 and table.loc[phase, "Kernel Time (ns)"] > 0
        assert f"{phase} = {range_name!r}" in result.notes[0]
    # the three phases hold most of the trace's kernel time
    assert table.loc[list(expected), "Kernel Time (ns)"].sum() > 0.8 * table.loc["(whole trace)", "Kernel Time (ns)"]
    compared = tracekit.compare([path])["compare"]
    assert set(expected) <= set(compared["Phase"])


def test_steps_of_a_real_torch_1_8_trace():
    path = SHARED / "kineto/v100_resnet50_torch1.8.pt.trace.json.gz"
    if not path.exists():
        pytest.skip(f"{path} is absent")
    steps = tracekit.steps(path)["steps"]
    assert steps["Step"].tolist() == [f"cpu_op:ProfilerStep#{n}" for n in range(5, 11)]
    assert (steps["Kernels"] == 1476).all()
    ranks = tracekit.ranks([path])["ranks"]
    assert ranks["Steps"].tolist() == [6]


def test_a_name_of_two_phases_is_neither_and_a_domain_prefix_is_dropped(tmp_path):
    """Megatron's "forward-backward" holds both words: neither phase is it; within --domain, a found name is
    matched without its "domain:" prefix."""
    b = ExportBuilder("2026.2")
    b.push_pop(0, 3_000, "forward-backward")
    b.push_pop(0, 1_000, "forward pass")
    b.push_pop(1_000, 2_000, "forward/backward")
    b.kernel(100, 200, GEMM, launch_at=10)
    b.kernel(1_100, 1_400, GEMM, launch_at=1_010)
    found = choose_phases(open_trace(str(b.write(tmp_path / "megatron.sqlite"))), None).chosen
    assert found == (("forward", "=forward pass"),)
    b = ExportBuilder("2026.2")
    b.domain(1, "MyDomain")
    b.push_pop(0, 1_000, "forward pass", domain_id=1)
    b.kernel(100, 200, GEMM, launch_at=10)
    path = b.write(tmp_path / "domain.sqlite")
    assert labelled(path) == {"forward": 100, "(whole trace)": 100}  # as "MyDomain:forward pass"
    table = tracekit.breakdown(path, domain="MyDomain")["breakdown"]
    assert dict(zip(table["Phase"], table["Kernel Time (ns)"])) == {"forward": 100, "(whole trace)": 100}


def hashed_phases(tmp_path, source: str):
    """A torch.profiler trace or an nsys export whose phases are DDP's "## forward ##" style ranges, with
    a "## forward ##" of the GPU side (not a phase), an "ema" range and a "step" around them: forward's
    kernel 20 us, backward's 30 us, the optimizer's 7 us, ema's 5 us."""
    if source == "kineto":
        k = KinetoBuilder()
        for name, at, length in [
            ("## forward ##", 0, 100),
            ("## backward ##", 100, 100),
            ("## optimizer ##", 200, 100),
            ("ema", 300, 50),
            ("step", 0, 400),
        ]:
            k.annotation(name, at, length)
        k.annotation("## forward ##", 10, 500, cat="gpu_user_annotation")
        for correlation, (at, length) in enumerate([(10, 20), (110, 30), (210, 7), (310, 5)], start=1):
            k.launch("cudaLaunchKernel", at, 2, correlation).kernel(GEMM, at + 5, length, correlation)
        return k.write(tmp_path / "hashed.json")
    b = ExportBuilder("2026.2")
    b.push_pop(0, 400_000, "step")
    for name, at in [("## forward ##", 0), ("## backward ##", 100), ("## optimizer ##", 200), ("ema", 300)]:
        b.push_pop(at * 1_000, at * 1_000 + (50_000 if name == "ema" else 100_000), name)
    for at, length in [(10, 20), (110, 30), (210, 7), (310, 5)]:
        b.kernel((at + 5) * 1_000, (at + 5 + length) * 1_000, GEMM, launch_at=at * 1_000)
    return b.write(tmp_path / "hashed.sqlite")


@pytest.mark.parametrize("source", ["kineto", "nsys"])
def test_a_named_phase_takes_the_ranges_finding_would(tmp_path, source):
    path = hashed_phases(tmp_path, source)
    found = tracekit.breakdown(path)
    assert labelled(path) == {"forward": 20_000, "backward": 30_000, "optimizer": 7_000, "(whole trace)": 62_000}
    given = tracekit.breakdown(path, phases="forward,backward")
    table = given["breakdown"]
    assert dict(zip(table["Phase"], table["Kernel Time (ns)"])) == {
        "forward": 20_000,
        "backward": 30_000,
        "(whole trace)": 62_000,
    }
    assert given["breakdown"].iloc[:2].equals(found["breakdown"].iloc[:2][table.columns])
    assert given.notes == ["phases found by their range names: forward = '## forward ##', backward = '## backward ##'"]
    # a phase's word beside a spec of the user's own: the word found, the spec as it is
    mixed = tracekit.breakdown(path, phases="optimizer,ema")["breakdown"]
    assert dict(zip(mixed["Phase"], mixed["Kernel Time (ns)"])) == {
        "optimizer": 7_000,
        "ema": 5_000,
        "(whole trace)": 62_000,
    }
    steps = tracekit.steps(path, step_range="step", phases="forward,backward")["steps"]
    assert steps[["forward (ns)", "backward (ns)"]].values.tolist() == [[100_000, 100_000]]
