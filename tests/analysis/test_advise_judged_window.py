"""advise judges the stretch a user names: ``ranges`` (the instances of a range, from the first one's start to the
last one's end) or ``steps`` (steps A to B by the numbers their labels carry), each apart from the others; a name
that matches nothing, or steps the trace does not have, is a one-line error that says what there is."""

from __future__ import annotations

import pytest
from helpers.kineto_builder import KinetoBuilder
from helpers.nsys_builder import ExportBuilder

import tracekit
from tracekit.errors import UsageError
from tracekit.model.options import OptionError

MS, US = 1_000_000, 1_000
SGEMM = "ampere_sgemm_128x64_nn"


def benchmark(tmp_path):
    """init_model (0-400 ms: three 100 ms pageable uploads), a 20 ms pageable upload at 420 ms, then one
    "timed_loop" range (450-1000 ms) of five 90 ms FP32 sgemms, one every 100 ms from 505 ms."""
    b = ExportBuilder("2026.2")
    b.gpu(0, "NVIDIA A100-SXM4-80GB", 108, 85_000_000_000, 8, 0)
    b.push_pop(0, 400 * MS, "init_model")
    for start in (10 * MS, 130 * MS, 250 * MS):
        b.memcpy(start, start + 100 * MS, copy_kind=1, size=1 << 30, src_kind=0, dst_kind=2, launch_at=start - US)
    b.memcpy(420 * MS, 440 * MS, copy_kind=1, size=1 << 28, src_kind=0, dst_kind=2, launch_at=420 * MS - US)
    b.push_pop(450 * MS, 1000 * MS, "timed_loop")
    for index in range(5):
        begin = (500 + index * 100) * MS
        b.kernel(begin + 5 * MS, begin + 95 * MS, SGEMM, launch_at=begin + US)
    return b.write(tmp_path / "benchmark.sqlite")


def judged(result) -> str:
    return next(note for note in result.notes if note.startswith("judged:"))


def span_note(result) -> str:
    return next(note for note in result.notes if note.startswith("severity:"))


def test_a_range_names_the_stretch_judged(tmp_path):
    """Found alone, the steady state runs from init_model's end (400 ms) and holds the 20 ms upload at 420 ms;
    ranges="timed_loop" judges 450 to 1000 ms: the sgemms alone, 505 to 995 ms."""
    path = benchmark(tmp_path)
    found = tracekit.advise(path)
    assert "pageable copies" in found.table("findings")["Finding"].tolist()
    result = tracekit.advise(path, ranges="timed_loop")
    assert judged(result) == (
        "judged: the range 'timed_loop' (1 instance, from the first one's start to the last one's end; ranges); "
        "one-time costs apart (table one-time)"
    )
    assert result.table("findings")["Finding"].tolist() == ["fp32 matmul", "host stall"]
    assert "judged span (490.000 ms, first GPU op to last)" in span_note(result)


def test_a_range_that_matches_nothing_names_close_names(tmp_path):
    with pytest.raises(UsageError, match=r"no NVTX range matches timed_lop in .*; close names: timed_loop; its ranges"):
        tracekit.advise(benchmark(tmp_path), ranges="timed_lop")


def steps_trace(tmp_path, first: int = 3, count: int = 4):
    """torch.profiler steps ProfilerStep#3 to #6 (10 ms each from 0), a 5 ms kernel launched 1 ms into each."""
    trace = KinetoBuilder()
    for index in range(count):
        at = index * 10_000
        trace.annotation(f"ProfilerStep#{first + index}", at, 10_000)
        trace.launch("cudaLaunchKernel", at + 1_000, 10, index + 1).kernel("gemm_kernel", at + 1_100, 5_000, index + 1)
    return trace.write(tmp_path / "steps.json")


def test_steps_by_the_numbers_their_labels_carry(tmp_path):
    """steps="4:5": ProfilerStep#4 and #5, 10 to 30 ms; the GPU span judged is their kernels', 11.1 to 26.1 ms."""
    result = tracekit.advise(steps_trace(tmp_path), steps="4:5")
    assert judged(result).startswith("judged: steps ProfilerStep#4 to ProfilerStep#5 (2 of 4; steps 4:5);")
    assert "judged span (15.000 ms, first GPU op to last)" in span_note(result)
    one = tracekit.advise(steps_trace(tmp_path), steps="6")
    assert judged(one).startswith("judged: ProfilerStep#6 (1 of 4; steps 6);")
    assert judged(tracekit.advise(steps_trace(tmp_path), steps=":4")).startswith(
        "judged: steps ProfilerStep#3 to ProfilerStep#4 (2 of 4; steps :4);"
    )


