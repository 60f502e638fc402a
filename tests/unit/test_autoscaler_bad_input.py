"""The autoscaler loop with bad input (the API and the GCS faked): a RayResourceRequest with bad
bundles gets its own status and one Warning Event while the cluster keeps scaling for the others;
a cluster over the pod limit is never planned; the decision never goes past the limit."""

from __future__ import annotations

from typing import Any

import pytest
from tests.support.builders import group, rc
from tests.support.fakes import KEY, EventLog, FakeApi, FakeSource, autoscaler

from rayscale.kube import ops

OUT_OF_RANGE = "is out of range: quantities are limited to ±9223372036854775807 (2^63-1)"


def request(name: str, resources: dict[str, Any], count: int = 1) -> dict[str, Any]:
    bundles = [{"resources": resources, "count": count}]
    return {
        "metadata": {"name": name, "namespace": "ns", "generation": 1},
        "spec": {"clusterName": "rc", "bundles": bundles},
        "status": {},
    }


async def test_a_bad_request_is_refused_with_an_event_and_the_cluster_scales_for_the_others(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    api = FakeApi(monkeypatch)
    events = EventLog()
    huge = request("huge", {"memory": "1e999999"})
    many = request("many", {"CPU": 1}, count=2**31 - 1)
    source = FakeSource(
        rc(group("cpu", replicas=0, max_replicas=2**31 - 1)),
        requests=[request("good", {"CPU": 1}, 2), huge, many],
    )
    scaler = autoscaler(source, events)
    await scaler.step(KEY)
    assert api.replicas() == [2]
    assert api.request_statuses()["good"]["phase"] == "Pending"
    huge_message = f"a bundle cannot be read: spec.bundles[0].resources.memory: '1e999999' {OUT_OF_RANGE}"
    many_message = (
        "a bundle cannot be read: spec.bundles[0].count: 2147483647 bundles in all is over the limit of"
        " 100000 per RayResourceRequest"
    )
    assert {
        n: (s["phase"], s["reason"], s["message"]) for n, s in api.request_statuses().items() if n != "good"
    } == {
        "huge": ("Unsatisfiable", "InvalidBundles", huge_message),
        "many": ("Unsatisfiable", "InvalidBundles", many_message),
    }
    warnings = [e[:5] for e in events.events if e.type == "Warning"]
    assert warnings == [
        ("RayResourceRequest", "huge", "Warning", "InvalidBundles", huge_message),
        ("RayResourceRequest", "many", "Warning", "InvalidBundles", many_message),
    ]
    # once the status says so, the next rounds write nothing and post nothing again
    for bad in (huge, many):
        bad["status"] = api.request_statuses()[bad["metadata"]["name"]]
    events.clear()
    await scaler.step(KEY)
    assert events.reasons("Warning") == []


async def test_a_cluster_over_the_pod_limit_is_never_planned(monkeypatch: pytest.MonkeyPatch) -> None:
    api = FakeApi(monkeypatch)
    source = FakeSource(
        rc(group("cpu", replicas=100_000, max_replicas=2**31 - 1)), requests=[request("r", {"CPU": 1})]
    )
    await autoscaler(source, EventLog()).step(KEY)
    assert api.patches == []
    status = api.request_statuses()["r"]
    assert status["phase"] == "Pending"
    assert status["message"] == (
        "RayCluster rc cannot be autoscaled: spec.workerGroupSpecs[0].replicas: 100000 replicas x 1 hosts ="
        " 100000 pods is over the limit of 10000 worker pods per RayCluster (--max-pods-per-cluster)"
    )


async def test_the_autoscaler_never_writes_replicas_past_the_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    """maxReplicas are the KubeRay default (2^31-1); the limit (4 pods) is what holds."""
    api = FakeApi(monkeypatch)
    groups = (group("a", replicas=1, max_replicas=2**31 - 1), group("b", replicas=0, max_replicas=2**31 - 1))
    source = FakeSource(rc(*groups), requests=[request("r", {"CPU": 1}, 4)])
    await autoscaler(source, EventLog(), max_pods=4).step(KEY)
    assert sum(api.replicas()) == 4  # a's replica (its pod not made yet) and 3 more
    api.patches.clear()
    source = FakeSource(rc(*groups), requests=[request("r", {"CPU": 1}, 5)])
    await autoscaler(source, EventLog(), max_pods=4).step(KEY)
    assert api.patches == []  # 5 pods would be over the limit: all or nothing, so nothing
    assert (api.request_statuses()["r"]["phase"], api.request_statuses()["r"]["reason"]) == (
        "Unsatisfiable",
        "MAX_WORKERS",
    )


@pytest.mark.parametrize(
    ("where", "value", "problem"),
    [
        # found by tests/integration/controller/test_fuzz_specs.py: the round raised TypeError
        (("headGroupSpec",), 2**63 - 1,
         "spec.headGroupSpec.template.spec.containers: must be a list of containers"),
        (("headGroupSpec",), {"name": "ray-head"},
         "spec.headGroupSpec.template.spec.containers: must be a list of containers"),
        (("workerGroupSpecs", 0), [], "spec.workerGroupSpecs[0].template.spec.containers: must have at least"
         " one container"),
    ],
)  # fmt: skip
async def test_a_cluster_the_controller_refuses_is_never_planned(
    monkeypatch: pytest.MonkeyPatch, where: tuple[Any, ...], value: Any, problem: str
) -> None:
    """A spec the controller refuses (SpecValid=False) is not autoscaled: no round meets what the
    validation keeps out, nothing is patched, and its requests say why."""
    api = FakeApi(monkeypatch)
    body = rc(group("cpu", replicas=0, max_replicas=2))
    node: Any = body["spec"]
    for key in where:
        node = node[key]
    node["template"]["spec"]["containers"] = value
    source = FakeSource(body, requests=[request("r", {"CPU": 1})])
    assert await autoscaler(source, EventLog()).step(KEY) is None
    assert api.patches == []
    assert (api.request_statuses()["r"]["phase"], api.request_statuses()["r"]["message"]) == (
        "Pending",
        f"RayCluster rc cannot be autoscaled: {problem}",
    )


async def test_a_status_is_written_once_while_the_watch_has_not_shown_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Found by tests/integration/controller/test_fuzz_specs.py (a request of 6000 bundles): a
    round that ran before the watch delivered the status written by the one before wrote it again
    and posted its InvalidBundles Event a second time (count 2)."""
    FakeApi(monkeypatch)
    events = EventLog()
    huge = request("huge", {"memory": "1e999999"})
    huge["metadata"]["resourceVersion"] = "7"
    scaler = autoscaler(FakeSource(rc(group("cpu", replicas=0, max_replicas=2)), requests=[huge]), events)
    writes: list[str] = []
    write = ops.patch_rayresourcerequest_status

    async def counted(api_: Any, ns: str, name: str, patch: dict[str, Any]) -> bool:
        writes.append(name)
        return await write(api_, ns, name, patch)

    monkeypatch.setattr(ops, "patch_rayresourcerequest_status", counted)
    await scaler.step(KEY)
    await scaler.step(KEY)  # the index still shows resourceVersion 7, without a status
    assert writes == ["huge"]
    assert events.reasons("Warning") == ["InvalidBundles"]
    huge["metadata"]["resourceVersion"] = "8"  # someone else wrote the status away: written again
    await scaler.step(KEY)
    assert writes == ["huge", "huge"]
