"""env = "conda" for real: a local channel of real packages (tests/conda_channel.py), indexed,
solved and locked with py-rattler, installed from the lock, probed by a sweep of the local executor.

Public channels (conda-forge, anaconda) cannot be reached from where these tests were written, so
the channel is built here; no conda, mamba or micromamba binary is used (none is installed)."""

import hashlib
import json
import shlex
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from conftest import run_cli, write

from gpucompat import analysis, space
from gpucompat.envs import conda
from gpucompat.errors import UserError
from gpucompat.model import StackSpec
from gpucompat.plan import parse_plan
from gpucompat.resolve import resolve_one

rattler = pytest.importorskip("rattler", reason="py-rattler (the conda extra) is not installed")

PLATFORM = "x86_64-manylinux_2_28"
PY = f"{sys.version_info[0]}.{sys.version_info[1]}"


@pytest.fixture(scope="module")
def channel(tmp_path_factory):
    from conda_channel import build_channel

    try:
        return build_channel(tmp_path_factory.mktemp("conda") / "channel")
    except subprocess.CalledProcessError as exc:  # the libcudart wheel comes from PyPI
        pytest.skip(f"cannot download nvidia-cuda-runtime-cu12 from PyPI: {exc.stderr[-300:]}")


def md5(path: Path) -> str:
    return hashlib.md5(path.read_bytes()).hexdigest()


def spec(channel, versions="latest:1", variants=("cuda-version=12.6",)):
    return StackSpec("cuda-runtime", versions, tuple(variants), (PY,), "conda", (channel.as_uri(),))


def test_plan_keys_and_their_errors(channel):
    plan = parse_plan(f'[[stacks]]\nframework = "cupy"\nenv = "conda"\nversions = ["13.3.0"]\n'
                      f'variants = ["cuda-version=12.6", "cudatoolkit=11.8"]\nchannels = ["{channel.as_uri()}", "conda-forge"]\n')
    stack = plan.stacks[0]
    assert (stack.env, stack.variants, stack.channels) == ("conda", ("cuda-version=12.6", "cudatoolkit=11.8"), (channel.as_uri(), "conda-forge"))
    # exact versions never touch the channels; each becomes conda match specs
    stacks = space.expand(stack)
    assert [s.requirements for s in stacks] == [("cupy==13.3.0", "cuda-version=12.6", f"python={PY}"),
                                                 ("cupy==13.3.0", "cudatoolkit=11.8", f"python={PY}")]
    bad = {
        'variants = ["cu121"]': "variants of a conda stack are CUDA pins",
        'variants = ["cuda-version=12.6; rm -rf /"]': "variants of a conda stack are CUDA pins",
        'channels = []': "channels must be a non-empty list",
        'channels = ["conda forge"]': "is not a conda channel",
        'channels = ["file:///nonexistent/channel"]': "has no noarch/repodata.json here",
    }
    for line, message in bad.items():
        with pytest.raises(UserError, match=message):
            parse_plan(f'[[stacks]]\nframework = "cupy"\nenv = "conda"\nversions = ["13.3.0"]\n{line}\n')
    with pytest.raises(UserError, match="'channels' are for env"):
        parse_plan('[[stacks]]\nframework = "cupy"\nversions = ["13.3.0"]\nchannels = ["conda-forge"]\n')


def test_without_py_rattler_a_conda_stack_is_one_sentence(monkeypatch):
    monkeypatch.setitem(sys.modules, "rattler", None)  # as if it were not installed
    with pytest.raises(UserError, match=r"conda stacks are solved with py-rattler, which is not installed: pip install 'gpucompat\[conda\]'"):
        resolve_one(space.expand(StackSpec("cupy", ("13.3.0",), ("default",), (PY,), "conda", ("conda-forge",)))[0], PLATFORM)


def test_version_space_from_the_channels_repodata(channel, isolated):
    assert conda.available_versions(spec(channel)) == ["12.4", "12.6"]
    assert [s.version for s in space.expand(spec(channel, "latest:1"))] == ["12.6"]
    assert [s.version for s in space.expand(spec(channel, "latest:2"))] == ["12.4", "12.6"]
    assert [s.version for s in space.expand(spec(channel, ">=12.5"))] == ["12.6"]
    with pytest.raises(UserError, match="no cuda-cudart release in"):
        space.expand(spec(channel, ">=13"))


