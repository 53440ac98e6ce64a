"""What NVIDIA's README lists as supported (issue 35 item 1): data/driver_devices.csv, built by
tools/build_driver_devices.py from NVIDIA/open-gpu-kernel-modules README.md's Compatible GPUs table at each tag.
Since issue 40 section 2 the list is a warning, not the verdict: where the release's code recognises the chip
(driver_chips.csv) the driver drives the board (tests/test_kernel_modules.py); `listed_drives` is the README's reading."""

import csv
from pathlib import Path

import pytest

from gpucompat.knowledge import gpus
from gpucompat.knowledge.driving import listed_drives
from gpucompat.knowledge.rules import driver_drives_rule, driving_branch

DATA = Path(__file__).resolve().parents[1] / "src" / "gpucompat" / "knowledge" / "data"


def drives(name, driver):
    """The README lists' own reading (what NVIDIA lists as supported), which the code tables may overrule."""
    row = gpus.lookup(name)
    return listed_drives(row["cc"], row["name"], driver)


def test_a_board_the_readme_leaves_out_is_driven_where_the_code_knows_its_chip():
    # README-as-truth was the bug (issue 40.2): 535.183.01's code (g_chips2halspec_nvoc.c) has AD104, the RTX 4070 SUPER's chip
    row = gpus.lookup("RTX 4070 SUPER")
    reason = driver_drives_rule(row["cc"], row["name"], "535.183.01")
    assert reason.verdict == "pass" and "g_chips2halspec_nvoc.c" in reason.text
    assert "not listed as supported by NVIDIA's README for 535.183.01" in reason.warning and "550.40.07" in reason.warning


def test_every_row_names_its_release_commit_and_source():
    read = {r["release"]: r for r in csv.DictReader((DATA / "driver_readmes.csv").open(encoding="utf-8"))}
    assert "515.48.07" in read and "515.43.04" not in read  # 515.43.04's README has no Compatible GPUs table
    for row in csv.DictReader((DATA / "driver_devices.csv").open(encoding="utf-8")):
        assert row["first"] in read and len(row["first_commit"]) == 40 and row["first_commit"] == read[row["first"]]["commit"]
        assert not row["last"] or read[row["last"]]["commit"] == row["last_commit"]
        assert row["source"].startswith("NVIDIA/open-gpu-kernel-modules@") and row["names"]


@pytest.mark.parametrize("name", ["NVIDIA GeForce RTX 4070 SUPER", "RTX 4070 SUPER", "10de:2783", "0x2783"])
def test_a_super_card_on_r535_is_not_driven_and_the_first_release_is_named(name):
    reason = drives(name, "535.183.01")
    assert (reason.verdict, reason.code, reason.confidence) == ("fail", "NO_DEVICE", "high")
    assert "10de:2783" in reason.text and "535.183.01's list" in reason.text and "550.40.07" in reason.text
    assert "4459285b60d7" in reason.source or "4459285b60d7" in reason.text  # the commit read
    branch, on, head = driving_branch("8.9", gpus.lookup(name)["name"], "535.183.01")
    assert branch == 550 and on.startswith("550.") and "550.40.07" in head


@pytest.mark.parametrize("name,first", [("NVIDIA GeForce RTX 4070 Ti SUPER", "550.40.07"), ("NVIDIA GeForce RTX 4080 SUPER", "550.40.53")])
def test_the_other_super_cards_need_r550(name, first):
    assert drives(name, "545.29.06").code == "NO_DEVICE" and first in drives(name, "545.29.06").text
    assert drives(name, "550.54.15").verdict == "pass"


def test_a_super_card_on_r550_passes_that_rule():
    assert drives("RTX 4070 SUPER", "550.54.15").verdict == "pass"
    unread = drives("RTX 4070 SUPER", "550.50")  # not a release read: an earlier one (550.40.07) lists it, and lists only grow
    assert unread.verdict == "pass" and "550.40.07" in unread.text and "only grows" in unread.text


