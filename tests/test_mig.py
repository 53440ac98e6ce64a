"""MIG instances as targets, pinned by their MIG UUID, and their bench figures against the whole GPU's.

MIG cannot be switched on on the GPU machines this project can use, so everything here stops at the
boundary: discovery replays NVML and nvidia-smi output recorded in NVIDIA's MIG user guide
(tests/data/mig/, each file names its page), the executor runs a stand-in job that writes back what it
was given, and the comparison works on figures written here.
"""

import re
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from rich.console import Console

from gpucompat.bench import mig_comparison
from gpucompat.discover import local
from gpucompat.discover.local import (
    Gpu,
    gpu_classes,
    mig_name,
    mig_notes,
    parse_nvidia_smi_list,
    visible,
    with_mig,
)
from gpucompat.report.bench import mig_table, mig_terminal

DATA = Path(__file__).parent / "data" / "mig"
A100 = (DATA / "a100-two-3g.20gb.txt").read_text()
H100 = (DATA / "h100-r570-compute-instances.txt").read_text()
A100X8 = (DATA / "a100x8-r470.txt").read_text()
A100_UUID = "GPU-e86cb44c-6756-fd30-cd4a-1e6da3caf9b0"
MIG0, MIG1 = "MIG-c7384736-a75d-5afc-978f-d2f1294409fd", "MIG-a28ad590-3fda-56dd-84fc-0a0b96edc58d"
MIB = 1024 * 1024


class NVMLError(Exception):
    pass


def fake_pynvml(recorded: str, refuse: tuple[str, ...] = ()):
    """A pynvml that answers as the recorded GPU would: its name and UUID and its MIG devices' from
    `nvidia-smi -L`, their GI/CI ids, memory and SMs from the `nvidia-smi` MIG table, their slices from
    the profile (3g: 3 compute slices, the A100 profile table's 3/7 SMs). What the record does not show
    (CC, driver, the whole GPU's memory) is the A100's: CC 8.0 from the guide's "Supported GPUs", the rest
    stand-ins that no assertion reads. `refuse`: calls that raise NVMLError, as on a driver without them."""
    gpu = re.search(r"GPU 0: (.+?) \(UUID: (GPU-[^)]+)\)", recorded)
    listed = re.findall(r"MIG (\S+)\s+Device\s+(\d+): \(UUID: (MIG-[^)]+)\)", recorded)
    table = {int(dev): (int(gi), int(ci), int(mib), int(sms)) for _, gi, ci, dev, mib, sms in
             re.findall(r"\|\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+\|\s+\d+MiB / (\d+)MiB \| (\d+)", recorded)}
    parent = SimpleNamespace(kind="gpu")
    migs = [SimpleNamespace(kind="mig", profile=profile, dev=int(dev), uuid=uuid) for profile, dev, uuid in listed]

    def call(name, fn):
        def answer(*args):
            if name in refuse:
                raise NVMLError(name)
            return fn(*args)
        return answer

    def mig_handle(handle, slot):
        if handle is not parent or slot >= len(migs):
            raise NVMLError("NVML_ERROR_NOT_FOUND")  # an empty slot of the 7
        return migs[slot]

    def attributes(h):
        g = int(re.match(r"(?:\d+c\.)?(\d+)g", h.profile)[1])
        c = int(re.match(r"(\d+)c\.", h.profile)[1]) if "c." in h.profile else g
        return SimpleNamespace(gpuInstanceSliceCount=g, computeInstanceSliceCount=c, multiprocessorCount=table[h.dev][3],
                               memorySizeMB=table[h.dev][2])

    functions = {
        "nvmlInit": lambda: None, "nvmlShutdown": lambda: None,
        "nvmlSystemGetDriverVersion": lambda: "470.42.01", "nvmlSystemGetCudaDriverVersion_v2": lambda: 11040,
        "nvmlDeviceGetCount": lambda: 1, "nvmlDeviceGetHandleByIndex": lambda i: parent,
        "nvmlDeviceGetCudaComputeCapability": lambda h: (8, 0),
        "nvmlDeviceGetUUID": lambda h: gpu[2] if h is parent else h.uuid,
        # NVML names a MIG device "<GPU name> MIG <profile>", as CUDA does (HTCondor's condor_gpu_discovery
        # manual lists "NVIDIA A100-SXM4-40GB MIG 3g.20gb", 20096 MB, among its simulated devices)
        "nvmlDeviceGetName": lambda h: gpu[1] if h is parent else f"{gpu[1]} MIG {h.profile}",
        "nvmlDeviceGetMemoryInfo": lambda h: SimpleNamespace(total=(40536 if h is parent else table[h.dev][2]) * MIB),
        "nvmlDeviceGetMigMode": lambda h: [1, 1], "nvmlDeviceGetMaxMigDeviceCount": lambda h: 7,
        "nvmlDeviceGetMigDeviceHandleByIndex": mig_handle,
        "nvmlDeviceGetGpuInstanceId": lambda h: table[h.dev][0], "nvmlDeviceGetComputeInstanceId": lambda h: table[h.dev][1],
        "nvmlDeviceGetAttributes": attributes,
    }
    return SimpleNamespace(NVMLError=NVMLError, **{name: call(name, fn) for name, fn in functions.items()})


