"""PlanApplier (rayscale.controller.apply), the controller's writes, with rayscale.kube.ops faked:
deletes then creates, each in parallel; KubeRay's Events, one per step and kind naming its pods
(at most BATCH each; one pod's message is KubeRay's own); scale expectations only for what the API
server did; the first failing step stops the rest; `wanted` stops creates for a deleted RayCluster;
Secrets, Ingresses and RBAC objects created once per RayCluster."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest
from tests.support.builders import cluster, pod
from tests.support.fakes import EventLog, FakeKubeOps, ManualClock

from rayscale.cluster.meta import ClusterMeta
from rayscale.cluster.naming import AUTH_TOKEN_KEY
from rayscale.common.types import Manifest
from rayscale.controller.apply import BATCH, MESSAGE_LIMIT, PlanApplier, pods_message
from rayscale.controller.expectations import ScaleExpectations
from rayscale.controller.fairslots import FairSlots
from rayscale.controller.plan import CreatePod, DeletePod, DeleteWhy, NodeKind, Step
from rayscale.controller.status import ReconcileError
from rayscale.kube import ops

GROUP_KEY = ("ns", "rc", "small")


@pytest.fixture
def expectations() -> ScaleExpectations:
    return ScaleExpectations(clock=ManualClock())


@pytest.fixture
def applier(expectations: ScaleExpectations, event_log: EventLog) -> PlanApplier:
    return PlanApplier(None, expectations, event_log)  # type: ignore[arg-type]  # ops is faked: no client


def create(group: str = "small", kind: str = "worker") -> CreatePod:
    prefix = "rc-head-" if kind == "head" else f"rc-{group}-worker-"
    manifest: Manifest = {"metadata": {"generateName": prefix, "namespace": "ns"}}
    return CreatePod(group, NodeKind(kind), manifest)


def delete(name: str, why: str = "scaleDown", group: str = "small") -> DeletePod:
    return DeletePod(name, group, NodeKind.WORKER, DeleteWhy(why))


def rc(name: str = "rc") -> ClusterMeta:
    """The RayCluster the applier works for, as the snapshot reads it."""
    return ClusterMeta.from_body(cluster(name=name))


def named(name: str, kind: str = "Secret") -> Manifest:
    return {"kind": kind, "metadata": {"name": name, "namespace": "ns"}}


async def test_a_steps_deletes_then_its_creates_each_in_parallel(
    applier: PlanApplier, kube_ops: FakeKubeOps
) -> None:
    step = Step("small", deletes=[delete(f"old-{i}") for i in range(3)], creates=[create() for _ in range(4)])
    assert await applier.run_steps(rc(), [step]) is None
    assert [call for call, _ in kube_ops.calls] == ["delete_pod"] * 3 + ["create_pod"] * 4
    assert kube_ops.most_in_flight == 4  # the creates were all in flight at once (and the deletes before)


async def test_a_large_scale_up_shares_the_slots_with_a_small_cluster(
    applier: PlanApplier, kube_ops: FakeKubeOps
) -> None:
    applier.slots = FairSlots(4)
    big = applier.run_steps(rc("big"), [Step("small", creates=[create("big") for _ in range(40)])])
    small = applier.run_steps(rc("rc"), [Step("small", creates=[create("tiny")])])
    assert list(await asyncio.gather(big, small)) == [None, None]
    order = kube_ops.names("create_pod")
    # first come, first served would send all 40 of the big one's creates first
    assert order.index("rc-tiny-worker-") < 8
    assert kube_ops.most_in_flight <= 4


async def test_events_and_expectations_for_each_create_and_delete(
    applier: PlanApplier, kube_ops: FakeKubeOps, event_log: EventLog, expectations: ScaleExpectations
) -> None:
    step = Step("small", deletes=[delete("old-0")], creates=[create(), create()])
    assert await applier.run_steps(rc(), [step]) is None
    created = sorted(kube_ops.names("create_pod", made=True))
    assert event_log.posted == [
        ("Normal", "DeletedWorkerPod", "Deleted worker Pod ns/old-0 (scaleDown)"),
        ("Normal", "CreatedWorkerPod", f"Created 2 worker Pods: ns/{created[0]}, ns/{created[1]}"),
    ]
    assert {e.name for e in event_log.events} == {"rc"}  # on the RayCluster
    assert expectations.pending(GROUP_KEY) == 3
    # met once the watch shows the new pods and no longer the deleted one
    assert not expectations.satisfied(GROUP_KEY, {"old-0": pod("old-0")})
    assert expectations.satisfied(GROUP_KEY, {name: pod(name) for name in created})


async def test_only_what_the_api_server_did_is_expected(
    applier: PlanApplier, kube_ops: FakeKubeOps, event_log: EventLog, expectations: ScaleExpectations
) -> None:
    kube_ops.refuse[("delete_pod", "old-1")] = ops.KubeError("delete pod old-1: forbidden", 403)
    step = Step("small", deletes=[delete("old-0"), delete("old-1")], creates=[create()])
    error = await applier.run_steps(rc(), [step])
    assert error == ReconcileError("delete pod old-1: forbidden", "FailedDeleteWorkerPod", None)
    assert kube_ops.names("create_pod") == []  # a failed delete stops the step before its creates
    assert expectations.pending(GROUP_KEY) == 1  # old-0's delete; none for old-1
    assert expectations.satisfied(GROUP_KEY, {"old-1": pod("old-1")})
    assert sorted(event_log.posted) == [  # in parallel: in any order
        ("Normal", "DeletedWorkerPod", "Deleted worker Pod ns/old-0 (scaleDown)"),
        ("Warning", "FailedToDeleteWorkerPod", "delete pod old-1: forbidden"),
    ]


async def test_a_failed_create_stops_the_steps_after_it_with_the_servers_retry_after(
    applier: PlanApplier, kube_ops: FakeKubeOps, event_log: EventLog, expectations: ScaleExpectations
) -> None:
    quota = ops.KubeError('pods "rc-small-worker-*" is forbidden: exceeded quota', 429, retry_after=7.0)
    kube_ops.refuse[("create_pod", "rc-small-worker-")] = quota
    steps = [
        Step("", creates=[create("", kind="head")]),
        Step("small", creates=[create("small"), create("small")]),
        Step("big", creates=[create("big")]),
    ]
    error = await applier.run_steps(rc(), steps)
    assert error == ReconcileError(str(quota), "FailedCreateWorkerPod", 7.0)
    assert kube_ops.names("create_pod") == ["rc-head-", "rc-small-worker-", "rc-small-worker-"]  # not "big"
    assert expectations.pending(("ns", "rc", "")) == 1  # the head's
    assert expectations.pending(GROUP_KEY) == 0
    assert sorted(event_log.reasons()) == [
        "CreatedHeadPod",
        "FailedToCreateWorkerPod",
        "FailedToCreateWorkerPod",
    ]


async def test_deletes_of_every_pod_expect_nothing_and_say_deleted_pod(
    applier: PlanApplier, kube_ops: FakeKubeOps, event_log: EventLog, expectations: ScaleExpectations
) -> None:
    kube_ops.refuse[("delete_pod", "b")] = ops.KubeError("delete pod b: unavailable", 503)
    step = Step("small", deletes=[delete("a", why="suspend"), delete("b", why="suspend")])
    error = await applier.run_steps(rc(), [step])
    assert error is not None
    assert error.reason == "FailedDeleteAllPods"
    assert expectations.pending(GROUP_KEY) == 0
    assert sorted(event_log.posted) == [
        ("Normal", "DeletedPod", "Deleted worker Pod ns/a (suspend)"),
        ("Warning", "FailedToDeleteWorkerPod", "delete pod b: unavailable"),
    ]


async def test_no_pod_is_created_once_the_cluster_is_no_longer_wanted(
    applier: PlanApplier, kube_ops: FakeKubeOps, expectations: ScaleExpectations
) -> None:
    # the watch sees the deletion after the 5th create
    steps = [Step("small", creates=[create() for _ in range(100)])]

    def wanted() -> bool:
        return len(kube_ops.names("create_pod")) < 5

    assert await applier.run_steps(rc(), steps, wanted) is None
    assert len(kube_ops.names("create_pod")) == 5
    assert expectations.pending(GROUP_KEY) == 5
    assert await applier.run_steps(rc(), steps) is None  # without `wanted`: every create
    assert len(kube_ops.names("create_pod")) == 105


async def test_secrets_ingresses_and_rbac_are_created_once_per_raycluster(
    applier: PlanApplier, kube_ops: FakeKubeOps, event_log: EventLog
) -> None:
    secrets, ingresses = [named("rc")], [named("rc-head-ingress", "Ingress")]
    rbac = [named("rc", "ServiceAccount"), named("rc", "Role"), named("rc", "RoleBinding")]
    kube_ops.existing.add("rc-head-ingress")  # made before (by an operator since restarted): kept
    for _ in range(3):
        assert await applier.create_once(rc(), secrets, ingresses, rbac) is None
    assert kube_ops.calls == [
        ("create_secret", "rc"),
        ("create_ingress", "rc-head-ingress"),
        ("create_rbac", "rc"),
        ("create_rbac", "rc"),
        ("create_rbac", "rc"),
    ]
    token = kube_ops.manifests["create_secret", "rc"]["stringData"][AUTH_TOKEN_KEY]  # a fresh token in a copy
    assert len(token) >= 32
    assert "stringData" not in secrets[0]
    assert event_log.reasons() == [
        "CreatedSecret",
        "CreatedServiceAccount",
        "CreatedRole",
        "CreatedRoleBinding",
    ]

    other = dataclasses.replace(rc(), uid="uid-2")  # the same name, recreated: its own Secret, a new token
    assert await applier.create_once(other, secrets, []) is None
    assert kube_ops.names("create_secret") == ["rc", "rc"]
    assert kube_ops.manifests["create_secret", "rc"]["stringData"][AUTH_TOKEN_KEY] != token


async def test_a_refused_create_once_is_tried_again_and_stops_the_rest(
    applier: PlanApplier, kube_ops: FakeKubeOps, event_log: EventLog
) -> None:
    kube_ops.refuse[("create_secret", "rc")] = ops.KubeError("create secret rc: forbidden", 403)
    ingresses = [named("rc-head-ingress", "Ingress")]
    assert await applier.create_once(rc(), [named("rc")], ingresses) == ReconcileError(
        "create secret rc: forbidden"
    )
    assert kube_ops.calls == [("create_secret", "rc")]
    assert event_log.posted == [("Warning", "FailedToCreateSecret", "create secret rc: forbidden")]
    del kube_ops.refuse[("create_secret", "rc")]
    assert await applier.create_once(rc(), [named("rc")], ingresses) is None
    assert kube_ops.calls[1:] == [("create_secret", "rc"), ("create_ingress", "rc-head-ingress")]


async def test_services_stop_at_the_first_refused(
    applier: PlanApplier, kube_ops: FakeKubeOps, event_log: EventLog
) -> None:
    kube_ops.existing.add("rc-head-svc")
    kube_ops.refuse[("create_service", "rc-headless")] = ops.KubeError("create service rc-headless: 500", 500)
    services = [named("rc-head-svc", "Service"), named("rc-headless", "Service"), named("rc-x", "Service")]
    error = await applier.create_services(rc(), services)
    assert error == ReconcileError("create service rc-headless: 500")
    assert kube_ops.names("create_service") == ["rc-head-svc", "rc-headless"]
    assert event_log.posted == [("Warning", "FailedToCreateService", "create service rc-headless: 500")]


async def test_a_large_step_posts_one_event_per_batch_of_pods_naming_each(
    applier: PlanApplier, kube_ops: FakeKubeOps, event_log: EventLog
) -> None:
    step = Step(
        "small",
        deletes=[delete(f"old-{i}") for i in range(3)] + [delete("picked", why="workersToDelete")],
        creates=[create() for _ in range(2 * BATCH + 1)],
    )
    assert await applier.run_steps(rc(), [step]) is None
    posted = [(reason, message) for _, reason, message in event_log.posted]
    assert sorted(posted[:2]) == [
        ("DeletedWorkerPod", "Deleted 3 worker Pods (scaleDown): ns/old-0, ns/old-1, ns/old-2"),
        ("DeletedWorkerPod", "Deleted worker Pod ns/picked (workersToDelete)"),
    ]
    creates = posted[2:]
    assert [reason for reason, _ in creates] == ["CreatedWorkerPod"] * 3
    last = "Created worker Pod ns/rc-small-worker-00041"
    assert [m.split(":")[0] for _, m in creates] == [f"Created {BATCH} worker Pods"] * 2 + [last]
    told = " ".join(m for _, m in creates)
    assert all(f"ns/{name}" in told for name in kube_ops.names("create_pod", made=True))


async def test_pods_created_before_a_failure_are_told(
    applier: PlanApplier, kube_ops: FakeKubeOps, event_log: EventLog
) -> None:
    kube_ops.refuse[("delete_pod", "old-1")] = ops.KubeError("delete pod old-1: forbidden", 403)
    step = Step("small", deletes=[delete("old-0"), delete("old-1")], creates=[create()])
    assert await applier.run_steps(rc(), [step]) is not None
    assert ("Normal", "DeletedWorkerPod", "Deleted worker Pod ns/old-0 (scaleDown)") in event_log.posted


def test_a_message_naming_many_pods_keeps_to_the_limit_and_counts_the_rest() -> None:
    names = [f"a-very-long-worker-pod-name-{i:04d}" for i in range(100)]
    message = pods_message("Created", "worker", "team", names)
    assert len(message) <= MESSAGE_LIMIT
    shown = message.count("team/")
    assert message.startswith("Created 100 worker Pods: team/a-very-long-worker-pod-name-0000, ")
    assert message.endswith(f", and {100 - shown} more")
    assert pods_message("Created", "worker", "team", names[:2]) == (
        "Created 2 worker Pods: team/a-very-long-worker-pod-name-0000, team/a-very-long-worker-pod-name-0001"
    )
