"""The disruption rows of the fault suite: their invariant checks (e2e/chaos/disruption_ledger.py)
catch what they are there for, and their section of docs/reliability.md is written beside the
fault runs' table without touching it (e2e/chaos/disruption_results.py, e2e/chaos/results.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from e2e.chaos import disruption_results, results
from e2e.chaos.disruption_ledger import DisruptionLedger

COMMAND = "python -m pytest e2e/chaos/test_disruptions.py"


def pod(name: str, *, replica: str | None = None, host: int = 0, deleting: bool = False) -> dict[str, Any]:
    labels = {"ray.io/cluster": "c", "ray.io/node-type": "worker", "ray.io/group": "work"}
    if replica is not None:
        labels |= {"ray.io/worker-group-replica-name": replica, "ray.io/replica-host-index": str(host)}
    meta: dict[str, Any] = {"name": name, "labels": labels}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {"metadata": meta, "status": {"phase": "Running"}}


def raycluster(*workers_to_delete: str, backoff: str = "") -> dict[str, Any]:
    group: dict[str, Any] = {"groupName": "work", "replicas": 1}
    if workers_to_delete:
        group["scaleStrategy"] = {"workersToDelete": list(workers_to_delete)}
    status = {"autoscaler": {"groups": [{"name": "work", **({"backoffUntil": backoff} if backoff else {})}]}}
    return {"metadata": {"name": "c"}, "spec": {"workerGroupSpecs": [group]}, "status": status}


def noticed(*pods: dict[str, Any], deadline: float | None = None) -> DisruptionLedger:
    found = DisruptionLedger("c")
    for body in pods:
        found.pod_event("ADDED", body)
    names = [str(p["metadata"]["name"]) for p in pods]
    found.notice(names, names, deadline)
    return found


def test_a_drained_worker_removed_once_idle_after_its_replacement_is_no_violation() -> None:
    found = noticed(pod("a"))
    found.pod_event("ADDED", pod("b"))  # the replacement
    found.idle("a")
    found.cluster_event("MODIFIED", raycluster("a"))
    found.pod_event("MODIFIED", pod("a", deleting=True))
    found.pod_event("DELETED", pod("a", deleting=True))
    assert found.violations == []
    figures = found.figures()
    assert (figures["pods_deleted"], figures["replaced_before_removed"]) == (1, True)
    assert figures["removed"] == {"a": "named in workersToDelete"}
    assert figures["drained_s"] is not None


def test_removing_a_busy_worker_under_a_notice_without_deadline_is_a_violation() -> None:
    found = noticed(pod("a"))
    found.cluster_event("MODIFIED", raycluster("a"))
    assert len(found.violations) == 1
    assert found.violations[0].startswith("busy node removed: a (named in workersToDelete)")
    assert found.violations[0].endswith("after the notice, no deadline")


def test_removing_a_busy_worker_before_its_deadline_is_a_violation_at_it_is_not() -> None:
    early = noticed(pod("a"), deadline=30)
    early.pod_event("MODIFIED", pod("a", deleting=True))
    assert [v.split(" (")[0] for v in early.violations] == ["busy node removed: a"]
    due = noticed(pod("a"), deadline=0)
    due.pod_event("MODIFIED", pod("a", deleting=True))
    assert due.violations == []


def test_removing_a_worker_without_a_notice_is_a_violation() -> None:
    found = noticed(pod("a"))
    found.pod_event("ADDED", pod("other"))
    found.pod_event("DELETED", pod("other"))
    assert found.violations == [
        "healthy worker removed: other (deleted), no notice of its own nor of its replica"
    ]


def test_a_replica_named_in_part_and_a_second_replacement_and_a_backoff_are_violations() -> None:
    found = noticed(pod("r-0", replica="r", host=0), pod("r-1", replica="r", host=1))
    found.pod_event("ADDED", pod("s-0", replica="s", host=0))
    found.pod_event("ADDED", pod("s-1", replica="s", host=1))
    assert found.violations == []
    found.pod_event("ADDED", pod("t-0", replica="t", host=0))
    found.idle("r-0")
    found.idle("r-1")
    found.cluster_event("MODIFIED", raycluster("r-0", backoff="2026-01-01T00:01:00Z"))
    assert found.violations == [
        "pod created twice: ['s-0', 's-1', 't-0'] made for 2 leaving pods",
        "replica r removed in part: ['r-0'] without ['r-1']",
        "failed launch counted: group work backs off until 2026-01-01T00:01:00Z",
    ]
    whole = noticed(pod("r-0", replica="r", host=0), pod("r-1", replica="r", host=1))
    whole.idle("r-0")
    whole.idle("r-1")
    whole.cluster_event("MODIFIED", raycluster("r-0", "r-1"))
    assert whole.violations == []


def outcome(fault: str, suite: str = "disruption", **detail: Any) -> results.Outcome:
    provenance = {"date": "2026-11-29 13:30 UTC", "commit": "abc1234", "cores": 2, "memory_gib": 7.8,
                  "load_start": 1.5, "load_end": 2.5, "command": COMMAND}  # fmt: skip
    return results.Outcome(suite, fault, (), 40.0, detail, provenance)


def test_the_disruption_rows_render_their_figures() -> None:
    runs = [
        outcome("cordon", tasks=1, failed=0, run_again=0, pods_deleted=1, drain_asked_s=1.2,
                work_ended_s=20.0, replacement_made_s=1.5, drained_s=22.0),
        outcome("cordon", tasks=1, failed=0, run_again=0, pods_deleted=1, drain_asked_s=2.0,
                work_ended_s=24.0, replacement_made_s=2.5, drained_s=26.0),
    ]  # fmt: skip
    text = disruption_results.section(runs)
    assert "| cordon | 2 | 2 | 0 | 0 | 2 | 1.6 / 2.0 | 22.0 / 24.0 | 2.0 / 2.5 | 24.0 / 26.0 | 0 |" in text
    assert "2 disruptions, 0 invariant violations, 0 not converged." in text
    assert "`python -m pytest e2e/chaos/test_disruptions.py`" in " ".join(text.split())


def test_writing_the_disruption_runs_keeps_the_fault_table(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    page = tmp_path / "reliability.md"
    page.write_text("# Reliability\n\n## Fault runs\n\nthe fault table\n\n## Disruption runs\n\nold rows\n")
    outcome("cordon", tasks=1, drained_s=3.0).record(tmp_path / "chaos")
    monkeypatch.setattr(results, "RESULTS", tmp_path / "chaos")
    monkeypatch.setattr(results, "DOCS", page)
    monkeypatch.setattr(results, "store", lambda *_: pytest.fail("no fault runs: nothing stored"))
    monkeypatch.setattr(results.load, "__defaults__", (tmp_path / "chaos",))
    assert results.main(["--write-docs"]) == 0
    text = page.read_text()
    assert "## Fault runs\n\nthe fault table\n" in text
    assert "old rows" not in text
    assert "| cordon | 1 | 1 | 0 | 0 | 0 | - | - | - | 3.0 / 3.0 | 0 |" in text
