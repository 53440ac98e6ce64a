"""Measure which SASS targets (sm_XY) each CUDA minor release can compile for, from NVIDIA's own binaries.

For every CUDA minor that has an NVIDIA nvcc wheel on PyPI (nvidia-cuda-nvcc-cu11 for 11.x,
nvidia-cuda-nvcc-cu12 for 12.x, nvidia-cuda-nvcc for 13.x on), the newest patch of that minor is
downloaded (`pip download --no-deps --only-binary=:all: --platform manylinux2014_x86_64
--python-version 3.11`), its `bin/ptxas` is run with `--help`, and the values `--gpu-name` allows
are read: the `sm_XY` ones, without the arch-/family-specific `a`/`f` suffixes, are the row. Where
the wheel also ships `bin/nvcc`, `nvcc --list-gpu-code` is run too and kept in the evidence.

Each ptxas is also asked which PTX ISA it implements (it refuses `.version 99.9` naming its own).

CUDA releases with no wheel (9.0-11.6) are derived from the oldest wheel's ptxas: a release gets the
sm_ targets that ptxas assembles a kernel for under that release's PTX ISA version (`.version 6.0`
for CUDA 9.0 ...; ptxas refuses a target its PTX ISA version does not support, e.g. "PTX .version 6.0
does not support .target sm_72"), the PTX ISA <-> CUDA pairs coming from NVIDIA's table
(tools/facts/ptx_isa_cuda.csv), plus the targets that ptxas no longer knows at all
(tools/facts/cuda_archs_documented.csv: sm_30/sm_32 up to 10.2).

Writes docs/evidence/cuda-archs/ptxas-targets.json (per wheel: file name, sha256, `ptxas --version`,
its PTX ISA, the allowed values, the sm_ list; per derived release: the probe results) and
tools/facts/cuda_archs.csv (cuda,sm,source), which tools/build_knowledge.py `cuda_archs()` copies
into src/gpucompat/knowledge/data/cuda_archs.csv.

    python tools/build_cuda_archs.py [--work /tmp/cuda-archs] [--keep]
    python tools/build_knowledge.py --skip-pypi   # then rebuild the packaged tables

The wheels stay in --work (outside git) and are deleted after reading unless --keep.
"""

from __future__ import annotations

import argparse
import csv
import datetime
import hashlib
import json
import re
import shutil
import stat
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EVIDENCE = ROOT / "docs" / "evidence" / "cuda-archs"
FACTS = ROOT / "tools" / "facts" / "cuda_archs.csv"
PTX_TABLE = ROOT / "tools" / "facts" / "ptx_isa_cuda.csv"
DOCUMENTED = ROOT / "tools" / "facts" / "cuda_archs_documented.csv"
PACKAGES = {"11": "nvidia-cuda-nvcc-cu11", "12": "nvidia-cuda-nvcc-cu12"}  # 13 and later: nvidia-cuda-nvcc
TARGET = ["--platform", "manylinux2014_x86_64", "--python-version", "3.11", "--only-binary=:all:"]


def _key(version: str) -> tuple:
    return tuple(int(p) for p in re.findall(r"\d+", version))


def versions(package: str) -> list[str]:
    """Every version of `package` with a Linux x86_64 wheel (`pip index versions`)."""
    out = subprocess.run([sys.executable, "-m", "pip", "index", "versions", package, *TARGET],
                         capture_output=True, text=True, check=True).stdout
    found = re.search(r"Available versions:\s*(.+)", out)
    return [v.strip() for v in found.group(1).split(",")] if found else []


def newest_per_minor() -> list[tuple[str, str]]:
    """(package, version): the newest patch of each CUDA minor, one package per major."""
    picks: dict[str, tuple[str, str]] = {}
    for package in ["nvidia-cuda-nvcc-cu11", "nvidia-cuda-nvcc-cu12", "nvidia-cuda-nvcc"]:
        for version in versions(package):
            major = version.split(".")[0]
            if PACKAGES.get(major, "nvidia-cuda-nvcc") != package or not re.fullmatch(r"\d+\.\d+\.\d+", version):
                continue  # only the package NVIDIA publishes that major under; no pre-releases
            minor = ".".join(version.split(".")[:2])
            if minor not in picks or _key(version) > _key(picks[minor][1]):
                picks[minor] = (package, version)
    return [picks[m] for m in sorted(picks, key=_key)]


