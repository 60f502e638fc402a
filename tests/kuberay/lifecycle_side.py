"""rayscale's side of a lifecycle script: rayscale's own controller (``RayClusterController`` of
``rayscale.controller.runner``, unchanged) reconciling one RayCluster through several steps, with
the Kubernetes calls it makes (``rayscale.kube.ops``) answered by an in-memory store.

The store stands in for the API server and the kubelet exactly as the oracle's lifecycle mode does
(tools/kuberay-oracle/lifecycle.go): a pod created with generateName is named ``pod_suffix(n)``
after it (n counting the script's pods), a spec change increments the generation, a RayCluster
with finalizers is only marked deleted, and the kubelet makes every pod Running and Ready (IP
``pod_ip(name)``) and every Job complete. Each step: reconcile until nothing changes, the kubelet,
reconcile until nothing changes again. ``runner.PROGRESS_SPACING`` (a rate limit on status writes
of the running operator, not a decision) is 0 here, since rounds follow each other at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import hashlib
import json
from collections.abc import Iterator, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any
from unittest import mock

import jsonpatch

from rayscale.common.retry import Failed
from rayscale.common.types import ClusterKey, Manifest
from rayscale.controller import runner
from rayscale.controller.runner import ControllerConfig, RayClusterController
from rayscale.kube import ops
from tests.kuberay import rayscale_side
from tests.kuberay.rayscale_side import MAX_ROUNDS, admit, kuberay_defaults, merge_patch

DELETED_AT = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")  # the deletion timeout counts from it
POD_REF = "pod:"  # "pod:<group>/<replica index>[/<host index>]" in workersToDelete


def pod_suffix(n: int) -> str:
    return hashlib.sha256(str(n).encode()).hexdigest()[:5]


def pod_ip(name: str) -> str:
    digest = hashlib.sha256(name.encode()).digest()
    return f"10.244.{digest[0]}.{digest[1] % 254 + 1}"


class Store:
    """One namespace of the stand-in API server: the ClusterSource, the ops and the EventSink."""

    KINDS = ("secrets", "ingresses", "rbac", "services", "pods", "jobs")

    def __init__(self, body: Manifest) -> None:
        self.body: Manifest | None = body
        self.objects: dict[str, dict[str, Manifest]] = {kind: {} for kind in self.KINDS}
        self.events: list[str] = []
        self.made = 0
        self.version = 1
        self._bump()

    def _bump(self) -> None:
        if self.body is not None:
            self.version += 1
            self.body["metadata"]["resourceVersion"] = str(self.version)

    # ---- ClusterSource
    def cluster(self, key: ClusterKey) -> Manifest | None:
        return copy.deepcopy(self.body)

    def pods(self, key: ClusterKey) -> Sequence[Manifest]:
        return [copy.deepcopy(p) for p in self.objects["pods"].values()]

    def services(self, key: ClusterKey) -> Sequence[Manifest]:
        return [copy.deepcopy(s) for s in self.objects["services"].values()]

    def cluster_keys(self) -> Sequence[ClusterKey]:
        return []

    # ---- EventSink
    def post(self, obj: Mapping[str, Any], type_: str, reason: str, message: str, action: str = "") -> None:
        self.events.append(f"{type_} {reason} {message}")

    # ---- rayscale.kube.ops
    async def create_pod(self, api: Any, namespace: str, manifest: Manifest) -> str:
        pod = copy.deepcopy(manifest)
        meta = pod["metadata"]
        if not meta.get("name"):
            self.made += 1
            meta["name"] = meta["generateName"] + pod_suffix(self.made)
        self.objects["pods"][meta["name"]] = pod
        return str(meta["name"])

    async def delete_pod(self, api: Any, namespace: str, name: str) -> bool:
        return self.objects["pods"].pop(name, None) is not None

    def _creator(self, kind: str) -> Any:
        async def create(api: Any, namespace: str, manifest: Manifest) -> bool:
            name = manifest["metadata"]["name"]
            if name in self.objects[kind]:
                return False
            stored = copy.deepcopy(manifest)
            if kind == "services":
                stored = rayscale_side.stored_service(stored)
            self.objects[kind][name] = stored
            return True

        return create

    async def get_job(self, api: Any, namespace: str, name: str) -> Manifest | None:
        return copy.deepcopy(self.objects["jobs"].get(name))

    async def patch_raycluster_status(self, api: Any, namespace: str, name: str, patch: Manifest) -> bool:
        if self.body is None:
            raise ops.KubeError(f"rayclusters/{name} not found", 404)
        self.body["status"] = merge_patch(self.body.get("status"), patch["status"])
        self._bump()
        return True

    async def json_patch_raycluster(self, api: Any, namespace: str, name: str, patch: list[Manifest]) -> None:
        if self.body is None:
            raise ops.KubeError(f"rayclusters/{name} not found", 404)
        self.body = jsonpatch.apply_patch(self.body, patch)
        meta = self.body["metadata"]
        if meta.get("deletionTimestamp") and not meta.get("finalizers"):
            self.body = None  # the last finalizer is gone: the API server deletes it
        self._bump()

    @contextlib.contextmanager
    def serving(self) -> Iterator[None]:
        calls: dict[str, Any] = {
            "create_pod": self.create_pod,
            "delete_pod": self.delete_pod,
            "get_job": self.get_job,
            "patch_raycluster_status": self.patch_raycluster_status,
            "json_patch_raycluster": self.json_patch_raycluster,
            "create_service": self._creator("services"),
            "create_secret": self._creator("secrets"),
            "create_ingress": self._creator("ingresses"),
            "create_rbac": self._creator("rbac"),
            "create_job": self._creator("jobs"),
        }
        with contextlib.ExitStack() as stack:
            for name, call in calls.items():
                stack.enter_context(mock.patch.object(ops, name, call))
            stack.enter_context(mock.patch.object(runner, "PROGRESS_SPACING", 0.0))
            yield

    # ---- the user and the kubelet
    def apply(self, doc: Manifest) -> None:
        """A new version of the RayCluster, as the API server stores it."""
        assert self.body is not None
        self._resolve_pod_names(doc)
        new = admit(doc)
        old_meta = self.body["metadata"]
        meta = new["metadata"]
        changed = new.get("spec") != self.body.get("spec")
        meta["generation"] = old_meta["generation"] + (1 if changed else 0)
        for key in ("uid", "finalizers", "creationTimestamp"):
            if key in old_meta:
                meta[key] = old_meta[key]
        if "status" in self.body:
            new["status"] = self.body["status"]
        self.body = new
        self._bump()

    def delete(self) -> None:
        assert self.body is not None
        if self.body["metadata"].get("finalizers"):
            self.body["metadata"]["deletionTimestamp"] = DELETED_AT
            self._bump()
        else:
            self.body = None

    def _resolve_pod_names(self, doc: Manifest) -> None:
        for group in (doc.get("spec") or {}).get("workerGroupSpecs") or []:
            names = (group.get("scaleStrategy") or {}).get("workersToDelete") or []
            for i, ref in enumerate(names):
                if isinstance(ref, str) and ref.startswith(POD_REF):
                    names[i] = self._pod_named(ref.removeprefix(POD_REF).split("/"))

    def _pod_named(self, ref: list[str]) -> str:
        keys = ("ray.io/group", "ray.io/worker-group-replica-index", "ray.io/replica-host-index")
        wanted = dict(zip(keys, ref, strict=False))
        found = [
            name
            for name, pod in self.objects["pods"].items()
            if all(pod["metadata"].get("labels", {}).get(k) == v for k, v in wanted.items())
        ]
        assert len(found) == 1, f"pod:{'/'.join(ref)} matches {found}"
        return found[0]

    def kubelet(self) -> None:
        for name, pod in self.objects["pods"].items():
            if (pod.get("status") or {}).get("phase") != "Running":
                conditions = [{"type": "Ready", "status": "True"}]
                pod["status"] = {"phase": "Running", "podIP": pod_ip(name), "conditions": conditions}
        for job in self.objects["jobs"].values():
            job["status"] = {"succeeded": 1, "conditions": [{"type": "Complete", "status": "True"}]}

    def state(self) -> str:
        return json.dumps([self.objects, self.body], sort_keys=True, default=str)

    def answer(
        self, name: str, namespace: str, events: list[str], errors: list[str], rounds: int
    ) -> Manifest:
        objects = [copy.deepcopy(o) for kind in self.KINDS for o in self.objects[kind].values()]
        cluster = None
        if self.body is not None:
            cluster = {"metadata": copy.deepcopy(self.body["metadata"]), "status": self.body.get("status")}
        return {"name": name, "namespace": namespace, "objects": objects, "cluster": cluster,
                "events": events, "errors": errors, "rounds": rounds}  # fmt: skip


async def _settle(controller: RayClusterController, store: Store, key: ClusterKey, errors: list[str]) -> int:
    rounds, last = 0, ""
    while rounds < MAX_ROUNDS:
        rounds += 1
        outcome = await controller.reconcile(key)
        if isinstance(outcome, Failed):
            errors.append(f"round {rounds}: {outcome}")
        state = store.state()
        if state == last:
            return rounds
        last = state
    errors.append(f"still changing after {MAX_ROUNDS} rounds")
    return rounds


async def _run(steps: Sequence[Manifest]) -> list[Manifest]:
    first = steps[0]["cluster"]
    store = Store(admit(first))
    assert store.body is not None
    key = (store.body["metadata"]["namespace"], store.body["metadata"]["name"])
    controller = RayClusterController(None, store, store, ControllerConfig())  # type: ignore[arg-type]
    answers = []
    with store.serving():
        for i, step in enumerate(steps):
            if i and step.get("delete"):
                store.delete()
            elif i:
                store.apply(copy.deepcopy(step["cluster"]))
            errors: list[str] = []
            store.events.clear()
            rounds = await _settle(controller, store, key, errors)
            store.kubelet()
            rounds += await _settle(controller, store, key, errors)
            answers.append(
                {**store.answer(key[1], key[0], list(store.events), errors, rounds), "step": step["name"]}
            )
    return answers


def run_script(steps: Sequence[Manifest]) -> list[Manifest]:
    """rayscale's answer after each step of a lifecycle script (see the module's doc)."""
    with kuberay_defaults():
        return asyncio.run(_run(steps))
