"""Any bytes in the environment (issue 41 item 7): every subprocess's output is decoded with replacement.

The dynamic loader writes LD_PRELOAD's value into the stderr of every process it cannot preload into, so a byte that is
not UTF-8 there reached `uv cache dir`'s stderr, which the environment-cache check decoded strictly: `doctor` ended in
an internal error. The real CLI, with the real environment as bytes (os.environb).
"""

from __future__ import annotations

import os
import subprocess
import sys


def test_doctor_with_a_byte_that_is_not_utf8_in_ld_preload_reports_and_exits_0(tmp_path):
    env = {**os.environb, b"LD_PRELOAD": b"/nowhere/pre\xffload.so", b"XDG_CONFIG_HOME": os.fsencode(tmp_path / "config"),
           b"GPUCOMPAT_CACHE": os.fsencode(tmp_path / "cache")}
    proc = subprocess.run([sys.executable, "-m", "gpucompat", "doctor"], capture_output=True, env=env, timeout=300)
    stderr = proc.stderr.decode("utf-8", "replace")
    assert b"\xff" in proc.stderr  # the loader did write the byte: the attack reached the subprocesses
    assert "internal error" not in stderr and "Traceback" not in stderr and "UnicodeDecodeError" not in stderr, stderr[-2000:]
    assert proc.returncode == 0, stderr[-2000:]
    assert b"environment cache" in proc.stdout


def test_no_subprocess_output_is_decoded_strictly():
    """text=True decodes with the locale's codec, strictly: every subprocess in gpucompat names utf-8 and errors="replace"."""
    from pathlib import Path

    import gpucompat

    strict = []
    for path in Path(gpucompat.__file__).parent.rglob("*.py"):
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            if "text=True" in line or "universal_newlines=True" in line or "stdout.decode()" in line or "stderr.decode()" in line:
                strict.append(f"{path.name}:{number}")
    assert strict == []
