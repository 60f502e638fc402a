"""Disruption notices of a RayCluster rayscale runs but does not autoscale (notices_only.py): the pure
parts, then whole rounds with the API and the GCS faked. A cordon drains a busy worker for preemption
and deletes its pod directly once idle (the replicas are the user's: no patch); a spot notice deletes at
its deadline; the head is only reported; a drain accepted keeps its unit leaving once the notice went;
without a notice no GCS is read; beside KubeRay's operator nothing is done; a Node's notice marks every
cluster with a pod on it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import Any

import pytest
from tests.support.builders import cluster, group, pod
from tests.support.fakes import KEY, FakeGcs, FakeKubeOps, LoopClock, SettledAutoscaler, gcs_state
from tests.support.fakes import EventLog as Events
from tests.support.fakes import FakeApi as Api
from tests.support.fakes import FakeSource as Source
from tests.support.views import ray_node

from rayscale.autoscaler import gcs_link
from rayscale.autoscaler.config import AutoscalerConfig
from rayscale.autoscaler.disruptions import CONDITION
from rayscale.autoscaler.idle import SECONDS_ANNOTATION
from rayscale.autoscaler.notices_only import cleared, clusters_on, noticed, own_notices, status_with
from rayscale.common.types import ClusterKey
from rayscale.disruption.notice import Notice
from rayscale.disruption.plan import EVENT_DELETE, EVENT_DRAIN, EVENT_HEAD
from rayscale.kube import ops
from rayscale.ray import model as ray

START = LoopClock.START
CORDON = Notice("cordon", "Node n1 is cordoned (spec.unschedulable).", None, hard=False)
SPOT = Notice("spot", "Node n1 has an EC2 Spot interruption notice.", START + timedelta(seconds=30), True)
BUSY, DRAINING = ray.NodeStatus.RUNNING, ray.NodeStatus.DRAINING


def on(node: str, body: dict[str, Any]) -> dict[str, Any]:
    body["spec"]["nodeName"] = node
    return body


def evicted(body: dict[str, Any]) -> dict[str, Any]:
    body["status"]["conditions"].append(
        {"type": "DisruptionTarget", "status": "True", "reason": "EvictionByEvictionAPI",
         "lastTransitionTime": "2026-01-01T01:00:00Z"}
    )  # fmt: skip
    return body


def node(name: str, status: ray.NodeStatus, *, idle_ms: int = 0, used: float = 0.0) -> ray.RayNodeState:
    return ray_node(name, status, 4.0 - 4 * used, idle_ms)


def fixed(**annotations: str) -> dict[str, Any]:
    """``ns/rc`` with in-tree autoscaling off and one worker group of 1 replica."""
    body = cluster(group("small", replicas=1))
    body["metadata"].update(resourceVersion="42", annotations=annotations)
    return body


# ---------------------------------------------------------------------------- the pure parts


def test_a_cluster_is_noticed_for_a_live_pod_with_a_notice_or_a_drain_remembered() -> None:
    nodes = {"n1": CORDON}
    assert noticed([on("n1", pod("w1"))], nodes, (), START)
    assert noticed([evicted(on("n2", pod("w1")))], nodes, (), START)
    assert noticed([on("n2", pod("w1"))], nodes, {"w1"}, START)  # drained before, its notice gone
    assert not noticed([on("n2", pod("w1"))], nodes, {"gone"}, START)
    assert not noticed([on("n1", pod("w1", deleting="2026-01-01T00:59:00Z"))], nodes, (), START)


def test_the_notice_of_an_accepted_drain_is_kept_while_the_drain_is() -> None:
    pods = [on("n1", pod("w1")), on("n2", pod("w2")), on("n1", pod("w3"))]
    kept = own_notices(
        {"old": SPOT, "gone": SPOT}, pods, {"n1": CORDON}, {"w1", "w2"}, {"old", "w1", "w2"}, START
    )
    assert kept == {"old": SPOT, "w1": CORDON}  # w2 has no notice; w3's drain was not accepted


def test_the_status_holds_the_idle_and_disruption_conditions_alone() -> None:
    idle = {"type": "IdleTermination", "status": "False", "reason": "Busy"}
    drain = {"type": CONDITION, "status": "True", "reason": "Draining"}
    assert status_with(None, None, drain) == {"status": {"autoscaler": {"conditions": [drain]}}}
    assert status_with({"conditions": [idle, drain]}, idle, drain) is None
    assert status_with({"replicas": 3, "conditions": [idle]}, idle, drain) == {
        "status": {"autoscaler": {"replicas": None, "conditions": [idle, drain]}}
    }
    assert status_with({"conditions": [drain]}, None, None) == {"status": {"autoscaler": None}}
    assert status_with({"conditions": [idle, drain]}, idle, None) == {
        "status": {"autoscaler": {"conditions": [idle]}}
    }
    assert cleared({"conditions": [drain]}) == {"status": {"autoscaler": None}}  # --mode controller
    assert cleared({"conditions": [idle]}) is None
    assert cleared(None) is None


class Listing:
    """A source that lists its clusters, as the operator's indexes do."""

    def __init__(self, pods: Mapping[ClusterKey, Sequence[dict[str, Any]]]) -> None:
        self._pods = pods

    def pods(self, key: ClusterKey) -> Sequence[dict[str, Any]]:
        return self._pods.get(key, ())

    def cluster_keys(self) -> Sequence[ClusterKey]:
        return list(self._pods)


