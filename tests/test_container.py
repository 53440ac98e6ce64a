"""Container stacks (env = "container"): plan keys, the exact command lines every executor writes,
NVIDIA_REQUIRE_CUDA on real image values, the runtimes' real error messages, and real Podman and Docker runs.

The Podman tests build a Debian image here with no registry (debootstrap from Debian's own
mirror: python3 and Debian's non-free libcudart11.0, so the probe's import rung passes and the
device rung meets no driver), import it with `podman import`, and run a real sweep cell in it.
They skip, saying why, where podman, debootstrap or root are missing; .ci/run installs them.
The Docker test starts its own dockerd (Debian's docker.io) for the session, on its own socket and
directories, loads the same image into it (`podman save`, no registry) and stops the daemon at the end.
"""

import json
import os
import shlex
import shutil
import subprocess
import tarfile
import time
from dataclasses import replace
from pathlib import Path

import pytest

from conftest import run_cli, write
from gpucompat import analysis
from gpucompat.envs import container
from gpucompat.errors import UserError
from gpucompat.executors import base
from gpucompat.executors.htcondor import job_script
from gpucompat.executors.kubernetes import job_manifest, pod_image
from gpucompat.predict import predict
from gpucompat.model import Cell, Observation, ResolvedStack, Stack, Target, Timeouts
from gpucompat.plan import parse_plan
from gpucompat.resolve import resolve_one
from gpucompat.space import expand

NGC = "docker://nvcr.io/nvidia/pytorch:25.01-py3"

# Real NVIDIA_REQUIRE_CUDA values, as NVIDIA's CUDA images set them:
# 12.8.0 (ubuntu2404): a public script's copy of gitlab.com/nvidia/container-images/cuda dist/12.8.0 base
# Dockerfile (found with the library's find_string, id 6323246706; the same value is quoted for
# nvidia/cuda:12.8.1-cudnn-runtime-ubuntu22.04 "the same brands again for the branches 535, 550, 560 and 565").
REQUIRE_12_8 = " ".join(["cuda>=12.8"] + [
    f"brand={brand},driver>={branch},driver<{branch + 1}"
    for branch in (470, 535, 550, 560, 565)
    for brand in ("unknown", "grid", "tesla", "nvidia", "quadro", "quadrortx", "nvidiartx", "vapps", "vpc", "vcs", "vws", "cloudgaming")])
# 11.8.0 (ubuntu1804 base): StatCan/aaw-kubeflow-containers docker-bits/1_CUDA-11.8.0.Dockerfile, copied from
# gitlab.com/nvidia/container-images/cuda/-/raw/ee72a6fef178d135e8366e5c88e15df39ff83c21/dist/11.8.0/ubuntu1804/base/Dockerfile
REQUIRE_11_8 = ("cuda>=11.8 brand=tesla,driver>=450,driver<451 brand=tesla,driver>=470,driver<471 brand=unknown,driver>=470,driver<471 "
                "brand=nvidia,driver>=470,driver<471 brand=nvidiartx,driver>=470,driver<471 brand=geforce,driver>=470,driver<471 "
                "brand=geforcertx,driver>=470,driver<471 brand=quadro,driver>=470,driver<471 brand=quadrortx,driver>=470,driver<471 "
                "brand=titan,driver>=470,driver<471 brand=titanrtx,driver>=470,driver<471 brand=tesla,driver>=510,driver<511 "
                "brand=unknown,driver>=510,driver<511 brand=nvidia,driver>=510,driver<511 brand=nvidiartx,driver>=510,driver<511 "
                "brand=geforce,driver>=510,driver<511 brand=geforcertx,driver>=510,driver<511 brand=quadro,driver>=510,driver<511 "
                "brand=quadrortx,driver>=510,driver<511 brand=titan,driver>=510,driver<511 brand=titanrtx,driver>=510,driver<511 "
                "brand=tesla,driver>=515,driver<516 brand=unknown,driver>=515,driver<516 brand=nvidia,driver>=515,driver<516 "
                "brand=nvidiartx,driver>=515,driver<516 brand=geforce,driver>=515,driver<516 brand=geforcertx,driver>=515,driver<516 "
                "brand=quadro,driver>=515,driver<516 brand=quadrortx,driver>=515,driver<516 brand=titan,driver>=515,driver<516 "
                "brand=titanrtx,driver>=515,driver<516")
