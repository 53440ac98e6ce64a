"""What one question costs (issue 40 section 8): a FAIL with its nearest yes judges some 120 candidate stacks on one GPU
and driver; the device tables are read for that GPU and driver once, not once per candidate. Counted in a fresh process
(the lookups are cached for the process), through the real CLI."""

from __future__ import annotations

import json
import subprocess
import sys

from conftest import REPO

COUNTING = """
import json, sys
from collections import Counter
from gpucompat.knowledge import driving, gpus, rules, tables
calls = Counter()
def counted(module, name):
    real = getattr(module, name)
    def wrapper(*args, **kwargs):
        calls[name] += 1
        return real(*args, **kwargs)
    setattr(module, name, wrapper)
counted(gpus, "driver_lists")         # a device ID against a driver release's list
counted(gpus, "words_begin")          # a product row of gpu_driver_branches.csv matched against the GPU's name
counted(rules, "predict_stack")       # candidates judged (nearest.py imports it from rules at its own import)
from gpucompat.answers import nearest
counted(nearest, "predict_stack")
from gpucompat import cli
sys.argv = ["gpucompat", "explain", "torch==2.6.0", "--gpu", "NVIDIA GeForce RTX 5090", "--driver", "575.64.05", "--python", "3.12", "--json"]
try:
    cli.main()
except SystemExit:
    pass
print(json.dumps(calls), file=sys.stderr)
"""


def test_a_fail_with_its_nearest_yes_reads_the_gpus_driver_listing_once():
    proc = subprocess.run([sys.executable, "-c", COUNTING], capture_output=True, text=True, cwd=REPO, timeout=120)
    answer, calls = json.loads(proc.stdout), json.loads(proc.stderr.strip().splitlines()[-1])
    assert answer["verdict"] == "fail" and any(n["kind"] == "newer" for n in answer["nearest"])  # the README's example
    assert calls["predict_stack"] >= 100  # the candidates are still judged one by one ...
    # ... but the GPU's listing in driver 575.64.05 and its driver-branch rows are read for the asked (GPU, driver) only:
    # before, 122 list lookups and 8,418 name matches (366 readings of the branch rows)
    assert calls["driver_lists"] <= 10 and calls["words_begin"] <= 200, calls
