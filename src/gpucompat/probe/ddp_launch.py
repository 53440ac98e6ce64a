"""The DDP worker's launcher environment: RANK, WORLD_SIZE, LOCAL_RANK and MASTER_* from torchrun, from
Slurm's srun, or a world of one (see ddp_worker's docstring); a bad one is a UsageError."""

import os
import socket


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