# deezer/spleeter docker/cuda-10-1.dockerfile (nvidia/cuda 10.1 of its day)
REQUIRE_10_1 = "cuda>=10.1 brand=tesla,driver>=396,driver<397 brand=tesla,driver>=410,driver<411 brand=tesla,driver>=418,driver<419"
# A project's own stricter form: runpod-based Dockerfile, "ENV NVIDIA_REQUIRE_CUDA=\"cuda>=12.8,driver>=570\"" (AND, no alternative)
REQUIRE_AND = "cuda>=12.8,driver>=570"

# The runtimes' own words, each from a public report (see knowledge/data/error_signatures.csv for the sources).
NVCCLI_REFUSED = ("docker: Error response from daemon: failed to create task for container: failed to create shim task: OCI runtime "
                  "create failed: runc create failed: unable to start container process: error during container init: error running "
                  "prestart hook #0: exit status 1, stdout: , stderr: Auto-detected mode as 'legacy'\n"
                  "nvidia-container-cli: requirement error: unsatisfied condition: cuda>=12.8, please update your driver to a newer "
                  "version, or use an earlier cuda container: unknown")  # github.com/theroyallab/tabbyAPI/issues/324
DOCKER_NO_GPU = 'docker: Error response from daemon: could not select device driver "" with capabilities: [[gpu]].'  # NVIDIA/nvidia-docker#1034
PODMAN_NO_CDI = "Error: setting up CDI devices: unresolvable CDI devices nvidia.com/gpu=all"  # NVIDIA/nvidia-container-toolkit#146
CRUN_NO_PYTHON = ("Error: crun: executable file `python3` not found in $PATH: No such file or directory: OCI runtime attempted to "
                  "invoke a command that was not found")
APPTAINER_NO_TAG = ("FATAL:   Unable to pull docker://netdisco/netdisco: conveyor failed to get: Error reading manifest latest in "
                    "docker.io/netdisco/netdisco: manifest unknown: manifest unknown")  # apptainer/singularity#2825
DOCKER_NO_TAG = ("Error response from daemon: manifest for ivangabriele/dockfish:latest not found: manifest unknown: manifest unknown")


def stack(image=NGC, runtime=None, framework="torch") -> Stack:
    return expand(parse_plan(f'[[stacks]]\nframework = "{framework}"\nenv = "container"\nimage = "{image}"\n'
                             + (f'runtime = "{runtime}"\n' if runtime else "")).stacks[0])[0]


def cell(image=NGC, runtime=None) -> Cell:
    s = stack(image, runtime)
    return Cell(7, s, Target("NVIDIA H100 80GB HBM3", "9.0", "535.129.03"), resolve_one(s, "x86_64-manylinux_2_28"))


# -- plan, space, resolve, predict -------------------------------------------------------------------

def test_a_container_stack_parses_into_one_stack_that_needs_no_resolution():
    s = stack(runtime="apptainer")
    assert (s.env, s.image, s.runtime, s.version, s.python) == ("container", NGC, "apptainer", "installed", "image")
    assert "nvcr.io/nvidia/pytorch:25.01-py3" in s.key
    resolved = resolve_one(s, "x86_64-manylinux_2_28")
    assert resolved.ok and resolved.pins == ()
    # two images never share an environment directory (their pulled SIFs live there)
    assert resolved.env_key != resolve_one(stack("docker://nvcr.io/nvidia/pytorch:24.12-py3"), "linux").env_key
    prediction = predict(cell())
    assert prediction.verdict == "uncertain" and "learned only when it runs" in prediction.reasons[0].text


@pytest.mark.parametrize("extra, said", [
    ("", "'image' is missing"),
    ('image = "x"\nversions = ["2.5.1"]', "drop 'versions'"),
    ('image = "x"\npython = "3.11"', "drop 'python'"),
    ('image = "x"\nruntime = "lxc"', "unknown runtime 'lxc'"),
    ('image = "/images/pt.sif"\nruntime = "podman"', "podman cannot run"),
    ('image = "--privileged"', "cannot start with '-'"),
    ('image = "docker://--privileged"', "cannot start with '-'"),  # the runtime's command line gets it without docker://
    ('image = "library://sylabs/pt:1"', "transports gpucompat runs"),
    ('image = "x"\nchannels = ["conda-forge"]', "drop 'channels'"),
    ('image = "a b"', "no spaces"),
])
def test_container_stack_mistakes_get_one_sentence(extra, said):
    with pytest.raises(UserError, match=said):
        parse_plan(f'[[stacks]]\nframework = "torch"\nenv = "container"\n{extra}\n')


