"""The driver must drive the GPU (knowledge/data/gpu_driver_branches.csv), and the CUDA toolkit must target it:
the rules from NVIDIA's sourced facts, and every answer that makes a verdict (explain, advise, the nearest yes,
--pool, the predictions stored beside sweep cells) applying them."""

from __future__ import annotations

import csv
import json

import pytest

from conftest import run_cli
from gpucompat.answers.advise import advise
from gpucompat.answers.explain import explain
from gpucompat.answers.asked import resolve_pool
from gpucompat.answers.observed import Observations
from gpucompat.answers.pool import answer as pool_answer
from gpucompat.answers.questions import read
from gpucompat.knowledge import gpus, tables
from gpucompat.knowledge.driving import listed_drives
from gpucompat.knowledge.rules import (DRIVES, driver_drives_rule, predict_stack, runtime_targets_rule, suggest_fix,
                                       toolkit_window_rule)
from gpucompat.model import Cell, ResolvedStack, Stack, Target
from gpucompat.predict import predict

DATA = tables.DATA / "gpu_driver_branches.csv"


def test_every_row_is_one_sourced_bound():
    rows = list(csv.DictReader(DATA.open(encoding="utf-8")))
    assert len(rows) >= 20
    for row in rows:
        assert row["bound"] in ("first", "last", "l4t") and row["confidence"] in ("high", "medium", "low"), row
        assert row["source"].strip() and row["architecture"].strip(), row
        assert (row["branch"].isdigit() and len(row["branch"]) == 3) if row["bound"] != "l4t" else not row["branch"], row
        assert all(cc.count(".") == 1 for cc in row["cc"].split(";")), row
    # one architecture row per bound and compute capability: a product row is what may differ
    seen = [(cc, row["bound"]) for row in rows if not row["gpu"] for cc in row["cc"].split(";")]
    assert len(seen) == len(set(seen))


def test_every_compute_capability_the_gpu_tables_hold_has_an_architecture_row():
    for name in ("gpus", "pci_gpus"):
        for row in tables.table(name):
            bounds = tables.driver_branches(row["cc"], None)
            assert bounds is not None and (bounds["first"] or bounds["last"] or bounds["l4t"]), (name, row["name"], row["cc"])


@pytest.mark.parametrize("cc, gpu, driver, needs", [
    ("3.7", "Tesla K80", "550", "R470 is the last branch for Kepler"),  # too new: NVIDIA's matrix, Kepler's last is R470
    ("6.0", "Tesla P100-PCIE-16GB", "590.44.01", "R580 is the last branch for Pascal"),
    ("7.0", "Tesla V100-SXM2-16GB", "595.45.04", "R580 is the last branch for Volta"),
    ("5.2", "NVIDIA GeForce GTX 980", "590.48.01", "R580 is the last branch for Maxwell"),
    ("2.0", "GeForce GTX 580", "418.39", "R390 is the last branch for Fermi"),
    ("10.0", "NVIDIA B200", "550.54.15", "Blackwell needs R570 or newer"),  # too old
    ("12.0", "NVIDIA GeForce RTX 5090", "565.57.01", "Blackwell needs R570 or newer"),
    ("9.0", "NVIDIA H100 PCIe", "515.43.04", "Hopper needs R520 or newer"),
    ("8.0", "NVIDIA A100-SXM4-40GB", "440.33", "Ampere needs R450 or newer"),
])
def test_a_driver_outside_the_architectures_branches_does_not_drive_it(cc, gpu, driver, needs):
    reason = driver_drives_rule(cc, gpu, driver)
    assert (reason.verdict, reason.code, reason.stage) == ("fail", "NO_DEVICE", "device")
    assert needs in reason.text and f"(R{driver[:3]})" in reason.text and reason.source.startswith(("https://", "NVIDIA/"))