def test_solve_into_an_explicit_lock(channel, isolated):
    stack = space.expand(spec(channel))[0]
    resolved = resolve_one(stack, PLATFORM)
    assert resolved.ok and (resolved.cuda_runtime, resolved.cudnn) == ("12.6", None)
    files = [channel / "linux-64" / "cuda-cudart-12.6.77-h0_gpucompat_test.tar.bz2", channel / "noarch" / "cuda-version-12.6-h0.tar.bz2",
             channel / "linux-64" / f"python-{sys.version.split()[0]}-h0_gpucompat_test.tar.bz2"]
    assert resolved.pins == tuple(f"{f.as_uri()}#{md5(f)}" for f in files)
    assert conda.requirements_text(resolved) == "@EXPLICIT\n# platform: linux-64\n" + "".join(p + "\n" for p in resolved.pins)
    # the index answered, and there is no answer: ENV_UNRESOLVABLE with the solver's reason on one line
    impossible = resolve_one(replace(stack, requirements=("cuda-cudart=12.4", "cuda-version=12.6", f"python={PY}")), PLATFORM)
    assert not impossible.ok and impossible.cause is None
    outcome = analysis.classify(impossible, None)
    assert outcome.code == "ENV_UNRESOLVABLE" and "cuda-cudart 12.4.* cannot be installed" in outcome.summary
    assert "cuda-version >=12.4,<12.5.0a0" in outcome.summary and "\n" not in outcome.summary
    # a channel that does not answer, or no cached repodata offline: could not test, never a verdict
    refused = resolve_one(replace(stack, channels=("http://127.0.0.1:9/channel",)), PLATFORM)
    assert (refused.ok, refused.cause) == (False, "index") and "Connection refused" in refused.error
    offline = resolve_one(replace(stack, channels=("conda-forge",)), PLATFORM, offline=True)
    assert (offline.ok, offline.cause) == (False, "offline-cache")
    assert analysis.classify(offline, None).code == "UNTESTED"


def test_install_script_quotes_every_value_and_prefers_a_conda_binary(channel, tmp_path):
    resolved = resolve_one(space.expand(spec(channel))[0], PLATFORM)
    env_dir, lock = tmp_path / "env 'one'", tmp_path / "lock; touch pwned.txt"
    lock.write_text(conda.requirements_text(resolved))
    script = conda.install_script(resolved, str(env_dir), str(lock), None, True, "uv", same_machine=True)
    assert f"lock={shlex.quote(str(lock))}; prefix={shlex.quote(str(env_dir))}" in script
    # a micromamba on PATH is used, with the lock, the prefix and --offline (a stand-in that records its arguments)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    write(bin_dir / "micromamba", f'#!/bin/sh\nprintf "%s\\n" "$@" > {shlex.quote(str(tmp_path / "argv"))}\n').chmod(0o755)
    subprocess.run(["/bin/sh", "-c", script], cwd=tmp_path, check=True, env={"PATH": f"{bin_dir}:/usr/bin:/bin"})
    assert (tmp_path / "argv").read_text().splitlines() == ["create", "--yes", "--prefix", str(env_dir), "--file", str(lock), "--offline"]
    assert not (tmp_path / "pwned.txt").exists() and not env_dir.exists()
    # without one, py-rattler installs the lock: exactly the locked files
    subprocess.run(["/bin/sh", "-c", script], cwd=tmp_path, check=True, env={"PATH": "/usr/bin:/bin"})
    assert sorted(p.name for p in (env_dir / "conda-meta").glob("*.json")) == [
        "cuda-cudart-12.6.77-h0_gpucompat_test.json", "cuda-version-12.6-h0.json", f"python-{sys.version.split()[0]}-h0_gpucompat_test.json"]
    assert (env_dir / "bin" / "python").resolve() == Path(sys.executable).resolve()


