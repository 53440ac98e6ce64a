"""The environments a site keeps (`gpucompat envs`, `envs prune`, the locks jobs hold on them), with
real uv environments of the CUDA runtime built by real sweeps and by the local and Slurm job scripts."""

import fcntl
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import run_cli, write

PY = f"{sys.version_info[0]}.{sys.version_info[1]}"


def sweep(tmp: Path, plan: str, *series: str) -> None:
    path = write(tmp / f"{plan}.toml", f'name = "{plan}"\n[[stacks]]\nframework = "cuda-runtime"\nversions = {json.dumps(list(series))}\n')
    run_cli("sweep", str(path), check=0)


def envs_json() -> dict:
    return json.loads(run_cli("envs", "--json", check=0).stdout)


def walk(path: Path) -> dict:
    """The files under path, each inode once, measured apart from gpucompat: (dev, ino) -> (size, nlink)."""
    found = {}
    for folder, _, names in os.walk(path):
        for name in names:
            info = os.lstat(os.path.join(folder, name))
            if os.path.isfile(os.path.join(folder, name)) and not os.path.islink(os.path.join(folder, name)):
                found[(info.st_dev, info.st_ino)] = (info.st_size, info.st_nlink)
    return found


def by_series(data: dict) -> dict:
    return {env["stack"]["version"]: env for env in data["environments"]}


@pytest.mark.integration
def test_envs_lists_each_environment_with_its_size_its_hard_links_the_last_sweep_and_the_stack(isolated):
    sweep(isolated, "site", "12.4", "13.0")
    data = envs_json()
    envs = by_series(data)
    assert sorted(envs) == ["12.4", "13.0"] and data["root"] == str(isolated / "cache" / "envs")
    for series, env in envs.items():
        files = walk(Path(env["path"]))
        assert env["bytes"] == sum(size for size, _ in files.values()) and env["files"] == len(files)
        assert env["shared_bytes"] == sum(size for size, links in files.values() if links > 1)
        assert env["own_bytes"] == env["bytes"] - env["shared_bytes"]
        assert env["stack"]["key"] == f"cuda-runtime=={series} [default] py{PY} uv" and env["ready"] and not env["in_use"]
        assert (env["last_use"]["plan"], env["last_use"]["sweep"]) == ("site", 1)
    if data["same_filesystem"]:  # uv hard-links its cache into the environment: libcudart is such a file
        [cudart] = Path(envs["12.4"]["path"]).rglob("libcudart.so.12")
        assert cudart.stat().st_nlink > 1 and envs["12.4"]["shared_bytes"] >= cudart.stat().st_size
        assert data["note"] is None
    # a real hard link between the two environments: each lists it, the cache counts its inode once
    [nvrtc] = Path(envs["13.0"]["path"]).rglob("libnvrtc.so.13")
    os.link(nvrtc, Path(envs["12.4"]["path"]) / "linked-nvrtc")
    again = envs_json()
    assert by_series(again)["12.4"]["bytes"] == envs["12.4"]["bytes"] + nvrtc.stat().st_size
    assert again["totals"]["bytes"] == data["totals"]["bytes"]  # the inode was already counted
    every = {inode: found for env in again["environments"] for inode, found in walk(Path(env["path"])).items()}
    assert again["totals"]["bytes"] == sum(size for size, _ in every.values())
    assert again["totals"]["shared_bytes"] == sum(size for size, links in every.values() if links > 1)
    assert again["totals"]["listed_bytes"] == data["totals"]["listed_bytes"] + nvrtc.stat().st_size
    text = run_cli("envs", check=0, env={"COLUMNS": "200"}).stdout
    assert "2 environments" in text and f"cuda-runtime==13.0 [default] py{PY} uv" in text and "sweep 1 of site" in text


