#!/usr/bin/env bash
# The sharing/scaling issue's GPU run (a machine with 4 H200 GPUs): examples/plans/gpu-share-scale.toml
# with the bench rung (time-slicing in 1, 2 and 4 processes; torchrun over 1, 2 and 4 GPUs), its
# results, report and Prometheus text file. .whl/ holds gpucompat's wheel and its dependencies.
set -uo pipefail
export PYTHONUNBUFFERED=1 COLUMNS=200
PY=$(command -v python3)
"$PY" -m pip install --no-index --find-links .whl --force-reinstall --no-deps gpucompat > /tmp/pip-install.txt 2>&1  # a warm machine keeps an older build
"$PY" -m pip install --no-index --find-links .whl gpucompat >> /tmp/pip-install.txt 2>&1
export PATH="$(dirname "$PY"):$PATH" GPUCOMPAT_DB="sqlite:///$OUT/share-scale.db"
{ nvidia-smi; nvidia-smi topo -m; } > /tmp/nvidia-smi.txt 2>&1
ls /tmp/nvidia-mps 2>/dev/null > /tmp/mps.txt; echo "mps pipe dir listing exit: $?" >> /tmp/mps.txt
gpucompat sweep examples/plans/gpu-share-scale.toml > "$OUT/sweep-terminal.txt" 2>&1
echo "sweep exit: $?" >> "$OUT/sweep-terminal.txt"
gpucompat results --bench > /tmp/bench-table.txt 2>&1
gpucompat results --bench --format json > "$OUT/bench.json"
gpucompat results --format prometheus > "$OUT/gpucompat.prom" 2> /tmp/prom.err
gpucompat report -o "$OUT/report.html" 2>&1
"$PY" benchmarks/bench_rung.py --python "$PY" --json "$OUT/bench-rung.json" > /tmp/bench-rung.txt 2>&1
tar -czf "$OUT/extra.tar.gz" -C /tmp nvidia-smi.txt mps.txt pip-install.txt bench-table.txt prom.err bench-rung.txt
cat /tmp/bench-table.txt | tail -60; cat /tmp/bench-rung.txt; tail -8 "$OUT/sweep-terminal.txt"
