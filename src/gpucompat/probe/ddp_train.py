"""The DDP worker's training run: DistributedDataParallel over the synthetic data, epochs timed between
barriers, held-out accuracy, and the result rank 0 writes (see ddp_worker's docstring)."""

import json
import os
import platform
import socket
import sys
import time
import warnings

from .ddp_launch import UsageError
from .ddp_model import Synthetic, build_model, forward_flops


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
