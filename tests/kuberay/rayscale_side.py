"""rayscale's side: the same RayCluster rendered by rayscale's own controller code.

Nothing of the controller is restated here. Each round is what
``rayscale.controller.runner.RayClusterController.reconcile`` does, with its Kubernetes calls
replaced by lists: ``plan_cluster`` over a snapshot of what exists, the plan's Secrets, Services
and pod steps applied, then ``compute_status`` (or ``invalid_status``), written as a merge patch
(``status_patch``). Rounds repeat until nothing changes, as the oracle does with KubeRay.

What stands in for the API server is the same as in the oracle (tools/kuberay-oracle/main.go):
rayscale's own CRD defaults (its structural schema, ``rayscale.api.crd.object_schema``) applied
to the document, generation 1, names from ``generateName`` plus 5 random characters, and for a
new Service its type, a cluster IP (``CLUSTER_IP``), its ports' targetPort and protocol.
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
import random
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from typing import Any

from rayscale.api.crd import object_schema
from rayscale.api.registry import RAYCLUSTER
from rayscale.batch.model import resized
from rayscale.batch.registry import lookup
from rayscale.cluster.meta import ClusterMeta
from rayscale.cluster.naming import AUTH_TOKEN_KEY
from rayscale.cluster.validation import Invalid
from rayscale.common.types import Manifest
from rayscale.controller import tokenauth
from rayscale.controller.apply import NOT_EXPECTED
from rayscale.controller.expectations import ScaleExpectations
from rayscale.controller.plan import Plan
from rayscale.controller.reconcile import PlannerOptions, plan_cluster
from rayscale.controller.snapshot import ClusterSnapshot
from rayscale.controller.status import (
    ReconcileError,
    compute_status,
    invalid_status,
    status_changed,
    status_patch,
)

MAX_ROUNDS = 8  # as the oracle
# KubeRay's environment switches (the oracle clears them too); rayscale honours the ones it
# implements under the same names.
KUBERAY_SWITCHES = (
    "CLUSTER_DOMAIN", "ENABLE_INIT_CONTAINER_INJECTION", "ENABLE_PROBES_INJECTION",
    "ENABLE_RANDOM_POD_DELETE", "ENABLE_GCS_FT_REDIS_CLEANUP", "ENABLE_DETERMINISTIC_HEAD_POD_NAME",
    "RAYCLUSTER_DEFAULT_REQUEUE_SECONDS_ENV", "ENABLE_LOGIN_SHELL", "ENABLE_RAY_HEAD_CLUSTER_IP_SERVICE",
    "USE_INGRESS_ON_OPENSHIFT",
)  # fmt: skip
CLUSTER_IP = "10.96.0.10"  # as the oracle
CREATED = "2026-01-01T00:00:00Z"  # as the oracle
NOW = datetime(2026, 1, 1, 0, 1, tzinfo=UTC)
_NAME_CHARS = "bcdfghjklmnpqrstvwxz2456789"  # the API server's generateName alphabet


def structural_default(obj: Any, schema: Mapping[str, Any]) -> None:
    """The API server's structural defaulting: a property's default fills it when absent."""
    if isinstance(obj, dict):
        props: Mapping[str, Any] = schema.get("properties") or {}
        for key, sub in props.items():
            if key not in obj and "default" in sub:
                obj[key] = copy.deepcopy(sub["default"])
            if key in obj:
                structural_default(obj[key], sub)
        extra = schema.get("additionalProperties")
        if isinstance(extra, Mapping):
            for key, value in obj.items():
                if key not in props:
                    structural_default(value, extra)
    elif isinstance(obj, list) and isinstance(schema.get("items"), Mapping):
        for item in obj:
            structural_default(item, schema["items"])


def admit(doc: Mapping[str, Any]) -> Manifest:
    """The document as rayscale's CRD stores it."""
    body = copy.deepcopy(dict(doc))
    structural_default(body, object_schema(RAYCLUSTER))
    meta = body.setdefault("metadata", {})
    meta.update(generation=1, creationTimestamp=CREATED)
    body.pop("status", None)
    return body


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386, as the API server applies rayscale's status patches."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_patch(out.get(key), value)
    return out


def stored_service(svc: Manifest) -> Manifest:
    stored = copy.deepcopy(svc)
    spec = stored.setdefault("spec", {})
    spec.setdefault("type", "ClusterIP")
    if not spec.get("clusterIP") and spec.get("type") != "ExternalName":
        spec["clusterIP"] = CLUSTER_IP
    for port in spec.get("ports") or []:
        port.setdefault("protocol", "TCP")
        if port.get("targetPort") in (None, 0, ""):
            port["targetPort"] = port["port"]
    return stored


def _stored_pod(manifest: Manifest, rng: random.Random) -> Manifest:
    pod = copy.deepcopy(manifest)
    meta = pod["metadata"]
    if not meta.get("name"):
        meta["name"] = meta["generateName"] + "".join(rng.choice(_NAME_CHARS) for _ in range(5))
    return pod


