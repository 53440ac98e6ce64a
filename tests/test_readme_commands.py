"""The README's two opening commands, as a newcomer runs them: in a new venv with nothing but Python (no torch,
no numpy, nothing of this machine's site-packages), the install-and-sweep command ends 0 with the verdicts the
README promises; the test command is the one .ci/run runs."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest
from conftest import REPO

pytestmark = pytest.mark.integration


def readme_commands() -> list[str]:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    block = re.search(r"```bash\n(.*?)```", text, re.S).group(1)
    return [line.split("  #")[0].strip() for line in block.splitlines() if line.strip()]


def test_the_readme_opens_with_the_two_commands_ci_runs():
    install_and_sweep, tests = readme_commands()
    assert install_and_sweep == "pip install . && gpucompat sweep examples/plans/quick.toml"
    assert tests == "pip install '.[test]' && python -m pytest -q"
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    # the newcomer's venv first, then this machine's interpreter: the same two steps each time
    assert ci.count("python -m pip install --quiet '.[test]'") == 2 and ci.count("\n  python -m pytest -q\n") == 1
    assert ci.rstrip().endswith("python -m pytest -q")


def test_the_first_command_in_a_new_venv_without_any_framework(tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    bin_dir = venv / "bin"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    env.update(PATH=f"{bin_dir}{os.pathsep}{env.get('PATH', '')}", VIRTUAL_ENV=str(venv),
               GPUCOMPAT_DB=f"sqlite:///{tmp_path / 'gpucompat.db'}", GPUCOMPAT_CACHE=str(tmp_path / "cache"),
               XDG_DATA_HOME=str(tmp_path / "data"), GPUCOMPAT_KNOWLEDGE=str(tmp_path / "knowledge"))
    install_and_sweep, _ = readme_commands()
    proc = subprocess.run(["bash", "-c", install_and_sweep.replace("pip install .", "pip install --quiet .")], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert subprocess.run([str(bin_dir / "python"), "-c", "import torch"], capture_output=True).returncode != 0  # nothing to hide behind
    data = json.loads(subprocess.run([str(bin_dir / "gpucompat"), "results", "--json", "--cells"], env=env, capture_output=True,
                                     text=True, check=True).stdout)
    # no GPU here: the runtimes could not be tested (never invalid); the only invalid cell is the impossible cp313 torch
    assert [(r["framework"], r["code"]) for r in data["invalid"]] == [("torch", "ENV_UNRESOLVABLE")]
    assert sorted((r["framework"], r["cause"]) for r in data["untested"]) == [("cuda-runtime", "no-gpu")] * 3 + [("torch", "not-installed")]
    assert data["valid"] == []
    assert "Invalid combinations (1)" in proc.stdout and "Could not test (4)" in proc.stdout and "not installed here" in proc.stdout