def test_image_and_runtime_belong_to_container_stacks_only():
    with pytest.raises(UserError, match="are for env"):
        parse_plan('[[stacks]]\nframework = "torch"\nversions = ["2.5.1"]\nimage = "x"\n')


# -- command lines -----------------------------------------------------------------------------------

def test_each_runtime_gets_its_gpu_flag_and_the_job_directory_bound_at_its_own_path():
    assert container.run_words("apptainer", NGC, "/cache/envs/abc") == [
        "apptainer", "exec", "--nv", "--no-home", "--bind", '"$PWD"', "--pwd", '"$PWD"', "/cache/envs/abc/image.sif", "python3"]
    assert container.run_words("singularity", "/images/pt.sif", "/e")[-2:] == ["/images/pt.sif", "python3"]
    podman = container.run_words("/usr/bin/podman", NGC, "/e")
    assert podman[:2] == ["/usr/bin/podman", "run"] and podman[-2:] == ["nvcr.io/nvidia/pytorch:25.01-py3", "python3"]
    assert "--device nvidia.com/gpu=all" in " ".join(podman) and "--gpus" not in podman
    assert " -v \"$PWD:$PWD\" -w \"$PWD\" -e CUDA_VISIBLE_DEVICES " in " ".join(podman)
    docker = container.run_words("docker", "nvcr.io/nvidia/pytorch:25.01-py3", "/e")
    assert "--gpus all" in " ".join(docker) and '--user "$(id -u):$(id -g)"' in " ".join(docker) and "nvidia.com/gpu=all" not in docker
    assert "--pull=never" in docker  # the pull is the install step's, never a side effect of the run


def test_the_probe_command_chooses_the_runtime_on_the_node_and_quotes_the_image():
    image = "registry.example/o'brien/$(id):1"  # a quote and a command substitution, written as data
    c = cell()  # a plan refuses such an image (tests/test_input_slips.py); one that got here is still only data
    odd = replace(c.stack, image=image)
    c = replace(c, stack=odd, resolved=replace(c.resolved, stack=odd))
    text = base.probe_command(c, "python3", "/cache/envs/x", "--framework torch --result result.json", redirect="> out 2> err")
    assert text.startswith("runtime=; for candidate in apptainer singularity podman docker; do")
    exec_lines = [line for line in text.splitlines() if " exec " in line]
    assert [line.split(")")[0].strip() for line in exec_lines] == ["apptainer", "singularity", "podman", "docker"]
    podman = next(line for line in exec_lines if line.strip().startswith("podman"))
    words = shlex.split(podman.split(") exec ", 1)[1].rsplit(";;", 1)[0])
    assert "registry.example/o'brien/$(id):1" in words and words[-8:-6] == ["--framework", "torch"]
    assert words[-2:] == ["2>", "err"]
    assert "gpucompat: no container runtime (apptainer, singularity, podman, docker) on the PATH" in text
    # a SIF file: only Apptainer/Singularity; the submit side's own choice (local executor): only that one
    assert "podman" not in base.probe_command(cell("/images/pt.sif"), "python3", "/e", "")
    local = base.probe_command(c, "python3", "/e", "", runtime="/usr/bin/podman")
    assert local.count(" exec ") == 1 and "for candidate in /usr/bin/podman;" in local
    subprocess.run(["sh", "-n", "-c", text], check=True)  # valid POSIX sh


def test_the_pull_step_fetches_once_and_never_builds():
    script = container.install_script(resolve_one(stack(NGC), "linux"), "/cache/envs/abc", "r.txt", None, False, uv="uv", same_machine=False)
    assert ("apptainer) test -s /cache/envs/abc/image.sif || apptainer pull /cache/envs/abc/image.sif "
            "docker://nvcr.io/nvidia/pytorch:25.01-py3 ;;") in script  # pulled once, never overwritten under a running job
    assert ("podman) podman image inspect nvcr.io/nvidia/pytorch:25.01-py3 >/dev/null 2>&1 || podman pull "
            "nvcr.io/nvidia/pytorch:25.01-py3 ;;") in script
    sif = container.install_script(resolve_one(stack("/images/pt.sif"), "linux"), "/e", "r", None, False, uv="uv", same_machine=False)
    assert "test -r /images/pt.sif" in sif and "pull" not in sif
    oras = container.install_script(resolve_one(stack("oras://ghcr.io/o/pt:1"), "linux"), "/e", "r", None, False, uv="uv", same_machine=False)
    assert "pull /e/image.sif oras://ghcr.io/o/pt:1" in oras
    subprocess.run(["sh", "-n", "-c", script], check=True)


