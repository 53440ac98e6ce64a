"""Wheel file names read for what they say: the Python versions and platforms a wheel serves.

Shared by tools/build_python_wheels.py (which built python_wheels.csv from PyPI's file lists) and
`gpucompat knowledge update` (which learns the same columns for releases newer than that table).
"""

from __future__ import annotations

import re

_LINUX_X86_64 = re.compile(r"manylinux1_x86_64|manylinux2010_x86_64|manylinux2014_x86_64"
                           r"|manylinux_[0-9]+_[0-9]+_x86_64|linux_x86_64", re.ASCII)


def wheel_tags(filename: str) -> tuple[list[str], list[str], list[str]] | None:
    """Split a wheel filename into (python tags, abi tags, platform tags).

    Compressed tag sets (``cp36.cp37``, ``manylinux_2_17_x86_64.manylinux2014_x86_64``)
    are expanded.  Returns None for a file that is not a wheel.
    """
    if not filename.endswith(".whl"):
        return None
    parts = filename[:-4].split("-")
    # name-version[-build]-python-abi-platform
    if len(parts) not in (5, 6):
        return None
    py, abi, plat = parts[-3], parts[-2], parts[-1]
    return py.split("."), abi.split("."), plat.split(".")


def is_linux_x86_64(platforms: list[str]) -> bool:
    return any(_LINUX_X86_64.fullmatch(p) for p in platforms)


def python_tokens(pys: list[str], abis: list[str]) -> set[str]:
    """Python versions a Linux wheel serves, as tokens for the pythons column."""
    out: set[str] = set()
    for py in pys:
        m = re.fullmatch(r"cp([0-9])([0-9]+)", py)
        if m:
            ver = f"{m.group(1)}.{m.group(2)}"
            if "abi3" in abis:
                out.add(f"abi3 from {ver}")
                continue
            free = any(re.fullmatch(rf"cp{m.group(1)}{m.group(2)}t", a) for a in abis)
            plain = any(a == "none" or re.fullmatch(rf"cp{m.group(1)}{m.group(2)}(d?m?u?)", a)
                        for a in abis)
            if free:
                out.add(ver + "t")
            if plain or not free:
                out.add(ver)
            continue
        m = re.fullmatch(r"py([0-9])([0-9]*)", py)
        if m:
            out.add(f"py{m.group(1)}")
    return out


def _token_key(tok: str):
    m = re.fullmatch(r"([0-9]+)\.([0-9]+)(t?)", tok)
    if m:
        return (0, int(m.group(1)), int(m.group(2)), m.group(3))
    m = re.fullmatch(r"abi3 from ([0-9]+)\.([0-9]+)", tok)
    if m:
        return (1, int(m.group(1)), int(m.group(2)), "")
    return (2, 0, 0, tok)


def sort_tokens(tokens) -> list[str]:
    return sorted(set(tokens), key=_token_key)
