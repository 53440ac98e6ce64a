"""The DDP worker (src/gpucompat/probe/ddp_*.py) on CPU with Gloo, through torch's own launcher, run as
the jobs run it: `probe.pyz ddp-worker ARGS`, from the built probe.pyz.

The worker runs under the interpreter named by GPUCOMPAT_TORCH_PYTHON (default: this one), which
must import torch; the tests skip, saying why, when it cannot. Each configuration runs once per
module (the fixtures below); a run costs ~5 s of interpreter start-up on top of its training.
"""

import ast
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from gpucompat.probe_build import probe_pyz

PROBE_DIR = Path(__file__).resolve().parent.parent / "src" / "gpucompat" / "probe"
WORKER = [str(probe_pyz()), "ddp-worker"]
PYTHON = os.environ.get("GPUCOMPAT_TORCH_PYTHON") or sys.executable
STDLIB = set(sys.stdlib_module_names)

FIELDS = {
    "world_size", "backend", "device_name", "model", "parameters", "epochs", "images_per_epoch", "batch_per_worker",
    "epoch_seconds", "images_per_second", "final_loss", "accuracy", "torch_version", "nccl_version",
}
CNN = ["--model", "cnn", "--epochs", "2", "--images-per-epoch", "2048", "--batch", "32"]
# The large model scaled down (3x16x16 images, 8 channels in the first stage) so that it trains in seconds on a CPU.
LARGE = ["--model", "large", "--image-size", "16", "--width", "8", "--epochs", "2", "--images-per-epoch", "1024", "--batch", "32"]


def _torch_missing():
    try:
        proc = subprocess.run([PYTHON, "-c", "import torch, torch.distributed"], capture_output=True, text=True, timeout=120)
    except OSError as exc:
        return "cannot run %s (GPUCOMPAT_TORCH_PYTHON): %s" % (PYTHON, exc)
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["?"])[-1]
        return "torch is not importable by %s (set GPUCOMPAT_TORCH_PYTHON to a Python that has it): %s" % (PYTHON, last)
    return None


TORCH_MISSING = _torch_missing()
needs_torch = pytest.mark.skipif(TORCH_MISSING is not None, reason=TORCH_MISSING or "")


def env(**extra):
    """The environment of a worker run: no inherited rendezvous or Slurm variables, no GPU
    (torchrun itself gives each process one thread when there are several)."""
    base = {k: v for k, v in os.environ.items()
            if not k.startswith(("SLURM_", "TORCHELASTIC_")) and k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK",
                                                                          "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")}
    base.update(CUDA_VISIBLE_DEVICES="")
    base.update(extra)
    return base


def torchrun(nproc, args, tmp_path, name, **extra):
    result = tmp_path / ("%s.json" % name)
    proc = subprocess.run(
        [PYTHON, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", str(nproc), *WORKER,
         *args, "--backend", "gloo", "--device", "cpu", "--result", str(result)],
        capture_output=True, text=True, env=env(**extra), timeout=300)
    return proc, result