@pytest.mark.integration
def test_prune_keeps_what_the_latest_sweeps_of_each_plan_use_and_skips_a_held_lock(isolated):
    for series in ("12.4", "13.0", "12.6"):  # plan "a": sweeps 1, 2, 3, one environment each
        sweep(isolated, "a", series)
    sweep(isolated, "b", "11.8")  # plan "b": sweep 4
    root = isolated / "cache" / "envs"
    keys = {series: env["key"] for series, env in by_series(envs_json()).items()}
    before = sorted(p.name for p in root.iterdir())

    dry = json.loads(run_cli("envs", "prune", "--keep", "1", "--dry-run", "--json", check=0).stdout)
    assert sorted(e["stack"]["version"] for e in dry["removed"]) == ["12.4", "13.0"]
    assert sorted(e["stack"]["version"] for e in dry["kept"]) == ["11.8", "12.6"]  # a's latest sweep, and b's
    assert sorted(p.name for p in root.iterdir()) == before, "a dry run removed something"
    assert "would remove 2 environments" in run_cli("envs", "prune", "--keep", "1", "--dry-run", check=0).stdout

    lock = root / f"{keys['13.0']}.lock"
    with open(lock, "a") as held:  # a job using the 13.0 environment
        fcntl.flock(held, fcntl.LOCK_SH)
        proc = run_cli("envs", "prune", "--keep", "1", env={"COLUMNS": "250"}, check=0)
        fcntl.flock(held, fcntl.LOCK_UN)
    assert f"skipped {keys['13.0']}" in proc.stdout and str(lock) in proc.stdout and "in use" in proc.stdout
    assert f"removed {keys['12.4']}" in proc.stdout
    left = {p.name for p in root.iterdir()}
    assert keys["12.4"] not in left and f"{keys['12.4']}.uses.json" not in left and f"{keys['12.4']}.lock" in left
    assert {keys["13.0"], keys["12.6"], keys["11.8"]} <= left
    assert sorted(by_series(envs_json())) == ["11.8", "12.6", "13.0"]
    # keep 2: a's sweeps 2 and 3 are its latest, so nothing more goes; keep 1 again, unheld: 13.0 goes
    assert json.loads(run_cli("envs", "prune", "--keep", "2", "--json", check=0).stdout)["removed"] == []
    assert [e["key"] for e in json.loads(run_cli("envs", "prune", "--keep", "1", "--json", check=0).stdout)["removed"]] == [keys["13.0"]]


@pytest.mark.integration
def test_a_local_probe_holds_its_environment_lock_and_a_pruned_environment_is_built_again(tmp_path):
    from gpucompat import env_cache
    from gpucompat.executors.base import DONE, READY_MARKER, JobSettings
    from gpucompat.executors.local import LocalExecutor
    from gpucompat.model import Cell, Target, Timeouts
    from gpucompat.plan import parse_plan
    from gpucompat.resolve import resolve_one
    from gpucompat.space import expand

    assert env_cache.READY_MARKER == READY_MARKER
    [stack] = expand(parse_plan('[[stacks]]\nframework = "cuda-runtime"\nversions = ["12.4"]\n').stacks[0])
    cell = Cell(1, stack, Target("cpu", declared=False), resolve_one(stack, "x86_64-manylinux_2_28"))

    def run_once() -> dict:
        executor = LocalExecutor(JobSettings(Timeouts(cell=60)), env_root=tmp_path / "envs")
        [job] = executor.prepare([cell], tmp_path / "work")
        lock = env_cache.lock_path(job.env_dir)
        # a stand-in probe: can it take the environment's lock exclusively? Not while its executor holds it shared
        (job.path / "run.sh").write_text(f'#!/bin/sh\ncd "$(dirname "$0")" || exit 70\n'
                                         f'if flock -n -x {lock} true; then held=false; else held=true; fi\n'
                                         f'printf \'{{"held": %s, "ready": %s}}\' "$held" '
                                         f'"$([ -e {job.env_dir / READY_MARKER} ] && echo true || echo false)" > result.json\n')
        executor.submit([job])
        deadline = time.monotonic() + 300
        while executor.poll().get(job.id) != DONE:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        return executor.collect(job).facts

    assert run_once() == {"held": True, "ready": True}
    assert not env_cache._held(tmp_path / "envs" / f"{cell.resolved.env_key}.lock")  # released once the probe ended
    env_cache.prune(0, root=tmp_path / "envs")  # removed; the next job builds it again before it probes
    assert not (tmp_path / "envs" / cell.resolved.env_key).exists()
    assert run_once() == {"held": True, "ready": True}


