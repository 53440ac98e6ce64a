#!/usr/bin/env python3
"""gpucompat DDP worker: data-parallel training through torch's own launcher, one process per device.

Run inside the environment under test (standard library + torch only, CPython 3.8+):

    python -m torch.distributed.run --standalone --nproc_per_node N ddp_worker.py \\
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

    srun --ntasks-per-node=4 --gpus-per-node=4 --kill-on-bad-exit=1 python ddp_worker.py ...

Run with neither (plain `python ddp_worker.py ...`), it is a world of one process on
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
import json
import os
import platform
import socket
import sys
import time
import traceback
import warnings

CLASSES = 10
PREFIX = "ddp_worker: error: "


class UsageError(Exception):
    """A bad argument or environment: one line, exit 2. everywhere: every rank meets the same one (an argument),
    so only rank 0 says it."""

    def __init__(self, message, everywhere=False):
        super().__init__(message)
        self.everywhere = everywhere


# --------------------------------------------------------------------------- launcher environment


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rendezvous_env(environ=None):
    """Fill RANK/WORLD_SIZE/LOCAL_RANK/MASTER_* in environ (os.environ) from the launcher that ran us.

    Returns the launcher's name: "torchrun" (or any launcher that set RANK and WORLD_SIZE),
    "slurm" (mapped from SLURM_*), or "single" (nothing set: a world of one)."""
    env = os.environ if environ is None else environ
    if "RANK" in env and "WORLD_SIZE" in env:
        env.setdefault("LOCAL_RANK", "0")
        return "torchrun" if "TORCHELASTIC_RUN_ID" in env else "env"
    if "SLURM_PROCID" in env and "SLURM_NTASKS" in env:
        env["RANK"] = env["SLURM_PROCID"]
        env["WORLD_SIZE"] = env["SLURM_NTASKS"]
        env["LOCAL_RANK"] = env.get("SLURM_LOCALID", "0")
        if "SLURM_NTASKS_PER_NODE" in env and "LOCAL_WORLD_SIZE" not in env:
            env["LOCAL_WORLD_SIZE"] = env["SLURM_NTASKS_PER_NODE"]
        if "MASTER_PORT" not in env and "SLURM_JOB_ID" in env:
            env["MASTER_PORT"] = str(20000 + int(env["SLURM_JOB_ID"]) % 20000)
        missing = [name for name in ("MASTER_ADDR", "MASTER_PORT") if name not in env]
        if missing:
            raise UsageError(
                "under Slurm without torchrun, export %s (e.g. MASTER_ADDR=$(scontrol show hostnames "
                "\"$SLURM_JOB_NODELIST\" | head -n 1), MASTER_PORT=29500)" % " and ".join(missing), everywhere=True)
        return "slurm"
    if "RANK" in env or "WORLD_SIZE" in env:
        raise UsageError("RANK and WORLD_SIZE must be set together (found only %s)" % ("RANK" if "RANK" in env else "WORLD_SIZE"))
    env.update(RANK="0", WORLD_SIZE="1", LOCAL_RANK="0", LOCAL_WORLD_SIZE="1")
    env.setdefault("MASTER_ADDR", "127.0.0.1")
    env.setdefault("MASTER_PORT", str(free_port()))
    return "single"


# --------------------------------------------------------------------------- models


def build_model(torch, name, channels, size, width):
    nn = torch.nn
    if name == "cnn":
        # The cloud-Slurm seed's model, as probe.py's bench_torch trains it.
        return nn.Sequential(nn.Conv2d(1, 32, 3), nn.ReLU(), nn.Flatten(), nn.Linear(32 * 26 * 26, 128), nn.ReLU(),
                             nn.Linear(128, CLASSES))

    # "large": a ResNet-18-shaped net (4 stages of 2 basic blocks, widths W, 2W, 4W, 8W, strides
    # 1, 2, 2, 2) on 3x64x64 images. Why this one: data-parallel scaling is governed by compute per
    # step against the bytes all-reduced per step. The seed's CNN has 2.77 M parameters (11.1 MB of fp32
    # gradients) for 5.9 MFLOP forward per image (~18 MFLOP forward+backward): a step of 64 images is
    # ~1.1 GFLOP (microseconds on an H100/H200) against an 11 MB all-reduce, ~100 FLOP per gradient
    # byte, so it measures communication and launch latency. This net at W=64 on 3x64x64 has 11.19 M
    # parameters (45 MB of gradients) but 4.4 GFLOP forward per image (~13 GFLOP forward+backward):
    # ~850 GFLOP per step of 64 images, ~19,000 FLOP per gradient byte, so compute dominates and
    # DDP's bucketed all-reduce hides behind the backward pass. (The JSON reports both figures:
    # forward_flops_per_image and gradient_bytes.) The classifier keeps a 4x4 spatial map
    # (AdaptiveAvgPool2d(4)) because the labels depend on where the template's features are (see
    # the head below). --width and --image-size scale it down for CPU tests. BatchNorm running statistics stay per rank (broadcast_buffers=False), so
    # the only communication per step is the gradient all-reduce.

    class Block(nn.Module):
        def __init__(self, cin, cout, stride):
            super().__init__()
            self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(cout)
            self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(cout)
            nn.init.zeros_(self.bn2.weight)  # each block starts as the identity (Goyal et al. 2017): stable at lr 0.03
            self.shortcut = nn.Sequential()
            if stride != 1 or cin != cout:
                self.shortcut = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

        def forward(self, x):
            out = torch.relu(self.bn1(self.conv1(x)))
            return torch.relu(self.bn2(self.conv2(out)) + self.shortcut(x))

    layers = [nn.Conv2d(channels, width, 3, 1, 1, bias=False), nn.BatchNorm2d(width), nn.ReLU()]
    cin = width
    for i, stride in enumerate((1, 2, 2, 2)):
        cout = width * 2 ** i
        layers += [Block(cin, cout, stride), Block(cout, cout, 1)]
        cin = cout
    # Head: a 4x4 map of 32 channels (512 features whatever the width) keeps where features are; a linear
    # layer straight on the 8W x 4 x 4 map (8,192 features at W=64) made SGD's first steps diverge.
    layers += [nn.AdaptiveAvgPool2d(4), nn.Conv2d(cin, 32, 1, bias=False), nn.BatchNorm2d(32), nn.ReLU(), nn.Flatten(),
               nn.Linear(32 * 16, CLASSES)]
    return nn.Sequential(*layers)


def forward_flops(torch, model, shape, device):
    """Multiply-adds x 2 of the convolutions and linear layers for one image (forward only)."""
    total = [0]
    nn = torch.nn

    def hook(module, inputs, output):
        if isinstance(module, nn.Conv2d):
            kh, kw = module.kernel_size
            total[0] += 2 * output.numel() * (module.in_channels // module.groups) * kh * kw
        elif isinstance(module, nn.Linear):
            total[0] += 2 * output.numel() * module.in_features

    handles = [m.register_forward_hook(hook) for m in model.modules() if isinstance(m, (nn.Conv2d, nn.Linear))]
    try:
        was_training = model.training
        model.eval()
        with torch.no_grad():
            model(torch.zeros((1,) + tuple(shape), device=device))
        model.train(was_training)
    finally:
        for h in handles:
            h.remove()
    return total[0]


# --------------------------------------------------------------------------- synthetic data


class Synthetic:
    """Learnable synthetic images whose label is a function of the image (see the docstring)."""

    TRAIN, HELD_OUT = 0, 1 << 40

    def __init__(self, torch, shape, batch, seed, device, signal=0.2):
        self.torch, self.shape, self.batch, self.seed, self.device, self.signal = torch, tuple(shape), batch, seed, device, signal
        cpu = torch.Generator().manual_seed(seed)
        channels, height, width = self.shape
        coarse = torch.randn(CLASSES, channels, max(2, height // 7), max(2, width // 7), generator=cpu)
        smooth = torch.nn.functional.interpolate(coarse, size=(height, width), mode="bilinear", align_corners=False)
        flat = smooth.reshape(CLASSES, -1)
        flat = (flat - flat.mean(dim=1, keepdim=True)) / flat.std(dim=1, keepdim=True)  # zero mean, unit variance per pixel
        self.templates = flat.reshape((CLASSES,) + self.shape).to(device)
        self.flat = flat.t().contiguous().to(device)  # (pixels, classes)
        self.generator = torch.Generator(device=device)

    def block(self, index, split=TRAIN):
        torch = self.torch
        self.generator.manual_seed((self.seed * 1000003 + split + index) % (1 << 62))
        c = torch.randint(0, CLASSES, (self.batch,), generator=self.generator, device=self.device)
        x = torch.randn((self.batch,) + self.shape, generator=self.generator, device=self.device)
        x.add_(self.templates[c], alpha=self.signal)
        y = (x.reshape(self.batch, -1) @ self.flat).argmax(dim=1)
        return x, y

    def order(self, epoch, blocks):
        g = self.torch.Generator().manual_seed(self.seed * 7919 + epoch)
        return self.torch.randperm(blocks, generator=g).tolist()


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


def version_string(value):
    if value is None:
        return None
    if isinstance(value, (tuple, list)):
        return ".".join(str(v) for v in value)
    if isinstance(value, int) and value > 1000:  # older torch: 2708 -> 2.7.8, 21905 -> 2.19.5 (NCCL_VERSION_CODE)
        major = value // 10000 if value >= 10000 else value // 1000
        minor = (value % 10000) // 100 if value >= 10000 else (value % 1000) // 100
        return "%d.%d.%d" % (major, minor, value % 100)
    return str(value)


def write_json(path, data):
    path = os.path.abspath(path)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = "%s.tmp.%d" % (path, os.getpid())
    with open(tmp, "w") as f:
        json.dump(data, f, indent=2)
        f.write("\n")
    os.replace(tmp, path)


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


def gather_json(torch, dist, value, device, world, size=1024):
    """dist.all_gather_object without it: that one needs numpy, which a stack under test may lack."""
    data = json.dumps(value).encode()[:size]
    mine = torch.zeros(size + 4, dtype=torch.uint8)
    mine[:4] = torch.tensor(list(len(data).to_bytes(4, "little")), dtype=torch.uint8)
    if data:
        mine[4:4 + len(data)] = torch.tensor(list(data), dtype=torch.uint8)
    mine = mine.to(device)
    everyone = [torch.empty_like(mine) for _ in range(world)]
    dist.all_gather(everyone, mine)
    out = []
    for tensor in everyone:
        raw = bytes(tensor.cpu().tolist())
        out.append(json.loads(raw[4:4 + int.from_bytes(raw[:4], "little")].decode()))
    return out


def train(torch, dist, DistributedDataParallel, args, launcher, device, backend, rank, world):
    cuda = device.type == "cuda"

    def synchronise():
        """Wait for this rank's device, then for every rank: an all-reduce works as a barrier on any backend."""
        if cuda:
            torch.cuda.synchronize(device)
        flag = torch.ones(1, device=device)
        dist.all_reduce(flag)
        if cuda:
            torch.cuda.synchronize(device)

    if cuda:
        torch.backends.cudnn.benchmark = True  # fixed shapes: autotune once, in the first (untimed) epoch
    torch.manual_seed(args.seed)  # identical initial weights everywhere (DDP also broadcasts rank 0's)
    shape = (1, 28, 28) if args.model == "cnn" else (3, args.image_size, args.image_size)
    model = build_model(torch, args.model, shape[0], shape[1], args.width).to(device)
    flops = forward_flops(torch, model, shape, device)
    parameters = sum(p.numel() for p in model.parameters())
    gradient_bytes = sum(p.numel() * p.element_size() for p in model.parameters() if p.requires_grad)
    with warnings.catch_warnings():  # torch 2.13 deprecates broadcast_buffers; its replacement is not in older torch
        warnings.simplefilter("ignore", FutureWarning)
        ddp = DistributedDataParallel(model, device_ids=[device.index] if cuda else None, broadcast_buffers=False)
    if os.environ.get("GPUCOMPAT_DDP_FAIL_RANK") == str(rank):  # a test's hook: one rank fails mid-run
        raise RuntimeError("injected failure on rank %d (GPUCOMPAT_DDP_FAIL_RANK)" % rank)
    lr = args.lr if args.lr is not None else (0.05 if args.model == "cnn" else 0.03)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=lr, momentum=0.0 if args.model == "cnn" else 0.9)
    loss_fn = torch.nn.CrossEntropyLoss()  # mean over the batch, as Keras' loss in the seed
    data = Synthetic(torch, shape, args.batch, args.seed, device)

    blocks = args.images_per_epoch // args.batch
    steps = blocks // world
    if steps < 1:
        raise UsageError("--images-per-epoch %d is less than one global batch (%d x %d processes)"
                         % (args.images_per_epoch, args.batch, world), everywhere=True)

    epoch_seconds, epoch_loss, epoch_images = [], [], []
    for epoch in range(args.epochs):
        order = data.order(epoch, blocks)
        loss_sum = torch.zeros((), device=device)
        ddp.train()
        synchronise()
        began = time.perf_counter()
        for step in range(steps):
            x, y = data.block(order[step * world + rank])
            optimizer.zero_grad(set_to_none=True)
            loss = loss_fn(ddp(x), y)
            loss.backward()
            optimizer.step()
            loss_sum += loss.detach()
        synchronise()
        seconds = time.perf_counter() - began
        stats = torch.tensor([loss_sum.item(), float(steps), float(steps * args.batch)], device=device, dtype=torch.float64)
        top = torch.tensor([seconds], device=device, dtype=torch.float64)
        dist.all_reduce(stats)
        dist.all_reduce(top, op=dist.ReduceOp.MAX)
        epoch_loss.append(stats[0].item() / stats[1].item())
        epoch_images.append(int(round(stats[2].item())))
        epoch_seconds.append(top[0].item())
        if rank == 0:
            print("ddp_worker: epoch %d/%d: %.3f s, loss %.4f, %d images" % (epoch + 1, args.epochs, epoch_seconds[-1],
                                                                           epoch_loss[-1], epoch_images[-1]), file=sys.stderr, flush=True)

    # Held-out accuracy: ceil(eval_images / batch) blocks of the held-out range, rank r taking r, r+N, ...
    ddp.eval()
    eval_blocks = -(-args.eval_images // args.batch)
    counts = torch.zeros(2, device=device, dtype=torch.float64)
    with torch.no_grad():
        for index in range(rank, eval_blocks, world):
            x, y = data.block(index, Synthetic.HELD_OUT)
            counts[0] += (model(x).argmax(dim=1) == y).sum()
            counts[1] += y.numel()
    dist.all_reduce(counts)
    accuracy = counts[0].item() / counts[1].item()

    device_name = torch.cuda.get_device_name(device) if cuda else (platform.processor() or platform.machine() or "cpu")
    # node: Slurm's name for it, where srun started us (several slurmd on one test machine share a host name)
    devices = gather_json(torch, dist, {"rank": rank, "host": socket.gethostname(), "node": os.environ.get("SLURMD_NODENAME"),
                                        "device_name": device_name}, device, world)

    timed = list(range(1, args.epochs)) if args.epochs >= 2 else [0]
    images_per_second = sum(epoch_images[i] for i in timed) / sum(epoch_seconds[i] for i in timed)
    nccl_version = None
    if cuda:
        try:
            nccl_version = version_string(torch.cuda.nccl.version())
        except Exception:
            nccl_version = None
    result = {
        "world_size": world,
        "backend": backend,
        "device": device.type,
        "device_name": device_name,
        "devices": devices,
        "launcher": launcher,
        "model": args.model,
        "parameters": parameters,
        "gradient_bytes": gradient_bytes,
        "forward_flops_per_image": flops,
        "image_shape": list(shape),
        "epochs": args.epochs,
        "images_per_epoch": epoch_images[-1],
        "images_per_epoch_requested": args.images_per_epoch,
        "batch_per_worker": args.batch,
        "global_batch": args.batch * world,
        "steps_per_epoch": steps,
        "lr": lr,
        "seed": args.seed,
        "epoch_seconds": epoch_seconds,
        "epoch_loss": epoch_loss,
        "epoch_images": epoch_images,
        "timed_epochs": [i + 1 for i in timed],
        "images_per_second": images_per_second,
        "final_loss": epoch_loss[-1],
        "accuracy": accuracy,
        "eval_images": int(counts[1].item()),
        "torch_version": torch.__version__,
        "cuda_version": torch.version.cuda,
        "nccl_version": nccl_version,
        # fp32 throughout; on Ampere and newer cuDNN convolutions use TF32 unless this is False
        "cudnn_allow_tf32": bool(torch.backends.cudnn.allow_tf32) if cuda else None,
        "matmul_allow_tf32": bool(torch.backends.cuda.matmul.allow_tf32) if cuda else None,
    }
    if rank == 0:
        write_json(args.result, result)
    return result


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


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    # The result is written and the process group destroyed: skip the interpreter's teardown, where
    # torch's Gloo/DDP worker threads can abort the process ("terminate called without an active
    # exception", seen once in 2-process CPU runs) after a run that succeeded.
    os._exit(code)
