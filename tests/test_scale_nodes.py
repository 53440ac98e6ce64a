"""Scaling across Slurm nodes without a cluster: the plan's `nodes`, the sbatch request a cell makes,
the srun line the probe starts and what the probe records outside Slurm. The live two-node run is
test_slurm.py's test_two_nodes_train_through_srun."""

from __future__ import annotations

import importlib
import sys

import pytest

from gpucompat.errors import UserError
from gpucompat.executors.base import JobSettings
from gpucompat.quoting import sbatch_directive
from gpucompat.executors.slurm import SlurmExecutor, request_args
from gpucompat.model import BenchSpec, Cell, ResolvedStack, Stack, Target, Timeouts
from gpucompat.plan import parse_plan
from gpucompat.probe import scaling
from gpucompat.probe_build import probe_pyz
from gpucompat.sweep import with_executor


STACKS = """
[[stacks]]
framework = "torch"
env = "current"
"""
A100 = Target("NVIDIA A100", gres="a100", features=("fakegpu",))
TORCH = Stack("torch", "installed", "default", "current", "current")
RUNTIME = Stack("cuda-runtime", "installed", "default", "current", "current")


def test_the_plan_reads_nodes_and_passes_them_to_the_probe():
    spec = parse_plan('executor = "slurm"\ntargets = "discover"\n' + STACKS + "[bench]\nscale = [1, 2, 4]\nnodes = [2, 1]\n")
    assert spec.bench.nodes == (1, 2) and spec.bench.probe_config()["nodes"] == [1, 2]
    assert "nodes" not in parse_plan(STACKS + "[bench]\nscale = [1]\n").bench.probe_config()


def test_nodes_are_checked_like_scale_and_need_slurm():
    for bad in ("nodes = [0]", "nodes = []", "nodes = [1, 17]", "nodes = [true]", "nodes = 2"):
        with pytest.raises(UserError, match=r"^plan: \[bench\] nodes must be a list of node counts from 1 to 16"):
            parse_plan('executor = "slurm"\ntargets = "discover"\n' + STACKS + f"[bench]\nscale = [1]\n{bad}\n")
    with pytest.raises(UserError, match=r"^plan: \[bench\] nodes needs scale"):
        parse_plan('executor = "slurm"\ntargets = "discover"\n' + STACKS + "[bench]\nnodes = [1, 2]\n")
    with pytest.raises(UserError) as refused:
        parse_plan(STACKS + "[bench]\nscale = [1, 2]\nnodes = [1, 2]\n")
    assert str(refused.value) == ("plan: [bench] nodes = [1, 2] trains across Slurm nodes through srun, which only executor = \"slurm\" "
                                  "provides; the executor is 'local', so keep nodes = [1] or leave it out.")
    assert parse_plan(STACKS + "[bench]\nscale = [1, 2]\nnodes = [1]\n").bench.nodes == (1,)  # one node needs no Slurm
    slurm = parse_plan('executor = "slurm"\ntargets = "discover"\n' + STACKS + "[bench]\nscale = [1]\nnodes = [1, 2]\n")
    with pytest.raises(UserError, match="the executor is 'kubernetes'"):
        with_executor(slurm, "kubernetes")  # --executor cannot take it elsewhere either


def test_a_single_node_request_asks_for_the_gpus_its_scaling_needs():
    for bench in (None, BenchSpec(), BenchSpec(scale=(1,)), BenchSpec(scale=(1,), nodes=(1,))):
        assert request_args(A100, bench) == ["--gres=gpu:a100:1", "--constraint=fakegpu"]
        assert request_args(Target("NVIDIA H100"), bench) == ["--gres=gpu:1"]
    assert request_args(A100, BenchSpec(scale=(1, 2, 4))) == ["--gres=gpu:a100:4", "--constraint=fakegpu"]
    assert request_args(Target("NVIDIA H100"), BenchSpec(scale=(1, 2), nodes=(1,))) == ["--gres=gpu:2"]


def test_across_nodes_a_cell_asks_for_max_nodes_with_max_scale_gpus_and_tasks_on_each():
    bench = BenchSpec(scale=(1, 2, 4), nodes=(1, 2))
    assert request_args(A100, bench) == ["--gres=gpu:a100:4", "--nodes=2", "--ntasks-per-node=4", "--constraint=fakegpu"]
    assert request_args(Target("NVIDIA H100"), BenchSpec(scale=(2,), nodes=(1, 3))) == ["--gres=gpu:2", "--nodes=3", "--ntasks-per-node=2"]
    assert all(sbatch_directive(d) == d for d in request_args(A100, bench))  # plain values: written into #SBATCH lines as they are