@pytest.mark.integration
def test_a_slurm_job_holds_its_environment_lock_from_install_to_the_end_of_its_probe(tmp_path):
    """The run.sh a Slurm node runs, run here with `bash`: it builds the environment, then holds the lock
    shared while its probe (here a stand-in that sleeps) runs; prune skips it, then removes it once it ended."""
    from gpucompat import env_cache
    from gpucompat.executors.base import READY_MARKER, JobSettings
    from gpucompat.executors.slurm import SlurmExecutor
    from gpucompat.model import Cell, Target, Timeouts
    from gpucompat.plan import parse_plan
    from gpucompat.resolve import resolve_one
    from gpucompat.space import expand

    [stack] = expand(parse_plan('[[stacks]]\nframework = "cuda-runtime"\nversions = ["12.4"]\n').stacks[0])
    cell = Cell(1, stack, Target("NVIDIA A100", "8.0", declared=True), resolve_one(stack, "x86_64-manylinux_2_28"))
    [job] = SlurmExecutor(JobSettings(Timeouts()), env_root=tmp_path / "envs").prepare([cell], tmp_path / "work")
    script = (job.path / "run.sh").read_text()
    assert "flock -s 8" in script
    lines = script.rstrip("\n").split("\n")
    (job.path / "run.sh").write_text("\n".join(lines[:-1] + ["exec sleep 60"]) + "\n")  # the probe's line, replaced
    node = subprocess.Popen(["bash", str(job.path / "run.sh")], start_new_session=True)
    try:
        deadline = time.monotonic() + 300
        while not (job.env_dir / READY_MARKER).exists() or not env_cache._held(env_cache.lock_path(job.env_dir)):
            assert time.monotonic() < deadline and node.poll() is None, (job.path / "install.log").read_text()
            time.sleep(0.1)
        time.sleep(0.5)
        result = env_cache.prune(0, root=tmp_path / "envs")
        assert result["removed"] == [] and [e["key"] for e in result["skipped"]] == [job.env_dir.name]
        assert job.env_dir.exists()
    finally:
        os.killpg(node.pid, 9)
        node.wait()
    assert [e["key"] for e in env_cache.prune(0, root=tmp_path / "envs")["removed"]] == [job.env_dir.name]


def test_uv_cache_on_another_filesystem_is_said_by_envs_and_doctor(isolated):
    other = Path("/dev/shm")
    if not other.is_dir() or os.stat(other).st_dev == os.stat(isolated).st_dev:
        pytest.skip("no second filesystem (/dev/shm) here")
    cache = other / f"gpucompat-uv-{os.getpid()}"
    env = {"UV_CACHE_DIR": str(cache), "COLUMNS": "400"}
    data = json.loads(run_cli("envs", "--json", env=env, check=0).stdout)
    assert data["same_filesystem"] is False and data["uv_cache"] == str(cache)
    assert "different filesystems" in data["note"] and "copies every file" in data["note"]
    assert "different filesystems" in run_cli("envs", env=env, check=0).stdout
    doctor = run_cli("doctor", "--json", env=env, check=0)
    assert json.loads(doctor.stdout)["env_cache"]["same_filesystem"] is False
    assert "uv copies every file" in run_cli("doctor", env=env, check=0).stdout
    same = json.loads(run_cli("envs", "--json", env={"UV_CACHE_DIR": str(isolated / "uv")}, check=0).stdout)
    assert same["same_filesystem"] is True and same["note"] is None
