"""The timeline names host processes and threads as their source recorded them (nsys's PROCESSES and
ThreadNames, torch.profiler's process_name and thread_name metadata), in the JSON and the .pftrace alike;
"process N" and "thread N" where the source names none."""

from __future__ import annotations

import pytest
from helpers.kineto_builder import KinetoBuilder
from helpers.nsys_builder import ExportBuilder
from helpers.paths import SHARED_KINETO, SHARED_TRACES
from helpers.perfetto_decode import from_json, from_protobuf

import tracekit

from .test_timeline import GEMM


@pytest.fixture
def export(tmp_path):
    """Process 100 named, its thread 100 renamed (the last name counts), its thread 101 left unnamed; another
    process of the machine named too (nsys records them all)."""
    b = ExportBuilder("2026.2")
    b.push_pop(1_000_000, 1_010_000, "step", pid=100, tid=100)
    b.kernel(1_001_001, 1_002_235, GEMM, launch_at=1_000_200, pid=100, tid=100)
    b.push_pop(1_000_000, 1_005_000, "loader", pid=100, tid=101)
    b.process(1, "systemd")
    b.process(100, "python3")
    b.thread_name(100, 100, "python3")
    b.thread_name(100, 100, "pt_main_thread")  # renamed: the last name counts
    b.thread_name(1, 1, "systemd")
    return b.write(tmp_path / "named.sqlite")


def test_an_export_s_processes_and_threads_have_their_names(export, tmp_path):
    names = from_json(tracekit.timeline(export, tmp_path / "t.json"))["names"]
    assert names[(100, None)] == "python3"
    assert names[(100, 100)] == "pt_main_thread"
    assert names[(100, 101)] == "thread 101"  # no name recorded: as before
    assert (1, None) not in names  # a process with no events has no track


def test_the_pftrace_has_the_same_names(export, tmp_path):
    names = from_protobuf(tracekit.timeline(export, tmp_path / "t.pftrace"))["names"]
    assert (names[(100, None)], names[(100, 100)], names[(100, 101)]) == ("python3", "pt_main_thread", "thread 101")


def test_several_inputs_name_their_processes_by_rank(export, tmp_path):
    copy = tmp_path / "job_rank1.sqlite"
    copy.write_bytes(export.read_bytes())
    first = tmp_path / "job_rank0.sqlite"
    export.rename(first)
    names = from_json(tracekit.timeline([first, copy], tmp_path / "job.json"))["names"]
    assert {"rank 0 · python3", "rank 1 · python3"} <= set(names.values())


def test_a_torch_profiler_trace_s_names(tmp_path):
    built = KinetoBuilder()
    built.launch("cudaLaunchKernel", "1000.000", "3.000", correlation=11, pid=4242, tid=4243)
    built.kernel(GEMM, "1010.000", "20.000", correlation=11)
    built.annotation("forward", "999.000", "30.000")  # pid 100, tid 100: named by neither
    built.names("process_name", 4242, 0, "python3.10")
    built.names("process_name", 0, 0, "python3.10")  # the GPU's process: tracekit names GPUs itself
    built.names("thread_name", 4242, 4243, "thread 4243 (pt_main_thread)")
    built.names("thread_name", 4242, 4243, "thread 4243 (pt_autograd_0)")
    names = from_json(tracekit.timeline(built.write(tmp_path / "t.json"), tmp_path / "out.json"))["names"]
    assert names[(4242, None)] == "python3.10" and names[(4242, 4243)] == "thread 4243 (pt_autograd_0)"
    assert names[(100, None)] == "process 100" and names[(100, 100)] == "thread 100"


@pytest.mark.shared
@pytest.mark.parametrize(
    ("path", "expected"),
    [
        (
            SHARED_TRACES / "cuda_matmul_nsys2022.4.sqlite",
            {(23485, None): "nsys-launcher", (23485, 23485): "MPI Rank 0"},
        ),
        (
            SHARED_TRACES / "a100_video_sr_cudnn_conv_nsys2024.2.sqlite",
            {(3426262, None): "python", (3426262, 3426262): "python"},
        ),
        (
            SHARED_KINETO / "a100_ddp_rank0of2_nccl.json.gz",
            {
                (2910249, None): "python3.10",
                (2910249, 2910249): "thread 2910249 (pt_main_thread)",
                (2910249, 2919752): "thread 2919752 (pt_autograd_0)",
            },
        ),
        (
            SHARED_KINETO / "v100_resnet50_torch1.8.pt.trace.json.gz",
            {(119771, None): "python", (119771, 1890023232): "thread 1 (python)"},
        ),
    ],
    ids=lambda value: value.name if hasattr(value, "name") else "",
)
def test_real_traces_name_their_hosts(path, expected, tmp_path):
    if not path.exists():
        pytest.skip(f"{path} is absent")
    names = from_json(tracekit.timeline(path, tmp_path / "t.json.gz"))["names"]
    assert {key: names.get(key) for key in expected} == expected