def test_only_torch_cells_are_sent_across_nodes(tmp_path):
    executor = SlurmExecutor(JobSettings(Timeouts(), bench=BenchSpec(scale=(1, 2), nodes=(1, 2))))
    executor.prepare([Cell(1, TORCH, A100, ResolvedStack(TORCH, True)), Cell(2, RUNTIME, A100, ResolvedStack(RUNTIME, True))], tmp_path)
    scripts = {path.name: path.read_text() for path in tmp_path.glob("array-*.sh")}
    torch_script, runtime_script = scripts["array-0.sh"], scripts["array-1.sh"]
    assert "#SBATCH --gres=gpu:a100:2\n#SBATCH --nodes=2\n#SBATCH --ntasks-per-node=2\n" in torch_script
    assert "#SBATCH --gres=gpu:a100:1\n#SBATCH --constraint=fakegpu\n" in runtime_script and "--nodes" not in runtime_script
    assert '"nodes":[1,2]' in (tmp_path / "cell-1" / "run.sh").read_text()  # the probe is told, inside one quoted word


def test_the_srun_line_puts_one_task_per_gpu_on_the_first_nodes():
    command = scaling.srun_command("/w/probe.pyz", 2, 4, ["gpu07", "gpu08", "gpu09"], ["ddp-worker", "--model", "cnn"])
    assert command == ["srun", "--export=ALL", "--nodes", "2", "--ntasks", "8", "--ntasks-per-node", "4", "--nodelist", "gpu07,gpu08",
                       "--kill-on-bad-exit=1", sys.executable, "/w/probe.pyz", "ddp-worker", "--model", "cnn"]


class NoGpuTorch:
    class cuda:
        @staticmethod
        def device_count():
            return 0


def test_outside_slurm_more_nodes_are_not_measured_never_failed(monkeypatch):
    """The probe as a job has it, imported from the built probe.pyz (where the DDP worker is)."""
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    monkeypatch.syspath_prepend(str(probe_pyz()))
    bench_module, scaling_module = (importlib.import_module("gpucompat_probe." + name) for name in ("bench", "scaling"))
    facts = {}
    bench = bench_module.Bench(facts, {"scale": [1], "nodes": [1, 2]})
    scaling_module.scale_figures(NoGpuTorch, bench, [1])
    across = [f for f in facts["figures"] if f.get("nodes")]
    assert [(f["measurement"], f["nodes"], f["processes"]) for f in across] == [("scaling_cnn", 2, 2), ("scaling_large", 2, 2)]
    assert all(f["unsupported"] == "not measured: needs a Slurm allocation" and "error" not in f for f in across)
    with pytest.raises(bench_module.Unsupported, match="needs a Slurm allocation"):
        scaling_module.srun_worker("probe.pyz", 2, 1, [])


def test_a_cluster_too_small_for_the_bench_still_tests_the_stack_on_one_gpu(tmp_path):
    """sbatch --test-only refuses 2 nodes of 4 GPUs: the torch cell is not NO_MATCH for it, it runs on one GPU."""
    import subprocess

    executor = SlurmExecutor(JobSettings(Timeouts(), bench=BenchSpec(scale=(1, 2, 4), nodes=(1, 2))))
    asked = []

    def sbatch(command, cwd=None):
        asked.append(command)
        refused = any(word.startswith(("--nodes=", "--gres=gpu:a100:4")) for word in command)
        return subprocess.CompletedProcess(command, 1 if refused else 0, "", "sbatch: error: Requested node configuration is not available"
                                           if refused else "")

    executor._run = sbatch
    cells = [Cell(1, TORCH, A100, ResolvedStack(TORCH, True))]
    assert executor.precheck(cells) == {1: None}
    assert [c[2] for c in asked] == ["--gres=gpu:a100:4", "--gres=gpu:a100:1"]  # the bench's shape first, then one GPU
    executor.prepare(cells, tmp_path)
    script = (tmp_path / "array-0.sh").read_text()
    assert "#SBATCH --gres=gpu:a100:1\n" in script and "--nodes" not in script
    everywhere = SlurmExecutor(JobSettings(Timeouts(), bench=BenchSpec(scale=(1, 2, 4), nodes=(1, 2))))
    everywhere._run = lambda command, cwd=None: subprocess.CompletedProcess(command, 1, "", "sbatch: error: Invalid partition name specified")
    assert "Invalid partition name" in everywhere.precheck(cells)[1]  # refused on one GPU too: the cell is NO_MATCH, as before
