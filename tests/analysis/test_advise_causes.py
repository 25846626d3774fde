"""advise's idle fixes follow the cause the ranges name: DataLoader workers only where the launching thread was
in data loading; framework overhead otherwise; nothing recorded said so; a blocking sync's caller (.item(),
data-dependent shapes) leads its fix."""

from __future__ import annotations

import pytest
from helpers.nsys_builder import ExportBuilder

import tracekit

MS, US = 1_000_000, 1_000


def stall(tmp_path, range_name: str | None):
    """A 10 ms gap between two kernels with ``range_name`` open on the launching thread across it."""
    b = ExportBuilder("2026.2")
    b.kernel(0, 10 * MS, "k", launch_at=-1 * MS)
    if range_name:
        b.push_pop(10 * MS, 19_800 * US, range_name)
    b.kernel(20 * MS, 30 * MS, "k", launch_at=19_900 * US)
    table = tracekit.advise(b.write(tmp_path / "stall.sqlite"))["findings"].set_index("Finding")
    return table.loc["host stall"]


@pytest.mark.parametrize(
    ("name", "said", "fix"),
    [
        ("enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__", "was in data loading", "num_workers"),
        ("aten::_local_scalar_dense", "was in host syncs", "no .item()"),
        ("wandb.log", "was in logging and checkpoints", "log and save less often"),
        ("my_model.forward", "was in framework code", "torch.compile"),
        (None, "what it did is not recorded", "annotate the loop"),
    ],
)
def test_host_stall_fix_follows_the_range(tmp_path, name, said, fix):
    row = stall(tmp_path, name)
    assert said in row["What"] and fix in row["Fix"]
    if name and "DataLoader" not in name:
        assert "num_workers" not in row["Fix"]  # no DataLoader advice where the thread was not loading data


@pytest.mark.parametrize(
    ("caller", "cause", "fix"),
    [("aten::item", ".item() and friends", "no .item()"), ("aten::nonzero", "data-dependent shapes", "torch.where")],
)
def test_blocking_sync_names_its_caller(tmp_path, caller, cause, fix):
    """The host waits 8 ms in cudaStreamSynchronize inside ``caller``; the GPU idles 5 ms after."""
    b = ExportBuilder("2026.2")
    b.kernel(0, 10 * MS, "k", launch_at=-1 * MS)
    b.push_pop(2 * MS, 10_100 * US, caller)
    b.runtime(2 * MS, 10_050 * US, "cudaStreamSynchronize_v3020", 900)
    b.kernel(15 * MS, 25 * MS, "k", launch_at=14_990 * US)
    row = tracekit.advise(b.write(tmp_path / "sync.sqlite"))["findings"].set_index("Finding").loc["blocking sync"]
    assert f"100 % of the waiting was {cause}" in row["What"] and fix in row["Fix"]
