"""The GPU and driver a question is about: as given (--gpu or --cc, --driver), or, for what is not
given, this machine's own, read through NVML (nvidia-smi where NVML cannot be loaded) the way
`discover --source local` reads them, and said so."""

from __future__ import annotations

import os

from ..errors import UserError
from ..knowledge import tables
from ..plan import CC_VERSION, DRIVER_VERSION

MAX_NAME_CHARS = 200


def target(gpu: str | None, cc: str | None, driver: str) -> dict:
    if bool(gpu) == bool(cc):
        raise UserError("give the GPU as either --gpu NAME or --cc X.Y (one of them).")
    if not isinstance(driver, str) or not DRIVER_VERSION.fullmatch(driver):
        raise UserError(f"--driver {str(driver)[:40]!r} is not a driver version like '535.104.05'.")
    row = None
    if gpu:
        if len(gpu) > MAX_NAME_CHARS:
            raise UserError(f"--gpu is {len(gpu)} characters long; a GPU name needs at most {MAX_NAME_CHARS}.")
        row = tables.gpu(gpu)  # an unknown name is not an error: the prediction says it cannot judge
        cc = row["cc"] if row else None
    elif not CC_VERSION.fullmatch(cc):
        raise UserError(f"--cc {cc[:40]!r} is not a compute capability like '8.0'.")
    supported = tables.driver_cuda(driver)
    return {"gpu": gpu, "matched": row["name"] if row else None, "cc": cc, "cc_source": row["source"] if row else None,
            "cc_confidence": row.get("confidence", "high") if row else None, "driver": driver,
            "driver_cuda": supported["cuda"] if supported else None}


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


def where(gpu: str | None, cc: str | None, driver: str | None) -> tuple[dict, list[str]]:
    """(the target, notes): what is not given is this machine's; a machine without a GPU asks for it in one sentence."""
    if (gpu or cc) and driver:
        return target(gpu, cc, driver), []
    here = this_machine()
    if here is None:
        missing = "--gpu NAME (or --cc X.Y) and --driver VERSION" if not (gpu or cc) else "--driver VERSION"
        raise UserError(f"no NVIDIA GPU is visible on this machine (NVML and nvidia-smi found none), so say which to ask about: give {missing}.")
    driver = driver or here["driver"]
    if gpu or cc:
        found = target(gpu, cc, driver)
        return found, [f"driver {here['driver']}: this machine's, read through {here['source']} (give --driver to ask about another)"]
    found = target(here["gpu"], None, driver)
    if here["cc"] and found["cc"] != here["cc"]:  # NVML's own compute capability outranks a name lookup
        found.update(cc=here["cc"], cc_source=here["source"], cc_confidence="high")
    more = f"; it has {here['classes']} GPU classes, this is GPU {here['index']} (give --gpu for another)" if here["classes"] > 1 else ""
    what = "GPU" if driver != here["driver"] else "GPU and driver"
    return found, [f"{what}: this machine's {here['gpu']}{', driver ' + here['driver'] if what != 'GPU' else ''}, read through {here['source']}{more}"]
