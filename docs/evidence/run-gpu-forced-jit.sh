#!/usr/bin/env bash
# Verdicts under an environment that changes kernel loading (issue 30, item 5): `check --env current` with
# CUDA_FORCE_PTX_JIT=1 for torch and CuPy, each beside the same operations in a plain program written apart
# from gpucompat, in the same job. Run from the repository root on the GPU machine (the workplace's device
# tool, no internet), with .whl/ (gpucompat's wheel and the dependencies the image lacks) carried.
# Output lands in $OUT/forced-jit/. Nothing changes the card's settings.
set -uo pipefail
export PYTHONUNBUFFERED=1 COLUMNS=160
PY=$(command -v python3)
"$PY" -m pip install --no-index --find-links .whl gpucompat > /tmp/pip-install.txt 2>&1 || { cat /tmp/pip-install.txt; exit 1; }
"$PY" -m pip install --no-index --find-links .whl --force-reinstall --no-deps gpucompat >> /tmp/pip-install.txt 2>&1
export PATH="$(dirname "$PY"):$PATH"
dir="$OUT/forced-jit"; mkdir -p "$dir"
export GPUCOMPAT_DB="sqlite:////tmp/forced-jit.db" GPUCOMPAT_CACHE=/tmp/forced-jit-cache
{
  nvidia-smi --query-gpu=name,driver_version,compute_cap --format=csv
  "$PY" -c "import torch, cupy; print('torch', torch.__version__, torch.cuda.get_arch_list(), '| cupy', cupy.__version__)"
  for framework in torch cupy; do
    echo; echo "== gpucompat check $framework --env current, with CUDA_FORCE_PTX_JIT=1"
    CUDA_FORCE_PTX_JIT=1 gpucompat check "$framework" --env current; echo "exit $?"
    echo; echo "== the same check without the variable"
    gpucompat check "$framework" --env current; echo "exit $?"
  done
  echo; echo "== plain programs, apart from gpucompat, with CUDA_FORCE_PTX_JIT=1"
  CUDA_FORCE_PTX_JIT=1 "$PY" -c "import torch; x = torch.randn(64, device='cuda'); print('torch sin:', float(torch.sin(x).sum()))" 2>&1 | tail -n 2
  CUDA_FORCE_PTX_JIT=1 "$PY" -c "import cupy; a = cupy.ones((64, 64), dtype=cupy.float32); print('cupy elementwise:', float((a * 2).sum())); print('cupy matmul (cuBLAS):', float((a @ a).sum()))" 2>&1 | tail -n 3
  echo; echo "== gpucompat inspect of the cuBLAS the CuPy check mapped (SASS and PTX it carries)"
  lib=$("$PY" -c "import glob, nvidia, os; print(sorted(glob.glob(os.path.join(list(nvidia.__path__)[0], '*', 'lib', 'libcublas.so.*')))[0])" 2>/dev/null)
  [ -n "$lib" ] && gpucompat inspect "$lib" --json | "$PY" -c "import json, sys; d = json.load(sys.stdin); print(json.dumps(d, indent=1)[:1500])"
} > "$dir/forced-jit.txt" 2>&1
gpucompat results --json --cells > "$dir/forced-jit-results.json" 2>&1
cat "$dir/forced-jit.txt"