def download(package: str, version: str, work: Path) -> Path:
    before = set(work.glob("*.whl"))
    wanted = f"{package.replace('-', '_')}-{version}-"
    have = [p for p in before if p.name.startswith(wanted)]
    if not have:
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", *TARGET, "-d", str(work),
                        f"{package}=={version}"], check=True, capture_output=True, text=True)
        have = [p for p in work.glob("*.whl") if p.name.startswith(wanted)]
    if len(have) != 1:
        raise SystemExit(f"expected one wheel for {package}=={version} in {work}, found {have}")
    return have[0]


def _extract(wheel: zipfile.ZipFile, name: str, into: Path) -> Path | None:
    member = next((m for m in wheel.namelist() if m.endswith(f"/bin/{name}")), None)
    if member is None:
        return None
    path = into / name
    path.write_bytes(wheel.read(member))
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def allowed_gpu_names(help_text: str) -> list[str]:
    """The values `ptxas --help` lists under --gpu-name."""
    block = help_text.split("--gpu-name", 1)[1]
    block = re.split(r"\n--[a-z]", block, maxsplit=1)[0]
    allowed = block.split("Allowed values for this option:", 1)[1].split("Default value", 1)[0]
    return re.findall(r"'([a-z]+_[0-9]+[a-z]?)'", allowed)


def plain_sm(names: list[str]) -> list[str]:
    """sm_XY targets without a/f suffixes, in numeric order."""
    return sorted({n for n in names if re.fullmatch(r"sm_\d+", n)}, key=lambda n: int(n[3:]))


def measure(package: str, version: str, work: Path) -> dict:
    wheel_path = download(package, version, work)
    digest = hashlib.sha256(wheel_path.read_bytes()).hexdigest()
    bin_dir = work / f"bin-{version}"
    bin_dir.mkdir(exist_ok=True)
    with zipfile.ZipFile(wheel_path) as wheel:
        ptxas = _extract(wheel, "ptxas", bin_dir)
        nvcc = _extract(wheel, "nvcc", bin_dir)
    if ptxas is None:
        raise SystemExit(f"{wheel_path.name} has no bin/ptxas")

    def run(*cmd: str) -> str:  # ptxas --help exits non-zero on some releases; its text is what is read
        return subprocess.run(cmd, capture_output=True, text=True, check=False).stdout

    ptxas_version = [line for line in run(str(ptxas), "--version").splitlines() if line.startswith(("Cuda", "Build"))]
    names = allowed_gpu_names(run(str(ptxas), "--help"))
    entry = {"package": package, "version": version, "wheel": wheel_path.name, "sha256": digest,
             "ptxas_version": ptxas_version, "ptxas_gpu_name_allowed": names, "sm": plain_sm(names)}
    if nvcc is not None:
        entry["nvcc_list_gpu_code"] = run(str(nvcc), "--list-gpu-code").split()
    refused = assemble(ptxas, "99.9", entry["sm"][-1], bin_dir)[1]
    found = re.search(r"current version is '([0-9.]+)'", refused)
    entry["ptx_isa"] = found.group(1) if found else None
    entry["_ptxas"] = ptxas  # kept until the derived rows are probed
    return entry


def assemble(ptxas: Path, ptx_version: str, target: str, work: Path) -> tuple[bool, str]:
    """Whether ptxas assembles an empty kernel written as PTX `.version ptx_version` for `target`."""
    source = work / "probe.ptx"
    source.write_text(f".version {ptx_version}\n.target {target}\n.address_size 64\n.visible .entry k() {{ ret; }}\n")
    done = subprocess.run([str(ptxas), f"-arch={target}", str(source), "-o", str(work / "probe.cubin")],
                          capture_output=True, text=True, check=False)
    return done.returncode == 0, (done.stdout + done.stderr).replace(str(source), source.name).strip()


