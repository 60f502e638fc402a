"""The fault suite's invariant checks (e2e/chaos/invariants.py) catch what they are there for."""

from __future__ import annotations

from typing import Any

from e2e.chaos.invariants import PodLedger, leader_violations


def pod(name: str, phase: str = "Running", *, cluster: str = "c0", deleting: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "labels": {"ray.io/cluster": cluster, "ray.io/node-type": "worker"}}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {"metadata": meta, "status": {"phase": phase}}


def two_workers_then_one_asked() -> PodLedger:
    """c0 created with two workers (a, b), then asked for one."""
    ledger = PodLedger()
    ledger.created_cluster("c0", 2)
    ledger.event("ADDED", pod("a"))
    ledger.event("ADDED", pod("b"))
    ledger.asked("c0", 1)
    return ledger


def test_a_second_pod_for_the_same_ask_is_a_duplicate() -> None:
    ledger = PodLedger()
    ledger.created_cluster("c0", 1)
    ledger.event("ADDED", pod("a"))
    assert ledger.violations == []
    assert ledger.converged()
    ledger.event("ADDED", pod("b"))  # nobody asked for a second worker
    assert len(ledger.violations) == 1
    assert ledger.violations[0].startswith("pod created twice: c0 has had 2 worker pods, at most 1")


def test_scaling_up_and_down_is_no_violation_but_an_unasked_delete_is() -> None:
    ledger = two_workers_then_one_asked()
    ledger.event("MODIFIED", pod("b", deleting=True))
    ledger.event("DELETED", pod("b"))
    ledger.asked("c0", 2)
    ledger.event("ADDED", pod("c", "Pending"))
    assert not ledger.converged()
    ledger.event("MODIFIED", pod("c"))
    assert ledger.converged()
    assert ledger.violations == []
    ledger.event("DELETED", pod("a"))  # a healthy worker the user never asked to remove
    assert [v.split(":")[0] for v in ledger.violations] == ["healthy worker removed"]


def test_a_resync_sees_the_pods_deleted_while_the_watch_was_down() -> None:
    ledger = two_workers_then_one_asked()
    ledger.resync([pod("a")])  # b went while nobody watched
    assert ledger.converged()
    assert ledger.violations == []


def audit(pid: int, resource: str, name: str, second: int, code: int = 200) -> dict[str, Any]:
    return {
        "stage": "ResponseComplete",
        "userAgent": f"rayscale/0.1 (host, pid {pid})",
        "responseStatus": {"code": code},
        "objectRef": {"namespace": "ns", "resource": resource, "name": name},
        "requestReceivedTimestamp": f"2026-01-01T00:00:{second:02d}.000000Z",
    }


def test_a_write_by_a_replica_that_does_not_hold_the_lease_is_two_leaders() -> None:
    events = [
        audit(1, "leases", "rayscale", 1),
        audit(1, "pods", "", 2),
        audit(2, "leases", "rayscale", 20),  # the standby took over
        audit(2, "pods", "", 21),
        audit(1, "pods", "", 22, code=409),  # refused: no harm
    ]
    assert leader_violations(events, "ns") == []
    late = [*events, audit(1, "pods", "", 23)]  # the old leader woke up and wrote
    (violation,) = leader_violations(late, "ns")
    assert violation.startswith("two leaders acting: pid 1 wrote pods/ at 00:00:23 while pid 2 held")
