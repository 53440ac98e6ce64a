"""Scaling over GPUs: data-parallel training through torchrun on this node and through srun across
the nodes of a Slurm job (torch, with the DDP worker of the same probe.pyz), and JAX's own
data-parallel training over a mesh of this node's GPUs.
"""

import json
import os
import socket
import sys
import time

from .bench import Unsupported
from .records import LOG, probe_file

# ---------------------------------------------------------------------------
# Scaling over GPUs: data-parallel training through the framework's own launcher (torchrun, one
# process per GPU, NCCL), the seed's CNN and a larger model whose compute outweighs its gradient
# all-reduce, on 1, 2, 4 ... GPUs of this node and, inside a Slurm job of several nodes ([bench]
# nodes = [1, 2]), on N nodes through srun. The worker is the DDP worker of the same probe.pyz,
# started as `python probe.pyz ddp-worker ARGS` (WORKER_COMMAND).
# Figures: {"measurement": "scaling_cnn", "dtype": "fp32", "processes": N GPUs, "value": images/s,
# "epoch_seconds", "final_loss", "accuracy", "speedup", "efficiency"}, plus "nodes" across nodes.
# ---------------------------------------------------------------------------

SCALE_RUNS = {"cnn": {"epochs": 4, "images": 60000, "batch": 64}, "large": {"epochs": 3, "images": 20480, "batch": 64}}
NOT_IN_SLURM = "not measured: needs a Slurm allocation"
WORKER_COMMAND = "ddp-worker"  # probe.pyz's first argument that runs the DDP worker (the package's __main__.py)
NO_WORKER = "the DDP worker runs from probe.pyz, and this probe does not run from one"


def scale_figures(torch, bench, counts):
    import subprocess
    import tempfile

    worker = probe_file()  # probe.pyz, which runs the DDP worker when its first argument is WORKER_COMMAND
    available = torch.cuda.device_count()
    # Across nodes: max(scale) GPUs on each (what the Slurm executor asked for), fewer where fewer are visible.
    per_node = max(1, min(max(counts), available))
    for model, sizes in SCALE_RUNS.items():
        alone = None
        args = [WORKER_COMMAND, "--model", model, "--epochs", str(sizes["epochs"]), "--images-per-epoch", str(sizes["images"]),
                "--batch", str(sizes["batch"])]

        def point(run, n, note):
            extra = {key: run.get(key) for key in ("epoch_seconds", "epoch_loss", "final_loss", "accuracy", "parameters", "backend",
                                                   "nccl_version")}
            extra.update(processes=n, note="%s, DistributedDataParallel, %s model, %d x %d images, batch %d per GPU"
                         % (note, model, sizes["epochs"], sizes["images"], sizes["batch"]))
            if alone:
                extra["speedup"] = run["images_per_second"] / alone
                extra["efficiency"] = extra["speedup"] / n
            return [run["images_per_second"]], extra

        for n in sorted(set(counts)):
            def body():
                if n > available:
                    raise Unsupported("%d GPUs asked, %d visible" % (n, available))
                if not os.path.isfile(worker):
                    raise Unsupported(NO_WORKER)
                handle, out = tempfile.mkstemp(prefix="gpucompat-scale-", suffix=".json")
                os.close(handle)
                command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", str(n), worker,
                           *args, "--result", out]
                LOG.info("scaling: %s", " ".join(command))
                proc = subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=600)
                if proc.returncode:
                    raise RuntimeError("torchrun exited %d: %s" % (proc.returncode, proc.stderr.decode(errors="replace")[-1500:]))
                with open(out) as result:
                    run = json.load(result)
                os.unlink(out)
                return point(run, n, "torchrun --nproc_per_node %d" % n)
            figure = bench.measure("scaling_" + model, "fp32", "images/s", body)
            figure["processes"] = n
            if n == 1 and "value" in figure:
                alone = figure["value"]
        for nodes in sorted(n for n in set(bench.config.get("nodes") or []) if n > 1):
            def across():
                if not os.path.isfile(worker):
                    raise Unsupported(NO_WORKER)
                run = srun_worker(worker, nodes, per_node, args)
                samples, extra = point(run, nodes * per_node, "srun --nodes %d --ntasks-per-node %d" % (nodes, per_node))
                extra["hosts"] = sorted(set(d.get("node") or d.get("host") for d in run.get("devices") or []))
                return samples, extra
            figure = bench.measure("scaling_" + model, "fp32", "images/s", across)
            figure.update(processes=nodes * per_node, nodes=nodes)


