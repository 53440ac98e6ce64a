""""Could not test" against "broken", told apart by a real uv: the index answered no (ENV_UNRESOLVABLE),
or uv could not ask (UNTESTED with a cause). Each case runs uv 0.13's real resolver; PyPI is reachable
here and in CI, nothing else on the internet is."""

from __future__ import annotations

import json
import socket
import subprocess
import sys

import pytest

from gpucompat.analysis import classify
from gpucompat.model import Stack
from gpucompat.envs.uv import uv_bin
from gpucompat.resolve import resolve_one

from conftest import run_cli

PLATFORM = "x86_64-manylinux_2_28"


def runtime_stack(series: str = "12.4", index_url: str | None = None, python: str = "3.11") -> Stack:
    return Stack("cuda-runtime", series, "default", python, "uv", (f"nvidia-cuda-runtime-cu12=={series}.*",), index_url)


def closed_port() -> int:
    """A local port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_pypi_answers_no_such_version_is_a_real_failure(isolated):
    resolved = resolve_one(runtime_stack("12.99"), PLATFORM)
    assert not resolved.ok and resolved.cause is None
    outcome = classify(resolved, None)
    assert outcome.code == "ENV_UNRESOLVABLE" and "12.99" in outcome.summary


def test_pypi_answers_no_wheel_for_this_python_is_a_real_failure(isolated):
    resolved = resolve_one(Stack("torch", "2.4.1", "default", "3.13", "uv", ("torch==2.4.1",)), PLATFORM)
    assert not resolved.ok and resolved.cause is None
    assert "cp313" in resolved.error


def test_index_on_a_closed_port_is_untested_index(isolated, monkeypatch):
    monkeypatch.setenv("UV_HTTP_RETRIES", "0")
    resolved = resolve_one(runtime_stack(index_url=f"http://127.0.0.1:{closed_port()}/simple"), PLATFORM)
    assert not resolved.ok and resolved.cause == "index"
    outcome = classify(resolved, None)
    assert outcome.code == "UNTESTED" and outcome.cause == "index" and outcome.evidence["cause"] == "index"
    assert "Connection refused" in outcome.evidence["resolver"]


def test_unknown_host_is_untested_network(isolated, monkeypatch):
    monkeypatch.setenv("UV_HTTP_RETRIES", "0")
    resolved = resolve_one(runtime_stack(index_url="http://no-such-host.invalid/simple"), PLATFORM)
    assert not resolved.ok and resolved.cause == "network"


def test_empty_find_links_is_untested_wheelhouse(isolated):
    wheelhouse = isolated / "empty-wheelhouse"
    wheelhouse.mkdir()
    resolved = resolve_one(runtime_stack(), PLATFORM, wheelhouse=str(wheelhouse))
    assert not resolved.ok and resolved.cause == "wheelhouse"
    assert classify(resolved, None).code == "UNTESTED"


def test_offline_with_a_cold_cache_is_untested_offline_cache(isolated, monkeypatch):
    monkeypatch.setenv("UV_CACHE_DIR", str(isolated / "cold-uv-cache"))
    resolved = resolve_one(runtime_stack(), PLATFORM, offline=True)
    assert not resolved.ok and resolved.cause == "offline-cache"


def test_untested_cells_exit_4_and_resume_retries_exactly_them(isolated):
    """A wheelhouse without the wheels: UNTESTED, exit 4, in its own list; once the wheels are there,
    --resume resolves and runs those cells again and they get a real verdict."""
    wheelhouse = isolated / "wheelhouse"
    wheelhouse.mkdir()
    plan = isolated / "plan.toml"
    plan.write_text('name = "retry"\n[[stacks]]\nframework = "cuda-runtime"\nversions = ["12.4"]\npython = ["3.11"]\n')
    first = run_cli("sweep", str(plan), "--wheelhouse", str(wheelhouse), "--json", check=4)
    report = json.loads(first.stdout)
    assert report["counts"] == {"surprises": 0, "valid": 0, "invalid": 0, "untested": 1, "pending": 0}
    assert report["untested"][0]["cause"] == "wheelhouse"
    table = run_cli("results", "--cells", check=0).stdout
    assert "Could not test (1)" in table and "wheelhouse" in table and "could not be tested" in table
    assert "0 invalid" in table
    sweep_id = report["sweep"]["id"]
    run_cli("report", "-o", str(isolated / "report.html"), check=0)
    html = (isolated / "report.html").read_text()
    assert '<table id="untested">' in html and "Could not test (1)" in html and "<b>0</b> invalid" in html
    assert run_cli("results", "--format", "csv", check=0).stdout.splitlines()[1].count(",UNTESTED,wheelhouse,resolve,") == 1

    subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:", "-d", str(wheelhouse),
                    "nvidia-cuda-runtime-cu12==12.4.127", "nvidia-cuda-nvrtc-cu12==12.4.127"], check=True, capture_output=True)
    again = json.loads(run_cli("sweep", "--resume", str(sweep_id), "--json", check=0).stdout)
    # installed and probed now: this machine has no driver, so still no verdict, for that reason instead
    assert [r["cause"] for r in again["untested"]] == ["no-gpu"] and again["invalid"] == []
    assert again["untested"][0]["cell"] == report["untested"][0]["cell"]  # the same cell, not a new one


def test_a_python_uv_cannot_download_is_untested_python_download(isolated):
    """3.15: no machine here has it, and uv cannot download it (GitHub is not reachable from here or CI)."""
    import os

    found = subprocess.run([uv_bin(), "python", "find", "3.15"], capture_output=True, text=True,
                           env={**os.environ, "UV_PYTHON_DOWNLOADS": "never"})
    if found.returncode == 0:
        pytest.skip(f"this machine has a Python 3.15 ({found.stdout.strip()}), so uv needs no download")
    result = json.loads(run_cli("check", "cuda-runtime==12.4", "--python", "3.15", "--json", check=4).stdout)
    cell = result["untested"][0]
    assert cell["stage"] == "install" and cell["cause"] == "python-download"