@pytest.mark.parametrize("cc, gpu, driver", [
    ("3.7", "Tesla K80", "470.42.01"), ("6.0", "Tesla P100-PCIE-16GB", "580.65.06"), ("10.0", "NVIDIA B200", "570.26"),
    ("9.0", "NVIDIA H100 80GB HBM3", "535.104.05"), ("12.0", "NVIDIA GeForce RTX 5090", "610.43.02"),
])
def test_a_driver_inside_them_drives_it(cc, gpu, driver):
    reason = driver_drives_rule(cc, gpu, driver)
    assert reason.verdict == "pass" and "drives" in reason.text


def test_a_product_launched_after_its_architecture_needs_its_own_branch():
    # H200 is Hopper (R520 on), but first listed at R550 (open-gpu-kernel-modules README); H200 NVL at R565. That is
    # what NVIDIA lists (listed_drives); the verdict is the code's (GH100 since R525), the README a warning (issue 40.2)
    judged = driver_drives_rule("9.0", "NVIDIA H200", "535.104.05")
    assert judged.verdict == "pass" and "NVIDIA H200 needs R550 or newer" in judged.warning
    h200 = listed_drives("9.0", "NVIDIA H200", "535.104.05")
    # 535.104.05's own list of compatible GPUs was read (driver_devices.csv): a read list is a high-confidence fact
    assert h200.code == "NO_DEVICE" and "NVIDIA H200 needs R550 or newer" in h200.text and h200.confidence == "high"
    assert listed_drives("9.0", "NVIDIA H100 80GB HBM3", "535.104.05").verdict == "pass"  # the same architecture, no exception
    assert "R565" in listed_drives("9.0", "NVIDIA H200 NVL", "550.54.14").text  # the longest name that begins it
    # per release (driver_devices.csv): 550.40.65's list names the H200; 550.54.14's README leaves it out, but a driver's
    # device table only grows
    assert listed_drives("9.0", "NVIDIA H200", "550.54.14").verdict == "pass"
    assert listed_drives("9.0", "NVIDIA H200", "550.90.07").verdict == "pass"
    assert listed_drives("10.3", "NVIDIA GB300", "575.51.03").code == "NO_DEVICE"
    assert gpus.words_begin("NVIDIA GeForce RTX 5050 Laptop GPU", "NVIDIA GeForce RTX 5050") == 2  # 'rtx 5050', vendor words aside
    assert gpus.words_begin("NVIDIA GeForce RTX 5090", "NVIDIA GeForce RTX 5050") == 0


def test_nothing_to_judge_says_nothing():
    assert driver_drives_rule("8.7", "Jetson AGX Orin", "540.4.0") is None  # Tegra: its JetPack's L4T drives it
    assert driver_drives_rule(None, None, "550.54.14") is None  # an unknown GPU does not make every answer uncertain
    assert driver_drives_rule("9.0", "NVIDIA H100", None) is None
    assert driver_drives_rule("99.0", None, "550.54.14") is None
    assert driver_drives_rule(None, "NVIDIA B200", "550.54.15").code == "NO_DEVICE"  # the name alone finds the architecture
    cuda_runtime = predict_stack("cuda-runtime", "12.4", "default", None, "550.54.14")
    assert cuda_runtime.verdict == "pass" and not any(r.rule == DRIVES for r in cuda_runtime.reasons)


@pytest.mark.parametrize("framework, release, variant", [
    ("torch", "1.13.1", "default"), ("tensorflow", "2.11.0", "plain"), ("jax", "0.4.30", "cuda12"), ("cupy", "12.3.0", "cuda11x"),
    ("cuda-runtime", "11.4", "default"),
])
def test_every_framework_fails_on_a_gpu_the_driver_does_not_drive(framework, release, variant):
    prediction = predict_stack(framework, release, variant, "3.7", "550.54.14", gpu="Tesla K80")
    assert (prediction.verdict, prediction.code) == ("fail", "NO_DEVICE"), [r.text for r in prediction.reasons]
    assert prediction.reasons[0].rule == DRIVES  # named first: nothing else matters on a GPU that is not there


