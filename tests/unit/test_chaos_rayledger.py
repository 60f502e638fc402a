"""The Ray fault suite's invariant checks (e2e/chaos/rayledger.py) catch what they are there for."""

from __future__ import annotations

import time
from typing import Any

from e2e.chaos.rayledger import RayLedger

IDLE = 15.0


def pod(name: str, phase: str = "Running", *, deleting: bool = False) -> dict[str, Any]:
    labels = {"ray.io/cluster": "c", "ray.io/node-type": "worker", "ray.io/group": "cpu"}
    meta: dict[str, Any] = {"name": name, "labels": labels}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {"metadata": meta, "status": {"phase": phase}}


def raycluster(
    workers_to_delete: tuple[str, ...] = (), replicas: int = 1, backoff: str = ""
) -> dict[str, Any]:
    group: dict[str, Any] = {"groupName": "cpu", "replicas": replicas}
    if workers_to_delete:
        group["scaleStrategy"] = {"workersToDelete": list(workers_to_delete)}
    status = {"autoscaler": {"groups": [{"name": "cpu", **({"backoffUntil": backoff} if backoff else {})}]}}
    return {"metadata": {"name": "c"}, "spec": {"workerGroupSpecs": [group]}, "status": status}


def ledger(needed: int = 2) -> RayLedger:
    found = RayLedger("c", IDLE)
    found.need(needed)
    return found


def test_scaling_up_within_the_demand_is_no_violation() -> None:
    found = ledger()
    found.pod_event("ADDED", pod("a", "Pending"))
    found.pod_event("MODIFIED", pod("a"))
    found.pod_event("ADDED", pod("b"))
    found.cluster_event("MODIFIED", raycluster(replicas=2))
    assert found.violations == []
    assert sorted(found.live()) == ["a", "b"]
    assert found.replicas == {"cpu": 2}


def test_a_pod_beyond_the_demand_is_a_duplicate_unless_the_fault_broke_one() -> None:
    found = ledger()
    for name in ("a", "b"):
        found.pod_event("ADDED", pod(name))
    found.kill("a")
    found.pod_event("ADDED", pod("c"))  # a's replacement
    assert found.violations == []
    found.pod_event("ADDED", pod("d"))
    assert found.violations == [
        "pod created twice: d is worker pod 4, at most 3 were needed "
        "(2 for the demand, 1 broken by the fault)"
    ]


def test_removing_a_busy_node_is_a_violation_at_the_first_sign() -> None:
    found = ledger()
    found.pod_event("ADDED", pod("a"))
    found.set_busy({"a": "actor-0"})
    found.release()
    found.released = time.monotonic() - 2 * IDLE  # long idle: only its being busy is wrong
    found.cluster_event("MODIFIED", raycluster(("a",)))
    assert found.violations == ["busy node removed: a (named in workersToDelete) while it runs actor actor-0"]
    found.pod_event("MODIFIED", pod("a", deleting=True))  # the same removal, seen again
    assert len(found.violations) == 1
    assert found.gone() == ["a"]


def test_a_drained_busy_node_is_a_violation() -> None:
    found = ledger()
    found.drained("a", "actor-0")
    assert found.violations == ["busy node drained: a's Ray node is DRAINING while it runs actor actor-0"]


def test_healthy_workers_go_only_after_the_idle_timeout_once_the_demand_went_down() -> None:
    found = ledger(3)
    for name in ("a", "b", "c"):
        found.pod_event("ADDED", pod(name))
    found.pod_event("MODIFIED", pod("a", deleting=True))
    assert found.violations == ["healthy worker removed: a (marked for deletion), the demand never went down"]
    found.release()
    found.pod_event("DELETED", pod("b"))
    assert found.violations[1].startswith(
        "healthy worker removed: b (deleted), 0.0s after the demand went down"
    )
    found.released = time.monotonic() - IDLE
    found.pod_event("DELETED", pod("c"))
    assert len(found.violations) == 2


def test_a_pod_the_fault_broke_may_go() -> None:
    found = ledger()
    found.pod_event("ADDED", pod("a"))
    found.kill("a")
    found.cluster_event("MODIFIED", raycluster(("a",)))
    assert found.violations == []


def test_nothing_goes_while_rays_state_is_unknown() -> None:
    found = ledger()
    for name in ("a", "b"):
        found.pod_event("ADDED", pod(name))
    found.kill("a")
    found.released = time.monotonic() - 2 * IDLE
    found.blind_from()
    found.pod_event("MODIFIED", pod("a", deleting=True))
    found.blind_until()
    found.pod_event("MODIFIED", pod("b", deleting=True))  # after the window: an idle removal
    assert found.violations == ["worker removed while Ray's state is unknown: a (marked for deletion)"]


def test_a_group_backing_off_is_a_failed_launch() -> None:
    found = ledger()
    found.cluster_event("MODIFIED", raycluster(backoff="2026-01-01T00:05:00Z"))
    assert found.violations == ["failed launch counted: group cpu backs off until 2026-01-01T00:05:00Z"]


def test_other_clusters_and_the_head_are_not_followed() -> None:
    found = ledger()
    other = pod("x")
    other["metadata"]["labels"]["ray.io/cluster"] = "other"
    head = pod("h")
    head["metadata"]["labels"]["ray.io/node-type"] = "head"
    found.pod_event("ADDED", other)
    found.pod_event("DELETED", head)
    assert found.pods == {}
    assert found.violations == []
