"""The driver's kernel module, open or proprietary (issue 40 section 2): each flavour drives its own GPUs, the release's
code tables (driver_chips.csv, tools/build_driver_chips.py) decide what it drives, and a README that leaves a board out
is a warning. Where the flavour is not given it is assumed, and said."""

import csv
from pathlib import Path

import pytest

from gpucompat.knowledge import gpus
from gpucompat.knowledge.driving import code_chips, default_kernel_module
from gpucompat.knowledge.rules import driver_drives_rule, predict_stack

DATA = Path(__file__).resolve().parents[1] / "src" / "gpucompat" / "knowledge" / "data"


def test_every_release_row_names_its_commit_and_the_code_it_read():
    rows = list(csv.DictReader((DATA / "driver_chips.csv").open(encoding="utf-8")))
    readmes = {r["release"]: r["commit"] for r in csv.DictReader((DATA / "driver_readmes.csv").open(encoding="utf-8"))}
    assert rows[0]["release"] == "515.43.04" and len(rows) >= len(readmes)
    for row in rows:
        assert len(row["commit"]) == 40 and row["commit"] in row["source"] and "g_chips2halspec_nvoc.c" in row["source"]
        assert row["release"] not in readmes or readmes[row["release"]] == row["commit"]
        assert "TU102" in row["chips"].split() and "Turing" in row["architectures"]
    assert [r["open_geforce"] for r in rows if r["release"] in ("515.48.07", "535.288.01", "545.23.06")] == ["alpha", "alpha", ""]
    assert all(r["source"] for r in csv.DictReader((DATA / "kernel_modules.csv").open(encoding="utf-8")))


def test_blackwell_on_570_needs_the_open_modules():
    proprietary = driver_drives_rule("12.0", "NVIDIA GeForce RTX 5090", "570.86.16", "proprietary")
    assert (proprietary.verdict, proprietary.code) == ("fail", "NO_DEVICE")
    assert "proprietary kernel modules" in proprietary.text and "need the open kernel modules" in proprietary.text
    assert "kernel_open.html" in proprietary.source
    assert driver_drives_rule("12.0", "NVIDIA GeForce RTX 5090", "570.86.16", "open").verdict == "pass"
    assumed = driver_drives_rule("12.0", "NVIDIA GeForce RTX 5090", "570.86.16")  # only one flavour drives Blackwell
    assert assumed.verdict == "pass" and "open kernel modules assumed" in assumed.text
    assert driver_drives_rule("9.0", "NVIDIA GH200 480GB", "550.54.14", "proprietary").code == "NO_DEVICE"  # Grace Hopper


def test_a_pascal_is_not_driven_by_the_open_modules():
    row = gpus.lookup("GeForce GTX 1080")
    opened = driver_drives_rule(row["cc"], row["name"], "570.86.16", "open")
    assert (opened.verdict, opened.code) == ("fail", "NO_DEVICE") and "need the proprietary kernel modules" in opened.text
    assumed = driver_drives_rule(row["cc"], row["name"], "570.86.16")
    assert assumed.verdict == "pass" and "proprietary kernel modules assumed" in assumed.text
    assert "has no open kernel modules" in driver_drives_rule("7.5", "Tesla T4", "470.42.01", "open").text  # before R515


def test_a_new_board_of_a_known_chip_is_driven_with_a_warning():
    # the RTX 5060 (GB206) is not in 570.86.15's README, but that release's code recognises its chips (CC 12.0)
    row = gpus.lookup("GeForce RTX 5060")
    reason = driver_drives_rule(row["cc"], "GeForce RTX 5060", "570.86.15", "open")
    assert reason.verdict == "pass" and "570.86.15's code" in reason.text
    assert "not listed as supported by NVIDIA's README for 570.86.15" in reason.warning
    # a chip the code does not know is not driven, whatever the README: 565.57.01's code has GB100/GB102, no GB202
    assert code_chips("565.57.01")[0]["chips"].split()[-1] == "GB102"


