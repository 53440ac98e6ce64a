#!/usr/bin/env bash
# explain's three forms as cold processes (issue 25), on the lent GPU machine's CPU: the exact command run there
# (repository root, no internet, .whl/ carried along). Results land in $OUT.
set -uo pipefail
PY=$(command -v python3)
"$PY" -m pip install --no-index --find-links .whl gpucompat > /tmp/pip-install.txt 2>&1 || { cat /tmp/pip-install.txt; exit 1; }
"$PY" -m pip install --no-index --find-links .whl --force-reinstall --no-deps gpucompat >> /tmp/pip-install.txt 2>&1
{ nproc; uptime; } > "$OUT/machine.txt"
"$PY" benchmarks/answers_speed.py --runs 21 --json "$OUT/answers-speed.json" 2>&1 | tee "$OUT/answers-speed.txt"