def test_a_nodes_notice_marks_every_cluster_with_a_pod_on_it() -> None:
    a, b, c = ("ns", "a"), ("ns", "b"), ("ns", "c")
    source = Listing({a: [on("n1", pod("w"))], b: [on("n2", pod("w"))], c: [on("n1", pod("h", "headgroup"))]})
    assert clusters_on("n1", source, [], every=True) == [a, c]
    assert clusters_on("n1", source, [b, c], every=False) == [c]  # beside KubeRay: the autoscaled ones
    assert clusters_on("n1", Source(None, [on("n1", pod("w"))]), [a], every=True) == [a]  # cannot list


# ---------------------------------------------------------------------------- whole rounds


class Gcs(FakeGcs):
    """FakeGcs that keeps what each drain was asked with."""

    asked: list[dict[str, Any]] = []

    async def drain_node(self, node_id: str, **kw: Any) -> ray.DrainResult:
        Gcs.asked.append({"node": node_id, "reason": str(kw.get("reason")), "message": kw.get("message")})
        return await super().drain_node(node_id, **kw)


@pytest.fixture
def kube(monkeypatch: pytest.MonkeyPatch) -> FakeKubeOps:
    """The pods deleted directly (`deleted`)."""
    return FakeKubeOps(monkeypatch)


def deleted(kube: FakeKubeOps) -> list[str]:
    return kube.names("delete_pod")


@pytest.fixture
def api(monkeypatch: pytest.MonkeyPatch, kube: FakeKubeOps) -> Api:
    fake = Api(monkeypatch)  # after FakeKubeOps: the cluster's status patches are the Api's
    Gcs.asked = []
    monkeypatch.setattr(gcs_link, "connect", Gcs)
    return fake


def scaler(
    source: Source,
    events: Events,
    clock: LoopClock,
    notices: Mapping[str, Notice],
    *,
    beside: bool = False,
    controller: bool = False,  # --mode controller
) -> SettledAutoscaler:
    # 5 s rounds, no polls
    config = AutoscalerConfig(5, 0, status_pace_seconds=0, beside_kuberay=beside, notices_only=controller)
    api: Any = None  # every call through it is faked
    return SettledAutoscaler(
        api, source, events, config, clock=clock.mono, wall_clock=clock.now, node_notices=notices
    )


def conditions(api: Api) -> dict[str, dict[str, Any]]:
    found = (api.cluster_statuses[-1].get("autoscaler") or {}).get("conditions") or []
    return {c["type"]: c for c in found if c}