def test_htcondor_and_kubernetes_jobs_run_the_image():
    c = cell(runtime="apptainer")
    script = job_script(c, "--framework torch --result result.json", 600, True, None)
    assert "command -v uv" not in script and "timeout 600 bash install.sh > install.log 2>&1" in script
    assert "apptainer) exec apptainer exec --nv --no-home --bind \"$PWD\" --pwd \"$PWD\" env/image.sif python3 probe.pyz" in script
    assert script.rstrip().endswith("esac") and "> stdout.log 2> stderr.log ;;" in script
    # Kubernetes: the pod's image is the stack's (the kubelet pulls it; the device plugin gives the GPU)
    manifest = job_manifest(c, "gpucompat-s1", pod_image(c.stack.image), "default", Timeouts())
    spec = manifest["spec"]["template"]["spec"]["containers"][0]
    assert spec["image"] == "nvcr.io/nvidia/pytorch:25.01-py3" and "python3 probe.pyz" in spec["command"][2]
    with pytest.raises(UserError, match="Apptainer's"):
        pod_image("/images/pt.sif")


# -- NVIDIA_REQUIRE_CUDA -----------------------------------------------------------------------------

def test_the_requirement_grammar_on_real_image_values():
    alternatives = container.parse_require(REQUIRE_12_8)
    assert alternatives[0] == [("cuda", ">=", "12.8")] and len(alternatives) == 61
    assert alternatives[15] == [("brand", "=", "tesla"), ("driver", ">=", "535"), ("driver", "<", "536")]
    assert container.parse_require(REQUIRE_AND) == [[("cuda", ">=", "12.8"), ("driver", ">=", "570")]]


@pytest.mark.parametrize("require, cuda, driver, brand, expected", [
    (REQUIRE_12_8, "12.2", "535.129.03", "geforce", False),  # the public reports: cuda>=12.8 on driver 535
    (REQUIRE_12_8, "12.2", "535.129.03", "tesla", True),  # a data-centre GPU on the 535 branch: forward compatibility
    (REQUIRE_12_8, "12.2", "535.129.03", None, None),  # the brand decides, and it is not known
    (REQUIRE_12_8, "12.4", "550.144.03", "geforce", False),  # tabbyAPI#324: driver 550, CUDA 12.4
    (REQUIRE_12_8, "12.8", "570.124.06", None, True),
    (REQUIRE_12_8, "13.0", "580.159.04", "geforce", True),
    (REQUIRE_11_8, "11.4", "470.82.01", "geforce", True),
    (REQUIRE_11_8, "11.6", "511.65", "geforce", False),  # 511 is outside every listed branch
    (REQUIRE_10_1, "10.0", "410.48", "tesla", True),
    (REQUIRE_AND, "12.8", "565.57.01", None, False),  # both must hold: the driver is below 570
])
def test_the_requirement_against_a_host(require, cuda, driver, brand, expected):
    assert container.check_require(require, cuda=cuda, driver=driver, brand=brand)[0] is expected


def test_the_condition_nvidia_container_cli_names_is_read_from_its_message():
    assert container.refused_condition(NVCCLI_REFUSED) == "cuda>=12.8"
    assert container.refused_condition("nvidia-container-cli: requirement error: unsatisfied condition: cuda >= 9.0\n") == "cuda >= 9.0"


# -- verdicts from the runtimes' own words -------------------------------------------------------------

