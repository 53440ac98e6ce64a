"""GPU name -> compute capability: curated gpus.csv first, then every pci.ids device name."""

import csv
import importlib.util
import re
from pathlib import Path

import pytest

from gpucompat.knowledge import gpus

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "src" / "gpucompat" / "knowledge" / "data"
CHIPS = ROOT / "tools" / "facts" / "gpu_chips.csv"
CC = re.compile(r"^\d{1,2}\.\d$")


def _builder():
    spec = importlib.util.spec_from_file_location("build_gpu_names", ROOT / "tools" / "build_gpu_names.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("name, cc", [
    # the brief's names
    ("NVIDIA GeForce RTX 3070 Laptop GPU", "8.6"),
    ("GeForce RTX 3070", "8.6"),
    ("NVIDIA A800-SXM4-80GB", "8.0"),
    ("NVIDIA RTX 4000 SFF Ada Generation", "8.9"),
    ("NVIDIA RTX A4500", "8.6"),
    ("Quadro M1000M", "5.0"),
    ("GeForce 920M", "3.5"),  # GK208BM in pci.ids: Kepler
    # curated rows resolve as before
    ("NVIDIA A100-SXM4-40GB", "8.0"),
    ("Tesla V100-PCIE-16GB", "7.0"),
    ("NVIDIA H200", "9.0"),
    ("NVIDIA GeForce RTX 4090", "8.9"),
    ("Tesla K40m", "3.5"),
    ("Tesla K80", "3.7"),
    # datacenter
    ("NVIDIA-A100-SXM4-80GB", "8.0"),  # Kubernetes GPU feature discovery label
    ("NVIDIA H100 80GB HBM3", "9.0"),
    ("NVIDIA H800", "9.0"),
    ("NVIDIA H20", "9.0"),
    ("NVIDIA A10", "8.6"),
    ("NVIDIA A10G", "8.6"),
    ("NVIDIA L40S", "8.9"),
    ("Tesla T4", "7.5"),
    ("Tesla P100-PCIE-16GB", "6.0"),
    ("Tesla K20Xm", "3.5"),
    ("Tesla M60", "5.2"),
    # workstation
    ("Quadro RTX 4000", "7.5"),
    ("NVIDIA RTX 2000 Ada Generation", "8.9"),
    ("NVIDIA T1000 8GB", "7.5"),
    ("Quadro P1000", "6.1"),
    # laptop
    ("NVIDIA GeForce RTX 3050 Ti Laptop GPU", "8.6"),
    ("NVIDIA GeForce RTX 4060 Laptop GPU", "8.9"),
    ("NVIDIA RTX A1000 Laptop GPU", "8.6"),
    ("NVIDIA GeForce GTX 960M", "5.0"),  # GM107M, not the desktop GTX 960 (GM206, 5.2)
    ("NVIDIA GeForce GTX 1650", "7.5"),
    # Maxwell vs Kepler vs Pascal TITANs
    ("GeForce GTX TITAN X", "5.2"),
    ("NVIDIA TITAN X (Pascal)", "6.1"),
    ("GeForce GTX TITAN Black", "3.5"),
    # Blackwell, Thor, DGX Spark
    ("NVIDIA B200", "10.0"),
    ("NVIDIA GB300", "10.3"),
    ("NVIDIA GeForce RTX 5090", "12.0"),
    ("NVIDIA GeForce RTX 5060 Laptop GPU", "12.0"),
    ("NVIDIA RTX PRO 6000 Blackwell Server Edition", "12.0"),
    ("NVIDIA RTX PRO 4000 Blackwell SFF Edition", "12.0"),
    ("NVIDIA GB10", "12.1"),
    ("NVIDIA Jetson AGX Thor", "11.0"),
    ("Jetson AGX Orin", "8.7"),
])
def test_known_names(name, cc):
    row = gpus.lookup(name)
    assert row is not None, name
    assert row["cc"] == cc, (name, row)
    assert row["source"] and row["architecture"] and row["name"]


@pytest.mark.parametrize("name", [
    "Foo Bar 9000", "", "NVIDIA", "NVIDIA RTX 4000",  # 'RTX 4000' is not 'RTX 4000 Ada' nor 'Quadro RTX 4000'
    "NVIDIA GeForce GT 730",  # three chips (GF108 2.1, GK107 3.0, GK208B 3.5) share the name
    "x" * 500,
])
def test_unknown_or_ambiguous_names(name):
    assert gpus.lookup(name) is None


