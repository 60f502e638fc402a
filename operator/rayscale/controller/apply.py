"""Execute a Plan against the API server: the only controller code that talks to Kubernetes."""

from __future__ import annotations

import asyncio
import copy
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Protocol

from kubernetes_asyncio import client

from rayscale.cluster.meta import ClusterMeta
from rayscale.cluster.naming import AUTH_TOKEN_KEY
from rayscale.common.types import ClusterKey, Manifest
from rayscale.controller import tokenauth
from rayscale.controller.expectations import ScaleExpectations
from rayscale.controller.fairslots import FairSlots
from rayscale.controller.plan import CreatePod, DeletePod, DeleteWhy, Step
from rayscale.controller.status import ReconcileError
from rayscale.kube import ops
from rayscale.kube.events import EventSink

log = logging.getLogger(__name__)
Creator = Callable[[client.ApiClient, str, Manifest], Awaitable[bool]]
MAX_PARALLEL_CALLS = 16  # one RayCluster's pod creates (deletes) in flight at once
#: Creates and deletes in flight for all RayClusters together; when more are asked for, a freed
#: slot goes round-robin to the next RayCluster waiting, so a large scale-up does not hold most of
#: the API server's attention while small clusters wait behind it.
SHARED_CALLS = 64
ALL_PODS = (DeleteWhy.SUSPEND, DeleteWhy.UPGRADE)  # deletes of every pod of the cluster: KubeRay's DeletedPod
#: deletes KubeRay makes without scale expectations: every pod, or a suspended group's
NOT_EXPECTED = (*ALL_PODS, DeleteWhy.SUSPEND_GROUP)
MESSAGE_LIMIT = 1024  # characters of an Event's message the recorder keeps
#: Pods named in one Created/Deleted Event at most: a step of many pods posts one Event per
#: BATCH of them (each a write to the API server, as each pod is), not one per pod.
BATCH = 20


def _pod_word(kind: str) -> str:
    return "HeadPod" if kind == "head" else "WorkerPod"


def pods_message(verb: str, kind: str, namespace: str, names: Sequence[str], why: str = "") -> str:
    """One Event's message for the pods of one kind a step created or deleted.

    One pod reads as KubeRay's own ("Created worker Pod ns/a", "Deleted worker Pod ns/a (scaleDown)");
    several are one Event that names them all ("Created 3 worker Pods: ns/a, ns/b, ns/c"), as many as
    fit the message, then "and N more".
    """
    suffix = f" ({why})" if why else ""
    if len(names) == 1:
        return f"{verb} {kind} Pod {namespace}/{names[0]}{suffix}"
    head = f"{verb} {len(names)} {kind} Pods{suffix}: "
    items = [f"{namespace}/{name}" for name in names]
    for shown in range(len(items), 0, -1):  # as many as fit with the count of the rest
        rest = f", and {len(items) - shown} more" if shown < len(items) else ""
        message = head + ", ".join(items[:shown]) + rest
        if len(message) <= MESSAGE_LIMIT:
            return message
    return head + f"and {len(items)} more"


class _Done:
    """The pods of one RayCluster's steps that the API server created or deleted, posted as one
    Event per (reason, kind, why) each time `BATCH` are together and when a step's calls are back."""

    def __init__(self, events: EventSink, meta: ClusterMeta) -> None:
        self.events, self.meta = events, meta
        self.names: dict[tuple[str, str, str, str], list[str]] = {}

    def add(self, verb: str, reason: str, kind: str, name: str, why: str = "") -> None:
        key = (verb, reason, kind, why)
        names = self.names.setdefault(key, [])
        names.append(name)
        if len(names) >= BATCH:
            self._post(key, self.names.pop(key))

    def flush(self) -> None:
        for key, names in self.names.items():
            self._post(key, names)
        self.names.clear()

    def _post(self, key: tuple[str, str, str, str], names: list[str]) -> None:
        verb, reason, kind, why = key
        message = pods_message(verb, kind, self.meta.namespace, sorted(names), why)
        self.events.post(self.meta.subject(), "Normal", reason, message)


async def _bounded(calls: Sequence[Callable[[], Awaitable[None]]], limit: int) -> None:
    semaphore = asyncio.Semaphore(limit)

    async def one(call: Callable[[], Awaitable[None]]) -> None:
        async with semaphore:
            await call()

    await asyncio.gather(*(one(c) for c in calls))


def _key(meta: ClusterMeta) -> ClusterKey:
    """Whose share of the applier's slots a call takes: its RayCluster's."""
    return (meta.namespace, meta.name)


class CreateListener(Protocol):
    """Told of each worker pod create the API server refused (the autoscaler: a ResourceQuota's
    403 is a failed launch at once)."""

    def pod_create_refused(self, key: ClusterKey, group: str, status: int, message: str) -> None: ...