def test_the_cuda_runtimes_toolkit_must_target_the_gpu():
    # CUDA 13.0 dropped everything below sm_75 and CUDA 12 has no sm_35 (knowledge/data/cuda_archs.csv)
    p100 = predict_stack("cuda-runtime", "13.0", "default", "6.0", "580.65.06", gpu="Tesla P100-PCIE-16GB")
    assert (p100.verdict, p100.code, p100.stage) == ("fail", "ARCH_UNSUPPORTED", "compute")
    assert "oldest target is sm_75" in next(r.text for r in p100.reasons if r.code == "ARCH_UNSUPPORTED")
    assert runtime_targets_rule("12.4", "3.5").code == "ARCH_UNSUPPORTED"
    assert runtime_targets_rule("11.8", "3.5").verdict == "pass"
    newer = runtime_targets_rule("12.4", "12.0")  # newer than every target: NVRTC's PTX for an older one, JIT-compiled
    assert newer.verdict == "pass" and "PTX JIT" in newer.warning
    assert runtime_targets_rule("12.4", None) is None and runtime_targets_rule("8.0", "6.0") is None  # 8.0: no target list
    assert predict_stack("cuda-runtime", "13.0", "default", "7.5", "580.65.06").verdict == "pass"
    assert toolkit_window_rule("13.0", "7.0").code == "ARCH_UNSUPPORTED"  # the same rule the other frameworks use without an arch list


def test_the_nearest_yes_on_an_undriven_gpu_names_the_branches_that_drive_it():
    result = explain("torch==2.4.1", None, "3.7", "550.54.14", "3.11")
    assert result["code"] == "NO_DEVICE"
    assert result["nearest"] and all(item["kind"] == "branch" for item in result["nearest"])
    for item in result["nearest"]:  # never a stack on the driver that does not drive it
        assert item["driver"].startswith("470.") and "drivers up to R470 drive Kepler GPUs" in item["text"]
        assert predict_stack("torch", item["spec"].split("==")[1].replace("+", "+"), item["variant"], "3.7", item["driver"], "3.11").verdict == "pass"
    assert any("the newest torch that runs is" in item["text"] for item in result["nearest"])
    blackwell = explain("torch==2.8.0", "NVIDIA B200", None, "550.54.15", "3.11")
    assert blackwell["code"] == "NO_DEVICE" and blackwell["nearest"][0]["driver"].startswith("570.")
    assert "drivers R570 and newer drive Blackwell GPUs" in blackwell["nearest"][0]["text"]


def test_advise_lists_nothing_for_an_undriven_gpu_and_says_why_in_one_sentence():
    result = advise("torch", "Tesla K80", None, "550.54.14", "3.11", [])
    assert result["predicted"] == [] and result["observed"] == [] and "R470 is the last branch for Kepler" in result["undriven"]
    sentence = result["notes"][-1]
    assert "no torch stack can use it" in sentence and "--driver 470.42.01" in sentence
    assert advise("torch", "Tesla K80", None, "470.42.01", "3.11", [])["predicted"]  # on R470 it advises


def test_pool_classes_and_sweep_predictions_apply_it():
    question = read("torch==1.13.1")
    targets = [Target("Tesla K80", "3.7", "550.54.14", count=4), Target("Tesla K80", "3.7", "470.42.01", count=4),
               Target("NVIDIA H200", "9.0", "535.104.05", count=8), Target("NVIDIA H100 80GB HBM3", "9.0", "535.104.05", count=8)]
    classes = pool_answer(question, "default", resolve_pool("slurm", targets, "test", None), "3.10", Observations([]))["classes"]
    # torch 1.13.1 has no sm_90: the H100 class fails on its architecture, never on its driver
    # the H200 on 535.104.05: its code knows GH100, so it is driven and fails on torch 1.13.1's missing sm_90 like the
    # H100; that NVIDIA's README lists it only from R550 is a warning (issue 40.2: README-as-truth was the bug)
    assert [c["code"] for c in classes] == ["NO_DEVICE", None, "ARCH_UNSUPPORTED", "ARCH_UNSUPPORTED"]
    stack = Stack("torch", "1.13.1", "default", "3.10", "uv")
    cell = Cell(1, stack, targets[0], ResolvedStack(stack, ok=True, pins=("torch==1.13.1",), cuda_runtime="11.7"))
    assert predict(cell).code == "NO_DEVICE"


