#!/usr/bin/env bash
# The exact command behind docs/performance.md's bench-rung and check-latency figures (issue 23), run on
# the workplace's GPU machine from the repository root with .whl/ carried (gpucompat's wheel and the
# dependencies the image lacks: sqlalchemy, greenlet, typer<0.29, uv). Results land in $OUT.
set -uo pipefail
export PYTHONUNBUFFERED=1 COLUMNS=160
PY=$(command -v python3)
"$PY" -m pip install --no-index --find-links .whl gpucompat > /tmp/pip-install.txt 2>&1
"$PY" -m pip install --no-index --find-links .whl --force-reinstall --no-deps gpucompat >> /tmp/pip-install.txt 2>&1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw,power.limit,temperature.gpu --format=csv | tee "$OUT/gpu.txt"
"$PY" benchmarks/bench_rung.py --pairs "${PAIRS:-3}" --json "$OUT/bench-rung.json" 2>&1 | tee "$OUT/bench-rung.txt"
"$PY" benchmarks/check_latency.py --runs "${RUNS:-3}" --json "$OUT/check-latency.json" 2>&1 | tee "$OUT/check-latency.txt"