class PlanApplier:
    def __init__(
        self,
        api: client.ApiClient,
        expectations: ScaleExpectations,
        events: EventSink,
        creates: CreateListener | None = None,
    ) -> None:
        self.api = api
        self.expectations = expectations
        self.events = events
        self.creates = creates
        self._created: set[tuple[str, str, str]] = set()  # (RayCluster uid, kind, name) created once
        self.slots = FairSlots(SHARED_CALLS)

    async def _create(
        self, meta: ClusterMeta, kind: str, create: Creator, manifest: Manifest
    ) -> ReconcileError | None:
        """One create, with KubeRay's Created<Kind> / FailedToCreate<Kind> Events."""
        namespace, name = manifest["metadata"]["namespace"], manifest["metadata"]["name"]
        try:
            async with self.slots.held(_key(meta)):
                created = await create(self.api, namespace, manifest)
            if created:
                message = f"Created {kind.lower()} {namespace}/{name}"
                self.events.post(meta.subject(), "Normal", f"Created{kind}", message)
        except ops.KubeError as exc:
            self.events.post(meta.subject(), "Warning", f"FailedToCreate{kind}", str(exc))
            return ReconcileError(str(exc), retry_after=exc.retry_after)
        return None

    async def create_services(self, meta: ClusterMeta, services: Sequence[Manifest]) -> ReconcileError | None:
        for svc in services:
            if error := await self._create(meta, "Service", ops.create_service, svc):
                return error
        return None

    async def create_once(
        self,
        meta: ClusterMeta,
        secrets: Sequence[Manifest],
        ingresses: Sequence[Manifest],
        rbac: Sequence[Manifest] = (),
    ) -> ReconcileError | None:
        """Create each Secret (with a fresh token), Ingress and RBAC object once per RayCluster;
        one that exists is kept."""
        uid = meta.uid
        todo: list[tuple[str, Creator, Manifest]] = [("Secret", ops.create_secret, m) for m in secrets]
        todo += [("Ingress", ops.create_ingress, m) for m in ingresses]
        todo += [(m["kind"], ops.create_rbac, m) for m in rbac]
        for kind, create, manifest in todo:
            key = (uid, kind, manifest["metadata"]["name"])
            if key in self._created:
                continue
            if kind == "Secret":
                manifest = copy.deepcopy(manifest)
                manifest["stringData"] = {AUTH_TOKEN_KEY: tokenauth.new_token()}
            if error := await self._create(meta, kind, create, manifest):
                return error
            self._created.add(key)
        return None

    async def run_steps(
        self, meta: ClusterMeta, steps: Sequence[Step], wanted: Callable[[], bool] | None = None
    ) -> ReconcileError | None:
        """Each step's deletes, then its creates, in parallel; stop at the first failing step.

        `wanted` is asked before each create: once it says no (the RayCluster is being deleted or
        is gone) no more pods are created for it.
        """
        done = _Done(self.events, meta)
        for step in steps:
            failures: list[ReconcileError] = []
            try:
                await _bounded([self._deleter(done, d, failures) for d in step.deletes], MAX_PARALLEL_CALLS)
                done.flush()
                if not failures:
                    await _bounded(
                        [self._creator(done, c, failures, wanted) for c in step.creates],
                        MAX_PARALLEL_CALLS,
                    )
            finally:  # what was done is told, also when the step failed or was cancelled
                done.flush()
            if failures:
                return failures[0]
        return None

    def _deleter(
        self, done: _Done, action: DeletePod, failures: list[ReconcileError]
    ) -> Callable[[], Awaitable[None]]:
        meta = done.meta

        async def call() -> None:
            try:
                async with self.slots.held(_key(meta)):
                    await ops.delete_pod(self.api, meta.namespace, action.name)
            except ops.KubeError as exc:
                word = _pod_word(action.kind)
                reason = "FailedDeleteAllPods" if action.why in ALL_PODS else f"FailedDelete{word}"
                self._failed(done, failures, exc, f"FailedToDelete{word}", reason)
                return
            if action.why not in NOT_EXPECTED:
                self.expectations.expect((meta.namespace, meta.name, action.group), action.name, "delete")
            reason = "DeletedPod" if action.why in ALL_PODS else f"Deleted{_pod_word(action.kind)}"
            done.add("Deleted", reason, action.kind, action.name, action.why)

        return call

    def _creator(
        self,
        done: _Done,
        action: CreatePod,
        failures: list[ReconcileError],
        wanted: Callable[[], bool] | None,
    ) -> Callable[[], Awaitable[None]]:
        meta = done.meta

        async def call() -> None:
            if wanted is not None and not wanted():
                return
            try:
                async with self.slots.held(_key(meta)):
                    name = await ops.create_pod(self.api, meta.namespace, action.manifest)
            except ops.KubeError as exc:
                word = _pod_word(action.kind)
                self._failed(done, failures, exc, f"FailedToCreate{word}", f"FailedCreate{word}")
                if self.creates is not None and action.group:
                    self.creates.pod_create_refused(_key(meta), action.group, exc.status, str(exc))
                return
            self.expectations.expect((meta.namespace, meta.name, action.group), name, "create")
            done.add("Created", f"Created{_pod_word(action.kind)}", action.kind, name)

        return call

    def _failed(
        self, done: _Done, failures: list[ReconcileError], exc: ops.KubeError, event: str, reason: str
    ) -> None:
        """A pod call failed: a Warning Event `event` on the RayCluster, and the step's failure."""
        self.events.post(done.meta.subject(), "Warning", event, str(exc))
        failures.append(ReconcileError(str(exc), reason, exc.retry_after))
