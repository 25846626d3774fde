"""torch.profiler's record of each collective (record_param_comms args, and newer torch's NCCL kernels that
carry them): read into the collective_args table, by the range or GPU op that carries them."""

from __future__ import annotations

import pytest
from helpers.kineto_builder import KinetoBuilder
from helpers.paths import SHARED_KINETO

from tracekit.sources import open_trace

COMMS = {
    "Collective name": "allreduce",
    "dtype": "BFloat16",
    "In msg nelems": 1048576,
    "Out msg nelems": 1048576,
    "In split size": "[]",
    "Out split size": "[]",
    "Group size": 8,
    "Process Group Name": "3",
    "Process Group Description": "dp",
    "Process Group Ranks": "[0, 1, 2, 3, 4, 5, 6, 7]",
    "Seq": 41,
}
NCCL = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)"


def built(tmp_path):
    trace = KinetoBuilder()
    trace.event("X", "cpu_op", "record_param_comms", 100, 100, 10, 30, {"External id": 1, **COMMS})
    trace.event("X", "cpu_op", "aten::mm", 100, 100, 50, 10)  # no collective: not in the table
    trace.launch("cudaLaunchKernel", 12, 5, 1).kernel("k", 100, 5, 1)
    trace.launch("cudaLaunchKernel", 20, 5, 2)
    trace.event("X", "kernel", NCCL, 0, 7, 200, 50, {"device": 0, "stream": 7, "correlation": 2, **COMMS, "Seq": 42})
    return trace.write(tmp_path / "t.json")


def test_the_collectives_args_from_their_range_and_their_kernel(tmp_path):
    trace = open_trace(built(tmp_path))
    table = trace.optional("collective_args")
    assert table is not None and table["source"].tolist() == ["range", "gpu_op"]
    ranges, ops = trace.ranges, trace.gpu_ops
    assert ranges.set_index("range_id").loc[table["row"].iloc[0], "name"] == "cpu_op:record_param_comms"
    assert ops["name"].iloc[table["row"].iloc[1]] == NCCL
    first = table.iloc[0]
    assert (first["collective"], first["dtype"], first["group_name"], first["group_desc"]) == (
        "allreduce",
        "BFloat16",
        "3",
        "dp",
    )
    assert (first["in_elements"], first["out_elements"], first["group_size"], first["seq"]) == (1048576, 1048576, 8, 41)
    assert first["group_ranks"] == "[0, 1, 2, 3, 4, 5, 6, 7]" and (first["rank"], first["src_rank"]) == (-1, -1)
    assert table["seq"].tolist() == [41, 42]


def test_values_of_another_shape_read_as_not_recorded(tmp_path):
    trace = KinetoBuilder()
    odd = {
        "Collective name": "all_to_all",
        "In msg nelems": [1, 2],
        "Group size": "eight",
        "Process Group Ranks": [0, 1],
    }
    trace.event("X", "cpu_op", "record_param_comms", 100, 100, 10, 30, odd)
    table = open_trace(trace.write(tmp_path / "odd.json")).optional("collective_args")
    assert table is not None
    row = table.iloc[0]
    assert (row["collective"], row["in_elements"], row["group_size"], row["group_ranks"]) == (
        "all_to_all",
        -1,
        -1,
        "[0,1]",
    )


@pytest.mark.shared
def test_the_ddp_trace_records_every_collective_twice():
    """DDP rank 0 of 2 (torch with NCCL 2.17): 27 record_param_comms ranges (21 collectives, 6 waits on their
    work, which torch records with a group of one and no ranks), and each of its 21 NCCL kernels (15
    all-reduces, 6 broadcasts) carries the args too."""
    path = SHARED_KINETO / "a100_ddp_rank0of2_nccl.json.gz"
    if not path.exists():
        pytest.skip(f"{path} is absent (../shared not beside the project)")
    trace = open_trace(path)
    table = trace.optional("collective_args")
    assert table is not None
    assert (table["source"] == "range").sum() == 27 and (table["source"] == "gpu_op").sum() == 21
    kernels = trace.gpu_ops["name"].astype(str).to_numpy()[table.loc[table["source"] == "gpu_op", "row"].to_numpy()]
    assert all(name.startswith("ncclKernel_") for name in kernels)
    waits = (table["collective"] == "wait").to_numpy()
    assert waits.sum() == 6 and set(table.loc[waits, "group_size"]) == {1}
    assert set(table.loc[~waits, "group_ranks"]) == {"[0, 1]"} and set(table.loc[~waits, "group_size"]) == {2}
    assert set(table.loc[~waits, "collective"]) == {"allreduce", "broadcast"}