def test_the_early_open_releases_drive_geforce_only_as_alpha():
    geforce = driver_drives_rule("7.5", "NVIDIA GeForce RTX 2080 Ti", "515.48.07", "open")
    assert geforce.verdict == "pass" and "NVreg_OpenRmEnableUnsupportedGpus=1" in geforce.warning
    assert not (driver_drives_rule("8.0", "NVIDIA A100-SXM4-40GB", "515.48.07", "open").warning or "").count("alpha")
    assert not (driver_drives_rule("7.5", "NVIDIA GeForce RTX 2080 Ti", "550.54.15", "open").warning or "").count("alpha")


def test_the_branch_default_is_assumed_and_said():
    assert default_kernel_module(550)[0] == "proprietary" and default_kernel_module(560)[0] == "open"
    h100 = driver_drives_rule("9.0", "NVIDIA H100 80GB HBM3", "580.65.06")
    assert h100.verdict == "pass" and "open kernel modules assumed, R580's default" in h100.text
    prediction = predict_stack("torch", "2.8.0", "default", "12.0", "570.86.16", gpu="NVIDIA GeForce RTX 5090", kernel_module="proprietary")
    assert prediction.code == "NO_DEVICE"


OPEN = "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build  (dvs-builder@U16-I1-N07-12-3)  Thu Jun  5 09:28:05 UTC 2025\n"
PROPRIETARY = "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.14  Thu Feb 22 01:44:30 UTC 2024\n"


def test_the_node_says_which_flavour_is_loaded(monkeypatch):
    from gpucompat import doctor
    from gpucompat.discover import local

    assert local.kernel_module_from_proc(OPEN) == "open" and local.driver_from_proc(OPEN) == "580.159.04"
    assert local.kernel_module_from_proc(PROPRIETARY) == "proprietary" and local.driver_from_proc(PROPRIETARY) == "550.54.14"
    assert local.kernel_module_from_proc("") is None
    # a Blackwell node with the proprietary module loaded: doctor says the driver does not drive it, naming the open modules
    rtx = local.Gpu(0, "GPU-1", "NVIDIA GeForce RTX 5090", "12.0", 32607, "570.86.16", "12.8")
    monkeypatch.setattr(doctor.local, "all_gpus", lambda: ([rtx], "nvml"))
    monkeypatch.setattr(doctor, "_proc_kernel_module", lambda: "proprietary")
    monkeypatch.setattr(doctor, "_cuda_start", lambda: {"init": 0, "count": 1})  # as that node's own cuInit answers
    monkeypatch.setattr(doctor, "gpu_state_now", lambda: None)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    report = doctor.doctor()
    assert report["driver"]["kernel_module"] == "proprietary" and "proprietary kernel module" in report["summary"]
    assert "need the open kernel modules" in report["summary"]


def test_a_plan_target_names_its_kernel_module():
    from gpucompat.errors import UserError
    from gpucompat.plan import parse_plan

    plan = '[[targets]]\nname="NVIDIA B200"\ncc="10.0"\ndriver="570.86.16"\nkernel_module="{}"\n[[stacks]]\nframework="torch"\nversions=["2.8.0"]\n'
    assert parse_plan(plan.format("open")).targets[0].kernel_module == "open"
    with pytest.raises(UserError, match="kernel_module 'closed' is not a driver kernel module; write 'open' or 'proprietary'"):
        parse_plan(plan.format("closed"))


