"""A real Slurm cluster (Debian's slurmctld, slurmd, munge) started by the tests, with two
fake GPU types; sweeps go through sbatch job arrays, squeue, scontrol and scancel."""

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import run_cli, write

pytestmark = pytest.mark.integration
HERE = Path(__file__).resolve().parent / "slurm"
NEEDED = ("slurmctld", "slurmd", "munged", "sbatch")
MISSING = [tool for tool in NEEDED if not shutil.which(tool)]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    if MISSING:
        pytest.skip(f"Slurm is not installed here ({', '.join(MISSING)} missing; .ci/run installs Debian's slurmctld, slurmd and munge)")
    if os.geteuid() != 0:
        pytest.skip("the test cluster runs slurmd as root")
    directory = tmp_path_factory.mktemp("slurm")
    ports = {"SLURMCTLD_PORT": str(free_port()), "SLURMD_PORT": str(free_port())}
    proc = subprocess.run([str(HERE / "start-cluster.sh"), str(directory)], capture_output=True, text=True,
                          env={**os.environ, **ports}, timeout=120)
    assert proc.returncode == 0, proc.stderr
    conf = proc.stdout.strip().splitlines()[-1]
    yield {"SLURM_CONF": conf}
    subprocess.run([str(HERE / "stop-cluster.sh"), str(directory)], timeout=60)


def test_discover_reads_the_live_cluster(cluster, isolated):
    classes = json.loads(run_cli("discover", "--source", "slurm", "--json", env=cluster, check=0).stdout)
    found = {c["gres"]: c for c in classes}
    assert set(found) == {"a100", "h100"}
    assert (found["a100"]["name"], found["a100"]["cc"]) == ("NVIDIA A100", "8.0")
    assert found["h100"]["cc"] == "9.0" and found["h100"]["features"] == ["fakegpu", "hbm"] and found["h100"]["count"] == 1


def test_a_gpu_type_no_node_has_is_no_match_in_seconds(cluster, isolated):
    plan = write(isolated / "plan.toml", """
name = "impossible"
executor = "slurm"
[[targets]]
name = "NVIDIA V100"
gres = "v100"
[[targets]]
name = "NVIDIA A100"
gres = "a100"
features = ["nosuchfeature"]
[[stacks]]
framework = "cuda-runtime"
versions = ["12.4"]
""")
    began = time.monotonic()
    run_cli("sweep", str(plan), env=cluster, check=0)
    assert time.monotonic() - began < 30  # resolution included; the ancestor waited 24 hours
    cells = json.loads(run_cli("results", "--json", check=0).stdout)["invalid"]
    assert [c["code"] for c in cells] == ["NO_MATCH", "NO_MATCH"]
    assert "Requested node configuration is not available" in cells[0]["reason"]
    assert "Invalid feature specification" in cells[1]["reason"]


FAKE_HANGING_TORCH = "import time\ntime.sleep(300)\n"


def test_a_real_sweep_through_slurm(cluster, isolated):
    fakes = isolated / "fakes" / "torch"
    fakes.mkdir(parents=True)
    (fakes / "__init__.py").write_text(FAKE_HANGING_TORCH)
    plan = write(isolated / "plan.toml", """
name = "live"
executor = "slurm"
targets = "discover"
[timeouts]
import = "3s"
pending = "2m"
cell = "2m"
install = "3m"
[[stacks]]
framework = "cuda-runtime"
versions = ["12.4"]
[[stacks]]
framework = "torch"
env = "current"
""")
    env = {**cluster, "PYTHONPATH": str(fakes.parent)}
    run_cli("sweep", str(plan), env=env, check=0, timeout=400)
    data = json.loads(run_cli("results", "--json", "--cells", check=0).stdout)
    cells = {(c["framework"], c["gpu"]): c for c in data["invalid"] + data["valid"]}
    assert len(cells) == 4 and data["counts"]["pending"] == 0
    for gpu in ("NVIDIA A100", "NVIDIA H100"):
        runtime = cells[("cuda-runtime", gpu)]
        assert (runtime["code"], runtime["stage"]) == ("NO_DEVICE", "device")  # installed and probed inside the job
        hung = cells[("torch", gpu)]
        assert (hung["code"], hung["stage"]) == ("TIMEOUT", "import"), hung["reason"]  # killed by its own 3 s stage timeout
    workdir = next((isolated / "gpucompat-runs").glob("sweep-*"))
    scripts = sorted(p.read_text() for p in workdir.glob("array-*.sh"))
    assert any("#SBATCH --gres=gpu:a100:1" in s and "#SBATCH --constraint=fakegpu&hbm" in s for s in scripts)
    assert all("#SBATCH --time=5" in s for s in scripts)  # install 3 min + cell 2 min


def test_interrupting_a_sweep_cancels_its_jobs(cluster, isolated):
    fakes = isolated / "fakes" / "torch"
    fakes.mkdir(parents=True)
    (fakes / "__init__.py").write_text(FAKE_HANGING_TORCH)
    plan = write(isolated / "plan.toml", """
name = "interrupted"
executor = "slurm"
targets = "discover"
[timeouts]
import = "5m"
[[stacks]]
framework = "torch"
env = "current"
""")
    env = {**os.environ, **cluster, "PYTHONPATH": str(fakes.parent)}
    proc = subprocess.Popen([sys.executable, "-m", "gpucompat", "sweep", str(plan)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        queue = subprocess.run(["squeue", "--noheader", "--states=RUNNING", "--format=%j"], env=env, capture_output=True, text=True).stdout
        if "gpucompat-" in queue:
            break
        time.sleep(0.5)
    else:
        proc.kill()
        pytest.fail("the sweep's jobs never started")
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130 and "interrupted" in stderr
    for _ in range(40):
        left = subprocess.run(["squeue", "--noheader", "--format=%j"], env=env, capture_output=True, text=True).stdout
        if "gpucompat-" not in left:
            break
        time.sleep(0.5)
    assert "gpucompat-" not in left, f"jobs left in the queue: {left}"
    sweeps = json.loads(run_cli("results", "--list", "--json", check=0).stdout)
    assert sweeps[-1]["status"] == "interrupted"