def test_each_mig_instance_of_a_recorded_a100_is_its_own_target_read_through_nvml(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml(A100))
    gpus, source = local.all_gpus()
    assert source == "NVML" and gpus[0].mig_mode is True and gpus[0].mig_devices == (MIG0, MIG1)
    first, second = gpus[0].mig
    assert (first.gpu_instance, first.compute_instance, first.sms, second.gpu_instance) == (1, 0, 42, 2)
    targets = gpu_classes(gpus)
    # the whole GPU is no target while MIG is on: CUDA cannot run on it
    assert [t.name for t in targets] == ["A100-SXM4-40GB MIG 3g.20gb"] * 2
    assert [t.devices for t in targets] == [(MIG0,), (MIG1,)]
    assert [t.memory_mib for t in targets] == [20224, 20096]  # each instance's own, as nvidia-smi shows it
    a = targets[0]
    assert (a.cc, a.driver, a.count, a.mig, a.mig_profile, a.mig_slices, a.mig_gi_slices, a.mig_gpu_slices, a.parent) == (
        "8.0", "470.42.01", 1, True, "3g.20gb", 3, 3, 7, A100_UUID)
    (note,) = mig_notes(gpus)
    assert "has MIG on: CUDA cannot use the whole GPU" in note and "its 2 MIG instance(s)" in note


def test_a_detail_nvml_refuses_costs_only_that_detail(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml(A100, refuse=("nvmlDeviceGetAttributes", "nvmlDeviceGetGpuInstanceId")))
    gpus, _ = local.all_gpus()
    assert [(m.gi_slices, m.slices, m.gpu_instance, m.memory_mib) for m in gpus[0].mig] == [(None, None, None, 20224), (None, None, None, 20096)]
    assert [(t.mig_slices, t.mig_gi_slices) for t in gpu_classes(gpus)] == [(3, 3), (3, 3)]  # read from the profile instead


def test_cuda_visible_devices_naming_one_instance_leaves_only_that_target(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml(A100))
    gpus, _ = local.all_gpus()
    assert [t.devices for t in gpu_classes(visible(gpus, MIG1))] == [(MIG1,)]
    assert [t.devices for t in gpu_classes(visible(gpus, "0"))] == [(MIG0,), (MIG1,)]
    assert gpu_classes(visible(gpus, "")) == []


