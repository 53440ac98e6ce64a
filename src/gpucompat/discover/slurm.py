"""Slurm: GPU classes from `scontrol show node -o` (one line of Key=Value per node).

A class is a GRES type with the node features that come with it (`gpu:a100:4` on nodes
with `Feature=hbm` is one class). Slurm does not know compute capabilities or drivers;
the GPU type is matched against the knowledge's GPU names where it can be (a100 -> 8.0).
"""

from __future__ import annotations

import re
import shlex

from ..errors import UserError
from ..knowledge import tables
from ..model import Target
from .command import run_command

_GRES = re.compile(r"^gpu(?::(?P<type>[^:(]+))?(?::(?P<count>\d+))?")


def parse_node_line(line: str) -> dict[str, str]:
    """'NodeName=a1 Gres=gpu:a100:4(S:0-1) ...' -> {'NodeName': 'a1', 'Gres': 'gpu:a100:4(S:0-1)', ...}."""
    fields, key = {}, None
    for token in line.split():
        if "=" in token and re.match(r"^[A-Za-z_]+=", token):
            key, value = token.split("=", 1)
            fields[key] = value
        elif key:  # a value with spaces (OS=Linux 5.14 ...) continues the previous field
            fields[key] += " " + token
    return fields


def gpu_gres(gres: str) -> list[tuple[str | None, int]]:
    """'gpu:a100:4(S:0-1),gpu:h100:2,shard:8' -> [('a100', 4), ('h100', 2)]."""
    found = []
    for item in re.split(r",(?![^(]*\))", gres or ""):
        match = _GRES.match(item.strip())
        if match and item.strip().startswith("gpu"):
            count = int(match.group("count")) if match.group("count") else 1
            kind = match.group("type")
            if kind and kind.isdigit() and not match.group("count"):  # gpu:4 is a count, not a type
                kind, count = None, int(kind)
            found.append((kind, count))
    return found


def classes_from_nodes(text: str) -> list[Target]:
    groups: dict[tuple, dict] = {}
    for line in text.splitlines():
        if not line.strip().startswith("NodeName="):
            continue
        node = parse_node_line(line)
        features = tuple(sorted(f for f in node.get("AvailableFeatures", "").split(",") if f and f != "(null)"))
        for kind, count in gpu_gres(node.get("Gres", "")):
            group = groups.setdefault((kind, features), {"count": 0, "nodes": []})
            group["count"] += count
            group["nodes"].append(node["NodeName"])
    targets = []
    for (kind, features), group in sorted(groups.items(), key=lambda item: (item[0][0] or "", item[0][1])):
        known = tables.gpu(kind.replace("_", " ")) if kind else None
        targets.append(Target(
            name=known["name"] if known else (kind or "gpu (no type)"), cc=known["cc"] if known else None,
            count=group["count"], gres=kind, features=features, nodes=tuple(group["nodes"]),
        ))
    return targets


def discover() -> list[Target]:
    command = ["scontrol", "show", "node", "-o"]
    proc = run_command(command, 60, "a Slurm submit host")
    if proc.returncode != 0:
        raise UserError(f"{shlex.join(command)} failed: {' '.join(proc.stderr.split())[:300]}")  # one line, however many scontrol wrote
    return classes_from_nodes(proc.stdout)
