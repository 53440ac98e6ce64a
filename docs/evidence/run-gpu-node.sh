#!/usr/bin/env bash
# The exact command run on the GPU machine (the workplace's device tool, repository root,
# no internet). .whl/ holds gpucompat's wheel and its dependencies; .wheelhouse/ the
# nvidia-cuda-runtime wheels named in examples/plans/gpu-node.toml. Results land in $OUT.
set -uo pipefail
export PYTHONUNBUFFERED=1 COLUMNS=200
# Into the interpreter that holds PyTorch, JAX and CuPy (a venv of its own at /opt/torch/.venv),
# as a user would: pip adds only what is missing there.
PY=$(command -v python3)
"$PY" -m pip install --no-index --find-links .whl gpucompat > /tmp/pip-install.txt 2>&1
export PATH="$(dirname "$PY"):$PATH" GPUCOMPAT_DB="sqlite:///$OUT/gpu-node.db"
{ nvidia-smi; nvidia-smi --query-gpu=index,uuid,name,compute_cap,memory.total,driver_version --format=csv,noheader,nounits; } > /tmp/nvidia-smi.txt 2>&1

gpucompat sweep examples/plans/gpu-node.toml --wheelhouse .wheelhouse > "$OUT/sweep-terminal.txt" 2>&1
echo "sweep exit: $?" >> "$OUT/sweep-terminal.txt"
gpucompat results --format json > "$OUT/gpu-node.json"
gpucompat results --format csv > "$OUT/gpu-node.csv"
gpucompat results --format md > "$OUT/gpu-node.md"

gpucompat check torch --env current --json > /tmp/check-torch-current.json 2>/tmp/check-torch-current.err
echo "check exit: $?" >> /tmp/check-torch-current.err

# for the knowledge issue: the installed torch's own arch list and cuobjdump's view of its kernels
{
  "$PY" -c "import torch; print(torch.__version__, torch.version.cuda); print(torch.cuda.get_arch_list())"
  lib=$("$PY" -c "import torch, os; print(os.path.join(os.path.dirname(torch.__file__), 'lib', 'libtorch_cuda.so'))")
  ls -la "$lib"
  echo "== cuobjdump --list-elf (unique arch)"; cuobjdump --list-elf "$lib" 2>&1 | grep -o 'sm_[0-9]*[a-z]*' | sort | uniq -c
  echo "== cuobjdump --list-ptx (unique arch)"; cuobjdump --list-ptx "$lib" 2>&1 | grep -o 'sm_[0-9]*[a-z]*' | sort | uniq -c
} > /tmp/torch-arch.txt 2>&1

GPUCOMPAT_DB= "$PY" benchmarks/check_latency.py --runs 5 --wheelhouse .wheelhouse --json "$OUT/check-latency.json" > /tmp/check-latency.txt 2>&1
cat /tmp/check-latency.txt
tar -czf "$OUT/extra.tar.gz" -C /tmp nvidia-smi.txt torch-arch.txt check-latency.txt check-torch-current.json check-torch-current.err pip-install.txt
cat "$OUT/sweep-terminal.txt" | tail -40