def watched(source: Source, api: Api) -> None:
    """The status written, as the watch then shows it on the RayCluster."""
    assert source.body is not None
    if api.cluster_statuses:
        source.body["status"] = {"autoscaler": api.cluster_statuses[-1]["autoscaler"]}


def worker_on_n1() -> Source:
    return Source(fixed(), [on("h", pod("rc-head", "headgroup")), on("n1", pod("w1"))])


async def test_a_cordon_drains_a_busy_worker_and_deletes_its_pod_once_idle(
    api: Api, kube: FakeKubeOps
) -> None:
    events, clock = Events(), LoopClock()
    FakeGcs.state = gcs_state(node("w1", BUSY, used=1.0))
    source = worker_on_n1()
    auto = scaler(source, events, clock, {"n1": CORDON})
    assert await auto.step(KEY) == 5  # looked at again every interval while it leaves
    watched(source, api)
    assert Gcs.asked == [{"node": "id-w1", "reason": "PREEMPTION", "message": CORDON.message}]
    assert (deleted(kube), api.patches) == ([], [])  # busy: it stays; the replicas are the user's
    assert events.reasons() == [EVENT_DRAIN]
    said = conditions(api)
    assert list(said) == [CONDITION]  # nothing else of status.autoscaler
    assert said[CONDITION]["reason"] == "Draining"
    assert "w1 (cordon, no deadline)" in said[CONDITION]["message"]

    clock.advance(600)
    FakeGcs.state = gcs_state(node("w1", DRAINING, used=1.0))
    await auto.step(KEY)
    watched(source, api)
    assert (deleted(kube), len(Gcs.asked), events.reasons()) == (
        [],
        1,
        [EVENT_DRAIN],
    )  # asked once, no new Event
    assert len(api.cluster_statuses) == 1  # the same condition, its time kept: not written again

    clock.advance(5)
    FakeGcs.state = gcs_state(node("w1", DRAINING, idle_ms=100))
    assert await auto.step(KEY) == 5
    watched(source, api)
    assert (deleted(kube), api.patches) == (["w1"], [])
    (gone,) = [e for e in events.events if e.reason == EVENT_DELETE]
    assert "Deleting pod w1 of worker group small: its Ray node is idle after draining." in gone.message
    assert api.cluster_statuses[-1] == {"autoscaler": None}  # the condition goes with the last unit

    clock.advance(5)
    await auto.step(KEY)  # the watch does not show the deletion yet: not deleted or told twice
    assert deleted(kube) == ["w1"]
    assert events.reasons() == [EVENT_DRAIN, EVENT_DELETE]


async def test_a_spot_notice_deletes_a_busy_worker_at_its_deadline(api: Api, kube: FakeKubeOps) -> None:
    events, clock = Events(), LoopClock()
    FakeGcs.state = gcs_state(node("w1", BUSY, used=1.0))
    auto = scaler(worker_on_n1(), events, clock, {"n1": SPOT})
    await auto.step(KEY)
    assert "w1 (spot, deadline 2026-01-01T01:00:30Z)" in conditions(api)[CONDITION]["message"]
    clock.advance(29)
    await auto.step(KEY)
    assert deleted(kube) == []
    clock.advance(1)
    await auto.step(KEY)
    assert deleted(kube) == ["w1"]
    (gone,) = [e for e in events.events if e.reason == EVENT_DELETE]
    assert "the notice's deadline passed" in gone.message


async def test_a_drained_worker_leaves_once_its_notice_went(api: Api, kube: FakeKubeOps) -> None:
    events, clock = Events(), LoopClock()
    FakeGcs.state = gcs_state(node("w1", BUSY, used=1.0))
    notices = {"n1": CORDON}
    auto = scaler(worker_on_n1(), events, clock, notices)
    await auto.step(KEY)
    notices.clear()  # uncordoned: Ray's drain for preemption cannot be taken back
    clock.advance(5)
    await auto.step(KEY)
    assert "w1 (cordon, no deadline)" in conditions(api)[CONDITION]["message"]
    FakeGcs.state = gcs_state(node("w1", DRAINING, idle_ms=100))
    clock.advance(5)
    await auto.step(KEY)
    assert deleted(kube) == ["w1"]


