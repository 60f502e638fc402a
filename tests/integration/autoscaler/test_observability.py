"""What the autoscaler tells users on the local control plane (no Ray: the GCS is unreachable):
status.autoscaler beside the controller's status, the UnmetDemand Event, and /metrics (the
autoscaler's series, and KubeRay's kuberay_cluster_* series the controller exports)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import Any

import pytest
from hack.localk8s import testcluster
from kubernetes_asyncio import client

from rayscale.api.names import RAYRESOURCEREQUEST
from tests.support.builders import BASIC as NAME
from tests.support.builders import cpu_and_gpu_cluster, gpu_request
from tests.support.kube import Kube
from tests.support.operators import Observed, Operator, autoscaler_rounds, running
from tests.support.polling import eventually
from tests.support.watching import versions

pytestmark = pytest.mark.integration
Sample = tuple[str, dict[str, str], float]


@pytest.fixture
def observed(
    cluster: testcluster.ClusterHandle,
    namespace: str,
    raycluster_crd: None,
    request: pytest.FixtureRequest,
) -> Iterator[Operator]:
    yield from running(Observed(cluster, namespace), request)


def of_cluster(samples: list[Sample], namespace: str, name: str = "") -> list[Sample]:
    return [
        s
        for s in samples
        if s[0].startswith("rayscale_autoscaler_")
        and s[1].get("namespace") == namespace
        and s[1].get("cluster") == NAME
        and (not name or s[0] == name)
    ]


def of_kuberay(samples: list[Sample], namespace: str) -> dict[str, list[dict[str, str]]]:
    """KubeRay's kuberay_cluster_* series of the test's RayCluster: name -> the label sets (value 1 for
    the info and condition series, the seconds under "value" for the duration)."""
    found: dict[str, list[dict[str, str]]] = {}
    for name, labels, value in samples:
        if name.startswith("kuberay_cluster_") and labels.get("namespace") == namespace:
            assert labels["name"] == NAME
            found.setdefault(name, []).append({**labels, "value": str(value)})
    return found


def never_wiped(versions: list[dict[str, Any]]) -> None:
    """Once written, neither writer's keys disappear, and status.autoscaler never goes back in time."""
    seen = [v.get("status") or {} for v in versions]
    auto = [i for i, s in enumerate(seen) if "autoscaler" in s]
    ctrl = [i for i, s in enumerate(seen) if "state" in s]
    assert auto, "status.autoscaler never written"
    assert ctrl, "the controller's status never written"
    assert auto == list(range(auto[0], len(seen))), "status.autoscaler wiped"
    assert ctrl == list(range(ctrl[0], len(seen))), "the controller's status wiped"
    times = [seen[i]["autoscaler"]["lastDecisionTime"] for i in auto]
    assert times == sorted(times), f"a stale status.autoscaler written back: {times}"


async def test_status_autoscaler_and_one_unmet_demand_event_beside_the_controller_status(
    api: client.ApiClient, namespace: str, observed: Observed
) -> None:
    kube = Kube(api, namespace)
    async with versions(kube, NAME) as seen:
        await _status_and_events(kube, observed)
    never_wiped(seen)


async def _status_and_events(kube: Kube, observed: Observed) -> None:
    namespace = kube.ns
    await kube.create(cpu_and_gpu_cluster())
    await kube.objects.create_namespaced_custom_object(*RAYRESOURCEREQUEST.at(namespace), gpu_request(3))

    async def groups() -> dict[str, Any] | None:
        status = (await kube.get(NAME)).get("status") or {}
        auto = status.get("autoscaler") or {}
        found = {g["name"]: g for g in auto.get("groups") or []}
        gpu = found.get("gpu") or {}
        done = gpu.get("current") == gpu.get("desired") == 3 and gpu.get("pending") == 0
        return status if done and status.get("availableWorkerReplicas") == 3 else None

    status = await eventually(groups, timeout=90, message="3 GPU workers running, in status.autoscaler")
    auto = status["autoscaler"]
    assert [g["name"] for g in auto["groups"]] == ["cpu", "gpu"]
    assert auto["unmetDemand"] == []
    assert auto["gcs"]["reachable"] is False
    assert auto["gcs"]["address"] == "127.0.0.1:1"
    assert auto["lastDecisionTime"]
    assert status["state"] == "ready"  # the controller's fields beside it

    # Past the group's max: unmet, with the scheduler's reason.
    await kube.objects.patch_namespaced_custom_object(
        *RAYRESOURCEREQUEST.at(namespace), "reserve-gpus",
        [{"op": "replace", "path": "/spec/bundles/0/count", "value": 10}],
        _content_type="application/json-patch+json",
    )  # fmt: skip

    async def unmet() -> list[dict[str, Any]]:
        found: dict[str, Any] = ((await kube.get(NAME)).get("status") or {}).get("autoscaler", {})
        return list(found.get("unmetDemand") or [])

    (entry,) = await eventually(unmet, timeout=60, message="unmet demand in status.autoscaler")
    assert (entry["kind"], entry["resources"], entry["count"], entry["reason"]) == (
        "constraint",
        {"GPU": 1},
        10,
        "MAX_REPLICAS",
    )
    assert "maxReplicas" in entry["message"]
    (event,) = await eventually(lambda: kube.events("UnmetDemand"), timeout=30, message="UnmetDemand Event")
    assert event.type == "Warning"
    assert event.involved_object.name == NAME
    assert "10 x {GPU: 1}" in event.message

    # Several more rounds with the demand unchanged: no second Event. A controller status write
    # meanwhile (a worker replaced) keeps status.autoscaler, and the autoscaler's keep its fields.
    rounds = await autoscaler_rounds(observed)
    await kube.delete_pod((await kube.workers(NAME, group="gpu", live=True))[0].metadata.name)
    await eventually(
        lambda: kube.running_workers(NAME, 3, group="gpu"), timeout=60, message="the worker replaced"
    )

    async def rounds_later() -> bool:
        return await autoscaler_rounds(observed) >= rounds + 10

    await eventually(rounds_later, timeout=60, message="10 more autoscaler rounds")
    assert len(await kube.events("UnmetDemand")) == 1

    async def both() -> dict[str, Any] | None:
        status = (await kube.get(NAME)).get("status") or {}
        gpu = {g["name"]: g for g in status.get("autoscaler", {}).get("groups") or []}.get("gpu", {})
        ok = (
            status.get("availableWorkerReplicas") == 3 and gpu.get("current") == 3 and gpu.get("pending") == 0
        )
        return status if ok else None

    status = await eventually(both, timeout=60, message="both writers' fields, up to date")
    assert status["state"] == "ready"
    assert {c["type"] for c in status["conditions"]} >= {"HeadPodReady", "RayClusterProvisioned"}
    assert status["autoscaler"]["unmetDemand"][0]["count"] == 10