def _apply(plan: Plan, meta: ClusterMeta, objects: dict[str, list[Manifest]],
           expectations: ScaleExpectations, rng: random.Random) -> None:  # fmt: skip
    """What PlanApplier does, against lists: Secrets (once, with a fresh token), Ingresses, Services, then
    each step's deletes and creates."""
    pods, services, secrets = objects["pods"], objects["services"], objects["secrets"]
    for manifest in plan.secrets:
        if all(s["metadata"]["name"] != manifest["metadata"]["name"] for s in secrets):
            secret = copy.deepcopy(manifest)
            secret["stringData"] = {AUTH_TOKEN_KEY: tokenauth.new_token()}
            secrets.append(secret)
    for manifest in plan.rbac:
        if all((o["kind"], o["metadata"]["name"]) != (manifest["kind"], manifest["metadata"]["name"])
               for o in objects["rbac"]):  # fmt: skip
            objects["rbac"].append(copy.deepcopy(manifest))
    if plan.pod_group is not None:  # what PodGroupKeeper does: created once, resized when it resizes
        want, groups = plan.pod_group, objects["podgroups"]
        same = [i for i, g in enumerate(groups) if g["apiVersion"] == want.manifest["apiVersion"]
                and g["metadata"]["name"] == want.name]  # fmt: skip
        if not same:
            groups.append(copy.deepcopy(want.manifest))
        elif (update := resized(groups[same[0]], want)) is not None:
            groups[same[0]] = copy.deepcopy(update)
    ingresses = objects["ingresses"]
    for manifest in plan.ingresses:
        if all(i["metadata"]["name"] != manifest["metadata"]["name"] for i in ingresses):
            ingresses.append(copy.deepcopy(manifest))
    names = {s["metadata"]["name"] for s in services}
    for svc in plan.services:
        if svc["metadata"]["name"] not in names:
            services.append(stored_service(svc))
    for step in plan.steps:
        gone = {d.name for d in step.deletes}
        pods[:] = [p for p in pods if p["metadata"]["name"] not in gone]
        for d in step.deletes:
            if d.why not in NOT_EXPECTED:
                expectations.expect((meta.namespace, meta.name, d.group), d.name, "delete")
        for create in step.creates:
            pod = _stored_pod(create.manifest, rng)
            pods.append(pod)
            expectations.expect((meta.namespace, meta.name, create.group), pod["metadata"]["name"], "create")


@contextlib.contextmanager
def kuberay_defaults() -> Iterator[None]:
    """The controller's environment switches unset, as in the oracle."""
    saved = {name: os.environ.pop(name) for name in KUBERAY_SWITCHES if name in os.environ}
    try:
        yield
    finally:
        os.environ.update(saved)


def render(
    doc: Mapping[str, Any], *, seed: int = 0, sidecar: bool = False, batch: str = ""
) -> dict[str, Any]:
    """What rayscale creates for one RayCluster document, shaped like one oracle answer;
    ``sidecar``: as ``rayscale run --mode controller`` (Ray's autoscaler in the head pod);
    ``batch``: as ``rayscale run --batch-scheduler BATCH``."""
    with kuberay_defaults():
        return _render(doc, seed, sidecar, batch)


def _render(doc: Mapping[str, Any], seed: int, sidecar: bool, batch: str) -> dict[str, Any]:
    body = admit(doc)
    meta = ClusterMeta.from_body(body)
    objects: dict[str, list[Manifest]] = {
        "pods": [],
        "services": [],
        "secrets": [],
        "ingresses": [],
        "rbac": [],
        "podgroups": [],
    }
    options = PlannerOptions(sidecar_autoscaler=sidecar, batch=lookup(batch))
    pods, services = objects["pods"], objects["services"]
    expectations = ScaleExpectations(clock=lambda: NOW.timestamp())
    rng = random.Random(seed)
    invalid: dict[str, str] | None = None
    errors: list[str] = []
    rounds, last, settled = 0, "", False
    while not settled:
        if rounds == MAX_ROUNDS:
            errors.append(f"still changing after {MAX_ROUNDS} rounds")
            break
        rounds += 1
        snapshot = ClusterSnapshot(
            body, [copy.deepcopy(p) for p in pods], [copy.deepcopy(s) for s in services]
        )
        plan, spec = plan_cluster(snapshot, expectations, options)
        if plan.skip or spec is None:
            break
        if plan.add_finalizer is not None:  # what the runner does before anything else
            body["metadata"]["finalizers"] = [*body["metadata"].get("finalizers", []), plan.add_finalizer]
            meta = ClusterMeta.from_body(body)
            continue
        old = snapshot.stored_status
        if isinstance(spec, Invalid):
            invalid = {"reason": spec.reason, "message": spec.message}
            new = invalid_status(meta, old, spec.reason, spec.message, now=NOW)
        else:
            if plan.error:
                errors.append(f"round {rounds}: {plan.error}")
            error = ReconcileError(plan.error) if plan.error else None
            _apply(plan, meta, objects, expectations, rng)
            new = compute_status(meta, spec, old, snapshot.pods, snapshot.services, error=error, now=NOW)
        if status_changed(old, new):
            body["status"] = merge_patch(old, status_patch(old, new, now=NOW)["status"])
        state = json.dumps([objects, body.get("status")], sort_keys=True, default=str)
        settled, last = state == last, state
    return {
        "name": meta.name,
        "namespace": meta.namespace,
        "invalid": invalid,
        "objects": objects["secrets"]
        + objects["ingresses"]
        + objects["rbac"]
        + objects["podgroups"]
        + services
        + pods,
        "cluster": {"metadata": body["metadata"], "status": body.get("status")},
        "errors": errors,
        "rounds": rounds,
    }