def test_nvidia_smi_list_of_a_recorded_h100_with_compute_instances_sharing_a_gpu_instance():
    listed = parse_nvidia_smi_list(H100)
    h100 = Gpu(0, "GPU-c08d91cb-e324-655c-71ba-7570956445bc", "NVIDIA H100 80GB HBM3", "9.0", 81559, "570.86.15", "12.8")
    targets = gpu_classes(with_mig([h100], listed))
    assert [t.name for t in targets] == ["NVIDIA H100 80GB HBM3 MIG 1c.3g.40gb"] * 3 + ["NVIDIA H100 80GB HBM3 MIG 1g.10gb"] * 2
    assert [t.devices[0] for t in targets] == ["MIG-c788539f-c1ea-5a36-8b4d-9b07d024b1bb", "MIG-405bbda1-6b05-535f-9702-f95e8cd170ce",
                                               "MIG-df7e5a27-eeea-51a0-9055-b36d5a552879", "MIG-b4b2228d-6933-5839-bc0e-41ab9edb61c6",
                                               "MIG-c71dc464-b9f9-5611-9d29-d601a47cffd6"]
    # one compute slice each of a 3-slice GPU instance, of the H100's 7; nvidia-smi -L gives no memory
    assert [(t.mig_slices, t.mig_gi_slices, t.mig_gpu_slices, t.memory_mib) for t in targets] == [(1, 3, 7, None)] * 3 + [(1, 1, 7, None)] * 2
    assert {t.parent for t in targets} == {h100.uuid} and {t.cc for t in targets} == {"9.0"}


def test_nvidia_smi_list_of_the_recorded_eight_a100s_each_partitioned_differently():
    listed = parse_nvidia_smi_list(A100X8)
    assert [len(devices) for devices in listed.values()] == [7, 3, 2, 1, 6, 1, 3, 3]
    gpu6 = listed["GPU-bb40ed7d-cbbb-d92c-50ac-24803cda52c5"]
    assert [(m.name, m.slices, m.gi_slices) for m in gpu6] == [
        ("A100-SXM4-40GB MIG 1c.7g.40gb", 1, 7), ("A100-SXM4-40GB MIG 2c.7g.40gb", 2, 7), ("A100-SXM4-40GB MIG 3c.7g.40gb", 3, 7)]
    plain = Gpu(8, "GPU-not-listed", "A100-SXM4-40GB", "8.0", 40536, "470.42.01", None, False)
    targets = gpu_classes(with_mig([plain], listed))  # a GPU that -L lists no instance under stays one whole target
    assert [(t.name, t.devices, t.mig) for t in targets] == [("A100-SXM4-40GB", ("GPU-not-listed",), None)]


def test_mig_names_as_nvml_gives_them():
    a30 = mig_name("NVIDIA A30 MIG 2g.12gb")
    assert (a30.parent, a30.profile, a30.slices, a30.gpu_slices) == ("NVIDIA A30", "2g.12gb", 2, 4)  # the A30's full profile is 4g.24gb
    assert mig_name("NVIDIA H200 MIG 1g.18gb+me").gpu_slices == 7
    assert mig_name("NVIDIA RTX PRO 4500 Blackwell MIG 1g.16gb").gpu_slices is None  # not assumed for a GPU the table lacks
    assert mig_name("NVIDIA A100-SXM4-40GB") is None and mig_name(None) is None
    mig_off = Gpu(0, "GPU-x", "NVIDIA H100 80GB HBM3", "9.0", 81559, "570.86.15", "12.8", False)
    assert mig_notes([mig_off]) == []
    no_instance = Gpu(0, "GPU-x", "NVIDIA H100 80GB HBM3", "9.0", 81559, "570.86.15", "12.8", True)
    assert gpu_classes([no_instance]) == [] and "no MIG instance yet" in mig_notes([no_instance])[0]