def finished(proc, result):
    assert proc.returncode == 0, "exit %d\nstdout:\n%s\nstderr:\n%s" % (proc.returncode, proc.stdout, proc.stderr)
    return json.loads(result.read_text())


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Each configuration once: {(model, nproc): result}."""
    cache = {}

    def get(model, nproc):
        if (model, nproc) not in cache:
            tmp = tmp_path_factory.mktemp("%s%d" % (model, nproc))
            cache[model, nproc] = finished(*torchrun(nproc, CNN if model == "cnn" else LARGE, tmp, "result"))
        return cache[model, nproc]
    return get


def test_worker_is_python38_syntax_and_imports_only_the_stdlib_at_top_level():
    for path in sorted(PROBE_DIR.glob("ddp_*.py")):
        tree = ast.parse(path.read_text(), feature_version=(3, 8))
        top_level = {alias.name.split(".")[0] for node in tree.body if isinstance(node, ast.Import) for alias in node.names}
        top_level |= {node.module.split(".")[0] for node in tree.body if isinstance(node, ast.ImportFrom) and node.module and not node.level}
        assert top_level <= STDLIB, top_level - STDLIB


@needs_torch
@pytest.mark.parametrize("model", ["cnn", "large"])
@pytest.mark.parametrize("nproc", [1, 2])
def test_result_has_every_field(runs, model, nproc):
    r = runs(model, nproc)
    assert FIELDS <= set(r), FIELDS - set(r)
    assert r["world_size"] == nproc and r["backend"] == "gloo" and r["device"] == "cpu" and r["model"] == model
    assert r["nccl_version"] is None and r["torch_version"]
    assert r["batch_per_worker"] == 32 and r["global_batch"] == 32 * nproc
    assert r["steps_per_epoch"] == r["images_per_epoch_requested"] // (32 * nproc)
    assert len(r["epoch_seconds"]) == len(r["epoch_loss"]) == r["epochs"]
    assert all(s > 0 for s in r["epoch_seconds"]) and r["images_per_second"] > 0
    assert r["parameters"] > 0 and r["gradient_bytes"] == 4 * r["parameters"] and r["forward_flops_per_image"] > 0
    assert [d["rank"] for d in r["devices"]] == list(range(nproc))
    assert 0.0 <= r["accuracy"] <= 1.0 and r["eval_images"] == 2048
    assert r["final_loss"] == r["epoch_loss"][-1]
    assert r["launcher"] == "torchrun"


@needs_torch
@pytest.mark.parametrize("model", ["cnn", "large"])
def test_two_processes_train_on_the_same_images_per_epoch_as_one(runs, model):
    one, two = runs(model, 1), runs(model, 2)
    assert one["images_per_epoch"] == two["images_per_epoch"] == one["images_per_epoch_requested"]
    assert one["epoch_images"] == two["epoch_images"] == [one["images_per_epoch"]] * one["epochs"]
    assert two["steps_per_epoch"] * 2 == one["steps_per_epoch"]


@needs_torch
@pytest.mark.parametrize("nproc", [1, 2])
def test_the_cnn_learns(runs, nproc):
    r = runs("cnn", nproc)
    losses = r["epoch_loss"]
    assert losses[-1] < losses[0] * 0.5, losses
    assert r["accuracy"] > 0.6, r["accuracy"]  # chance is 0.1


@needs_torch
@pytest.mark.parametrize("nproc", [1, 2])
def test_the_large_model_loss_falls(runs, nproc):
    losses = runs("large", nproc)["epoch_loss"]
    assert losses[-1] < losses[0], losses


@needs_torch
def test_an_unknown_model_fails_with_one_clear_line(tmp_path):
    proc, result = torchrun(2, ["--model", "huge", "--epochs", "1", "--images-per-epoch", "64", "--batch", "32"], tmp_path, "bad")
    assert proc.returncode != 0
    errors = [line for line in proc.stderr.splitlines() if line.startswith("ddp_worker: error:")]
    assert errors == ["ddp_worker: error: unknown --model 'huge' (choose cnn or large)"], proc.stderr
    assert not result.exists()


@needs_torch
def test_a_failing_rank_fails_the_run_with_its_traceback(tmp_path):
    proc, result = torchrun(2, ["--model", "cnn", "--epochs", "1", "--images-per-epoch", "128", "--batch", "32"], tmp_path,
                            "fail", GPUCOMPAT_DDP_FAIL_RANK="1")
    assert proc.returncode != 0
    assert "[rank 1] ddp_worker failed:\nTraceback (most recent call last):" in proc.stderr, proc.stderr
    assert "RuntimeError: injected failure on rank 1 (GPUCOMPAT_DDP_FAIL_RANK)" in proc.stderr
    assert not result.exists()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@needs_torch
def test_slurm_environment_is_mapped_without_torchrun(tmp_path):
    result = tmp_path / "slurm.json"
    proc = subprocess.run(
        [PYTHON, *WORKER, "--model", "cnn", "--epochs", "2", "--images-per-epoch", "256", "--batch", "32",
         "--eval-images", "64", "--device", "cpu", "--result", str(result)],
        capture_output=True, text=True, timeout=300,
        env=env(SLURM_PROCID="0", SLURM_NTASKS="1", SLURM_LOCALID="0", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port())))
    r = finished(proc, result)
    assert r["launcher"] == "slurm" and r["world_size"] == 1 and r["backend"] == "gloo"
    assert r["images_per_epoch"] == 256 and r["steps_per_epoch"] == 8 and r["eval_images"] == 64


@needs_torch
def test_slurm_without_master_addr_says_what_to_export(tmp_path):
    proc = subprocess.run(
        [PYTHON, *WORKER, "--model", "cnn", "--epochs", "1", "--images-per-epoch", "64", "--batch", "32",
         "--result", str(tmp_path / "x.json")],
        capture_output=True, text=True, timeout=120, env=env(SLURM_PROCID="0", SLURM_NTASKS="2", SLURM_JOB_ID="7"))
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "ddp_worker: error: under Slurm without torchrun, export MASTER_ADDR (e.g. MASTER_ADDR=$(scontrol show "
        "hostnames \"$SLURM_JOB_NODELIST\" | head -n 1), MASTER_PORT=29500)"], proc.stderr


def _worker_module():
    from gpucompat.probe import ddp_launch  # the standard library only at import: no torch needed

    return ddp_launch


SRUN_TASK = {"SLURM_PROCID": "5", "SLURM_NTASKS": "8", "SLURM_LOCALID": "1", "SLURM_NTASKS_PER_NODE": "4",
             "SLURM_JOB_ID": "123", "SLURMD_NODENAME": "gpu08"}


def test_srun_tasks_take_rank_world_and_local_rank_from_slurm():
    worker = _worker_module()
    environ = dict(SRUN_TASK, MASTER_ADDR="gpu07", MASTER_PORT="29500")
    assert worker.rendezvous_env(environ) == "slurm"
    assert (environ["RANK"], environ["WORLD_SIZE"], environ["LOCAL_RANK"], environ["LOCAL_WORLD_SIZE"]) == ("5", "8", "1", "4")
    assert (environ["MASTER_ADDR"], environ["MASTER_PORT"]) == ("gpu07", "29500")
    environ = dict(SRUN_TASK, MASTER_ADDR="gpu07")
    del environ["SLURM_LOCALID"]
    worker.rendezvous_env(environ)
    assert environ["LOCAL_RANK"] == "0" and environ["MASTER_PORT"] == str(20000 + 123)  # the job's own port when none is given


def test_torchrun_variables_win_over_slurm_ones():
    worker = _worker_module()
    environ = dict(SRUN_TASK, RANK="2", WORLD_SIZE="4", LOCAL_RANK="2", TORCHELASTIC_RUN_ID="x", MASTER_ADDR="a", MASTER_PORT="1")
    assert worker.rendezvous_env(environ) == "torchrun"
    assert (environ["RANK"], environ["WORLD_SIZE"], environ["LOCAL_RANK"]) == ("2", "4", "2")


def test_slurm_without_a_master_address_or_with_half_of_torchrun_is_refused():
    worker = _worker_module()
    with pytest.raises(worker.UsageError, match="under Slurm without torchrun, export MASTER_ADDR"):
        worker.rendezvous_env(dict(SRUN_TASK))
    with pytest.raises(worker.UsageError, match="RANK and WORLD_SIZE must be set together"):
        worker.rendezvous_env({"RANK": "0"})
    environ = {}
    assert worker.rendezvous_env(environ) == "single" and (environ["RANK"], environ["WORLD_SIZE"]) == ("0", "1")