def test_doctors_fix_for_an_undriven_gpu_is_a_driver():
    prediction = predict_stack("torch", "2.4.1", "default", "6.0", "590.44.01", gpu="Tesla P100-PCIE-16GB")
    fix = suggest_fix("torch", "2.4.1", "6.0", "590.44.01", prediction, "Tesla P100-PCIE-16GB")
    assert fix.startswith("install a driver that drives this GPU (R367 to R580)")


@pytest.mark.parametrize("args, code", [
    (["torch==1.13.1", "--gpu", "K80", "--driver", "550"], "NO_DEVICE"),
    (["torch==2.8.0", "--gpu", "B200", "--driver", "550.54.15"], "NO_DEVICE"),
    (["torch==2.4.1", "--gpu", "Tesla P100-PCIE-16GB", "--driver", "590.44.01"], "NO_DEVICE"),
    (["cuda-runtime==13.0", "--gpu", "Tesla P100-PCIE-16GB", "--driver", "580.65.06"], "ARCH_UNSUPPORTED"),
])
def test_the_issues_examples_through_the_real_cli(args, code):
    proc = run_cli("explain", *args, "--python", "3.11", "--json")
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert (result["verdict"], result["code"]) == ("fail", code)


def test_advise_through_the_real_cli_prints_the_sentence_and_no_empty_table():
    proc = run_cli("advise", "torch", "--gpu", "K80", "--driver", "550", "--python", "3.11")
    assert proc.returncode == 0, proc.stderr
    said = " ".join(proc.stdout.split())  # Rich wraps the note at the terminal's width
    assert "no torch stack can use it" in said and "--driver 470.42.01" in proc.stdout and "┏" not in proc.stdout
    data = json.loads(run_cli("advise", "torch", "--gpu", "K80", "--driver", "550", "--python", "3.11", "--json", check=0).stdout)
    assert data["predicted"] == [] and "R470 is the last branch for Kepler" in data["undriven"]


def test_doctor_says_when_the_driver_does_not_drive_a_gpu_it_lists(monkeypatch):
    # this machine has no GPU: discovery stands in with what NVML would list (a K80 beside an R550 driver)
    from gpucompat import doctor
    from gpucompat.discover.local import Gpu

    k80 = Gpu(0, "GPU-aaaa", "Tesla K80", "3.7", 11441, "550.54.14", "12.4")
    monkeypatch.setattr(doctor.local, "all_gpus", lambda: ([k80], "nvml"))
    monkeypatch.setattr(doctor, "_cuda_start", lambda: {"init": 0, "count": 1})  # as that node's own cuInit answers
    monkeypatch.setattr(doctor, "gpu_state_now", lambda: None)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    summary = doctor.doctor()["summary"]
    assert "driver 550.54.14 (R550) does not drive Kepler GPUs such as Tesla K80: R470 is the last branch for Kepler" in summary
    monkeypatch.setattr(doctor.local, "all_gpus", lambda: ([], "nvml"))
    monkeypatch.setattr(doctor, "_proc_driver", lambda: "595.45.04")
    assert "a driver ignores a GPU its branch does not drive" in doctor.doctor()["summary"]


def test_a_laptop_part_listed_before_its_desktop_namesake_keeps_its_own_branch():
    assert listed_drives("12.0", "NVIDIA GeForce RTX 5050", "570.172.08").code == "NO_DEVICE"  # desktop: R575 on
    assert listed_drives("12.0", "NVIDIA GeForce RTX 5050 Laptop GPU", "570.172.08").verdict == "pass"