@pytest.mark.parametrize("stderr, code, stage, cause, said", [
    (NVCCLI_REFUSED, "DRIVER_TOO_OLD", "device", None, "NVIDIA_REQUIRE_CUDA"),
    (DOCKER_NO_GPU, "UNTESTED", "device", "env-fault", "NVIDIA Container Toolkit"),
    (PODMAN_NO_CDI, "UNTESTED", "device", "env-fault", "no CDI specification"),
    (CRUN_NO_PYTHON, "UNTESTED", "import", "image", "has no python3"),
    ("Error: localhost/pt:1: image not known", "UNTESTED", "import", "image", "does not have the image"),
    ("gpucompat: no container runtime (podman) on the PATH of node n1", "UNTESTED", "import", "runtime", "no container runtime"),
    ("docker: Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?",
     "UNTESTED", "import", "runtime", "Cannot connect"),
    # the toolkit's hook on a node without a driver (github.com/NVIDIA/nvidia-docker/issues/1711)
    ("stderr: Auto-detected mode as 'legacy'\nnvidia-container-cli: initialization error: load library failed: libnvidia-ml.so.1: "
     "cannot open shared object file: no such file or directory: unknown.", "UNTESTED", "device", "no-gpu", "no usable NVIDIA driver"),
    # no signature: the runtime or the image's python3 ended it, never a gpucompat bug (INTERNAL) nor the stack's
    ('  File "/job/probe.pyz/gpucompat_probe/adapter_cupy.py", line 55\nSyntaxError: invalid syntax', "UNTESTED", "import", "runtime", "SyntaxError: invalid syntax"),
])
def test_a_runtime_that_never_started_the_probe(stderr, code, stage, cause, said):
    outcome = analysis.classify(cell().resolved, Observation(facts={}, returncode=125, stderr=stderr))
    assert (outcome.code, outcome.stage, outcome.cause) == (code, stage, cause)
    assert said in outcome.summary
    if code == "DRIVER_TOO_OLD":
        assert outcome.evidence["nvidia_require_cuda"] == "cuda>=12.8" and "unsatisfied condition" in outcome.summary


@pytest.mark.parametrize("log, code, cause", [
    (APPTAINER_NO_TAG, "ENV_UNRESOLVABLE", None),
    (DOCKER_NO_TAG, "ENV_UNRESOLVABLE", None),
    ('Error: initializing source docker://nvcr.io/nvidia/pytorch:25.01-py3: pinging container registry nvcr.io: Get '
     '"https://nvcr.io/v2/": dial tcp: lookup nvcr.io: no such host', "UNTESTED", "image"),
    ("Error response from daemon: unauthorized: authentication required", "UNTESTED", "image"),
    # Docker Hub says this of a private image without a login too: nothing is known about the tag
    ("Error response from daemon: pull access denied for someorg/pt, repository does not exist or may require 'docker login'",
     "UNTESTED", "image"),
])
def test_a_pull_that_failed(log, code, cause):
    outcome = analysis.classify(cell().resolved, Observation(facts={}, install_failed=True, install_log=log))
    assert (outcome.code, outcome.cause) == (code, cause)
    assert outcome.evidence["image"] == NGC


def test_a_driver_too_old_inside_the_image_names_its_requirement():
    facts = {"finished": True, "system": {"cuda_env": {"NVIDIA_REQUIRE_CUDA": REQUIRE_12_8},
                                          "proc_driver_version": "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.129.03  Thu Oct 19",
                                          "libcuda": True, "driver_cuda_version": "12.2"},
             "stages": {"import": {"ok": True, "facts": {"cuda_runtime": "12.8"}},
                        "device": {"ok": False, "facts": {"driver_cuda_version": "12.2"},
                                   "error": {"type": "RuntimeError", "message": "CUDA driver version is insufficient for CUDA runtime version"}}}}
    outcome = analysis.classify(cell().resolved, Observation(facts=facts, returncode=0))
    assert outcome.code == "DRIVER_TOO_OLD" and "NVIDIA_REQUIRE_CUDA asks for cuda>=12.8" in outcome.summary
    assert outcome.evidence["nvidia_require_cuda"]["satisfied"] is None  # driver 535 fits a brand's branch: the brand decides
    facts["system"]["cuda_env"]["NVIDIA_REQUIRE_CUDA"] = "cuda-12.8"  # no condition gpucompat reads: no words added, no crash
    assert analysis.classify(cell().resolved, Observation(facts=facts, returncode=0)).summary == outcome.summary.split("; the image's")[0]


def test_advise_answers_a_container_stack_with_its_image_line():
    from gpucompat.answers.advise import advise

    row = {"framework": "torch", "version": "2.6.0a0+ecf3bae40a", "variant": "installed", "python": "3.12.3", "env": "container",
           "image": NGC, "gpu": "NVIDIA H100 80GB HBM3", "cc": "9.0", "driver": "570.124.06", "code": "PASS", "stage": "compute",
           "warnings": [], "cuda_runtime": "12.8", "sweep": 3}
    observed = advise("torch", None, "9.0", "570.124.06", None, [row])["observed"]
    assert observed[0]["install"] == '{ env = "container", image = "docker://nvcr.io/nvidia/pytorch:25.01-py3" }'
    assert observed[0]["image"] == NGC
    odd = advise("torch", None, "9.0", "570.124.06", None, [{**row, "image": 'reg.example/a"b:1'}])["observed"][0]["install"]
    tomllib = pytest.importorskip("tomllib", reason="tomllib is the standard library's from Python 3.11")
    assert tomllib.loads("stack = " + odd)["stack"]["image"] == 'reg.example/a"b:1'  # valid TOML, the value escaped


