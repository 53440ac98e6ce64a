"""Build src/gpucompat/knowledge/data/gpu_peaks.csv from tools/facts/gpu_peaks.csv, and check the rows
that NVIDIA's own system specs give against those specs.

gpu_peaks.csv holds datasheet peaks: dense TFLOP/s per data type and memory bandwidth in GB/s, one row per
GPU name, each with its source. The packaged table is a byte copy of the fact file (tests/test_gpu_peaks.py
checks that). Where NVIDIA publishes a figure in a repository of its own, the row cites it, and this tool
compares: NVIDIA's ai-dynamo/aiconfigurator keeps a system spec per GPU (aic-core/src/aiconfigurator_core/
systems/<gpu>.yaml: bfloat16_tc_flops, fp8_tc_flops, mem_bw, in FLOP/s and byte/s, dense), so a row's bf16,
fp8 and memory_gbs must agree with its YAML (TFLOP/s to within 1, which is the YAML rounding the datasheet's
halved sparse figure, e.g. 1978 for 3958*/2 = 1979; GB/s exactly). Figures no NVIDIA file read gives say
"unverified" in the row's source.

    python tools/build_gpu_peaks.py                                    # copy the facts into the package
    python tools/build_gpu_peaks.py --aiconfigurator /path/to/aiconfigurator.git \\
        [--commit 095f58a51c4ca8e61b66ec108d86f223f8d559ce]           # and check the rows against NVIDIA's YAMLs

--aiconfigurator is a clone (or bare mirror) of https://github.com/ai-dynamo/aiconfigurator; files are read
with `git show COMMIT:PATH`, so no checkout is needed. Exit status 1 when a row and its YAML disagree.
"""

from __future__ import annotations

import argparse
import csv
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FACTS = ROOT / "tools" / "facts" / "gpu_peaks.csv"
DATA = ROOT / "src" / "gpucompat" / "knowledge" / "data" / "gpu_peaks.csv"
SYSTEMS = "aic-core/src/aiconfigurator_core/systems"
COMMIT = "095f58a51c4ca8e61b66ec108d86f223f8d559ce"  # the commit the rows cite
# gpu_peaks row -> aiconfigurator system spec (one GPU of that system)
YAML = {
    "NVIDIA H100 80GB HBM3": "h100_sxm.yaml",
    "NVIDIA H100 PCIe": "h100_pcie.yaml",
    "NVIDIA H200": "h200_sxm.yaml",
    "NVIDIA A100-SXM4-80GB": "a100_sxm.yaml",
    "NVIDIA A100 80GB PCIe": "a100_pcie.yaml",
    "NVIDIA A30": "a30.yaml",
    "NVIDIA L40S": "l40s.yaml",
    "NVIDIA L4": "l4.yaml",
    "NVIDIA B200": "b200_sxm.yaml",
    "NVIDIA GB200": "gb200.yaml",
}
_KEY = re.compile(r"^\s*(bfloat16_tc_flops|fp8_tc_flops|mem_bw):\s*([0-9.eE+]+)", re.MULTILINE)


def spec(repo: Path, commit: str, name: str) -> dict[str, float]:
    """{'bf16': TFLOP/s, 'fp8': TFLOP/s, 'memory_gbs': GB/s} from one system YAML (absent keys left out)."""
    text = subprocess.run(["git", "-C", str(repo), "show", f"{commit}:{SYSTEMS}/{name}"],
                          check=True, capture_output=True, text=True).stdout
    values = {key: float(value) for key, value in _KEY.findall(text)}
    out = {}
    if "bfloat16_tc_flops" in values:
        out["bf16"] = values["bfloat16_tc_flops"] / 1e12
    if "fp8_tc_flops" in values:
        out["fp8"] = values["fp8_tc_flops"] / 1e12
    if "mem_bw" in values:
        out["memory_gbs"] = values["mem_bw"] / 1e9
    return out


def check(rows: list[dict], repo: Path, commit: str) -> list[str]:
    """One line per disagreement between a row and its NVIDIA system spec."""
    problems = []
    by_name = {row["gpu"]: row for row in rows}
    for gpu, name in YAML.items():
        row = by_name.get(gpu)
        if row is None:
            problems.append(f"{gpu}: no row in {FACTS.name}")
            continue
        for column, value in spec(repo, commit, name).items():
            mine = float(row[column]) if row[column].strip() else None
            tolerance = 0.0 if column == "memory_gbs" else 1.0
            if mine is None or abs(mine - value) > tolerance:
                problems.append(f"{gpu}: {column} {row[column] or '-'} but {name} gives {value:g}")
        print(f"{gpu}: checked against {name} @{commit[:8]}")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--aiconfigurator", type=Path, help="a clone or bare mirror of ai-dynamo/aiconfigurator")
    parser.add_argument("--commit", default=COMMIT)
    args = parser.parse_args(argv)
    with FACTS.open(newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    if args.aiconfigurator:
        problems = check(rows, args.aiconfigurator, args.commit)
        if problems:
            print("\n".join(problems), file=sys.stderr)
            return 1
    shutil.copyfile(FACTS, DATA)
    print(f"wrote {DATA.relative_to(ROOT)} ({len(rows)} rows)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
