"""The RayClusters both sides render: KubeRay's samples, rayscale's examples, our edge cases.

Every document gets an id naming where it comes from (``sample:ray-cluster.complete.yaml``,
``example:raycluster-basic.yaml``, ``case:custom-head-service.yaml``; ``#2`` for the second
RayCluster of a file). known.yaml and allowlist.yaml refer to documents by these ids.
"""

from __future__ import annotations

import copy
import dataclasses
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
CASES = Path(__file__).resolve().parent / "cases"
NAMESPACE = "default"
UID = "00000000-0000-4000-8000-000000000001"  # the oracle's stand-in uid too


@dataclasses.dataclass(frozen=True)
class Document:
    id: str
    body: dict[str, Any]


def rayclusters(path: Path, prefix: str, base: Path) -> list[Document]:
    """The RayCluster documents of one YAML file, ids ``<prefix>:<path below base>[#n]``."""
    found = [d for d in yaml.safe_load_all(path.read_text(encoding="utf-8")) if _is_raycluster(d)]
    out = []
    for i, doc in enumerate(found, start=1):
        body = copy.deepcopy(doc)
        meta = body.setdefault("metadata", {})
        # What the API server would give it in a fresh namespace (and what the oracle assumes).
        meta.setdefault("namespace", NAMESPACE)
        meta.setdefault("uid", UID)
        suffix = f"#{i}" if len(found) > 1 else ""
        out.append(Document(f"{prefix}:{path.relative_to(base).as_posix()}{suffix}", body))
    return out


def _is_raycluster(doc: Any) -> bool:
    return isinstance(doc, dict) and doc.get("kind") == "RayCluster"


def load(samples_dir: Path) -> list[Document]:
    """KubeRay's samples (from the Go module cache), rayscale's examples, then tests/kuberay/cases."""
    docs: list[Document] = []
    for path in sorted(samples_dir.rglob("*.yaml")):
        docs += rayclusters(path, "sample", samples_dir)
    for path in sorted(EXAMPLES.rglob("*.yaml")):
        docs += rayclusters(path, "example", EXAMPLES)
    for path in sorted(CASES.glob("*.yaml")):
        docs += rayclusters(path, "case", CASES)
    return docs