# -- a real Podman run ---------------------------------------------------------------------------------

IMAGE = "localhost/gpucompat-test-probe:bookworm-1"
STAND_IN = Path("/var/run/cdi/gpucompat-test-stand-in.yaml")


def _podman_env(tmp: Path) -> dict:
    """The environment podman runs in here: as it is, or (machines whose sandbox forbids raising rlimits
    and whose crun refuses hybrid cgroups, as this workplace's) a containers.conf with runc and lower ulimits."""
    probe = ["podman", "run", "--rm", "--network=none", IMAGE, "python3", "-c", "print(1)"]
    if subprocess.run(probe, capture_output=True, text=True).returncode == 0:
        return {}
    conf = tmp / "containers.conf"
    conf.write_text('[containers]\ndefault_ulimits = ["nofile=1024:1024", "nproc=1024:1024"]\n[engine]\n'
                    + ('runtime = "runc"\n' if shutil.which("runc") else ""))
    env = {"CONTAINERS_CONF": str(conf)}
    proc = subprocess.run(probe, capture_output=True, text=True, env={**os.environ, **env})
    if proc.returncode != 0:
        pytest.skip(f"podman cannot run a container on this machine: {proc.stderr.strip()[-300:]}")
    return env


@pytest.fixture(scope="session")
def podman_image(tmp_path_factory):
    """The test image, built once per machine (kept in podman's storage): a Debian bookworm minbase root
    file system with python3 and libcudart11.0, from Debian's mirror, imported with no registry."""
    if not shutil.which("podman"):
        pytest.skip("podman is not installed (apt-get install podman; .ci/run does)")
    if os.geteuid() != 0:
        pytest.skip("the podman tests run as root (rootful podman, and debootstrap)")
    if subprocess.run(["podman", "image", "exists", IMAGE]).returncode != 0:
        if not shutil.which("debootstrap"):
            pytest.skip("debootstrap is not installed (apt-get install debootstrap; .ci/run does)")
        root = tmp_path_factory.mktemp("rootfs") / "bookworm"
        subprocess.run(["debootstrap", "--variant=minbase", "--components=main,non-free", "--include=python3,libcudart11.0",
                        "bookworm", str(root), "http://deb.debian.org/debian"], check=True, capture_output=True, timeout=900)
        for bulky in ("usr/share/doc", "usr/share/man", "usr/share/locale", "var/cache/apt/archives"):
            shutil.rmtree(root / bulky, ignore_errors=True)
        archive = root.parent / "rootfs.tar"
        with tarfile.open(archive, "w") as tar:
            tar.add(root, arcname=".")
        subprocess.run(["podman", "import", str(archive), IMAGE], check=True, capture_output=True)
    env = _podman_env(tmp_path_factory.mktemp("podman"))
    return env


def _image_id() -> str:
    return subprocess.run(["podman", "image", "inspect", "--format", "{{.Id}} {{.Digest}}", IMAGE],
                          capture_output=True, text=True, check=True).stdout.strip()


def _sweep(isolated, env, framework="cuda-runtime", image=IMAGE, runtime="podman") -> dict:
    plan = write(isolated / "plan.toml", f'name = "containers"\n[[stacks]]\nframework = "{framework}"\nenv = "container"\n'
                                         f'image = "{image}"\nruntime = "{runtime}"\n')
    proc = run_cli("sweep", str(plan), env=env, timeout=300)
    assert proc.returncode in (0, 1, 4), proc.stderr  # 1: a broken stack, 4: an untested cell
    data = json.loads(run_cli("results", "--format", "json", check=0).stdout)
    rows = data["valid"] + data["invalid"] + data.get("untested", [])
    assert len(rows) == 1, data
    return rows[0]


