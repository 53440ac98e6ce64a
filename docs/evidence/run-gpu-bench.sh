#!/usr/bin/env bash
# The bench issue's GPU run: examples/plans/gpu-bench.toml with the bench rung, twice (the
# second sweep is diffed against the first: repeatability across sweeps), the report, and
# benchmarks/bench_rung.py (harness overhead, time per cell, repeatability). .whl/ holds
# gpucompat's wheel and its dependencies, .wheelhouse/ the CUDA 12.6 runtime and NVRTC
# wheels named in the plan. Results land in $OUT.
set -uo pipefail
export PYTHONUNBUFFERED=1 COLUMNS=200
PY=$(command -v python3)
"$PY" -m pip install --no-index --find-links .whl --force-reinstall --no-deps gpucompat > /tmp/pip-install.txt 2>&1  # a warm machine keeps an older build
"$PY" -m pip install --no-index --find-links .whl gpucompat >> /tmp/pip-install.txt 2>&1
export PATH="$(dirname "$PY"):$PATH" GPUCOMPAT_DB="sqlite:///$OUT/bench.db"
{ nvidia-smi; nvidia-smi --query-gpu=name,compute_cap,memory.total,driver_version,power.limit,clocks.max.sm --format=csv; } > /tmp/nvidia-smi.txt 2>&1

gpucompat sweep examples/plans/gpu-bench.toml --wheelhouse .wheelhouse > "$OUT/sweep-terminal.txt" 2>&1
echo "sweep exit: $?" >> "$OUT/sweep-terminal.txt"
gpucompat sweep examples/plans/gpu-bench.toml --wheelhouse .wheelhouse > /tmp/sweep-2.txt 2>&1
echo "second sweep exit: $?" >> /tmp/sweep-2.txt
gpucompat results --bench --sweep 1 > /tmp/bench-table.txt 2>&1
gpucompat results --bench --sweep 1 --format json > "$OUT/bench.json"
gpucompat results --bench --sweep 1 --format csv > /tmp/bench.csv
gpucompat diff 1 2 > /tmp/diff.txt 2>&1; echo "diff exit: $?" >> /tmp/diff.txt
gpucompat report --sweep 1 -o "$OUT/report.html" 2>&1
"$PY" benchmarks/bench_rung.py --python "$PY" --json "$OUT/bench-rung.json" > /tmp/bench-rung.txt 2>&1
tar -czf "$OUT/extra.tar.gz" -C /tmp nvidia-smi.txt pip-install.txt sweep-2.txt bench-table.txt bench.csv diff.txt bench-rung.txt
cat /tmp/bench-table.txt; cat /tmp/diff.txt | tail -25; cat /tmp/bench-rung.txt; tail -5 "$OUT/sweep-terminal.txt"
