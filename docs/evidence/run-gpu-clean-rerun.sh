#!/usr/bin/env bash
# Issue 39 on the GPU machine (the workplace's device tool, repository root, no internet): environment faults no rule
# names, judged by the probe's clean re-run (clean_rerun_matrix.py), and the sweep behind the site pictures: this
# machine's GPU plus a declared class no node has (NVIDIA L40S), run in a shell whose XLA_FLAGS breaks JAX.
# .whl/ holds gpucompat's wheel (built from the commit named in the README) and the dependencies the image lacks.
# Output lands in $OUT. Nothing changes the card's settings.
set -uo pipefail
export PYTHONUNBUFFERED=1 COLUMNS=160
PY=$(command -v python3)
"$PY" -m pip install --no-index --find-links .whl gpucompat > /tmp/pip-install.txt 2>&1 || { cat /tmp/pip-install.txt; exit 1; }
export PATH="$(dirname "$PY"):$PATH" GPUCOMPAT_DB="sqlite:////tmp/clean-rerun.db" GPUCOMPAT_CACHE=/tmp/clean-rerun-cache
{
  nvidia-smi --query-gpu=name,driver_version,compute_cap --format=csv
  head -1 /proc/driver/nvidia/version
  "$PY" -c "import torch, jax, cupy; print('torch', torch.__version__, '| jax', jax.__version__, '| cupy', cupy.__version__)" 2>&1 | tail -1
  gpucompat --version
} > "$OUT/machine.txt" 2>&1
timeout 400 "$PY" docs/evidence/clean_rerun_matrix.py "$OUT/clean-rerun.json" 2> "$OUT/clean-rerun.txt"
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
driver=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader | head -1)
sed -e "s/@GPU@/$gpu/" -e "s/@DRIVER@/$driver/" docs/evidence/site-plan-clean-rerun.toml > /tmp/site-plan.toml
cp /tmp/site-plan.toml "$OUT/site-plan.toml"
export GPUCOMPAT_DB="sqlite:///$OUT/site.db"
XLA_FLAGS=--xla_gpu_no_such_flag=true timeout 150 gpucompat sweep /tmp/site-plan.toml > "$OUT/site-sweep.txt" 2>&1; echo "sweep exit $?" >> "$OUT/site-sweep.txt"
gpucompat results --format json > "$OUT/site-results.json" 2>> "$OUT/site-sweep.txt"
tail -8 "$OUT/clean-rerun.txt"; tail -12 "$OUT/site-sweep.txt"