def test_install_says_could_not_test_when_the_lock_needs_what_is_not_there(channel, tmp_path):
    resolved = resolve_one(space.expand(spec(channel))[0], PLATFORM)
    missing = replace(resolved, pins=("https://conda.anaconda.org/conda-forge/noarch/cuda-version-12.6-h0.tar.bz2#0", *resolved.pins[:1]))
    lock = write(tmp_path / "lock.txt", conda.requirements_text(missing))
    script = conda.install_script(missing, str(tmp_path / "env"), str(lock), None, True, "uv", same_machine=True)
    proc = subprocess.run(["/bin/sh", "-ex", "-c", script], check=False, capture_output=True, text=True, env={"PATH": "/usr/bin:/bin"})
    assert proc.returncode != 0 and "offline, and cuda-version-12.6-h0.tar.bz2 was not found in the cache" in proc.stderr
    from gpucompat.resolve import could_not_ask

    assert could_not_ask(proc.stderr) == "offline-cache"


@pytest.mark.integration
def test_a_conda_sweep_end_to_end(channel, isolated):
    plan = write(isolated / "conda.toml", f'''name = "conda-local"
[[stacks]]
framework = "cuda-runtime"
env = "conda"
versions = "latest:2"
variants = ["cuda-version=12.6"]
channels = ["{channel.as_uri()}"]
python = ["{PY}"]
''')
    run_cli("sweep", str(plan), check=0)
    data = json.loads(run_cli("results", "--format", "json", check=0).stdout)
    cells = {r["version"]: r for r in data["valid"] + data["invalid"] + data["untested"]}
    # 12.4 with cuda-version 12.6: the solver says no before any job
    assert (cells["12.4"]["code"], cells["12.4"]["stage"]) == ("ENV_UNRESOLVABLE", "resolve")
    assert "cuda-cudart 12.4.* cannot be installed" in cells["12.4"]["reason"]
    # 12.6: installed from the lock, libcudart loaded from the environment, then no driver on this machine
    cell = cells["12.6"]
    assert (cell["code"], cell["stage"], cell["cuda_runtime"], cell["env"]) == ("NO_DEVICE", "device", "12.6", "conda")
    assert "no NVIDIA driver" in cell["reason"]
    job = next(isolated.rglob(f"cell-{cell['cell']}"))  # beside the database
    result = json.loads((job / "result.json").read_text())
    library = Path(result["stages"]["import"]["facts"]["library"])
    env_dir = Path(json.loads((job / "job.json").read_text())["env_dir"])
    assert library == env_dir / "lib" / "libcudart.so.12" and (env_dir / "conda-meta").is_dir()
    from conda_channel import cudart_library

    assert library.read_bytes() == cudart_library("12.6.77")
    assert result["stages"]["import"]["facts"]["cuda_runtime"] == "12.6"
    # the job holds what was asked for and what was solved
    assert f'  - "{channel.as_uri()}"' in (job / "environment.yml").read_text()
    assert '  - "cuda-version=12.6"' in (job / "environment.yml").read_text()
    lock = (job / "conda-lock.txt").read_text().splitlines()
    assert lock[:2] == ["@EXPLICIT", "# platform: linux-64"] and len(lock) == 5
    # the seed's table: conda's CUDA axis under "CUDA Runtime Version", on a line of its own
    md = run_cli("results", "--format", "md", check=0).stdout
    assert "| Framework | Framework Version | Compute Capability | CUDA Runtime Version | Failure Reason |" in md
    assert "| cuda-runtime (conda) | - | - | 12.6 | NO_DEVICE (device) |" in md


def test_advise_writes_a_conda_environment_file(isolated):
    proc = run_cli("advise", "--framework", "cuda-runtime", "--cc", "8.0", "--driver", "550.54.15", "--python", "3.11",
                   "--format", "conda", check=0)
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("# gpucompat advise: cuda-runtime 12.") and "(predicted)" in lines[0]
    series = lines[0].split()[4]
    assert lines[2:] == [f'name: "cuda-runtime-{series}"', "channels:", '  - "conda-forge"', "dependencies:",
                         f'  - "cuda-cudart={series}"', f'  - "cuda-version={series}"', '  - "python=3.11"']
    assert conda.advised_pin("torch", "2.4.1", "cu118") == "cudatoolkit=11.8"
    assert conda.advised_pin("cupy", "13.3.0", "cuda12x") == "cuda-version=12"
    assert conda.advised_pin("cupy", "13.3.0", "cuda-version=12.6") == "cuda-version=12.6"
    bad = run_cli("advise", "--framework", "torch", "--cc", "8.0", "--driver", "550.54.15", "--format", "yaml", check=2)
    assert "--format 'yaml': write table or conda." in bad.stderr
