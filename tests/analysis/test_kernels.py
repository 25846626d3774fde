"""Kernel summary and category shares with exactly known numbers (no nsys needed)."""

import io
import json
import math

import pandas as pd
import pytest
from helpers.nsys_builder import ExportBuilder

from tracekit.analysis.kernels.summary import category_table, kernel_table
from tracekit.analysis.stats import round_half_away
from tracekit.sources.nsys.export import read_nsys_export


@pytest.fixture
def export(tmp_path):
    b = ExportBuilder("2026.2")
    for duration in (100, 200, 300, 400):  # total 1000, mean 250, median 250, sample std 129.099...
        b.kernel(0, duration, "ampere_sgemm_128x64_tn", grid=(4, 1, 1))
    b.kernel(0, 500, "ampere_sgemm_128x64_tn", grid=(8, 1, 1))
    b.kernel(
        0,
        250,
        "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>()",
        short="vectorized_elementwise_kernel",
    )
    b.kernel(
        0,
        250,
        "void at::native::vectorized_elementwise_kernel<4, at::native::MulFunctor<float>>()",
        short="vectorized_elementwise_kernel",
    )
    b.memcpy(0, 1000, copy_kind=1)
    return b.write(tmp_path / "k.sqlite")


def test_summary_by_name(export):
    table = kernel_table(read_nsys_export(export))
    top = table.iloc[0]
    assert top["Name"] == "ampere_sgemm_128x64_tn"
    assert top[["Total Time (ns)", "Instances", "Min (ns)", "Max (ns)"]].tolist() == [1500, 5, 100, 500]
    assert top["Avg (ns)"] == 300.0 and top["Med (ns)"] == 300.0
    assert top["StdDev (ns)"] == pytest.approx(math.sqrt(25_000))  # sample standard deviation of 100..500
    assert top["Time (%)"] == 75.0  # 1500 of 2000 ns of kernels (the memcpy is not a kernel)
    assert table["Time (%)"].tolist() == [75.0, 12.5, 12.5]
    assert table["StdDev (ns)"].tolist()[1:] == [0.0, 0.0]  # one instance: 0, as nsys prints


def test_summary_by_launch_config_and_short_name(export):
    trace = read_nsys_export(export)
    split = kernel_table(trace, by_launch_config=True)
    gemm = split[split["Name"] == "ampere_sgemm_128x64_tn"].set_index("GridXYZ")
    assert gemm.loc["   4    1    1", "Total Time (ns)"] == 1000
    assert gemm.loc["   4    1    1", "Med (ns)"] == 250.0  # even count: mean of the middle two
    assert gemm.loc["   4    1    1", "StdDev (ns)"] == pytest.approx(math.sqrt(50_000 / 3))
    assert gemm.loc["   8    1    1", "Instances"] == 1
    short = kernel_table(trace, name="short")
    # a generic base keeps its work argument: the two elementwise operations stay apart
    assert short.set_index("Name").loc["vectorized_elementwise_kernel<CUDAFunctor_add>", "Total Time (ns)"] == 250
    assert short.set_index("Name").loc["vectorized_elementwise_kernel<MulFunctor>", "Total Time (ns)"] == 250


def test_top_keeps_percentages_of_all_rows(export):
    table = kernel_table(read_nsys_export(export), top=1)
    assert len(table) == 1 and table["Time (%)"].tolist() == [75.0]


def test_all_ops_include_memcpy(export):
    table = kernel_table(read_nsys_export(export), which_ops="all")
    row = table.set_index("Name").loc["[CUDA memcpy HtoD]"]
    assert row["Total Time (ns)"] == 1000 and row["Time (%)"] == pytest.approx(100 / 3)


def test_category_shares(export):
    table = category_table(read_nsys_export(export)).set_index("Category")
    assert table.loc["matmul", ["Total Time (ns)", "Instances", "Kernels"]].tolist() == [1500, 5, 1]
    assert table.loc["elementwise", ["Total Time (ns)", "Instances", "Kernels"]].tolist() == [500, 2, 2]
    assert table.loc["matmul", "Time (%)"] == 75.0
    assert table.loc["memory", "Total Time (ns)"] == 0  # kernels only by default
    everything = category_table(read_nsys_export(export), which_ops="all").set_index("Category")
    assert everything.loc["memory", "Total Time (ns)"] == 1000
    assert everything["Time (%)"].sum() == pytest.approx(100.0, abs=0.15)


def test_rounding_is_half_away_from_zero():
    assert round_half_away([0.25, 0.35, 2.5, -0.25, 134402.75]).tolist() == [0.3, 0.4, 2.5, -0.3, 134402.8]


def test_cli_formats(cli, export):
    as_json = json.loads(cli("kernels", export, "--format", "json").stdout)
    assert as_json[0]["Name"] == "ampere_sgemm_128x64_tn" and as_json[0]["Total Time (ns)"] == 1500
    as_csv = pd.read_csv(io.StringIO(cli("kernels", export, "--format", "csv", "--top", "2").stdout))
    assert as_csv["Instances"].tolist() == [5, 1]
    table = cli("kernels", export).output
    assert "1,500" in table and "ampere_sgemm_128x64_tn" in table
    markdown = cli("kernels", export, "--format", "md", "--by", "category").output
    assert "| matmul | 75.0 | 1,500 | 5 | 1 |" in markdown


def test_cli_writes_parquet(cli, export, tmp_path):
    out = tmp_path / "k.parquet"
    assert cli("kernels", export, "--format", "parquet", "-o", out).exit_code == 0
    assert pd.read_parquet(out)["Total Time (ns)"].tolist() == [1500, 250, 250]
    missing = cli("kernels", export, "--format", "parquet")
    assert missing.exit_code == 1 and "--output" in missing.output