async def test_metrics_show_the_cluster_and_forget_it_when_it_is_deleted(
    api: client.ApiClient, namespace: str, observed: Observed
) -> None:
    kube = Kube(api, namespace)
    created = await kube.create(cpu_and_gpu_cluster())
    uid = created["metadata"]["uid"]
    await kube.objects.create_namespaced_custom_object(*RAYRESOURCEREQUEST.at(namespace), gpu_request(3))

    # The scale-up is counted as it is written; the round's gauges are set when the round ends.
    every = {
        "rayscale_autoscaler_pending_demand",
        "rayscale_autoscaler_groups_backing_off",
        "rayscale_autoscaler_gcs_reachable",
        "rayscale_autoscaler_gcs_errors_total",
        "rayscale_autoscaler_scaled_up_total",
    }

    def runs(samples: list[Sample]) -> set[tuple[str, str]]:
        return {
            (s[1]["controller"], s[1]["result"])
            for s in samples
            if s[0] == "controller_runtime_reconcile_total"
        }

    async def scaled() -> list[Sample]:
        samples = await observed.scrape()
        ups = of_cluster(samples, namespace, "rayscale_autoscaler_scaled_up_total")
        names = {s[0] for s in of_cluster(samples, namespace)}
        done = {("raycluster", "success"), ("autoscaler", "requeue_after")} <= runs(samples)
        return (
            samples
            if [s[2] for s in ups if s[1]["group"] == "gpu"] == [3.0] and names >= every and done
            else []
        )

    samples = await eventually(
        scaled, timeout=60, message="3 GPU nodes scaled up and the round's series, in /metrics"
    )
    (reachable,) = of_cluster(samples, namespace, "rayscale_autoscaler_gcs_reachable")
    assert reachable[2] == 0
    assert any(s[0] == "controller_runtime_reconcile_time_seconds_count" and s[2] > 0 for s in samples)
    assert any(s[0] == "rayscale_autoscaler_decision_duration_seconds_count" and s[2] > 0 for s in samples)

    await kube.objects.patch_namespaced_custom_object(
        *RAYRESOURCEREQUEST.at(namespace), "reserve-gpus",
        [{"op": "replace", "path": "/spec/bundles/0/count", "value": 10}],
        _content_type="application/json-patch+json",
    )  # fmt: skip

    async def unmet() -> list[Sample]:
        return of_cluster(await observed.scrape(), namespace, "rayscale_autoscaler_unmet_demand")

    (series,) = await eventually(unmet, timeout=60, message="unmet demand in /metrics")
    assert (series[1]["reason"], series[2]) == ("MAX_REPLICAS", 10)

    # KubeRay's series: the cluster, its RayClusterProvisioned condition, how long it took.
    async def provisioned() -> dict[str, list[dict[str, str]]]:
        found = of_kuberay(await observed.scrape(), namespace)
        conditions = [s["condition"] for s in found.get("kuberay_cluster_condition_provisioned", [])]
        return found if conditions == ["true"] else {}

    kuberay = await eventually(provisioned, timeout=60, message="kuberay_cluster_* series, provisioned")
    (info,) = kuberay["kuberay_cluster_info"]
    assert info == {"name": NAME, "namespace": namespace, "uid": uid, "owner_kind": "None", "value": "1.0"}
    assert kuberay["kuberay_cluster_condition_provisioned"][0]["uid"] == uid
    (took,) = kuberay["kuberay_cluster_provisioned_duration_seconds"]
    condition = await kube.condition(NAME, "RayClusterProvisioned")
    assert condition is not None
    assert condition["status"] == "True"
    age_then = datetime.fromisoformat(condition["lastTransitionTime"]) - datetime.fromisoformat(
        created["metadata"]["creationTimestamp"]
    )
    assert took["uid"] == uid
    # Measured when the condition turned True: its transition time (whole seconds), a moment more.
    assert age_then.total_seconds() <= float(took["value"]) < age_then.total_seconds() + 5

    await kube.delete_cluster(NAME)

    async def gone() -> bool:
        samples = await observed.scrape()
        return not of_cluster(samples, namespace) and not of_kuberay(samples, namespace)

    await eventually(gone, timeout=60, message="the cluster's series removed from /metrics")
