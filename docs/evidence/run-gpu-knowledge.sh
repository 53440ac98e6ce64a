#!/usr/bin/env bash
# Second GPU run (knowledge issue): doctor, inspect of the installed torch against its own
# arch list and cuobjdump, the speed of explain and inspect, and the gpu-node sweep again,
# now with a prediction for every cell. Same set-up as run-gpu-node.sh; results in $OUT.
set -uo pipefail
export PYTHONUNBUFFERED=1 COLUMNS=200
PY=$(command -v python3)
"$PY" -m pip install --no-index --find-links .whl --force-reinstall --no-deps gpucompat > /tmp/pip-install.txt 2>&1
"$PY" -m pip install --no-index --find-links .whl gpucompat >> /tmp/pip-install.txt 2>&1
export PATH="$(dirname "$PY"):$PATH" GPUCOMPAT_DB="sqlite:///$OUT/knowledge.db"

gpucompat doctor --json > "$OUT/doctor.json" 2>&1
gpucompat doctor > /tmp/doctor.txt 2>&1

lib=$("$PY" -c "import torch, os; print(os.path.join(os.path.dirname(torch.__file__), 'lib', 'libtorch_cuda.so'))")
gpucompat inspect torch --json > "$OUT/inspect-torch.json" 2>&1
{
  echo "== torch.cuda.get_arch_list()"; "$PY" -c "import torch; print(torch.__version__, torch.cuda.get_arch_list())"
  echo "== gpucompat inspect torch"; gpucompat inspect torch | head -5
  echo "== cuobjdump --list-elf $lib (unique)"; cuobjdump --list-elf "$lib" | grep -o 'sm_[0-9]*[af]*' | sort -u | tr '\n' ' '; echo
  echo "== cuobjdump --list-ptx $lib (unique)"; cuobjdump --list-ptx "$lib" | grep -o 'sm_[0-9]*[af]*' | sort -u | tr '\n' ' '; echo
  echo "== gpucompat inspect $lib"; gpucompat inspect "$lib"
} > /tmp/inspect-vs-cuobjdump.txt 2>&1

"$PY" benchmarks/knowledge_speed.py --runs 10 --library "$lib" --cuobjdump "$(command -v cuobjdump)" --json "$OUT/knowledge-speed.json" > /tmp/knowledge-speed.txt 2>&1

gpucompat sweep examples/plans/gpu-node.toml --wheelhouse .wheelhouse > /tmp/sweep-terminal.txt 2>&1
echo "sweep exit: $?" >> /tmp/sweep-terminal.txt
gpucompat results --format json > "$OUT/gpu-node-predicted.json"
gpucompat results --format md > "$OUT/gpu-node-predicted.md"
gpucompat explain torch==2.11.0 --gpu "NVIDIA H200" --driver 580.159.04 --json > /tmp/explain-torch-h200.json 2>&1

tar -czf "$OUT/extra.tar.gz" -C /tmp doctor.txt inspect-vs-cuobjdump.txt knowledge-speed.txt sweep-terminal.txt explain-torch-h200.json pip-install.txt
cat /tmp/doctor.txt /tmp/inspect-vs-cuobjdump.txt /tmp/knowledge-speed.txt; tail -25 /tmp/sweep-terminal.txt