async def test_without_a_notice_no_gcs_is_read(api: Api, kube: FakeKubeOps) -> None:
    FakeGcs.state = gcs_state(node("w1", BUSY, used=1.0))
    auto = scaler(worker_on_n1(), Events(), LoopClock(), {"n2": CORDON})
    assert await auto.step(KEY) is None
    assert (FakeGcs.calls, FakeGcs.dialed, deleted(kube)) == ([], [], [])


async def test_beside_kuberay_a_fixed_cluster_is_left_to_it(api: Api, kube: FakeKubeOps) -> None:
    FakeGcs.state = gcs_state(node("w1", BUSY, used=1.0))
    auto = scaler(worker_on_n1(), Events(), LoopClock(), {"n1": SPOT}, beside=True)
    assert await auto.step(KEY) is None
    assert (FakeGcs.calls, deleted(kube)) == ([], [])


async def test_the_head_is_only_reported(api: Api, kube: FakeKubeOps) -> None:
    events, clock = Events(), LoopClock()
    FakeGcs.state = gcs_state()
    source = Source(fixed(), [on("n1", pod("rc-head", "headgroup"))])
    auto = scaler(source, events, clock, {"n1": SPOT})
    await auto.step(KEY)
    clock.advance(60)  # past the deadline
    await auto.step(KEY)
    assert (Gcs.asked, deleted(kube)) == ([], [])
    assert events.reasons("Warning") == [EVENT_HEAD]  # once
    assert conditions(api)[CONDITION]["reason"] == "HeadNotice"


async def test_nothing_is_deleted_while_the_heads_raylet_is_not_running(api: Api, kube: FakeKubeOps) -> None:
    events, clock = Events(), LoopClock()
    FakeGcs.state = gcs_state(head=False)  # no Ray node for w1: deleted at once, were Ray's view trusted
    auto = scaler(worker_on_n1(), events, clock, {"n1": CORDON})
    assert await auto.step(KEY) == 5
    assert (deleted(kube), events.reasons()) == ([], [])
    FakeGcs.state = gcs_state()
    clock.advance(5)
    await auto.step(KEY)
    assert deleted(kube) == ["w1"]
    (gone,) = [e for e in events.events if e.reason == EVENT_DELETE]
    assert "Ray has no live node for it" in gone.message


