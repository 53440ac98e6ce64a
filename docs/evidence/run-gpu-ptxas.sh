#!/usr/bin/env bash
# Issue 35 on the GPU machine (the workplace's device tool, repository root, no internet): JAX on a GPU its ptxas
# does not know (CUDA 11.7's ptxas has no sm_90) against the knowledge's rule, and gpucompat's own check in the
# same shells. .whl/ holds gpucompat's wheel and its dependencies; .whl/extra/ the nvidia-cuda-nvcc-cu11 11.7.99
# wheel from PyPI. Output lands in $OUT. Nothing changes the card's settings.
set -uo pipefail
export PYTHONUNBUFFERED=1 COLUMNS=160
PY=$(command -v python3)
"$PY" -m pip install --no-index --find-links .whl gpucompat > /tmp/pip-install.txt 2>&1 || { cat /tmp/pip-install.txt; exit 1; }
"$PY" -m pip install --no-index --find-links .whl --force-reinstall --no-deps gpucompat >> /tmp/pip-install.txt 2>&1
export PATH="$(dirname "$PY"):$PATH" GPUCOMPAT_DB="sqlite:////tmp/ptxas.db" GPUCOMPAT_CACHE=/tmp/ptxas-cache
mkdir -p /tmp/cuda117 && (cd /tmp/cuda117 && "$PY" -m zipfile -e "$OLDPWD"/.whl/extra/nvidia_cuda_nvcc_cu11-11.7.99-*.whl .)
OLD=/tmp/cuda117/nvidia/cuda_nvcc
chmod +x "$OLD"/bin/*
{
  nvidia-smi --query-gpu=name,driver_version,compute_cap --format=csv
  "$PY" -c "import jax, jaxlib; print('jax', jax.__version__, 'jaxlib', jaxlib.__version__)"
  "$PY" -m pip list 2>/dev/null | grep -iE "^(jax|nvidia-cuda-nvcc|nvidia-cuda-nvrtc)"
  find / -name ptxas -type f 2>/dev/null | head; for p in $(find / -name ptxas -type f 2>/dev/null | head -5); do echo "$p: $("$p" --version | tail -1)"; done
  echo "== ptxas 11.7's targets"; "$OLD/bin/ptxas" --help | grep -o "sm_[0-9]*a\?" | sort -u | tr '\n' ' '; echo
} > "$OUT/machine.txt" 2>&1
"$PY" docs/evidence/jax_old_ptxas.py "$OLD" > "$OUT/jax-old-ptxas.jsonl" 2>&1
{
  echo "== gpucompat explain, the rules' answer for this card"
  gpucompat explain "jax[cuda13]==$("$PY" -c 'import jax; print(jax.__version__)')" --gpu "NVIDIA H100 80GB HBM3" --driver "$(nvidia-smi --query-gpu=driver_version --format=csv,noheader | head -1)"
  echo; echo "== gpucompat check jax --env current, as installed"
  gpucompat check jax --env current; echo "exit $?"
  echo; echo "== gpucompat check jax --env current, XLA_FLAGS at CUDA 11.7"
  XLA_FLAGS="--xla_gpu_cuda_data_dir=$OLD" gpucompat check jax --env current; echo "exit $?"
  XLA_FLAGS="--xla_gpu_cuda_data_dir=$OLD" gpucompat check jax --env current --json > "$OUT/check-old-ptxas.json" 2>/dev/null
} > "$OUT/gpucompat.txt" 2>&1
cat "$OUT/jax-old-ptxas.jsonl" | cut -c1-600; tail -25 "$OUT/gpucompat.txt"
