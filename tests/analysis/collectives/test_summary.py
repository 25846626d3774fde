"""Collectives on one rank: each NCCL kernel with what torch recorded of its call, and nccl-tests'
bandwidths per operation, dtype and group, on built traces with exact numbers and on the real DDP trace."""

from __future__ import annotations

import gzip
import json
from collections import defaultdict

import pandas as pd
import pytest
from helpers.kineto_builder import KinetoBuilder
from helpers.paths import SHARED_KINETO

import tracekit
from tracekit.analysis.collectives.instances import collective_instances
from tracekit.analysis.collectives.summary import collectives_summary
from tracekit.sources import open_trace

ALL_REDUCE = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
ALL_GATHER = "ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
GROUP = {"Group size": 8, "Process Group Name": "3", "Process Group Ranks": "[0, 1, 2, 3, 4, 5, 6, 7]"}


def built(tmp_path):
    """An all-reduce of 1,048,576 BF16 elements (2 MiB) in 100 us, recorded by record_param_comms around its
    launch; an all-gather whose kernel carries its own args (newer torch): 262,144 float32 in, 8 x that out
    (8 MiB), in 50 us; and a kernel that is no collective."""
    trace = KinetoBuilder()
    reduce_args = {
        "Collective name": "allreduce",
        "dtype": "BFloat16",
        "In msg nelems": 1048576,
        "Out msg nelems": 1048576,
    }
    trace.event("X", "cpu_op", "record_param_comms", 100, 100, 10, 30, {**reduce_args, **GROUP, "Seq": 7})
    trace.launch("cudaLaunchKernel", 12, 5, 1).kernel(ALL_REDUCE, 100, 100, 1)
    gather = {
        "Collective name": "_allgather_base",
        "dtype": "Float",
        "In msg nelems": 262144,
        "Out msg nelems": 2097152,
    }
    trace.launch("cudaLaunchKernel", 50, 5, 2)
    trace.event(
        "X", "kernel", ALL_GATHER, 0, 7, 300, 50, {"device": 0, "stream": 7, "correlation": 2, **gather, **GROUP}
    )
    trace.launch("cudaLaunchKernel", 60, 5, 3).kernel("gemm", 400, 10, 3)
    return trace.write(tmp_path / "t.json")


def test_bytes_and_bandwidths_by_hand(tmp_path):
    """all-reduce: 2,097,152 bytes / 100,000 ns = 20.97 GB/s; bus x 2 x 7/8. all-gather: its output, 8,388,608
    bytes / 50,000 ns = 167.77 GB/s; bus x 7/8. Sizes from the range and from the kernel."""
    instances = collective_instances(open_trace(built(tmp_path)))
    assert instances["operation"].tolist() == ["AllReduce", "AllGather"]
    assert instances["bytes"].tolist() == [2_097_152, 8_388_608]
    assert instances["sizes"].tolist() == ["record_param_comms", "kernel"] and instances["seq"].tolist() == [7, -1]
    table = collectives_summary(instances).set_index("Operation")
    reduce, gather = table.loc["AllReduce"], table.loc["AllGather"]
    assert (reduce["Dtype"], reduce["Group"], reduce["Ranks"], reduce["Count"]) == ("bfloat16", "3", 8, 1)
    assert reduce["Algorithm Bandwidth (GB/s)"] == pytest.approx(2_097_152 / 100_000)
    assert reduce["Bus Bandwidth (GB/s)"] == pytest.approx(2_097_152 / 100_000 * 2 * 7 / 8)
    assert gather["Dtype"] == "float32" and gather["Algorithm Bandwidth (GB/s)"] == pytest.approx(8_388_608 / 50_000)
    assert gather["Bus Bandwidth (GB/s)"] == pytest.approx(8_388_608 / 50_000 * 7 / 8)


def test_without_a_record_the_bandwidths_stay_empty(tmp_path):
    """A trace that records no sizes (nsys, torch before record_param_comms' args): the operation and dtype
    from the name, no bytes, no bandwidth."""
    trace = KinetoBuilder()
    trace.launch("cudaLaunchKernel", 12, 5, 1).kernel(ALL_REDUCE, 100, 100, 1)
    table = collectives_summary(collective_instances(open_trace(trace.write(tmp_path / "t.json"))))
    row = table.iloc[0]
    assert (row["Operation"], row["Dtype"], row["Count"], row["Sized"]) == ("AllReduce", "bfloat16", 1, 0)
    assert row["Bytes"] != row["Bytes"] and row["Bus Bandwidth (GB/s)"] != row["Bus Bandwidth (GB/s)"]