def jax_scale_figures(jax, bench, counts):
    """Data-parallel training of the seed's CNN on 1, 2, 4 ... GPUs of this node the way JAX does it:
    one process, each step's batch split over a mesh of N devices and the parameters replicated, so
    that XLA adds the gradient all-reduce (NCCL). Learnable synthetic data (each image is noise plus
    0.2 x its class's template); figures as scale_figures' (scaling_cnn)."""
    import jax.numpy as jnp
    import numpy as np

    try:
        from jax.sharding import Mesh, NamedSharding, PartitionSpec
    except ImportError:  # before jax 0.4.1: the scaling figures say so, the rest of the bench stands
        Mesh = None

    devices, sizes, lr = jax.devices("gpu"), SCALE_RUNS["cnn"], 0.05
    templates = jax.random.normal(jax.random.PRNGKey(7), (10, 1, 28, 28), dtype=jnp.float32)

    def loss(p, x, y):
        h = jax.lax.conv_general_dilated(x, p["conv"], (1, 1), "VALID", dimension_numbers=("NCHW", "OIHW", "NCHW"))
        logits = jax.nn.relu(jax.nn.relu(h).reshape(x.shape[0], -1) @ p["dense"]) @ p["out"]
        return -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(logits), y[:, None], axis=1)), logits

    def images(key, count):
        y = jax.random.randint(key, (count,), 0, 10)
        return jax.random.normal(jax.random.fold_in(key, 1), (count, 1, 28, 28), dtype=jnp.float32) + 0.2 * templates[y], y

    alone = None
    for n in sorted(set(counts)):
        def body():
            if Mesh is None:
                raise Unsupported("JAX's data-parallel scaling needs jax.sharding (jax 0.4.1 or newer)")
            if n > len(devices):
                raise Unsupported("%d GPUs asked, %d visible" % (n, len(devices)))
            mesh = Mesh(np.array(devices[:n]), ("data",))
            split, replicated = NamedSharding(mesh, PartitionSpec("data")), NamedSharding(mesh, PartitionSpec())
            keys = jax.random.split(jax.random.PRNGKey(1), 3)
            # the scale of torch's default init (uniform within 1/sqrt(fan_in)): larger weights diverge at this lr
            init = lambda key, shape, fan_in: jax.random.normal(key, shape, dtype=jnp.float32) * (1.0 / (3 * fan_in)) ** 0.5  # noqa: E731
            params = jax.device_put({"conv": init(keys[0], (32, 1, 3, 3), 9), "dense": init(keys[1], (32 * 26 * 26, 128), 32 * 26 * 26),
                                     "out": init(keys[2], (128, 10), 128)}, replicated)

            @jax.jit
            def step(p, x, y):
                (value, _), grads = jax.value_and_grad(loss, has_aux=True)(p, x, y)
                return jax.tree_util.tree_map(lambda w, g: w - lr * g, p, grads), value

            global_batch = sizes["batch"] * n
            steps = sizes["images"] // global_batch
            pool = [jax.device_put(images(jax.random.PRNGKey(100 + i), global_batch), split) for i in range(16)]
            params, _ = step(params, *pool[0])  # compiles
            jax.block_until_ready(params)
            epoch_seconds, losses = [], []
            for _ in range(sizes["epochs"]):
                began, values = time.perf_counter(), []
                for index in range(steps):
                    params, value = step(params, *pool[index % len(pool)])
                    values.append(value)
                jax.block_until_ready(params)
                epoch_seconds.append(time.perf_counter() - began)
                losses.append(float(jnp.mean(jnp.stack(values))))
            x, y = images(jax.random.PRNGKey(99), 4096)
            accuracy = float(jnp.mean(jnp.argmax(loss(jax.device_get(params), x, y)[1], axis=1) == y))
            timed = epoch_seconds[1:] or epoch_seconds
            rate = steps * global_batch * len(timed) / sum(timed)
            extra = {"epoch_seconds": epoch_seconds, "final_loss": losses[-1], "accuracy": accuracy, "processes": n,
                     "note": "one process, jax.jit over a mesh of %d GPU(s): batch split, parameters replicated (XLA all-reduce), "
                             "cnn model, %d x %d images, batch %d per GPU, 16 learnable synthetic batches in turn"
                             % (n, sizes["epochs"], steps * global_batch, sizes["batch"])}
            if alone:
                extra["speedup"] = rate / alone
                extra["efficiency"] = extra["speedup"] / n
            return [rate], extra
        figure = bench.measure("scaling_cnn", "fp32", "images/s", body)
        figure["processes"] = n
        if n == 1 and "value" in figure:
            alone = figure["value"]