def test_the_local_executor_pins_a_mig_targets_job_to_its_mig_uuid(tmp_path, monkeypatch):
    from gpucompat.executors.base import DONE, JobSettings
    from gpucompat.executors.local import LocalExecutor
    from gpucompat.model import Cell, ResolvedStack, Stack, Timeouts

    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml(A100))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-e86cb44c")  # the parent by a UUID prefix: both its instances
    targets = gpu_classes(local.local_gpus())
    stack = Stack("cupy", "installed", "default", sys.executable, "current")
    cells = [Cell(i, stack, t, ResolvedStack(stack, True)) for i, t in enumerate(targets)]
    executor = LocalExecutor(JobSettings(Timeouts(cell=30)), env_root=tmp_path / "envs")
    jobs = executor.prepare(cells, tmp_path / "work")
    for job in jobs:  # a stand-in probe: it writes back what it was started with
        (job.path / "run.sh").write_text('#!/bin/sh\ncd "$(dirname "$0")" || exit 70\nprintf \'{"system": {"env": '
                                         '{"CUDA_VISIBLE_DEVICES": "%s"}}}\' "$CUDA_VISIBLE_DEVICES" > result.json\n')
    executor.submit(jobs)
    deadline = time.monotonic() + 30
    while any(state != DONE for state in executor.poll().values()) or len(executor.poll()) < len(jobs):
        assert time.monotonic() < deadline
        time.sleep(0.05)
    seen = {job.cell.target.name + " " + job.cell.target.devices[0]: executor.collect(job).facts["system"]["env"]["CUDA_VISIBLE_DEVICES"]
            for job in jobs}
    assert seen == {f"A100-SXM4-40GB MIG 3g.20gb {MIG0}": MIG0, f"A100-SXM4-40GB MIG 3g.20gb {MIG1}": MIG1}


def figure(gpu, value, measurement="matmul", dtype="bf16", sweep=3, cell=1, **changes):
    """A bench row as bench.present gives it."""
    return {"cell": cell, "sweep": sweep, "framework": "torch", "version": "2.11.0+cu130", "variant": "default", "python": "3.12",
            "env": "uv", "gpu": gpu, "cc": "8.0", "driver": "580.159.04", "measurement": measurement, "dtype": dtype, "value": value,
            "unit": {"matmul": "TFLOP/s", "copy": "GB/s", "launch": "us"}.get(measurement, "images/s"),
            "better": "lower" if measurement == "launch" else "higher", "spread": None, "repetitions": 10, "processes": 1, **changes}


WHOLE, THREE_G, ONE_G = "NVIDIA A100-SXM4-40GB", "NVIDIA A100-SXM4-40GB MIG 3g.20gb", "NVIDIA A100-SXM4-40GB MIG 1g.5gb"


def test_mig_figures_against_the_whole_gpu_and_the_share_their_slices_promise():
    rows = [figure(WHOLE, 280.0, cell=1), figure(THREE_G, 112.0, cell=2), figure(ONE_G, 40.0, cell=3),
            figure(WHOLE, 4.0, "launch", "", cell=1), figure(THREE_G, 5.0, "launch", "", cell=2),
            figure(THREE_G, 700.0, "copy", "", cell=2)]  # the whole GPU's copy was not measured
    by = {(c["profile"], c["measurement"]): c for c in mig_comparison(rows)}
    three = by[("3g.20gb", "matmul")]
    assert (three["gpu"], three["whole"], three["slices"], three["gpu_slices"]) == (WHOLE, 280.0, 3, 7)
    assert three["relative"] == pytest.approx(0.4) and three["expected"] == pytest.approx(3 / 7)
    assert three["of_expected"] == pytest.approx(0.4 / (3 / 7))  # 93 %: a little short of its slices
    assert by[("1g.5gb", "matmul")]["relative"] == pytest.approx(40 / 280) and by[("1g.5gb", "matmul")]["of_expected"] == pytest.approx(1.0)
    launch = by[("3g.20gb", "launch")]
    assert launch["relative"] == pytest.approx(0.8) and launch["expected"] is None  # lower is better: 4 us / 5 us
    assert by[("3g.20gb", "copy")]["whole"] is None and by[("3g.20gb", "copy")]["relative"] is None
    trained = {c["profile"]: c for c in mig_comparison([figure(WHOLE, 9e4, "train", cell=1), figure(THREE_G, 8e4, "train", cell=2)])}
    assert trained["3g.20gb"]["relative"] == pytest.approx(8 / 9) and trained["3g.20gb"]["expected"] is None  # launch-bound: no promise
    shown = {(line["instance"], line["measurement"]): line for line in mig_table(rows)}
    line = shown[("3g.20gb, 3 of 7 slices", "matmul")]
    assert [line[k] for k in ("value", "whole", "relative", "expected", "of_expected")] == [
        "112.0 TFLOP/s", "280.0 TFLOP/s", "40 %", "43 %", "93 %"]
    assert shown[("3g.20gb, 3 of 7 slices", "device copy")]["whole"] == "no figure of the whole GPU"
    for width in (80, 200):  # `results --bench` prints it below the figures
        console = Console(width=width, record=True)
        console.print(mig_terminal(rows))
        text = console.export_text()
        assert "MIG instances against the whole GPU" in text and "3g.20gb" in text and "93 %" in text
    assert mig_terminal([figure(WHOLE, 280.0)]) is None


