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
    from gpucompat.knowledge.signatures import could_not_ask

    assert could_not_ask(proc.stderr) == "offline-cache"


def test_a_node_without_any_conda_installer_is_untested_not_a_failed_install(channel, tmp_path):
    resolved = resolve_one(space.expand(spec(channel))[0], PLATFORM)
    lock = write(tmp_path / "lock.txt", conda.requirements_text(resolved))
    bin_dir = tmp_path / "bin"  # python3 without site-packages: no py-rattler, as on most cluster nodes
    bin_dir.mkdir()
    write(bin_dir / "python3", f'#!/bin/sh\nexec {shlex.quote(sys.executable)} -S "$@"\n').chmod(0o755)
    script = conda.install_script(resolved, str(tmp_path / "env"), str(lock), None, False, "uv", same_machine=False)
    proc = subprocess.run(["/bin/sh", "-c", script], capture_output=True, text=True, env={"PATH": f"{bin_dir}:/usr/bin:/bin"})
    assert proc.returncode == 1 and "no conda installer here" in proc.stderr
    from gpucompat.model import Observation

    outcome = analysis.classify(resolved, Observation(facts={}, install_failed=True, install_log=proc.stderr))
    assert (outcome.code, outcome.stage, outcome.cause) == ("UNTESTED", "install", "installer")


@pytest.mark.parametrize("log, cause", [
    # micromamba: github.com/mamba-org/mamba/issues/3536 and #3454
    ("critical libmamba Multiple errors occured: Download error (6) Couldn't resolve host name "
     "[https://conda.anaconda.org/conda-forge/noarch/repodata.json]", "network"),
    ("critical libmamba Download error (28) Timeout was reached [https://conda.anaconda.org/conda-forge/win-64/cmake-3.29.6-h400e5d1_0.conda]\n"
     "    Operation too slow. Less than 30 bytes/sec transferred the last 60 seconds", "network"),
    # conda: github.com/conda/conda/issues/9948
    ("CondaHTTPError: HTTP 000 CONNECTION FAILED for url <https://conda.anaconda.org/conda-forge/linux-64/repodata.json>\n"
     "Elapsed: -\n\nAn HTTP error occurred when trying to retrieve this URL.", "network"),
])
def test_conda_installers_network_failures_are_untested(log, cause):
    from gpucompat.model import Observation, ResolvedStack, Stack

    resolved = ResolvedStack(Stack("cupy", "13.3.0", "default", PY, "conda", ("cupy==13.3.0",), channels=("conda-forge",)), True)
    outcome = analysis.classify(resolved, Observation(facts={}, install_failed=True, install_log=log))
    assert (outcome.code, outcome.cause) == ("UNTESTED", cause)


def test_a_solve_that_runs_out_of_time_is_untested_and_our_own_bugs_surface(channel, isolated, monkeypatch):
    from datetime import timedelta

    stack = space.expand(spec(channel))[0]
    monkeypatch.setattr(conda, "SOLVE_TIMEOUT", timedelta(microseconds=1))
    slow = resolve_one(stack, PLATFORM)
    assert (slow.ok, slow.cause) == (False, "resolver") and "did not finish within" in slow.error
    assert analysis.classify(slow, None).code == "UNTESTED"  # running out of time proves nothing about the stack
    monkeypatch.undo()

    def broken(*args, **kwargs):
        raise TypeError("a bug of gpucompat's, not a channel that did not answer")

    monkeypatch.setattr(rattler, "solve", broken)
    with pytest.raises(TypeError, match="a bug of gpucompat's"):
        resolve_one(stack, PLATFORM)


def test_the_version_space_reads_the_platforms_subdir(channel, isolated):
    # the test channel's cuda-cudart is built for linux-64 only: an aarch64 plan has none
    assert conda.available_versions(spec(channel), platform="aarch64-manylinux_2_28") == []
    assert conda.available_versions(spec(channel), platform=PLATFORM) == ["12.4", "12.6"]


def test_py_rattler_downloads_under_a_name_of_its_own_in_a_shared_cache(channel, tmp_path):
    import functools
    import http.server
    import threading

    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(channel))
    handler.log_message = lambda *args: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        resolved = resolve_one(space.expand(spec(channel))[0], PLATFORM)
        served = replace(resolved, pins=tuple(p.replace(channel.as_uri(), f"http://127.0.0.1:{server.server_port}") for p in resolved.pins))
        lock = write(tmp_path / "lock.txt", conda.requirements_text(served))
        cache = tmp_path / "pkgs"
        for pin in served.pins:  # another job's download in progress, under the name every job used to share
            (cache / (pin.split("#")[0].rsplit("/", 1)[1] + ".part")).mkdir(parents=True)
        script = conda.install_script(served, str(tmp_path / "env"), str(lock), None, False, "uv", same_machine=True)
        proc = subprocess.run(["/bin/sh", "-c", script], capture_output=True, text=True, timeout=120,
                              env={"PATH": "/usr/bin:/bin", "CONDA_PKGS_DIRS": str(cache)})
    finally:
        server.shutdown()
    assert proc.returncode == 0, proc.stderr
    assert len(list((tmp_path / "env" / "conda-meta").glob("*.json"))) == 3
    downloaded = [p for p in cache.iterdir() if p.is_file()]
    assert len(downloaded) == 3 and all(p.stat().st_mode & 0o044 for p in downloaded)  # whole, and readable by the other users


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
    assert (cell["code"], cell["cause"], cell["stage"], cell["cuda_runtime"], cell["env"]) == ("UNTESTED", "no-gpu", "device", "12.6", "conda")
    assert "no kernel module, no libcuda.so.1" in cell["reason"]
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
    invalid, untested = md.split("## Invalid combinations")[1].split("## Could not test")
    assert "| 12.6 |" not in invalid and "| no-gpu |" in untested  # no GPU here: could not test, never invalid


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
    assert "--format 'yaml': write table, conda, or (with --pool) md or html." in bad.stderr