def test_explain_and_advise_take_the_kernel_module(tmp_path):
    import json

    from conftest import run_cli

    ask = ["torch==2.8.0", "--gpu", "RTX 5090", "--driver", "570.86.16", "--python", "3.12", "--json"]
    proprietary = json.loads(run_cli("explain", *ask, "--kernel-module", "proprietary").stdout)
    assert (proprietary["verdict"], proprietary["code"]) == ("fail", "NO_DEVICE") and proprietary["target"]["kernel_module"] == "proprietary"
    assert proprietary["nearest"][0]["label"] == "the other kernel module" and "open kernel modules" in proprietary["nearest"][0]["text"]
    assert json.loads(run_cli("explain", *ask, "--kernel-module", "open").stdout)["verdict"] == "pass"
    said = json.loads(run_cli("explain", *ask).stdout)  # not given, not this machine's: the only flavour that drives it, said
    assert said["verdict"] == "pass" and any("open kernel modules assumed" in r["text"] for r in said["reasons"])
    wrong = run_cli("explain", *ask, "--kernel-module", "closed")
    assert wrong.returncode == 2 and "--kernel-module 'closed' is not a driver kernel module; give open or proprietary." in wrong.stderr
    advised = json.loads(run_cli("advise", "torch", "--gpu", "RTX 5090", "--driver", "570.86.16", "--kernel-module", "proprietary",
                                 "--python", "3.12", "--json", "--db", f"sqlite:///{tmp_path / 'g.db'}").stdout)
    assert advised["predicted"] == [] and "--kernel-module open" in " ".join(advised["notes"])


def test_a_pool_class_judges_with_its_own_kernel_module():
    from gpucompat.answers.asked import resolve_pool
    from gpucompat.answers.observed import Observations
    from gpucompat.answers.pool import answer as pool_answer
    from gpucompat.answers.questions import read
    from gpucompat.model import Target

    targets = [Target("NVIDIA B200", "10.0", "570.86.16", count=8, kernel_module="proprietary"),
               Target("NVIDIA B200", "10.0", "570.86.16", count=8, kernel_module="open"), Target("NVIDIA B200", "10.0", "570.86.16", count=8)]
    pool = resolve_pool("slurm", targets, "test", None, kernel_module="proprietary")  # --kernel-module: for a class that says none
    assert [c.kernel_module for c in pool.classes] == ["proprietary", "open", "proprietary"]
    classes = pool_answer(read("torch==2.8.0"), "default", pool, "3.12", Observations([]))["classes"]
    assert [c["code"] for c in classes] == ["NO_DEVICE", None, "NO_DEVICE"]


def test_a_stored_result_says_the_kernel_module_its_probe_read():
    from gpucompat.report.rows import probe_driver, probe_kernel_module

    assert (probe_driver(OPEN), probe_kernel_module(OPEN)) == ("580.159.04", "open")
    assert (probe_driver(PROPRIETARY), probe_kernel_module(PROPRIETARY)) == ("550.54.14", "proprietary")
    assert probe_kernel_module(None) == ""


def test_flavours_that_disagree_give_an_uncertain_answer_naming_both(monkeypatch):
    # no release in the tables yet splits the flavours on a GPU both drive; the rule's own combination is checked here
    from gpucompat.knowledge import driving
    from gpucompat.knowledge.reasons import Reason

    def by_flavour(flavour, cc, gpu, driver):
        if flavour == "open":
            return Reason("driver drives the GPU", "pass", "driver 550.54.15 (R550) drives it", "open-source")
        return Reason("driver drives the GPU", "fail", "driver 550.54.15 (R550) does not drive it", "proprietary-source", "NO_DEVICE", "device")

    monkeypatch.setattr(driving, "flavour_drives", by_flavour)
    reason = driving.driver_drives_rule("8.9", "NVIDIA L40S", "550.54.15")
    assert reason.verdict == "uncertain" and reason.code is None
    assert "with the open kernel modules driver 550.54.15 (R550) drives it" in reason.text and "with the proprietary ones" in reason.text
    assert "open-source" in reason.source and "proprietary-source" in reason.source and "depends on its kernel module" in reason.warning
    assert driving.driver_drives_rule("8.9", "NVIDIA L40S", "550.54.15", "proprietary").code == "NO_DEVICE"  # given: no doubt
