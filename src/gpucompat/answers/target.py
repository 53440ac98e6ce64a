"""The GPU and driver a question is about: as given (--gpu or --cc, --driver), or, for what is not
given, this machine's own, read through NVML (nvidia-smi where NVML cannot be loaded) the way
`discover --source local` reads them, and said so.

A GPU name as typed is read as the tables hold it where it can be without guessing: 'RTX4090' is
'RTX 4090' (GeForce RTX 4090), said in a note. A name close to names the tables hold gets one sentence
asking which was meant ('RTX 4909': did you mean GeForce RTX 4090?); another vendor's GPU (AMD's MI250X,
Intel's Max 1550) one sentence saying gpucompat judges NVIDIA CUDA stacks only. A name far from every
known one is not an error: the answer says its compute capability is unknown and asks for --cc."""

from __future__ import annotations

import os

from ..errors import UserError
from ..knowledge import gpus, tables
from ..model import CC_VERSION, DRIVER_VERSION

MAX_NAME_CHARS = 200


def gpu_row(name: str) -> tuple[dict | None, str | None]:
    """(the table row for a GPU name as a person typed it, how it was read where that is not literally it)."""
    row = tables.gpu(name)
    if row is not None:
        return row, None
    shown = name if len(name) <= 60 else name[:60] + "..."
    if vendor := gpus.other_vendor(name):
        raise UserError(f"{shown!r} is an {vendor} GPU: gpucompat judges NVIDIA CUDA stacks only, so it has no answer for it.")
    if found := gpus.respelled(name):
        spelled, row = found
        return row, f"--gpu {shown!r} read as {spelled!r}: {row['name']} (CC {row['cc']})"
    if close := gpus.suggestions(name):
        meant = close[0] if len(close) == 1 else ", ".join(close[:-1]) + " or " + close[-1]
        raise UserError(f"the knowledge holds no GPU named {shown!r}: did you mean {meant} (or, for a GPU it does not hold yet, --cc X.Y)?")
    return None, None


def target(gpu: str | None, cc: str | None, driver: str, typed: bool = True) -> dict:
    """`typed`: the GPU name is what a person wrote (read as gpu_row reads it), not what a driver reported."""
    if bool(gpu) == bool(cc):
        raise UserError("give the GPU as either --gpu NAME or --cc X.Y (one of them).")
    if not isinstance(driver, str) or not DRIVER_VERSION.fullmatch(driver):
        raise UserError(f"--driver {str(driver)[:40]!r} is not a driver version like '535.104.05'.")
    row, read_as = None, None
    if gpu:
        if len(gpu) > MAX_NAME_CHARS:
            raise UserError(f"--gpu is {len(gpu)} characters long; a GPU name needs at most {MAX_NAME_CHARS}.")
        # a name far from every known one is not an error: the prediction says it cannot judge
        row, read_as = gpu_row(gpu) if typed else (tables.gpu(gpu), None)
        cc = row["cc"] if row else None
    elif not CC_VERSION.fullmatch(cc):
        raise UserError(f"--cc {cc[:40]!r} is not a compute capability like '8.0'.")
    supported = tables.driver_cuda(driver)
    return {"gpu": gpu, "matched": row["name"] if row else None, "cc": cc, "cc_source": row["source"] if row else None,
            "cc_confidence": row.get("confidence", "high") if row else None, "driver": driver,
            "driver_cuda": supported["cuda"] if supported else None, "gpu_read_as": read_as}


def this_machine() -> dict | None:
    """This machine's first visible GPU (name, compute capability, driver), how many GPU classes it has and where that
    was read; None where there is none (no driver, or CUDA_VISIBLE_DEVICES hides them all)."""
    from ..discover.local import all_gpus, visible

    gpus, source = all_gpus()
    shown = visible(gpus, os.environ.get("CUDA_VISIBLE_DEVICES"))
    if not shown or not shown[0].driver:
        return None
    first = shown[0]
    return {"gpu": first.name, "cc": first.cc, "driver": first.driver, "source": source,
            "classes": len({(g.name, g.cc) for g in shown}), "index": first.index}


def _reading(found: dict) -> list[str]:
    return [found["gpu_read_as"]] if found.get("gpu_read_as") else []


def where(gpu: str | None, cc: str | None, driver: str | None) -> tuple[dict, list[str]]:
    """(the target, notes): what is not given is this machine's; a machine without a GPU asks for it in one sentence."""
    if (gpu or cc) and driver:
        found = target(gpu, cc, driver)
        return found, _reading(found)
    here = this_machine()
    if here is None:
        missing = "--gpu NAME (or --cc X.Y) and --driver VERSION" if not (gpu or cc) else "--driver VERSION"
        raise UserError(f"no NVIDIA GPU is visible on this machine (NVML and nvidia-smi found none), so say which to ask about: give {missing}.")
    driver = driver or here["driver"]
    if gpu or cc:
        found = target(gpu, cc, driver)
        return found, _reading(found) + [f"driver {here['driver']}: this machine's, read through {here['source']} (give --driver to ask about another)"]
    found = target(here["gpu"], None, driver, typed=False)
    if here["cc"] and found["cc"] != here["cc"]:  # NVML's own compute capability outranks a name lookup
        found.update(cc=here["cc"], cc_source=here["source"], cc_confidence="high")
    more = f"; it has {here['classes']} GPU classes, this is GPU {here['index']} (give --gpu for another)" if here["classes"] > 1 else ""
    what = "GPU" if driver != here["driver"] else "GPU and driver"
    return found, [f"{what}: this machine's {here['gpu']}{', driver ' + here['driver'] if what != 'GPU' else ''}, read through {here['source']}{more}"]
