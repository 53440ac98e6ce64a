"""HTCondor and Kubernetes up to the boundary (no live pool or cluster can run here):
discovery parsers on ads and node objects in the documented formats, the files the
executors write parsed by the official libraries, and the HTCondor round trip with the
execute node's part played by running the very job script a node would run."""

import json
import os
import subprocess
from pathlib import Path

import pytest

from conftest import run_cli, write

htcondor2 = pytest.importorskip("htcondor2", reason="the HTCondor bindings are part of the test extra (pip install 'gpucompat[htcondor]')")

from gpucompat.discover.htcondor import parse_long  # noqa: E402
from gpucompat.discover.kubernetes import classes_from_nodes  # noqa: E402
from gpucompat.executors.htcondor import job_history  # noqa: E402
from gpucompat.executors.kubernetes import BEGIN, END, result_from_log  # noqa: E402
from gpucompat.envs.uv import uv_bin  # noqa: E402

# Startd ads as `condor_status -long` prints them: a partitionable slot with the nested GPU
# ads of current HTCondor (condor_gpu_discovery -extra -nested), its dynamic child, a
# mixed machine, and a machine advertising the legacy flat CUDA attributes.
ADS = """
Machine = "gpu1.example.org"
Name = "slot1@gpu1.example.org"
SlotType = "Partitionable"
TotalGPUs = 2
AvailableGPUs = { GPUs_GPU_32235e0a,GPUs_GPU_487e38b2 }
GPUs_Capability = 7.0
GPUs_DeviceName = "NVIDIA TITAN V"
GPUs_DriverVersion = 13.0
GPUs_GlobalMemoryMb = 12050
GPUs_GPU_32235e0a = [ Id = "GPU-32235e0a"; ClockMhz = 1455.0; Capability = 7.0; DeviceName = "NVIDIA TITAN V"; DriverVersion = 13.0; GlobalMemoryMb = 12050; MaxSupportedVersion = 13000 ]
GPUs_GPU_487e38b2 = [ Id = "GPU-487e38b2"; ClockMhz = 1455.0; Capability = 7.0; DeviceName = "NVIDIA TITAN V"; DriverVersion = 13.0; GlobalMemoryMb = 12050; MaxSupportedVersion = 13000 ]

Machine = "gpu1.example.org"
Name = "slot1_1@gpu1.example.org"
SlotType = "Dynamic"
GPUs = 1
AvailableGPUs = { GPUs_GPU_32235e0a }

Machine = "mixed.example.org"
Name = "slot1@mixed.example.org"
SlotType = "Partitionable"
TotalGPUs = 2
AvailableGPUs = { GPUs_GPU_aa,GPUs_GPU_bb }
GPUs_DriverVersion = 12.2
GPUs_GPU_aa = [ Id = "GPU-aa"; Capability = 8.0; DeviceName = "NVIDIA A100-SXM4-40GB"; GlobalMemoryMb = 40536; MaxSupportedVersion = 12020 ]
GPUs_GPU_bb = [ Id = "GPU-bb"; Capability = 8.6; DeviceName = "NVIDIA A40"; GlobalMemoryMb = 45634; MaxSupportedVersion = 12020 ]

Machine = "gzk-1.chtc.wisc.edu"
Name = "slot1@gzk-1.chtc.wisc.edu"
TotalGPUs = 8
CUDACapability = 6.1
CUDADeviceName = "NVIDIA GeForce GTX 1080"
CUDADriverVersion = 11.6
CUDAGlobalMemoryMb = 8119
"""


def test_htcondor_nested_and_legacy_ads():
    classes = {t.name: t for t in parse_long(ADS)}
    assert set(classes) == {"NVIDIA TITAN V", "NVIDIA A100-SXM4-40GB", "NVIDIA A40", "NVIDIA GeForce GTX 1080"}
    titan = classes["NVIDIA TITAN V"]
    assert (titan.cc, titan.cuda_driver, titan.count, titan.memory_mib, titan.nodes) == ("7.0", "13.0", 2, 12050, ("gpu1.example.org",))
    assert (classes["NVIDIA A40"].cc, classes["NVIDIA A40"].cuda_driver) == ("8.6", "12.2")
    legacy = classes["NVIDIA GeForce GTX 1080"]
    assert (legacy.cc, legacy.cuda_driver, legacy.count) == ("6.1", "11.6", 8)  # the seed's gzk-1 row