@pytest.mark.integration
def test_podman_runs_the_probe_in_the_image_and_the_result_comes_back(isolated, podman_image):
    """With a CDI spec for nvidia.com/gpu (a stand-in with no device: this machine has no GPU, and no
    NVIDIA Container Toolkit to generate the real one), the exact command gpucompat writes runs the
    probe in the image: the import rung loads the image's libcudart, the device rung finds no driver."""
    if any(p.exists() and "nvidia.com/gpu" in p.read_text() for d in ("/etc/cdi", "/var/run/cdi") for p in Path(d).glob("*.y*ml")):
        pytest.skip("this node has a real CDI spec for nvidia.com/gpu; the stand-in is for machines with no GPU")
    before = _image_id()
    STAND_IN.parent.mkdir(parents=True, exist_ok=True)
    STAND_IN.write_text('cdiVersion: "0.5.0"\nkind: nvidia.com/gpu\ndevices:\n- name: all\n  containerEdits:\n'
                        '    env:\n    - NVIDIA_GPUCOMPAT_CDI_STAND_IN=1\n')
    try:
        row = _sweep(isolated, podman_image)
    finally:
        STAND_IN.unlink()
    assert (row["code"], row["cause"], row["stage"]) == ("UNTESTED", "no-gpu", "device"), row
    assert "no kernel module, no libcuda.so.1" in row["reason"]
    assert row["python"].startswith("3.11") and row["env"] == "container"  # the image's Python, not this one's
    assert row["image"] == IMAGE
    result = json.loads(next(isolated.rglob("cell-*/result.json")).read_text())
    assert result["system"]["cuda_env"]["NVIDIA_GPUCOMPAT_CDI_STAND_IN"] == "1"  # written inside, read back through the bind
    assert result["stages"]["import"]["ok"] and "libcudart.so.11" in json.dumps(result["stages"]["import"])
    assert _image_id() == before  # the image was not modified


@pytest.mark.integration
def test_podman_without_a_cdi_spec_refuses_the_gpu(isolated, podman_image):
    if any(Path(d).glob("*.y*ml") for d in ("/etc/cdi", "/var/run/cdi") if Path(d).is_dir()) and \
            any("nvidia.com/gpu" in p.read_text() for d in ("/etc/cdi", "/var/run/cdi") for p in Path(d).glob("*.y*ml")):
        pytest.skip("this node has a CDI spec for nvidia.com/gpu")
    row = _sweep(isolated, podman_image)
    assert (row["code"], row["cause"], row["stage"]) == ("UNTESTED", "env-fault", "device")
    assert "unresolvable CDI devices nvidia.com/gpu=all" in row["reason"] and "CDI specification" in row["reason"]


@pytest.mark.integration
def test_an_image_podman_cannot_pull_is_untested(isolated, podman_image):
    row = _sweep(isolated, podman_image, image="localhost:1/gpucompat/no-such-image:1")  # nothing listens there: no registry answers
    assert (row["code"], row["cause"]) == ("UNTESTED", "image"), row


# -- a real Docker run -----------------------------------------------------------------------------------

def _docker_client() -> str | None:
    """The engine's own client (Debian's docker.io: /usr/sbin/dockerd, /usr/bin/docker), so that client and
    daemon are of one release; else the first docker on the PATH."""
    dockerd = Path(shutil.which("dockerd") or "/nonexistent").resolve()
    for candidate in (dockerd.with_name("docker"), dockerd.parent.parent / "bin" / "docker"):
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    return shutil.which("docker")


def _stop(daemon: subprocess.Popen, root: Path) -> None:
    """Stop the test's dockerd (it stops the containerd it started) and drop its layers (hundreds of MB)."""
    daemon.terminate()
    try:
        daemon.wait(timeout=60)
    except subprocess.TimeoutExpired:
        daemon.kill()
        daemon.wait()
    # dockerd bind-mounts its data root onto itself (os.path.ismount cannot see that) and, where it fails to start
    # (a storage driver the kernel refuses), leaves that mount behind: unmount until none is left
    for _ in range(4):
        if subprocess.run(["umount", "--lazy", str(root / "data")], capture_output=True).returncode != 0:
            break
    shutil.rmtree(root / "data", ignore_errors=True)


