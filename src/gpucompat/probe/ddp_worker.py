"""gpucompat DDP worker: data-parallel training through torch's own launcher, one process per device.

Run inside the environment under test (standard library + torch only, CPython 3.8+):

    python -m torch.distributed.run --standalone --nproc_per_node N probe.pyz ddp-worker \\
        --model cnn|large --epochs E --images-per-epoch M --batch B --result out.json \\
        [--backend nccl|gloo] [--device cuda|cpu] [--seed S] [--lr LR] [--eval-images K] \\
        [--image-size S] [--width W] [--timeout-s T]

It measures how training scales with the number of processes: every rank trains the same
model wrapped in DistributedDataParallel on its own disjoint shard of a synthetic data set.
The per-worker batch B is fixed (as in the cloud-Slurm seed), so the global batch is B*N
and an epoch is M // (B*N) steps: the same images per epoch whatever N is (exactly the
same images when M is a multiple of B*N).

Launchers
---------
torchrun (python -m torch.distributed.run) sets RANK, WORLD_SIZE, LOCAL_RANK,
LOCAL_WORLD_SIZE, MASTER_ADDR and MASTER_PORT. Under Slurm's srun, one task per GPU,
without torchrun: when RANK/WORLD_SIZE are not set but SLURM_PROCID/SLURM_NTASKS are,

    RANK = SLURM_PROCID, WORLD_SIZE = SLURM_NTASKS, LOCAL_RANK = SLURM_LOCALID (default 0),
    LOCAL_WORLD_SIZE = SLURM_NTASKS_PER_NODE when set;
    MASTER_ADDR and MASTER_PORT from the environment (the job script exports them, e.g.
      export MASTER_ADDR=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)
      export MASTER_PORT=$((20000 + SLURM_JOB_ID % 20000))
    ); when MASTER_PORT is missing it is 20000 + SLURM_JOB_ID % 20000, when MASTER_ADDR is
    missing the run stops with a one-line error.

    srun --ntasks-per-node=4 --gpus-per-node=4 --kill-on-bad-exit=1 python probe.pyz ddp-worker ...

Run with neither (plain `python probe.pyz ddp-worker ...`), it is a world of one process on
127.0.0.1 and a free port. The device is LOCAL_RANK's GPU; where a process sees exactly one
GPU (srun --gpus-per-task=1 gives each task its own CUDA_VISIBLE_DEVICES) it is that one.

Data
----
Ten fixed, smooth random templates (drawn from --seed, identical on every rank). An image is
signal * template[c] + Gaussian noise for a random class c, and its LABEL is a deterministic
function of the image alone: the class whose template has the largest dot product with it
(almost always c). Images are made on the device in blocks of B from a per-block seed, so
the data set is the same in every epoch and for every N; each epoch visits the blocks in a
seeded random order and rank r takes blocks r, r+N, r+2N, ... of it (disjoint shards).
Accuracy is measured on held-out blocks (another seed range), split over the ranks and
all-reduced. Making a block is a few element-wise kernels, small next to a training step.

Timing
------
Each epoch is bracketed by a device synchronise + an all-reduce barrier, timed with
time.perf_counter; epoch_seconds[i] is the slowest rank's time. The first epoch also pays for
cuDNN/cuBLAS autotuning and lazy initialisation, so images_per_second is measured over epochs
2..E when E >= 2 (over the one epoch otherwise): timed_epochs says which.

Result
------
Rank 0 writes --result (atomically):

    {"world_size", "backend", "device", "device_name", "devices": [{"rank", "host", "node", "device_name"}],
     "model", "parameters", "gradient_bytes", "forward_flops_per_image", "image_shape",
     "epochs", "images_per_epoch", "images_per_epoch_requested", "batch_per_worker",
     "global_batch", "steps_per_epoch", "lr", "seed", "epoch_seconds": [...],
     "epoch_loss": [...], "timed_epochs", "images_per_second", "final_loss", "accuracy",
     "eval_images", "torch_version", "cuda_version", "nccl_version", "launcher"}

images_per_epoch is the number of images the ranks actually trained on in an epoch (all-reduced
sum), final_loss the mean training loss over the last epoch, accuracy the fraction right on the
held-out images. Any rank's failure exits non-zero with its traceback on stderr (prefixed with
its rank); a bad argument exits 2 with one "ddp_worker: error: ..." line (printed by rank 0;
the other ranks wait 3 s before exiting so that the launcher does not stop rank 0 first). For
tests, GPUCOMPAT_DDP_FAIL_RANK=R makes rank R raise once its model is wrapped.
"""

import argparse
import os
import sys
import time
import traceback

from .ddp_launch import UsageError, rendezvous_env
from .ddp_train import train

PREFIX = "ddp_worker: error: "


# --------------------------------------------------------------------------- main