def test_kubernetes_gpu_feature_discovery_labels():
    def node(name, product, major, minor, driver, count, extra=None):
        labels = {"nvidia.com/gpu.product": product, "nvidia.com/gpu.compute.major": major, "nvidia.com/gpu.compute.minor": minor,
                  "nvidia.com/gpu.count": count, "nvidia.com/gpu.memory": "81559", "nvidia.com/mig.strategy": "none", **(extra or {})}
        labels.update({f"nvidia.com/cuda.driver-version.{k}": v for k, v in zip(("major", "minor", "revision"), driver.split("."))})
        return {"metadata": {"name": name, "labels": labels}, "status": {"allocatable": {"nvidia.com/gpu": count}}}

    nodes = [node("h1", "NVIDIA-H100-80GB-HBM3", "9", "0", "580.65.06", "8", {"nvidia.com/cuda.runtime-version.major": "13", "nvidia.com/cuda.runtime-version.minor": "0"}),
             node("h2", "NVIDIA-H100-80GB-HBM3", "9", "0", "580.65.06", "8", {"nvidia.com/cuda.runtime-version.major": "13", "nvidia.com/cuda.runtime-version.minor": "0"}),
             {"metadata": {"name": "cpu1", "labels": {"kubernetes.io/arch": "amd64"}}, "status": {"allocatable": {"cpu": "64"}}}]
    (h100,) = classes_from_nodes(nodes)
    assert (h100.cc, h100.driver, h100.cuda_driver, h100.count, h100.nodes) == ("9.0", "580.65.06", "13.0", 16, ("h1", "h2"))
    assert "nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3" in h100.selector and "nvidia.com/gpu.compute.major=9" in h100.selector


PLAN = """
name = "pool"
executor = "{executor}"
{extra}
[timeouts]
pending = "6h"
[[targets]]
name = "NVIDIA A100-SXM4-80GB"
cc = "8.0"
[[targets]]
name = "NVIDIA GeForce GTX 1080"
cc = "6.1"
[[stacks]]
framework = "cuda-runtime"
versions = ["12.4"]
"""


def test_htcondor_dag_and_submit_files_parse_with_the_bindings(isolated):
    plan = write(isolated / "plan.toml", PLAN.format(executor="htcondor", extra=""))
    out = isolated / "dag"
    run_cli("sweep", str(plan), "--dry-run", "--out", str(out), check=0)
    dag = (out / "sweep.dag").read_text()
    assert dag.count("JOB cell") == 2 and dag.count("SCRIPT POST") == 2
    for sub in sorted(out.glob("cell*.sub")):
        submit = htcondor2.Submit(sub.read_text())
        assert submit["request_gpus"] == "1" and submit["gpus_minimum_runtime"] == "12.0"  # minor-version compatibility
        assert submit["gpus_minimum_capability"] in ("8.0", "6.1")
        assert submit["periodic_remove"].startswith("((JobStatus == 1) && (time() - QDate) > 21600) || ((JobStatus == 5) && ")
        assert submit["require_gpus"] in ("Capability == 8.0", "Capability == 6.1")  # declared classes: by capability
        cell = Path(submit["initialdir"])
        assert {"run.sh", "install.sh", "post.sh"} <= {p.name for p in cell.iterdir()}
        assert submit["transfer_input_files"].split(", ")[0] == str(out.resolve() / "probe.pyz")  # the sweep's one probe


def test_htcondor_round_trip_collects_what_the_nodes_leave(isolated):
    plan = write(isolated / "plan.toml", PLAN.format(executor="local", extra=""))
    proc = run_cli("sweep", str(plan), "--executor", "htcondor", check=2)  # the override holds on --resume too
    assert "condor_submit_dag sweep.dag" in proc.stderr  # no schedd here: one sentence with the exact command to run by hand
    listed = json.loads(run_cli("results", "--list", "--json", check=0).stdout)
    assert listed[-1]["status"] != "submitted" and listed[-1]["done"] == 0
    cells = sorted((isolated / "gpucompat-runs").glob("sweep-*/cell-*"))
    # the user runs condor_submit_dag by hand on these files: it writes sweep.dag.condor.sub as the bindings' from_dag does
    htcondor2.Submit.from_dag(str(cells[0].parent / "sweep.dag"), {"DagmanPath": "/bin/true"})
    # play the execute node and DAGMan for the first cell: its job script, then its POST script
    first = cells[0]
    (first / "probe.pyz").write_bytes((first.parent / "probe.pyz").read_bytes())  # transfer_input_files: the sweep's one probe
    node_path = f"{Path(uv_bin()).parent}:{os.environ['PATH']}"  # an execute node with uv on its PATH
    job = subprocess.run(["bash", "run.sh"], cwd=first, capture_output=True, text=True, timeout=300, env={**os.environ, "PATH": node_path})
    subprocess.run([str(first / "post.sh"), str(job.returncode)], check=True)
    # and a job that DAGMan removed while idle: its log says so, and nothing came back
    (cells[1] / "job.log").write_text(
        "000 (123.000.000) 2026-11-21 06:00:00 Job submitted from host: <10.0.0.1:9618>\n...\n"
        "009 (123.000.000) 2026-11-21 12:00:01 Job was aborted.\n"
        "\tThe job attribute PeriodicRemove expression '(JobStatus == 1) && (time() - QDate) > 21600' evaluated to TRUE\n...\n")
    subprocess.run([str(cells[1] / "post.sh"), "-1002"], check=True)  # DAGMan's $RETURN for a removed job
    sweep_id = listed[-1]["id"]
    run_cli("sweep", "--resume", str(sweep_id), check=4)  # adopts the DAG submitted by hand: collects, rewrites nothing; exit 4:
    # a cell could not be tested (its job never started)
    data = json.loads(run_cli("results", "--json", "--cells", check=0).stdout)
    untested = {r["gpu"]: (r["cause"], r["stage"]) for r in data["untested"]}
    assert untested["NVIDIA A100-SXM4-80GB"] == ("no-gpu", "device")  # installed and probed by the node's own script, here with no GPU
    assert untested["NVIDIA GeForce GTX 1080"] == ("not-scheduled", "schedule") and data["invalid"] == []
    assert json.loads(run_cli("results", "--list", "--json", check=0).stdout)[-1]["status"] == "done"


