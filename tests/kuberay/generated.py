"""RayClusters generated from the CRD's schema, judged beside the samples (ids ``generated:<n>``).

``COUNT`` clusters from a fixed ``SEED``: the same ones every run. Each spec is drawn by walking the
RayCluster schema rayscale serves (``rayscale.api.crd.object_schema``, the one crds/ holds): every
optional field is present with probability ``P_FIELD``; enums, booleans, integer bounds and
required fields come from the schema; strings, maps and list items from a small vocabulary of
values Ray and Kubernetes accept, since a random string would only be refused by both sides. Not
drawn: the pod templates (``examples/raycluster-basic.yaml``'s), the head Service and other
embedded core objects, and the fields rayscale refuses by design (docs/controller.md: ingressOptions,
networkPolicy, tlsOptions, historyServerOptions, the rocksdb GCS backend and its storage), and the
fields KubeRay v1.6.2 does not have (a group's ``priority``, ``scaleStrategy.scaleGate``).
"""

from __future__ import annotations

import copy
import random
from collections.abc import Mapping
from typing import Any

from rayscale.api import names
from rayscale.api.crd import object_schema
from rayscale.api.registry import RAYCLUSTER
from tests.kuberay import documents

SEED = 20260101
COUNT = 12
P_FIELD = 0.4
#: never drawn (see the module's doc), by property name
SKIPPED = frozenset({
    "template", "headService", "ingressOptions", "networkPolicy", "tlsOptions", "historyServerOptions",
    "storage", "securityContext", "env", "envFrom", "volumeMounts", "command", "args", "valueFrom",
    "priority",  # rayscale's own (Ray 2.56's group priority): KubeRay v1.6.2 has no such field
    "scaleGate",  # KubeRay's later scaleStrategy.scaleGate: KubeRay v1.6.2 has no such field
})  # fmt: skip
STRINGS: dict[str, list[str]] = {
    "rayVersion": ["2.55.0", "2.55.0", "2.46.0"],
    "serviceType": ["ClusterIP", "NodePort", "LoadBalancer"],
    "imagePullPolicy": ["Always", "IfNotPresent"],
    "image": ["rayproject/ray:2.55.0"],
    "redisAddress": ["redis:6379", "redis://redis.example:6380"],
    "externalStorageNamespace": ["ns-one"],
    "value": ["s3cr3t"],
    "secretName": ["my-auth-token"],
    "managedBy": ["ray.io/kuberay-operator"],
    "backend": ["redis"],
    "workersToDelete": ["gone-pod-a", "gone-pod-b"],
}
MAPS: dict[str, dict[str, str]] = {
    # no resource fields: with a group's `resources` both sides refuse them (one verdict, less to see)
    "rayStartParams": {"dashboard-host": "0.0.0.0", "metrics-export-port": "8080",
                       "object-store-memory": "100000000", "block": "true"},
    "headServiceAnnotations": {"example.com/team": "ray", "example.com/tier": "1"},
    "labels": {"team": "ray", "tier": "1"},
    "resources": {"CPU": "1", "memory": "2000000000"},
}  # fmt: skip
INTS: dict[str, tuple[int, int]] = {
    "replicas": (0, 3), "minReplicas": (0, 2), "maxReplicas": (1, 4), "numOfHosts": (1, 2),
    "idleTimeoutSeconds": (0, 120), "priority": (0, 3),
}  # fmt: skip


def _draw(schema: Mapping[str, Any], name: str, rng: random.Random) -> Any:
    if "enum" in schema:
        choices = [v for v in schema["enum"] if v in STRINGS.get(name, schema["enum"])]
        return rng.choice(choices)
    kind = schema.get("type")
    if kind == "boolean":
        return rng.random() < 0.5
    if kind == "integer":
        low, high = INTS.get(name, (0, 3))
        return rng.randint(max(low, schema.get("minimum", low)), high)
    if kind == "string":
        return rng.choice(STRINGS.get(name, ["x"]))
    if kind == "array":
        items = schema.get("items") or {}
        return [_draw(items, name, rng) for _ in range(rng.randint(1, 2))]
    if kind == "object" and "properties" in schema:
        return _object(schema, rng)
    if kind == "object":
        vocabulary = MAPS.get(name, {})
        keys = rng.sample(sorted(vocabulary), k=min(len(vocabulary), rng.randint(0, 2)))
        return {k: vocabulary[k] for k in keys}
    return None


def _object(schema: Mapping[str, Any], rng: random.Random) -> dict[str, Any]:
    required = set(schema.get("required") or [])
    out: dict[str, Any] = {}
    for name, sub in (schema.get("properties") or {}).items():
        if name in SKIPPED or sub.get("x-kubernetes-preserve-unknown-fields"):
            continue
        if name in required or rng.random() < P_FIELD:
            value = _draw(sub, name, rng)
            if value is not None:
                out[name] = value
    return out


def _cluster(i: int, rng: random.Random, base: Mapping[str, Any]) -> dict[str, Any]:
    spec_schema = object_schema(RAYCLUSTER)["properties"]["spec"]
    spec = _object(spec_schema, rng)
    head = spec.setdefault("headGroupSpec", {})
    head.setdefault("rayStartParams", {})
    head["template"] = copy.deepcopy(base["spec"]["headGroupSpec"]["template"])
    groups = spec.get("workerGroupSpecs") or []
    worker = base["spec"]["workerGroupSpecs"][0]
    for n, group in enumerate(groups):
        group["groupName"] = f"group-{n}"
        group.setdefault("rayStartParams", {})
        group["template"] = copy.deepcopy(worker["template"])
    meta: dict[str, Any] = {"name": f"generated-{i}", "namespace": documents.NAMESPACE, "uid": documents.UID}
    if rng.random() < P_FIELD:
        annotations = {"ray.io/enable-serve-service": "true", "ray.io/ft-enabled": "true"}
        key = rng.choice(sorted(annotations))
        meta["annotations"] = {key: annotations[key]}
    return {**names.RAYCLUSTER.type_meta(), "metadata": meta, "spec": spec}


def load() -> list[documents.Document]:
    """The ``COUNT`` generated RayClusters (the same every run)."""
    rng = random.Random(SEED)
    (base,) = documents.rayclusters(documents.EXAMPLES / "raycluster-basic.yaml", "e", documents.EXAMPLES)
    return [documents.Document(f"generated:{i}", _cluster(i, rng, base.body)) for i in range(COUNT)]