def test_an_element_count_whose_bytes_pass_int64_is_unknown_not_wrapped(tmp_path):
    """3e18 float64 elements are 2.4e19 bytes, past int64: wrapped, the product read 5.55e18 bytes; it is unknown
    (-1) and the bandwidth empty, as for a call that recorded no size."""
    trace = KinetoBuilder()
    args = {
        "Collective name": "allreduce",
        "dtype": "Double",
        "In msg nelems": 3 * 10**18,
        "Out msg nelems": 3 * 10**18,
    }
    trace.launch("cudaLaunchKernel", 12, 5, 1)
    trace.event("X", "kernel", ALL_REDUCE, 0, 7, 100, 100, {"device": 0, "stream": 7, "correlation": 1, **args})
    instances = collective_instances(open_trace(trace.write(tmp_path / "t.json")))
    assert instances["bytes"].tolist() == [-1]


def test_a_step_range_that_names_no_range_is_said(tmp_path):
    """Asked for steps named "train_step" in a trace with none: the rate per step is empty, and the note says why."""
    result = tracekit.collectives(built(tmp_path), step_range="train_step")
    assert result.table("collectives")["Per Step per Rank"].isna().all()
    assert "no range named 'train_step': no rate per step" in result.notes


def test_no_bandwidth_over_no_time():
    """Sized all-reduces whose kernels took 0 ns (or whose time was all waiting): no bandwidth (not infinite)."""
    instances = pd.DataFrame(
        {
            "operation": ["AllReduce"] * 2,
            "dtype": ["float32"] * 2,
            "group": ["0"] * 2,
            "ranks": [2, 2],
            "bytes": [4096, 4096],
            "duration": [0, 0],
        }
    )
    row = collectives_summary(instances).iloc[0]
    assert row["Bytes"] == 8192 and row["Algorithm Bandwidth (GB/s)"] != row["Algorithm Bandwidth (GB/s)"]
    assert row["Bus Bandwidth (GB/s)"] != row["Bus Bandwidth (GB/s)"]


def test_an_all_to_all_on_send_receive_kernels_has_the_all_to_all_bus_factor():
    """NCCL runs torch's all_to_all as SendRecv kernels; nccl-tests' bus bandwidth of an all-to-all is (n-1)/n of
    the algorithm's (a rank's share to itself crosses no link): over two ranks 4,096 bytes in 1,000 ns are 4.096
    GB/s of algorithm bandwidth and 2.048 of bus, not 4.096. A plain send/receive in its own row keeps x 1."""
    instances = pd.DataFrame(
        {
            "operation": ["SendRecv"] * 3,
            "dtype": ["float32"] * 3,
            "group": ["0", "0", "1"],
            "ranks": [2, 2, 2],
            "bytes": [4096, 4096, 4096],
            "duration": [1000, 1000, 1000],
            "recorded": ["all_to_all", "all_to_all", "send"],
        }
    )
    table = collectives_summary(instances).set_index("Group")
    assert table.loc["0", "Algorithm Bandwidth (GB/s)"] == pytest.approx(4.096)
    assert table.loc["0", "Bus Bandwidth (GB/s)"] == pytest.approx(2.048)
    assert table.loc["1", "Bus Bandwidth (GB/s)"] == pytest.approx(4.096)


@pytest.mark.shared
def test_the_ddp_traces_totals_equal_its_nccl_kernels():
    """DDP rank 0 of 2: per operation, the time equals the sum of its NCCL kernels in the raw JSON, and every
    one is sized (each kernel carries torch's record)."""
    path = SHARED_KINETO / "a100_ddp_rank0of2_nccl.json.gz"
    if not path.exists():
        pytest.skip(f"{path} is absent (../shared not beside the project)")
    raw = defaultdict(int)
    for event in json.load(gzip.open(path, "rt"))["traceEvents"]:
        if event.get("cat") == "kernel" and event["name"].startswith("ncclKernel_"):
            raw[event["name"].split("_")[1]] += round(float(event["dur"]) * 1000)
    table = collectives_summary(collective_instances(open_trace(path)))
    totals = defaultdict(int)
    for operation, time in zip(table["Operation"], table["Total Time (ns)"]):
        totals[operation] += int(time)
    assert dict(totals) == dict(raw)
    assert (table["Sized"] == table["Count"]).all() and set(table["Ranks"]) == {2}
