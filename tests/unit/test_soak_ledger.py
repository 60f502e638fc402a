"""The soak's ledger (e2e/chaos/soak.py) tells suspends, resumes and re-created clusters from
duplicate creates and needless deletes, and the soak's figures say what "flat" means."""

from __future__ import annotations

from typing import Any

from e2e.chaos.soak import Sample, SoakLedger, growth


def pod(
    name: str, uid: str, phase: str = "Running", *, kind: str = "worker", deleting: bool = False
) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": name,
        "labels": {"ray.io/cluster": "c0", "ray.io/node-type": kind},
        "ownerReferences": [{"kind": "RayCluster", "name": "c0", "uid": uid}],
    }
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {"metadata": meta, "status": {"phase": phase}}


def started(replicas: int, uid: str = "u1") -> SoakLedger:
    ledger = SoakLedger()
    ledger.created_cluster("c0", replicas)
    ledger.registered("c0", uid)
    ledger.event("ADDED", pod("head", uid, kind="head"))
    for i in range(replicas):
        ledger.event("ADDED", pod(f"w{i}", uid))
    assert ledger.converged()
    assert ledger.violations == []
    return ledger


def test_suspend_removes_every_worker_and_resume_brings_them_back() -> None:
    ledger = started(2)
    ledger.suspend("c0", True)
    ledger.scale("c0", 3)  # an edit while suspended asks nothing yet
    for name in ("head", "w0", "w1"):
        ledger.event("DELETED", pod(name, "u1", kind="head" if name == "head" else "worker"))
    assert ledger.converged()
    assert ledger.violations == []
    ledger.suspend("c0", False)
    assert not ledger.converged()
    ledger.event("ADDED", pod("head2", "u1", kind="head"))
    for name in ("w2", "w3", "w4"):
        ledger.event("ADDED", pod(name, "u1"))
    assert ledger.converged()
    assert ledger.violations == []
    ledger.event("ADDED", pod("w5", "u1"))  # a fourth worker: nobody asked for it
    assert ledger.violations[-1].startswith("pod created twice: c0 has had 6 worker pods, at most 5")


def test_a_worker_removed_without_a_suspend_or_a_decrease_is_a_violation() -> None:
    ledger = started(2)
    ledger.event("DELETED", pod("w0", "u1"))
    assert ledger.violations[-1].startswith("healthy worker removed: c0 lost 1 worker pods, at most 0")


def test_a_recreated_cluster_is_counted_apart_from_the_deleted_one() -> None:
    ledger = started(2)
    ledger.retire("c0")
    ledger.created_cluster("c0", 1)
    ledger.event("ADDED", pod("n0", "u2"))  # the new cluster's worker, before its uid is known
    ledger.registered("c0", "u2")
    ledger.event("ADDED", pod("head-new", "u2", kind="head"))
    assert not ledger.converged()  # the old pods are still there
    for name, kind in (("w0", "worker"), ("w1", "worker"), ("head", "head")):
        ledger.event("MODIFIED", pod(name, "u1", kind=kind, deleting=True))  # the garbage collector
        ledger.event("DELETED", pod(name, "u1", kind=kind))
    assert ledger.converged()
    assert ledger.violations == []
    ledger.event("ADDED", pod("late", "u1"))  # a pod made for the deleted cluster, beyond its ask
    assert ledger.violations[-1].startswith("pod created twice: deleted c0 (uid u1) has had 3 worker pods")


def test_two_live_heads_are_a_violation_but_a_replaced_one_is_not() -> None:
    ledger = started(0)
    ledger.event("MODIFIED", pod("head", "u1", kind="head", deleting=True))
    ledger.event("ADDED", pod("head2", "u1", "Pending", kind="head"))
    assert ledger.violations == []
    ledger.event("ADDED", pod("head3", "u1", "Pending", kind="head"))
    assert ledger.violations[-1].startswith("two head pods: c0")


def samples(rss_mib: list[float], fds: int = 20, pid: int = 1) -> list[Sample]:
    return [Sample(10.0 * i, pid, True, int(r * 1024), fds, 10) for i, r in enumerate(rss_mib)]


def test_flat_means_under_20_mib_or_10_percent_after_the_warm_up() -> None:
    # 400 s: quarters of 100 s, 10 samples each; the first 40 s of a replica are left out
    flat = growth(samples([500.0] * 20 + [540.0] * 20), 400)  # +40 MiB, but +8 %
    assert flat["rss_kib"]["flat"] is True
    grown = growth(samples([200.0] * 20 + [230.0] * 20), 400)  # +30 MiB, +15 %
    assert grown["rss_kib"]["flat"] is False
    warm = samples([100.0] * 40)
    warm[-5:] = [Sample(s.t, 2, True, s.rss_kib, 90, 60) for s in warm[-5:]]  # a new leader, warming up
    assert growth(warm, 400)["fds"]["flat"] is True
    only_new = [Sample(s.t, 3 + i, True, s.rss_kib, s.fds, s.tcp) for i, s in enumerate(samples([1.0] * 40))]
    assert growth(only_new, 400)["fds"]["flat"] is None  # a new leader every sample: nothing to tell