def test_repeated_step_names_count_from_one(tmp_path):
    """Five "step" ranges are step #1 to step #5 (as `tracekit steps` labels them): steps="2:4" is the 2nd to
    the 4th, whose sgemms run from 605 to 895 ms."""
    b = ExportBuilder("2026.2")
    for index in range(5):
        begin = (500 + index * 100) * MS
        b.push_pop(begin, begin + 100 * MS, "step")
        b.kernel(begin + 5 * MS, begin + 95 * MS, SGEMM, launch_at=begin + US)
    result = tracekit.advise(b.write(tmp_path / "five.sqlite"), steps="2:4")
    assert judged(result).startswith("judged: steps step #2 to step #4 (3 of 5; steps 2:4);")
    assert "judged span (290.000 ms, first GPU op to last)" in span_note(result)


def test_steps_the_trace_does_not_have_say_what_it_has(tmp_path):
    path = steps_trace(tmp_path)
    with pytest.raises(
        UsageError, match=r"steps '1:4': .* has 4 steps, numbered 3 to 6 \(ProfilerStep#3 to ProfilerStep#6\)$"
    ):
        tracekit.advise(path, steps="1:4")
    with pytest.raises(UsageError, match=r"steps '7:': .* has 4 steps, numbered 3 to 6"):
        tracekit.advise(path, steps="7:")
    with pytest.raises(UsageError, match=r"steps '1:2': .* has no steps \(no range named 'iteration'\)$"):
        tracekit.advise(path, steps="1:2", step_range="iteration")


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"steps": "x"}, r"^steps takes A:B, the first and last step numbers \(3:7, 3:, :7 or 5\), not 'x'$"),
        ({"steps": "5:3"}, r"^steps's last step must not come before its first, not '5:3'$"),
        ({"steps": "1:3", "ranges": "step"}, r"^ranges and steps each say what to judge: give one of them$"),
        ({"window": "1:", "ranges": "step"}, r"^window and ranges each say what to judge: give one of them$"),
        ({"whole_trace": True, "steps": "1"}, r"^whole_trace and steps each say what to judge"),
        ({"step_range": "step", "ranges": "x"}, r"^step_range names the steps, which ranges does not judge"),
        ({"step_range": "step", "whole_trace": True}, r"^step_range names the steps, which whole_trace does not"),
    ],
)
def test_what_to_judge_is_said_once(tmp_path, options, message):
    with pytest.raises(OptionError, match=message):
        tracekit.advise(tmp_path / "never-read.sqlite", **options)


def test_the_command_line_names_the_flags(tmp_path, cli):
    path = steps_trace(tmp_path)
    both = cli("advise", path, "--steps", "3:4", "--range", "ProfilerStep#3")
    assert both.exit_code == 2 and "--range and --steps each say what to judge: give one of them" in both.output
    missing = cli("advise", path, "--steps", "9")
    assert missing.exit_code == 1 and "--steps '9': " in missing.output and "Traceback" not in missing.output
    ranged = cli("advise", path, "--range", "ProfilerStep#4")
    assert ranged.exit_code == 0 and "the range 'ProfilerStep#4' (1 instance" in ranged.output


def test_the_critical_path_is_a_step_of_what_is_judged():
    """--steps 5:6 on the DDP rank: the critical path is that of a step judged (it was the whole trace's
    median step, ProfilerStep#4, outside the window)."""
    from helpers.paths import SHARED_KINETO

    path = SHARED_KINETO / "a100_ddp_rank0of2_nccl.json.gz"
    if not path.exists():
        pytest.skip(f"{path} is absent")
    steps = tracekit.advise(path, steps="5:6")["critical-path"]["Step"].tolist()
    assert len(steps) == 1 and steps[0] in {"ProfilerStep#5", "ProfilerStep#6"}