def slurm_hosts():
    """This job's nodes in Slurm's order; the batch script runs on the first (sbatch(1))."""
    import subprocess

    nodelist = os.environ.get("SLURM_JOB_NODELIST") or os.environ.get("SLURM_NODELIST") or ""
    proc = subprocess.run(["scontrol", "show", "hostnames", nodelist], stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
    if proc.returncode or not nodelist:
        raise RuntimeError("scontrol show hostnames %r: %s" % (nodelist, proc.stderr.decode(errors="replace").strip()[-500:]))
    return proc.stdout.decode(errors="replace").split()


def master_address(host):
    """How the other nodes reach `host`: its name where it resolves, else Slurm's NodeAddr for it (node
    names need not be host names: a test cluster runs several slurmd under made-up names on one machine)."""
    import subprocess

    try:
        socket.getaddrinfo(host, None)
        return host
    except socket.gaierror:
        proc = subprocess.run(["scontrol", "show", "node", "-o", host], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, timeout=60)
        fields = dict(token.split("=", 1) for token in proc.stdout.decode(errors="replace").split() if "=" in token)
        return fields.get("NodeAddr") or host


def srun_command(worker, nodes, per_node, hosts, worker_args):
    """srun starting the DDP worker on the first `nodes` hosts of this job, one task per GPU. --ntasks is
    given because srun reads the job's SLURM_NTASKS as its default -n; --nodelist keeps rank 0 on hosts[0];
    --export=ALL because a job submitted with --export=NONE would start the tasks without MASTER_ADDR/PORT."""
    return ["srun", "--export=ALL", "--nodes", str(nodes), "--ntasks", str(nodes * per_node), "--ntasks-per-node", str(per_node),
            "--nodelist", ",".join(hosts[:nodes]), "--kill-on-bad-exit=1", sys.executable, worker] + list(worker_args)


def srun_worker(worker, nodes, per_node, worker_args, timeout=600):
    """Run the DDP worker across `nodes` nodes of this Slurm job -> its result. Ranks come from SLURM_PROCID
    (ddp_worker maps them), the rendezvous from MASTER_ADDR/MASTER_PORT set here."""
    import shutil
    import subprocess
    import tempfile

    if not os.environ.get("SLURM_JOB_ID") or not shutil.which("srun"):
        raise Unsupported(NOT_IN_SLURM)
    hosts = slurm_hosts()
    if len(hosts) < nodes:
        raise Unsupported("%d nodes asked, this Slurm job has %d (%s)" % (nodes, len(hosts), ",".join(hosts)))
    # ddp_worker takes RANK/WORLD_SIZE as torchrun's when set: only SLURM_PROCID/SLURM_NTASKS may speak
    env = dict((k, v) for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"))
    with socket.socket() as s:  # this is hosts[0], where rank 0 listens: a port free here
        s.bind(("", 0))
        env["MASTER_PORT"] = str(s.getsockname()[1])
    env["MASTER_ADDR"] = master_address(hosts[0])
    # rank 0 writes the result on hosts[0]: into the job directory, which every node shares
    handle, out = tempfile.mkstemp(prefix="gpucompat-scale-", suffix=".json", dir=os.getcwd())
    os.close(handle)
    try:
        command = srun_command(worker, nodes, per_node, hosts, list(worker_args) + ["--result", out])
        LOG.info("scaling: MASTER_ADDR=%s MASTER_PORT=%s %s", env["MASTER_ADDR"], env["MASTER_PORT"], " ".join(command))
        proc = subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, timeout=timeout)
        if proc.returncode:
            raise RuntimeError("srun exited %d: %s" % (proc.returncode, proc.stderr.decode(errors="replace")[-1500:]))
        with open(out) as result:
            return json.load(result)
    finally:
        os.unlink(out)
