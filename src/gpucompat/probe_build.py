"""The probe as jobs run it: the package src/gpucompat/probe/ (standard library only) zipped with the
standard library's zipapp into one probe.pyz, built once per gpucompat version and digest of the
probe's sources into the cache directory, and copied from there into every job.

Inside the zip the package is named gpucompat_probe (no environment under test has one of that
name), and the zip's __main__.py calls its __main__.entry: `python probe.pyz ARGS` runs the probe,
`python probe.pyz ddp-worker ARGS` the DDP worker. Only the file's name carries the digest: the
zip's bytes (timestamps, member order) may differ between two builds of the same sources.

    python -m gpucompat.probe_build        builds it where needed and prints its path
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
import zipapp
from pathlib import Path

from . import __version__
from .paths import cache_dir

SOURCE = Path(__file__).resolve().parent / "probe"
PROBE_FILE = "probe.pyz"  # its name in every job directory
PACKAGE = "gpucompat_probe"
MAIN = (f"# probe.pyz (gpucompat.probe_build): the probe, or with `ddp-worker` first the DDP worker\n"
        f"from {PACKAGE}.__main__ import entry\n\nentry()\n")


def sources() -> list[Path]:
    """The probe's modules, in a stable order: every .py file of the package, nothing else."""
    return sorted(SOURCE.glob("*.py"))


def source_digest() -> str:
    digest = hashlib.sha256(MAIN.encode())
    for path in sources():
        digest.update(b"\0" + path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


def probe_pyz(cache: Path | None = None) -> Path:
    """The path of probe.pyz for this gpucompat and these sources, built into `cache` (default: the
    cache directory's probe/) the first time it is asked for; written to a temporary file and renamed,
    so a job never copies half of one and two gpucompat processes may build it at once."""
    target = (cache or cache_dir() / "probe") / f"probe-{__version__}-{source_digest()}.pyz"
    if target.is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="probe-build-", dir=target.parent) as work:
        staging = Path(work) / "root"
        (staging / PACKAGE).mkdir(parents=True)
        for path in sources():
            shutil.copyfile(path, staging / PACKAGE / path.name)
        (staging / "__main__.py").write_text(MAIN)
        built = Path(work) / "probe.pyz"
        zipapp.create_archive(staging, built, compressed=True)
        os.replace(built, target)
    return target


if __name__ == "__main__":
    print(probe_pyz())