def test_job_history_reads_the_job_log(tmp_path):
    log = write(tmp_path / "job.log", "001 (1.000.000) 2026-11-21 06:02:10 Job executing on host: <10.0.0.7:9618>\n...\n"
                "009 (1.000.000) 2026-11-21 06:07:30 Job was aborted.\n\tThe job attribute PeriodicRemove expression 'x' evaluated to TRUE\n...\n")
    history = job_history(log)
    assert history.executed and history.terminated is None and "PeriodicRemove" in history.aborted


def test_kubernetes_manifests_validate_against_the_schemas(isolated):
    validate = pytest.importorskip("kubernetes_validate", reason="kubernetes-validate is part of the test extra")
    plan = write(isolated / "plan.toml", PLAN.format(executor="kubernetes", extra='[kubernetes]\nimage = "nvcr.io/nvidia/pytorch:25.01-py3"\nnamespace = "gpu-tests"'))
    out = isolated / "k8s"
    run_cli("sweep", str(plan), "--dry-run", "--out", str(out), check=0)
    manifests = [json.loads(p.read_text()) for p in sorted(out.glob("cell-*/job.json"))] + [json.loads((out / "configmap.json").read_text())]
    assert len(manifests) == 3
    for manifest in manifests:
        validate.validate(manifest, "1.30", strict=True)
    job = manifests[0]
    pod = job["spec"]["template"]["spec"]
    # the pod's deadline counts from the kubelet (image pull + install + cell); the Job's also allows the 6 h pending wait
    assert job["spec"]["backoffLimit"] == 0 and pod["activeDeadlineSeconds"] == 21600 + 1200 + 1800
    assert job["spec"]["activeDeadlineSeconds"] == pod["activeDeadlineSeconds"] + 21600 + 60
    assert pod["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": "1"}  # a quantity: the client's models want a string
    assert pod["nodeSelector"]["nvidia.com/gpu.compute.major"] in ("8", "6")  # declared classes select their nodes
    assert pod["tolerations"][0]["key"] == "nvidia.com/gpu" and pod["restartPolicy"] == "Never"
    bad = write(isolated / "bad.toml", PLAN.format(executor="kubernetes", extra=""))
    refused = run_cli("sweep", str(bad), "--dry-run", "--out", str(isolated / "x"))
    assert refused.returncode == 2 and "needs an image" in refused.stderr


def test_result_comes_back_from_the_pod_log():
    log = f"some framework noise\n{BEGIN}\n{{\"finished\": true, \"stages\": {{}}}}\n{END}\n"
    assert result_from_log(log) == {"finished": True, "stages": {}}
    assert result_from_log("killed before the end") == {}


def test_discover_says_what_is_missing_in_one_sentence(isolated):
    for source in ("htcondor", "kubernetes"):
        proc = run_cli("discover", "--source", source, env={"PATH": "/usr/bin:/bin", "KUBECONFIG": str(isolated / "none")})
        assert proc.returncode == 2 and proc.stderr.startswith("error:") and "Traceback" not in proc.stderr
    assert "unknown source" in run_cli("discover", "--source", "pbs").stderr


def test_discovered_classes_are_required_by_name_too():
    from gpucompat.executors.htcondor import gpu_requirement

    titan = next(t for t in parse_long(ADS) if t.name == "NVIDIA TITAN V")
    assert gpu_requirement(titan) == 'Capability == 7.0 && DeviceName == "NVIDIA TITAN V"'
    assert htcondor2.Submit({"request_gpus": "1", "require_gpus": gpu_requirement(titan)})["require_gpus"] == gpu_requirement(titan)
