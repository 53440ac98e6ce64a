"""gpu_peaks.csv: datasheet peak throughput (dense TFLOP/s) and memory bandwidth (GB/s) per NVIDIA GPU."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from gpucompat.knowledge.gpus import lookup

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "src" / "gpucompat" / "knowledge" / "data" / "gpu_peaks.csv"
FACTS = ROOT / "tools" / "facts" / "gpu_peaks.csv"
COLUMNS = ["gpu", "fp64", "fp32", "tf32", "fp16", "bf16", "fp8", "memory_gbs", "source"]
NUMERIC = COLUMNS[1:-1]


def _rows() -> list[dict]:
    with DATA.open(newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


ROWS = _rows()
BY_NAME = {row["gpu"]: row for row in ROWS}


def _num(row: dict, column: str) -> float | None:
    return float(row[column]) if row[column].strip() else None


def test_columns_and_copy_identical():
    with DATA.open(newline="", encoding="utf-8") as handle:
        assert next(csv.reader(handle)) == COLUMNS
    assert DATA.read_bytes() == FACTS.read_bytes()
    assert len(ROWS) >= 20
    assert len(BY_NAME) == len(ROWS), "duplicate gpu names"


@pytest.mark.parametrize("row", ROWS, ids=lambda r: r["gpu"])
def test_row_sourced_and_positive(row):
    assert row["source"].strip().startswith(("http", "H100", "H200", "A100", "V100", "HGX", "GB200"))
    assert "https://" in row["source"]
    assert _num(row, "memory_gbs") is not None
    for column in NUMERIC:
        value = _num(row, column)
        assert value is None or value > 0, (row["gpu"], column)


@pytest.mark.parametrize("row", ROWS, ids=lambda r: r["gpu"])
def test_name_resolves_to_compute_capability(row):
    found = lookup(row["gpu"])
    assert found is not None, row["gpu"]
    major, minor = found["cc"].split(".")
    assert major.isdigit() and minor.isdigit()


@pytest.mark.parametrize("row", ROWS, ids=lambda r: r["gpu"])
def test_dense_ordering(row):
    fp16, bf16, tf32, fp8 = (_num(row, c) for c in ("fp16", "bf16", "tf32", "fp8"))
    if fp16 is not None and bf16 is not None:
        # Datacenter and GeForce (FP32-accumulate figure) alike print the same BF16 and FP16 Tensor rate.
        assert fp16 == bf16
    if fp16 is not None and tf32 is not None:
        assert tf32 <= fp16
    if fp8 is not None and fp16 is not None:
        assert fp8 > fp16


HOPPER_ADA_DATACENTER = ["NVIDIA H100 80GB HBM3", "NVIDIA H100 PCIe", "NVIDIA H100 NVL", "NVIDIA H200",
                         "NVIDIA H200 NVL", "NVIDIA L40S", "NVIDIA L40", "NVIDIA L4"]


@pytest.mark.parametrize("name", HOPPER_ADA_DATACENTER)
def test_fp8_twice_fp16_on_hopper_ada_datacenter(name):
    row = BY_NAME[name]
    # L40S prints 362.05 (FP16) next to 733 (FP8): a datasheet rounding, hence the tolerance.
    assert _num(row, "fp8") == pytest.approx(2 * _num(row, "fp16"), rel=0.03)


@pytest.mark.parametrize("name", ["NVIDIA A100-SXM4-80GB", "Tesla V100-SXM2-16GB", "Tesla T4"])
def test_no_fp8_before_ada(name):
    assert _num(BY_NAME[name], "fp8") is None


def test_spot_values():
    h100 = BY_NAME["NVIDIA H100 80GB HBM3"]
    assert 989 <= _num(h100, "bf16") < 990
    assert _num(h100, "memory_gbs") == 3350
    h200 = BY_NAME["NVIDIA H200"]
    assert 989 <= _num(h200, "bf16") < 990
    assert _num(h200, "memory_gbs") == 4800
    a100 = BY_NAME["NVIDIA A100-SXM4-80GB"]
    assert _num(a100, "bf16") == 312
    assert _num(a100, "memory_gbs") == 2039
    assert _num(BY_NAME["NVIDIA A100-SXM4-40GB"], "memory_gbs") == 1555


def test_sparse_figures_were_halved():
    # Rows whose datasheet prints only sparse (*) Tensor figures say so in the source.
    for name in HOPPER_ADA_DATACENTER[:5] + ["NVIDIA L4", "NVIDIA B200", "NVIDIA GB200", "NVIDIA RTX A6000"]:
        assert "sparse halved" in BY_NAME[name]["source"], name