def test_the_whole_gpus_figure_comes_from_another_sweep_the_newest_and_only_for_the_same_stack():
    rows = [figure(THREE_G, 112.0, sweep=9, cell=40)]
    reference = [figure(WHOLE, 250.0, sweep=4, cell=7), figure(WHOLE, 280.0, sweep=6, cell=8),
                 figure(WHOLE, 999.0, sweep=8, cell=9, version="2.4.1"), figure(WHOLE, 999.0, sweep=8, cell=10, dtype="fp32")]
    (c,) = mig_comparison(rows, reference)
    assert (c["whole"], c["whole_sweep"], c["whole_cell"]) == (280.0, 6, 8)
    assert mig_comparison([figure(WHOLE, 280.0)]) == []  # no MIG figure: nothing to compare


def test_the_html_report_shows_the_mig_table_escaped():
    from gpucompat.report.html import render

    sweep = {"id": 1, "name": "mig", "created_at": 0, "plan_path": None, "options": {}}
    rows = [figure(WHOLE, 280.0, cell=1), figure(THREE_G, 112.0, cell=2, framework="<b>torch</b>")]
    html = render(sweep, [], rows, [], mig_reference=[figure(WHOLE, 280.0, sweep=1, cell=5, framework="<b>torch</b>")])
    assert '<h3 id="mig">MIG instances against the whole GPU</h3>' in html
    table = html.split('<table id="mig-table"', 1)[1].split("</table>", 1)[0]
    assert "&lt;b&gt;torch&lt;/b&gt;" in table and "<b>torch" not in table
    assert "3g.20gb, 3 of 7 slices" in table and ">40 %<" in table and ">43 %<" in table
    assert 'id="mig"' not in render(sweep, [], [figure(WHOLE, 280.0)], [])


def test_doctor_judges_the_mig_instance_cuda_visible_devices_names(monkeypatch):
    from gpucompat import doctor

    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml(A100))
    monkeypatch.setattr(doctor, "installed", lambda fw: ("13.0.0", None) if fw == "cuda-runtime" else None)
    monkeypatch.setattr(doctor, "_import_facts", lambda fw: {"version": "13.0.0", "cuda_runtime": "13.0"})
    monkeypatch.setattr(doctor, "_cuda_start", lambda: {"init": 0, "count": 1})  # the recorded node's CUDA started
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", MIG1)
    report = doctor.doctor()
    assert [(v["gpu"], v["cc"]) for v in report["verdicts"]] == [("A100-SXM4-40GB MIG 3g.20gb", "8.0")]
    assert report["verdicts"][0]["code"] == "DRIVER_TOO_OLD"  # CUDA 13.0 on the recorded driver 470
