#!/usr/bin/env bash
# Issue 34 on the GPU machine (the workplace's device tool, repository root, no internet): environment
# faults × frameworks (env_faults_matrix.py), `doctor` in a faulty shell, the start check's cost, and the
# sweep behind the site pictures. .whl/ holds gpucompat's wheel and the dependencies the image lacks;
# build/env-faults/libcuda.so.1 is the stand-in stub (tests/cuda_stub/cuda_stub.c -DINIT=34), used only
# where the machine has no CUDA toolkit stub of its own. Output lands in $OUT. Nothing changes the card's settings.
set -uo pipefail
export PYTHONUNBUFFERED=1 COLUMNS=160
PY=$(command -v python3)
"$PY" -m pip install --no-index --find-links .whl gpucompat > /tmp/pip-install.txt 2>&1 || { cat /tmp/pip-install.txt; exit 1; }
"$PY" -m pip install --no-index --find-links .whl --force-reinstall --no-deps gpucompat >> /tmp/pip-install.txt 2>&1
export PATH="$(dirname "$PY"):$PATH" GPUCOMPAT_DB="sqlite:////tmp/env-faults.db" GPUCOMPAT_CACHE=/tmp/env-faults-cache
{
  nvidia-smi --query-gpu=name,driver_version,compute_cap,persistence_mode --format=csv
  cat /proc/driver/nvidia/version | head -1
  "$PY" -c "import torch, jax, cupy; print('torch', torch.__version__, '| jax', jax.__version__, '| cupy', cupy.__version__)" 2>&1 | tail -1
  ls -la /dev/nvidia* 2>&1; ulimit -a 2>&1 | head -20
  ls /usr/local/cuda*/lib64/stubs/ /usr/local/cuda*/compat/ 2>&1 | head
  echo "== the start check alone, 5 times (python probe.pyz cuda-start: interpreter start, cuInit, cuDeviceGetCount)"
  pyz=$("$PY" -c "from gpucompat.probe_build import probe_pyz; print(probe_pyz())")
  for i in 1 2 3 4 5; do "$PY" "$pyz" cuda-start; done
  echo "== the same interpreter start without the check, 5 times"
  for i in 1 2 3 4 5; do /usr/bin/time -f "%e s" "$PY" -c "pass"; done
  for i in 1 2 3 4 5; do /usr/bin/time -f "%e s cuda-start" "$PY" "$pyz" cuda-start > /dev/null; done
} > "$OUT/machine.txt" 2>&1
"$PY" docs/evidence/env_faults_matrix.py > "$OUT/env-faults.json" 2> "$OUT/env-faults.txt"
{
  echo "== doctor with the stub on LD_LIBRARY_PATH"
  LD_LIBRARY_PATH=/tmp/module-cuda/lib64/stubs gpucompat doctor
  echo "exit $?"
  echo; echo "== doctor in a clean shell"
  gpucompat doctor; echo "exit $?"
} > "$OUT/doctor.txt" 2>&1
export GPUCOMPAT_DB="sqlite:///$OUT/site.db"
gpucompat sweep docs/evidence/site-plan-h100.toml > "$OUT/site-sweep.txt" 2>&1; echo "sweep exit $?" >> "$OUT/site-sweep.txt"
tail -5 "$OUT/env-faults.txt"; tail -3 "$OUT/site-sweep.txt"