def test_similar_names_do_not_borrow_each_others_rows():
    assert listed_drives("9.0", "NVIDIA H200", "535.104.05").code == "NO_DEVICE"
    assert listed_drives("9.0", "NVIDIA H20", "535.43.25").verdict == "pass"  # 'H20' is not the start of 'H200', nor the reverse
    assert "10de:2335" not in listed_drives("9.0", "NVIDIA H20", "535.104.05").text  # not listed by 535.104.05, nor H200's ID
    assert listed_drives("9.0", "NVIDIA H20 NVL16", "575.51.03").code == "NO_DEVICE"
    assert listed_drives("8.9", "NVIDIA L20", "525.60.13").code == "NO_DEVICE"
    assert listed_drives("8.9", "NVIDIA L40", "525.78.01").verdict == "pass"  # 525.60.13's list has no L40
    assert listed_drives("12.0", "NVIDIA GeForce RTX 5090 D v2", "575.64.05").code == "NO_DEVICE"
    assert listed_drives("12.0", "NVIDIA GeForce RTX 5090 D", "575.64.05").verdict == "pass"
    assert listed_drives("9.0", "NVIDIA GH200 480GB", "535.129.03").verdict == "pass"  # 535.104.05's list has none
    assert listed_drives("9.0", "NVIDIA GH200 144G HBM3e", "550.54.14").code == "NO_DEVICE"


def test_the_architectures_a_driver_does_not_drive_come_from_the_table():
    """What doctor says of a loaded driver that lists no GPU: read from gpu_driver_branches.csv, never written twice."""
    from gpucompat.knowledge.rules import architectures_not_driven

    assert architectures_not_driven("590.44.01") == ["Tesla (last R340)", "Fermi (last R390)", "Kepler (last R470)",
                                                     "Maxwell (last R580)", "Pascal (last R580)", "Volta (last R580)"]
    assert "Blackwell (from R570)" in architectures_not_driven("550.54.15") and "Maxwell (last R580)" not in architectures_not_driven("550.54.15")
    assert architectures_not_driven(None) == []


def test_doctor_names_the_pci_device_a_loaded_driver_does_not_list(tmp_path, monkeypatch):
    """A driver that lists no GPU: the NVIDIA devices on the PCI bus (sysfs, read with no driver), each judged against
    that release's list of compatible GPUs (driver_devices.csv), before any architecture-wide guess."""
    from gpucompat import doctor
    from gpucompat.discover import local

    for address, vendor, kind, device in [("0000:3b:00.0", "0x10de", "0x030000", "0x2783"),  # RTX 4070 SUPER
                                          ("0000:3b:00.1", "0x10de", "0x040300", "0x22bc"),  # its audio function
                                          ("0000:00:02.0", "0x8086", "0x030000", "0x4680")]:  # an Intel iGPU
        folder = tmp_path / address
        folder.mkdir()
        for name, value in (("vendor", vendor), ("class", kind), ("device", device)):
            (folder / name).write_text(value + "\n")
    found = local.pci_nvidia_gpus(str(tmp_path))
    assert found == [("0000:3b:00.0", "2783")]
    assert local.pci_nvidia_gpus(str(tmp_path / "absent")) == []
    monkeypatch.setattr(local, "pci_nvidia_gpus", lambda: found)
    said = doctor._unlisted("535.183.01")  # no R535 release names the 4070 SUPER: 550.40.x is the first
    assert "10de:2783" in said and "does not drive" in said and "first listed in 550.40" in said and "SUPER" in said
    assert "lists" in doctor._unlisted("550.54.14") and "NVRM" in doctor._unlisted("550.54.14")
    monkeypatch.setattr(local, "pci_nvidia_gpus", lambda: [])
    assert "Blackwell (from R570)" in doctor._unlisted("550.54.15")  # no device seen: the architectures, as before
