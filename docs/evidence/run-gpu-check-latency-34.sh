#!/usr/bin/env bash
# Issue 34, item 8, on the GPU machine: `check --env current` against the framework's bare start, with the
# start check (cuInit beside the import) timed on and off, RUNS runs alternating; then JAX beside a process
# that holds the GPU's memory, classified by this code. .whl/ carries gpucompat and what the image lacks.
set -uo pipefail
export PYTHONUNBUFFERED=1 COLUMNS=160
PY=$(command -v python3)
"$PY" -m pip install --no-index --find-links .whl gpucompat > /tmp/pip-install.txt 2>&1 || { cat /tmp/pip-install.txt; exit 1; }
"$PY" -m pip install --no-index --find-links .whl --force-reinstall --no-deps gpucompat >> /tmp/pip-install.txt 2>&1
export PATH="$(dirname "$PY"):$PATH"
nvidia-smi --query-gpu=name,driver_version,clocks.current.sm,power.draw,temperature.gpu --format=csv > "$OUT/gpu.txt" 2>&1
nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv >> "$OUT/gpu.txt" 2>&1
"$PY" benchmarks/check_latency.py --runs "${RUNS:-4}" --frameworks "${FRAMEWORKS:-torch,jax,cupy}" --json "$OUT/check-latency.json" 2>&1 | tee "$OUT/check-latency.txt"
if [ "${BUSY:-1}" = 1 ]; then
  export GPUCOMPAT_DB="sqlite:////tmp/busy.db"
  "$PY" -c "import torch, time; free, total = torch.cuda.mem_get_info(); x = torch.empty(free - (1 << 30), dtype=torch.uint8, device='cuda'); print('held', x.numel() >> 20, 'MiB', flush=True); time.sleep(120)" > /tmp/holder.txt &
  sleep 8; cat /tmp/holder.txt
  { gpucompat check jax --env current; echo "exit $?"; } > "$OUT/jax-busy.txt" 2>&1
  kill %1
fi