def test_a10_is_not_a100_and_prefix_is_optional():
    assert gpus.lookup("NVIDIA A10")["name"] == "NVIDIA A10"
    assert gpus.lookup("NVIDIA A100")["cc"] == "8.0"
    assert gpus.lookup("GeForce RTX 3070")["cc"] == gpus.lookup("NVIDIA GeForce RTX 3070")["cc"] == "8.6"


def test_curated_wins_and_says_which_table():
    assert gpus.lookup("NVIDIA H100 PCIe")["matched"] == "gpus.csv"
    assert gpus.lookup("NVIDIA GeForce RTX 3070 Laptop GPU")["matched"] == "pci_gpus.csv"


def test_key_normalises_driver_spellings():
    assert gpus.key("NVIDIA A800-SXM4-80GB") == gpus.key("A800 SXM4 80GB") == "a800 sxm4 80gb"
    assert gpus.key("NVIDIA GeForce RTX 3070 Laptop GPU") == gpus.key("GeForce RTX 3070 Mobile")
    assert gpus.key("NVIDIA GeForce RTX 2080 with Max-Q Design") == gpus.key("GeForce RTX 2080 Max-Q")
    assert gpus.core("a800 sxm4 80gb") == "a800"


def _rows(path):
    with path.open(newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def test_every_row_is_sourced_with_a_valid_cc():
    chips = _rows(CHIPS)
    names = _rows(DATA / "pci_gpus.csv")
    assert len(chips) >= 50 and len(names) >= 500
    known_chips = {row["chip"] for row in chips}
    for row in chips:
        assert row["source"].strip() and row["architecture"].strip() and CC.match(row["cc"]), row
        assert "http" in row["source"], row
    for row in names:
        assert row["source"].strip().startswith("pci.ids ") and CC.match(row["cc"]), row
        assert row["chip"] in known_chips, row
    by_chip = {row["chip"]: row["cc"] for row in chips}
    assert all(by_chip[row["chip"]] == row["cc"] for row in names)
    assert len({row["name"] for row in names}) == len(names)


# Real lines from pci.ids 2026.08.22 (github.com/pciutils/pciids), NVIDIA section, plus the
# next vendor so the parser must stop there.
PCI_IDS_EXCERPT = """\
#	Version: 2026.08.22
10de  NVIDIA Corporation
	0fbc  GM107 High Definition Audio Controller [GeForce 940MX]
	1023  GK110BGL [Tesla K40m]
	13d8  GM204M [GeForce GTX 960 OEM / 970M]
	1299  GK208BM [GeForce 920M]
	1e30  TU102GL [Quadro RTX 6000/8000]
		10de 129e  Quadro RTX 8000
	2484  GA104 [GeForce RTX 3070]
	249d  GA104M [GeForce RTX 3070 Mobile / Max-Q]
	20f3  GA100 [A800-SXM4-80GB]
	25b6  GA107GL [A2 / A16]
	28b0  AD107GL [RTX 2000 / 2000E Ada Generation]
	2c18  GB203M / GN22 [GeForce RTX 5090 Max-Q / Mobile]
	2924  GB100
	2900  GB100 [Reserved Dev ID A]
	3000  GR100 [Reserved Dev ID A]
	0194  G80 [GeForce 8800 Ultra]
	0f02  GF108 [GeForce GT 730]
	0fc9  GK107 [GeForce GT 730]
10df  Emulex Corporation
	1ae5  LP6000 PCI Fibre Channel Host Adapter
"""


def test_parser_on_a_real_excerpt():
    build = _builder()
    rows, counts = build.build(PCI_IDS_EXCERPT, build.load_chips())
    got = {row["name"]: row for row in rows}
    assert counts["version"] == "2026.08.22"
    assert got["Tesla K40m"]["chip"] == "GK110B" and got["Tesla K40m"]["cc"] == "3.5"
    assert {"GeForce GTX 960 OEM", "GeForce GTX 970M"} <= set(got)
    assert got["GeForce 920M"]["cc"] == "3.5"
    assert got["Quadro RTX 6000"]["cc"] == got["Quadro RTX 8000"]["cc"] == "7.5"
    assert {"GeForce RTX 3070 Mobile", "GeForce RTX 3070 Max-Q"} <= set(got)
    assert got["A800-SXM4-80GB"]["cc"] == "8.0"
    assert {"A2", "A16"} <= set(got)
    assert {"RTX 2000 Ada Generation", "RTX 2000E Ada Generation"} <= set(got)
    assert {"GeForce RTX 5090 Max-Q", "GeForce RTX 5090 Mobile"} <= set(got) and got["GeForce RTX 5090 Mobile"]["cc"] == "12.0"
    assert got["GeForce RTX 3070"]["source"] == "pci.ids 2026.08.22 10de:2484; chip GA104 (tools/facts/gpu_chips.csv)"
    # not GPUs, not products, unknown chips, and names two chips of different CC share
    assert not any("Audio" in n or "940MX" in n or "Reserved" in n or "8800" in n or "LP6000" in n for n in got)
    assert counts["skipped_by_chip"] == {"G80": 1, "GR100": 1}
    assert counts["unnamed"] == 1 and counts["not_products"] == 1
    assert counts["conflicting_names"] == ["GeForce GT 730"] and "GeForce GT 730" not in got


def test_expand_alternatives():
    expand = _builder().expand
    assert expand("Tesla C2050 / C2070") == ["Tesla C2050", "Tesla C2070"]
    assert expand("GH200 120GB / 480GB") == ["GH200 120GB", "GH200 480GB"]
    assert expand("Quadro K620M / Quadro M500M") == ["Quadro K620M", "Quadro M500M"]
    assert "GeForce RTX 3080 Max-Q 16GB" in expand("GeForce RTX 3080 Mobile / Max-Q 8GB/16GB")


# --- issue 29, part 7: names as people type them ------------------------------------------------------------

@pytest.mark.parametrize("typed, spelled, name, cc", [
    ("RTX4090", "RTX 4090", "GeForce RTX 4090", "8.9"),
    ("rtx4090", "rtx 4090", "GeForce RTX 4090", "8.9"),
    ("GeForce RTX4090", "GeForce RTX 4090", "GeForce RTX 4090", "8.9"),
    ("GTX1080Ti", "GTX 1080 Ti", "GeForce GTX 1080 Ti", "6.1"),
    ("Quadro RTX6000", "Quadro RTX 6000", "Quadro RTX 6000", "7.5"),
])
def test_a_name_run_together_is_read_once_spaced(typed, spelled, name, cc):
    assert gpus.lookup(typed) is None  # the strict lookup is unchanged: the spacing is a reading, said by the caller
    found, row = gpus.respelled(typed)
    assert (found, row["name"], row["cc"]) == (spelled, name, cc)


def test_one_letter_stays_joined_to_its_digits():
    assert gpus.respelled("A100") is None and gpus.respelled("L40S") is None  # names as they are; never 'A 100'
    assert gpus.respelled("Foo9000") is None


@pytest.mark.parametrize("typed, first", [
    ("RTX 4909", "GeForce RTX 4090"),  # a typo within a small edit distance
    ("GTX 108O", "GeForce GTX 1080"),
    ("RTX6000", "NVIDIA RTX 6000 Ada"),  # a name that several hold: each is offered
])
def test_a_name_close_to_known_ones_gets_suggestions(typed, first):
    assert gpus.lookup(typed) is None and gpus.respelled(typed) is None
    assert gpus.suggestions(typed)[0] == first


def test_a_name_far_from_every_known_one_gets_no_suggestion():
    assert gpus.suggestions("NVIDIA Foo 9000") == [] and gpus.suggestions("") == []


@pytest.mark.parametrize("name, vendor", [
    ("MI250X", "AMD"), ("AMD Instinct MI300X", "AMD"), ("Instinct MI210", "AMD"), ("Radeon RX 7900 XTX", "AMD"),
    ("AMD Radeon PRO W7900", "AMD"), ("Intel Data Center GPU Max 1550", "Intel"), ("Max 1550", "Intel"),
    ("Data Center GPU Flex 170", "Intel"), ("Intel Arc A770", "Intel"), ("Arc B580", "Intel"), ("Gaudi 2", "Intel"),
    ("HL-225 Gaudi2", "Intel"), ("Apple M2 Max", "Apple"),
])
def test_other_vendors_gpus_are_named(name, vendor):
    assert gpus.other_vendor(name) == vendor


def test_no_nvidia_name_the_tables_hold_is_taken_for_another_vendors():
    names = [r["name"] for table in ("gpus.csv", "pci_gpus.csv") for r in csv.DictReader((DATA / table).open(encoding="utf-8"))]
    assert len(names) > 700
    assert [n for n in names if gpus.other_vendor(n)] == []
    assert gpus.other_vendor("NVIDIA GeForce RTX 2080 with Max-Q Design") is None


def test_letters_typed_for_digits_get_did_you_mean():
    from gpucompat.knowledge.gpus import suggestions

    assert suggestions("A1OO") == ["NVIDIA A100"]
    assert suggestions("RTX 4O9O") == ["GeForce RTX 4090"]
    assert suggestions("H1OO") == ["NVIDIA H100"]
    assert suggestions("TITAN Xp") == [] or "TITAN" in suggestions("TITAN Xp")[0]  # a word with no digit is left as typed
