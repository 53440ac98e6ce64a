"""How much the local executor runs at once: derived from the node's cores, memory and GPUs, or set by the plan."""

import pytest
from conftest import write


def test_concurrency_follows_the_node_and_the_plan_overrides_it():
    from gpucompat.concurrency import GIB, limits, mem_available

    assert (limits(0, ncores=2, memory=23 * GIB).installs, limits(0, ncores=2, memory=23 * GIB).probes) == (2, 2)
    assert (limits(8, ncores=64, memory=512 * GIB).installs, limits(8, ncores=64, memory=512 * GIB).probes) == (8, 8)  # one per GPU
    assert limits(8, ncores=4, memory=512 * GIB).probes == 4  # fewer cores than GPUs
    assert (limits(0, ncores=32, memory=5 * GIB).installs, limits(0, ncores=32, memory=5 * GIB).probes) == (5, 2)  # memory-bound
    assert (limits(0, ncores=1, memory=GIB // 2).installs, limits(0, ncores=1, memory=GIB // 2).probes) == (1, 1)  # never 0
    low = limits(4, installs=1, probes=3, ncores=16, memory=64 * GIB)
    assert (low.installs, low.probes) == (1, 3) and "the plan sets max_parallel_installs = 1, max_parallel_probes = 3" in low.why
    assert mem_available() > 0


def test_the_meminfo_reader_and_the_plan_keys(tmp_path):
    from gpucompat.concurrency import mem_available
    from gpucompat.errors import UserError
    from gpucompat.plan import parse_plan

    meminfo = write(tmp_path / "meminfo", "MemTotal:       16000000 kB\nMemAvailable:    8000000 kB\n")
    assert mem_available(str(meminfo)) == 8_000_000 * 1024 and mem_available(str(tmp_path / "none")) is None
    stacks = '[[stacks]]\nframework = "cuda-runtime"\nversions = ["12.4"]\n'
    assert (parse_plan(stacks).max_parallel_installs, parse_plan(stacks).max_parallel_probes) == (None, None)  # derived
    spec = parse_plan("max_parallel_installs = 3\nmax_parallel_probes = 1\n" + stacks)
    assert (spec.max_parallel_installs, spec.max_parallel_probes) == (3, 1)
    with pytest.raises(UserError, match="max_parallel_probes must be a whole number from 1 to 64"):
        parse_plan("max_parallel_probes = 0\n" + stacks)