def test_h100_sxm5_on_r520_and_r525():
    assert drives("H100 SXM5", "520.61.05").code == "NO_DEVICE"
    assert drives("NVIDIA H100 80GB HBM3", "520.56.06").code == "NO_DEVICE"  # R520 listed only the H100 PCIe
    assert drives("NVIDIA H100 PCIe", "520.56.06").verdict == "pass"
    assert drives("H100 SXM5", "525.85.12").verdict == "pass" and drives("NVIDIA H100 80GB HBM3", "525.85.12").verdict == "pass"
    assert "525.47.07" in drives("NVIDIA H100 80GB HBM3", "520.56.06").text  # first listed there
    assert drives("NVIDIA H800", "520.56.06").code == "NO_DEVICE" and drives("NVIDIA H800", "530.41.03").verdict == "pass"


def test_other_first_releases_from_the_issue():
    assert "535.43.23" in drives("NVIDIA GeForce RTX 4090 D", "530.41.03").text
    assert drives("NVIDIA RTX PRO 5000 Blackwell Embedded GPU", "580.82.07").code == "NO_DEVICE"
    assert drives("NVIDIA RTX PRO 5000 Blackwell Embedded GPU", "580.105.08").verdict == "pass"


def test_a_release_not_read_errs_toward_the_architecture_never_a_false_fail():
    late = drives("RTX 4070 SUPER", "535.300")  # newer than every R535 list read, none of which lists it: a newer one may
    assert late.verdict == "pass" and late.confidence == "medium" and "architecture" in late.text
    old = drives("RTX 4070 SUPER", "470.82.01")  # before R515 nothing is read: the architecture's branches decide
    assert old.code == "NO_DEVICE" and "R520" in old.text
    assert drives("GeForce RTX 3090", "510.47.03").verdict == "pass"
    between = drives("RTX 4070 SUPER", "535.190")  # not read; a later R535 (535.288.01) still does not list it
    assert between.code == "NO_DEVICE" and between.confidence == "medium" and "535.288.01" in between.text
    assert drives("NVIDIA GeForce RTX 5090", "570.86.10").verdict == "pass"  # older than every R570 list read: not guessed


def test_a_name_for_several_boards_fails_only_where_none_is_listed():
    mixed = drives("H100", "525.60.13")  # the PCIe and SXM5 boards are listed by then, 10de:2321 (first in 535.43.09) is not
    assert mixed.verdict == "pass" and mixed.warning and "10de:2321" in mixed.warning and "10de:2330" not in mixed.warning


def test_names_reach_the_device_ids():
    assert gpus.device_ids("NVIDIA GeForce RTX 4070 SUPER") == ["2783"] == gpus.device_ids("10DE:2783")
    assert gpus.lookup("NVIDIA GeForce RTX 4070 SUPER")["name"] == "NVIDIA GeForce RTX 4070 SUPER"
    assert gpus.lookup("10de:2330")["name"] == "NVIDIA H100 80GB HBM3" and gpus.lookup("10de:2330")["cc"] == "9.0"
    assert "2783" not in gpus.device_ids("GeForce RTX 4070") and "2786" in gpus.device_ids("GeForce RTX 4070")
    assert gpus.lookup("NVIDIA A10")["name"] == "NVIDIA A10"


def test_a_later_readme_that_leaves_a_card_out_does_not_undrive_it():
    # the H200 is in 550.40.65's list, left out of 550.54.14's README and back in 550.90.07's: a driver's table only grows
    h200 = drives("NVIDIA H200", "550.54.14")
    assert h200.verdict == "pass" and "550.40.65" in h200.text and "leaves it out" in h200.text
    # the Tesla T4 (Turing, driven since R410) is first named in 575.51.02's README: the lists' silence decides only for
    # architectures that began in the lists' era, so R525 still drives it, by the architecture's branches, with a warning
    t4 = drives("Tesla T4", "525.60.13")
    assert t4.verdict == "pass" and t4.warning and "name older products late" in t4.warning