def _start_dockerd(dockerd: str, docker: list[str], root: Path, socket: str, driver: str | None):
    """dockerd on its own configuration file, socket, data and exec roots; (the daemon, None) once it answers,
    else (None, why)."""
    config = root / "daemon.json"  # not /etc/docker/daemon.json: nothing of a system daemon's settings
    config.write_text("{}\n")
    command = [dockerd, "--config-file", str(config), "--host", socket, "--data-root", str(root / "data"), "--exec-root", str(root / "exec"),
               "--pidfile", str(root / "docker.pid"), "--iptables=false", "--ip6tables=false", "--bridge=none",
               *([f"--storage-driver={driver}"] if driver else [])]
    log_path = root / f"dockerd-{driver or 'default'}.log"
    with open(log_path, "w") as log:
        daemon = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + 60
    while subprocess.run([*docker, "version"], capture_output=True).returncode != 0:
        if daemon.poll() is not None or time.monotonic() > deadline:
            _stop(daemon, root)
            return None, f"dockerd cannot start on this machine: {log_path.read_text().strip()[-400:]}"
        time.sleep(0.5)
    return daemon, None


@pytest.fixture(scope="session")
def docker_daemon(tmp_path_factory, podman_image):
    """A dockerd of this test session only: its own (empty) configuration file, socket, data and exec roots, no bridge and no iptables
    (the cells run with --network=none). Its own choice of storage driver (overlay2 where the kernel
    allows it), else vfs (any file system, nested ones too, but it copies the image for each container).
    The podman test image is loaded into it (`podman save`: the same image ID, no registry). Yields the
    environment a sweep needs (DOCKER_HOST, and a PATH whose `docker` is the engine's client)."""
    dockerd, client = shutil.which("dockerd"), _docker_client()
    if not dockerd or not client:
        pytest.skip("Docker's engine is not installed (apt-get install docker.io; .ci/run does)")
    root = tmp_path_factory.mktemp("dockerd")
    socket = f"unix://{root / 'docker.sock'}"
    docker = [client, "--host", socket]
    archive = root / "image.tar"
    subprocess.run(["podman", "save", "--format", "docker-archive", "-o", str(archive), IMAGE], check=True, capture_output=True)
    daemon, why = None, ""
    for driver in (None, "vfs"):
        daemon, why = _start_dockerd(dockerd, docker, root, socket, driver)
        if daemon is None:
            continue
        subprocess.run([*docker, "load", "-i", str(archive)], check=True, capture_output=True)
        proc = subprocess.run([*docker, "run", "--rm", "--network=none", IMAGE, "python3", "-c", "print(1)"], capture_output=True, text=True)
        if proc.returncode == 0:
            break
        why = f"dockerd cannot run a container on this machine: {proc.stderr.strip()[-300:]}"
        _stop(daemon, root)
        daemon = None
    archive.unlink()
    if daemon is None:
        pytest.skip(why)
    try:
        bin_dir = root / "bin"  # only `docker` put first on the PATH: nothing else of its directory shadows this environment's tools
        bin_dir.mkdir()
        (bin_dir / "docker").symlink_to(client)
        yield {"DOCKER_HOST": socket, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}", "docker": docker,
               "client": str(bin_dir / "docker")}
    finally:
        _stop(daemon, root)


@pytest.mark.integration
def test_docker_without_the_nvidia_toolkit_refuses_the_gpu(isolated, docker_daemon):
    """A real sweep cell with `runtime = "docker"` against a real Docker engine with no NVIDIA Container
    Toolkit: the daemon's own refusal of `--gpus all` is the node's (could not test: env-fault), naming the missing hook."""
    docker = docker_daemon["docker"]
    inspect = [*docker, "image", "inspect", "--format", "{{.Id}}", IMAGE]
    if shutil.which("nvidia-container-runtime-hook"):  # what `--gpus` runs where the toolkit is installed
        pytest.skip("the NVIDIA Container Toolkit is installed here; the test is for an engine without it")
    before = subprocess.run(inspect, capture_output=True, text=True, check=True).stdout.strip()
    row = _sweep(isolated, {k: docker_daemon[k] for k in ("DOCKER_HOST", "PATH")}, runtime="docker")
    assert (row["code"], row["cause"], row["stage"], row["env"], row["image"]) == ("UNTESTED", "env-fault", "device", "container", IMAGE), row
    assert 'could not select device driver "" with capabilities: [[gpu]]' in row["reason"]
    assert "NVIDIA Container Toolkit is missing" in row["reason"]
    run_sh = next(isolated.rglob("cell-*/run.sh")).read_text()
    assert f"exec {docker_daemon['client']} run --rm --network=none" in run_sh and "--gpus all" in run_sh  # the engine's client, by its path
    assert subprocess.run(inspect, capture_output=True, text=True, check=True).stdout.strip() == before  # the image was not modified
    assert subprocess.run([*docker, "ps", "-aq"], capture_output=True, text=True, check=True).stdout.strip() == ""  # nothing left behind
