"""Kubernetes: GPU classes from GPU Feature Discovery's node labels, through the official client.

Labels read (GFD / NVIDIA GPU operator): nvidia.com/gpu.product, nvidia.com/gpu.compute.major
and .minor, nvidia.com/cuda.driver-version.major/.minor/.revision (the driver's own version;
older GFD: nvidia.com/cuda.driver.major/.minor/.rev), nvidia.com/cuda.runtime-version.major/.minor
(the CUDA version the driver supports), nvidia.com/gpu.count, nvidia.com/gpu.memory,
nvidia.com/mig.strategy. The labels that identify a class become its nodeSelector.
"""

from __future__ import annotations

from ..errors import UserError
from ..model import Target

PREFIX = "nvidia.com/"
SELECTOR_LABELS = ("nvidia.com/gpu.product", "nvidia.com/gpu.compute.major", "nvidia.com/gpu.compute.minor")


def _version(labels: dict, *stems: str) -> str | None:
    for stem in stems:
        parts = [labels.get(f"{PREFIX}{stem}.{p}") for p in ("major", "minor", "revision", "rev")]
        found = [p for p in parts if p]
        if found:
            return ".".join(found)
    return None


def classes_from_nodes(nodes: list[dict]) -> list[Target]:
    """Node objects as the API returns them (dicts) -> GPU classes."""
    groups: dict[tuple, dict] = {}
    for node in nodes:
        labels = (node.get("metadata") or {}).get("labels") or {}
        allocatable = (node.get("status") or {}).get("allocatable") or {}
        count = int(labels.get(f"{PREFIX}gpu.count") or allocatable.get(f"{PREFIX}gpu") or 0)
        if not count or f"{PREFIX}gpu.product" not in labels:
            continue
        major, minor = labels.get(f"{PREFIX}gpu.compute.major"), labels.get(f"{PREFIX}gpu.compute.minor")
        key = (
            labels[f"{PREFIX}gpu.product"], f"{major}.{minor}" if major and minor else None,
            _version(labels, "cuda.driver-version", "cuda.driver"), _version(labels, "cuda.runtime-version", "cuda.runtime"),
            int(labels[f"{PREFIX}gpu.memory"]) if labels.get(f"{PREFIX}gpu.memory", "").isdigit() else None,
            labels.get(f"{PREFIX}mig.strategy", "none"),
            tuple(f"{k}={labels[k]}" for k in SELECTOR_LABELS if k in labels),
        )
        group = groups.setdefault(key, {"count": 0, "nodes": []})
        group["count"] += count
        group["nodes"].append((node.get("metadata") or {}).get("name", "?"))
    return [
        Target(name=product.replace("-", " "), cc=cc, driver=driver, cuda_driver=cuda, memory_mib=memory, count=g["count"],
               selector=selector, nodes=tuple(g["nodes"]), mig=None if mig == "none" else True)
        for (product, cc, driver, cuda, memory, mig, selector), g in sorted(groups.items(), key=lambda item: item[0][0])
    ]


def api():
    """A CoreV1Api from the kubeconfig (or the in-cluster service account)."""
    try:
        from kubernetes import client, config
    except ImportError:
        raise UserError("Kubernetes needs the official client: pip install 'gpucompat[kubernetes]'.") from None
    try:
        config.load_kube_config()
    except Exception:  # noqa: BLE001 - any kubeconfig problem: try in-cluster, then say so
        try:
            config.load_incluster_config()
        except Exception:  # noqa: BLE001
            raise UserError("no Kubernetes cluster configured: no usable kubeconfig and not running in a pod.") from None
    return client


def discover() -> list[Target]:
    client = api()
    try:
        nodes = client.CoreV1Api().list_node(_request_timeout=60)
    except Exception as exc:  # noqa: BLE001 - the API's errors are many; one sentence for all
        raise UserError(f"listing the Kubernetes nodes failed: {exc.__class__.__name__}: {str(exc)[:200]}") from None
    return classes_from_nodes([client.ApiClient().sanitize_for_serialization(n) for n in nodes.items])