async def test_an_idle_clock_and_a_notice_share_the_status(
    api: Api, kube: FakeKubeOps, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def nothing(gcs: FakeGcs, **_: Any) -> list[Any]:
        return []

    async def no_submissions(gcs: FakeGcs) -> dict[str, Any]:
        return {}

    monkeypatch.setattr(FakeGcs, "get_all_job_info", nothing, raising=False)
    monkeypatch.setattr(FakeGcs, "list_submissions", no_submissions, raising=False)
    monkeypatch.setattr(FakeGcs, "get_all_actor_info", nothing, raising=False)
    FakeGcs.state = gcs_state(node("w1", BUSY, used=1.0))
    source = Source(
        fixed(**{SECONDS_ANNOTATION: "600"}), [on("h", pod("rc-head", "headgroup")), on("n1", pod("w1"))]
    )
    auto = scaler(source, Events(), LoopClock(), {"n1": CORDON})
    await auto.step(KEY)
    assert sorted(conditions(api)) == [CONDITION, "IdleTermination"]


async def test_a_nodes_notice_marks_a_fixed_cluster(api: Api) -> None:
    class Listed(Source):
        def cluster_keys(self) -> Sequence[ClusterKey]:
            return [KEY]

    auto = scaler(Listed(fixed(), [on("n1", pod("w1"))]), Events(), LoopClock(), {})
    auto.node_changed("n1")
    assert auto._memory.served(KEY).triggers == {"node"}


async def test_a_multi_host_replica_is_drained_and_deleted_whole(api: Api, kube: FakeKubeOps) -> None:
    events, clock = Events(), LoopClock()
    body = cluster(group("tpu", replicas=1, hosts=2))
    body["metadata"]["resourceVersion"] = "42"
    hosts = [on(f"n{i + 1}", pod(f"r1-{i}", "tpu", replica="r1", host=i)) for i in range(2)]
    FakeGcs.state = gcs_state(*(node(f"r1-{i}", BUSY, used=1.0) for i in range(2)))
    auto = scaler(Source(body, hosts), events, clock, {"n1": CORDON})  # one host's node only
    await auto.step(KEY)
    assert sorted(d["node"] for d in Gcs.asked) == ["id-r1-0", "id-r1-1"]
    assert deleted(kube) == []
    FakeGcs.state = gcs_state(*(node(f"r1-{i}", DRAINING, idle_ms=100) for i in range(2)))
    clock.advance(5)
    await auto.step(KEY)
    assert sorted(deleted(kube)) == ["r1-0", "r1-1"]  # together, in one round


async def test_a_failed_delete_is_sent_again_the_next_round(api: Api, kube: FakeKubeOps) -> None:
    events, clock = Events(), LoopClock()
    FakeGcs.state = gcs_state(node("w1", BUSY, used=1.0))
    auto = scaler(worker_on_n1(), events, clock, {"n1": SPOT})
    kube.refuse[("delete_pod", "w1")] = ops.KubeError("forbidden", 403)
    clock.advance(30)
    await auto.step(KEY)
    assert (deleted(kube), events.reasons()) == (["w1"], [])  # sent, refused: no Event
    del kube.refuse[("delete_pod", "w1")]
    clock.advance(5)
    await auto.step(KEY)
    assert (deleted(kube), events.reasons()) == (["w1", "w1"], [EVENT_DELETE])


# ---------------------------------------------------------------------------- --mode controller


@pytest.mark.parametrize("in_tree", [False, True])  # True: Ray's own autoscaler runs in its head
async def test_under_mode_controller_a_fixed_clusters_notice_is_acted_on_and_nothing_else(
    api: Api, kube: FakeKubeOps, in_tree: bool
) -> None:
    events, clock = Events(), LoopClock()
    FakeGcs.state = gcs_state(node("w1", BUSY, used=1.0))
    request = {"metadata": {"name": "r", "namespace": "ns"}, "spec": {"clusterName": "rc"}, "status": {}}
    body = fixed()
    body["spec"]["enableInTreeAutoscaling"] = in_tree
    source = Source(body, [on("h", pod("rc-head", "headgroup")), on("n1", pod("w1"))], [request])
    auto = scaler(source, events, clock, {"n1": CORDON}, controller=True)
    assert await auto.step(KEY) == 5
    watched(source, api)
    assert [d["reason"] for d in Gcs.asked] == ["PREEMPTION"]
    assert list(conditions(api)) == [CONDITION]
    FakeGcs.state = gcs_state(node("w1", DRAINING, idle_ms=100))
    clock.advance(5)
    await auto.step(KEY)
    watched(source, api)
    assert (deleted(kube), api.patches, api.statuses) == (["w1"], [], [])  # no request told anything
    assert events.reasons() == [EVENT_DRAIN, EVENT_DELETE]
    assert api.cluster_statuses[-1] == {"autoscaler": None}
    source._pods = [source._pods[0]]  # w1 gone
    assert await auto.step(KEY) is None
    assert len(api.cluster_statuses) == 2  # nothing left to clear


async def test_under_mode_controller_nothing_is_read_without_a_notice(api: Api, kube: FakeKubeOps) -> None:
    FakeGcs.state = gcs_state(node("w1", BUSY, used=1.0))
    pods = [on("h", pod("rc-head", "headgroup")), on("n1", pod("w1"))]
    for in_tree in (False, True):
        body = fixed()
        body["spec"]["enableInTreeAutoscaling"] = in_tree
        quiet = scaler(Source(body, pods), Events(), LoopClock(), {}, controller=True)
        assert await quiet.step(KEY) is None
    assert (FakeGcs.calls, deleted(kube), api.cluster_statuses, api.statuses) == ([], [], [], [])