def _csv(path: Path) -> list[dict]:
    with path.open(newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def derived(oldest: dict, work: Path) -> list[dict]:
    """Rows for the CUDA releases older than every wheel, probed with the oldest wheel's ptxas."""
    ptxas = oldest["_ptxas"]
    first = _key(".".join(oldest["version"].split(".")[:2]))
    rows = []
    for pair in _csv(PTX_TABLE):
        if _key(pair["cuda"]) >= first or _key(pair["cuda"]) < (9, 0):
            continue
        probes = {t: assemble(ptxas, pair["ptx_isa"], t, ptxas.parent) for t in oldest["sm"]}
        accepted = [t for t, (ok, _) in probes.items() if ok]
        extra = [r for r in _csv(DOCUMENTED) if _key(r["from_cuda"]) <= _key(pair["cuda"]) <= _key(r["to_cuda"])]
        sm = sorted(set(accepted) | {t for r in extra for t in r["sm"].split(";")}, key=lambda n: int(n[3:]))
        refusals = sorted({out.splitlines()[0] for ok, out in probes.values() if not ok and out})
        rows.append({"cuda": pair["cuda"], "sm": ";".join(sm), "ptx_isa": pair["ptx_isa"], "accepted": accepted,
                     "refusals": refusals, "extra": extra, "table_source": pair["source"]})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", default="/tmp/cuda-archs", help="where the wheels are downloaded (outside git)")
    parser.add_argument("--keep", action="store_true", help="keep the downloaded wheels")
    args = parser.parse_args()
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    today = datetime.date.today().isoformat()
    entries = []
    for package, version in newest_per_minor():
        entry = measure(package, version, work)
        entries.append(entry)
        print(f"{entry['wheel']}: PTX ISA {entry['ptx_isa']}: {' '.join(entry['sm'])}", flush=True)
        if not args.keep:
            (work / entry["wheel"]).unlink()
    older = derived(entries[0], work)
    table = {r["ptx_isa"]: r["cuda"] for r in _csv(PTX_TABLE)}
    for e in entries:
        e["ptx_isa_table_says"] = table.get(e["ptx_isa"] or "", "not in tools/facts/ptx_isa_cuda.csv")
        shutil.rmtree(e.pop("_ptxas").parent)
    for r in older:
        print(f"CUDA {r['cuda']} (PTX ISA {r['ptx_isa']}, derived): {r['sm'].replace(';', ' ')}", flush=True)
    EVIDENCE.mkdir(parents=True, exist_ok=True)
    evidence = {"measured": today, "wheels": entries,
                "derived": [{k: v for k, v in r.items() if k != "table_source"} | {"probed_with": entries[0]["wheel"]} for r in older]}
    (EVIDENCE / "ptxas-targets.json").write_text(json.dumps(evidence, indent=1) + "\n")
    oldest = entries[0]
    rows = []
    for r in older:
        extra = "".join(f" ; {';'.join(x['sm'])} from tools/facts/cuda_archs_documented.csv: {x['source']}" for x in r["extra"])
        rows.append({"cuda": r["cuda"], "sm": r["sm"], "source": (
            f"no NVIDIA nvcc wheel for {r['cuda']}: the sm_ targets that bin/ptxas of NVIDIA's wheel {oldest['wheel']} "
            f"(sha256 {oldest['sha256']}) assembles a kernel for as PTX `.version {r['ptx_isa']}` (it refuses a target that "
            f"PTX ISA version does not support), run {today} (tools/build_cuda_archs.py, docs/evidence/cuda-archs/ptxas-targets.json); "
            f"PTX ISA {r['ptx_isa']} = CUDA {r['cuda']} per {r['table_source']}{extra}")})
    for e in entries:
        release = e["ptxas_version"][0].split("release ", 1)[1].split(",")[0] if e["ptxas_version"] else "?"
        minor = ".".join(e["version"].split(".")[:2])
        if release != minor:
            raise SystemExit(f"{e['wheel']}: ptxas says release {release}, not {minor}")
        nvcc = e.get("nvcc_list_gpu_code")
        nvcc_sm = nvcc is not None and plain_sm([n for n in nvcc if n.startswith("sm_")])
        said = "" if nvcc is None else " ; `nvcc --list-gpu-code` of the same wheel " + (
            "gives the same sm_ list" if nvcc_sm == e["sm"] else f"differs: {' '.join(nvcc)}")
        rows.append({"cuda": minor, "sm": ";".join(e["sm"]), "source": (
            f"`ptxas --help` (values --gpu-name allows; sm_ targets without a/f suffixes) of bin/ptxas in NVIDIA's wheel "
            f"{e['wheel']} from PyPI (sha256 {e['sha256']}), run {today} (`ptxas --version`: {', '.join(e['ptxas_version'][:1])}; "
            f"tools/build_cuda_archs.py, docs/evidence/cuda-archs/ptxas-targets.json){said}")})
    with FACTS.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=["cuda", "sm", "source"], lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
    print(f"{FACTS.relative_to(ROOT)}: {len(rows)} rows")


if __name__ == "__main__":
    main()