def parse_args(argv):
    parser = argparse.ArgumentParser(prog="ddp_worker", description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True, help="cnn (the cloud-Slurm seed's) or large (ResNet-18-shaped)")
    parser.add_argument("--epochs", type=int, required=True)
    parser.add_argument("--images-per-epoch", type=int, required=True, help="total over all ranks")
    parser.add_argument("--batch", type=int, required=True, help="per worker; the global batch is batch x world size")
    parser.add_argument("--result", required=True, help="JSON file rank 0 writes")
    parser.add_argument("--backend", choices=("nccl", "gloo"), help="default: nccl with CUDA, else gloo")
    parser.add_argument("--device", choices=("cuda", "cpu"), help="default: cuda when available")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--lr", type=float, help="SGD learning rate; default 0.05 (cnn), 0.03 with momentum 0.9 (large)")
    parser.add_argument("--eval-images", type=int, default=2048, help="held-out images (rounded up to whole batches)")
    parser.add_argument("--image-size", type=int, default=64, help="large model: side of the 3xSxS images (default 64)")
    parser.add_argument("--width", type=int, default=64, help="large model: channels of the first stage (default 64)")
    parser.add_argument("--timeout-s", type=float, default=600, help="process-group timeout for a collective")

    def error(message):
        raise UsageError(message, everywhere=True)

    parser.error = error
    args = parser.parse_args(argv)
    if args.model not in ("cnn", "large"):
        raise UsageError("unknown --model %r (choose cnn or large)" % args.model, everywhere=True)
    for name in ("epochs", "images_per_epoch", "batch", "eval_images", "image_size", "width"):
        if getattr(args, name) < 1:
            raise UsageError("--%s must be at least 1 (got %d)" % (name.replace("_", "-"), getattr(args, name)), everywhere=True)
    if args.model == "large" and args.image_size < 8:
        raise UsageError("--image-size must be at least 8 for the large model", everywhere=True)
    return args


def run(args, launcher):
    import datetime

    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if not 0 <= rank < world:
        raise UsageError("RANK %d is outside WORLD_SIZE %d" % (rank, world))

    device_kind = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    if device_kind == "cuda":
        if not torch.cuda.is_available():
            raise UsageError("--device cuda, but torch %s sees no CUDA device" % torch.__version__)
        count = torch.cuda.device_count()
        if count == 1:
            index = 0
        elif local_rank < count:
            index = local_rank
        else:
            raise UsageError("LOCAL_RANK %d, but this process sees only %d GPUs" % (local_rank, count))
        torch.cuda.set_device(index)
        device = torch.device("cuda", index)
    else:
        device = torch.device("cpu")
    backend = args.backend or ("nccl" if device.type == "cuda" else "gloo")
    if backend == "nccl" and device.type != "cuda":
        raise UsageError("the nccl backend needs --device cuda", everywhere=True)

    dist.init_process_group(backend, init_method="env://", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=args.timeout_s))
    try:
        return train(torch, dist, DistributedDataParallel, args, launcher, device, backend, rank, world)
    finally:
        try:
            dist.destroy_process_group()
        except Exception:
            pass


def main(argv=None):
    rank = os.environ.get("RANK", os.environ.get("SLURM_PROCID", "0"))
    try:
        args = parse_args(sys.argv[1:] if argv is None else argv)
        launcher = rendezvous_env()
        rank = os.environ["RANK"]
        run(args, launcher)
    except UsageError as exc:
        message = str(exc).replace("\n", " ")
        if not exc.everywhere:
            print(PREFIX + ("" if os.environ.get("WORLD_SIZE", "1") == "1" else "[rank %s] " % rank) + message,
                  file=sys.stderr, flush=True)
        elif rank == "0":  # the same bad argument on every rank: rank 0 says it once
            print(PREFIX + message, file=sys.stderr, flush=True)
        else:  # let rank 0 say it before the launcher, seeing this rank fail, stops the others
            time.sleep(3)
        return 2
    except BaseException as exc:  # noqa: B902 - any rank's failure: traceback, non-zero exit
        if isinstance(exc, SystemExit) and exc.code in (0, None):
            return 0
        sys.stderr.write("[rank %s] ddp_worker failed:\n%s" % (rank, traceback.format_exc()))
        sys.stderr.flush()
        return 1
    return 0


def run_as_script(argv=None):
    """main(), then leave at once (torchrun and srun start the worker as `python probe.pyz ddp-worker ARGS`)."""
    code = main(argv)
    sys.stdout.flush()
    sys.stderr.flush()
    # The result is written and the process group destroyed: skip the interpreter's teardown, where
    # torch's Gloo/DDP worker threads can abort the process ("terminate called without an active
    # exception", seen once in 2-process CPU runs) after a run that succeeded.
    os._exit(code)


if __name__ == "__main__":
    run_as_script()
