"""RayResourceRequest status from a decision: Satisfied, Unsatisfiable with the reason, Pending."""

from __future__ import annotations

from rayscale.autoscaler.requests import decision_status, pending_status, status_patch
from rayscale.autoscaler.scheduling.model import Decision, GroupDecision, Unmet, UnmetReason

REQUEST = {"metadata": {"name": "r", "namespace": "ns", "generation": 3}, "status": {}}


def decided(*unmet: Unmet) -> Decision:
    return Decision(groups={}, terminate=(), unmet=unmet, placements=())


def unmet(kind: str, reason: UnmetReason, count: int = 10) -> Unmet:
    return Unmet(kind, {"GPU": 1.0, "CPU": 4.0}, None, None, (), count, reason)


def test_satisfied_when_no_constraint_is_unmet() -> None:
    # unmet tasks are not this request's business
    status = decision_status(REQUEST, decided(unmet("demand", UnmetReason.NO_MATCHING_GROUP)))
    assert status == {"phase": "Satisfied", "reason": None, "message": "the cluster can hold every bundle",
                      "observedGeneration": 3}  # fmt: skip


def test_unsatisfiable_with_the_schedulers_reason() -> None:
    status = decision_status(REQUEST, decided(unmet("constraint", UnmetReason.MAX_REPLICAS)))
    assert (status["phase"], status["reason"]) == ("Unsatisfiable", "MAX_REPLICAS")
    assert status["message"].endswith("10 x {CPU: 4, GPU: 1} (MAX_REPLICAS)")


def test_written_only_when_changed() -> None:
    new = pending_status(REQUEST, "RayCluster x does not exist")
    patch = status_patch(REQUEST, new)
    assert patch == {"status": new}
    assert status_patch({**REQUEST, "status": new}, new) is None


def test_satisfied_only_once_the_capacity_runs() -> None:
    launching = Decision(groups={"gpu": GroupDecision(current=0, replicas=3, launch=3, terminate=0)},
                         terminate=(), unmet=(), placements=())  # fmt: skip
    assert decision_status(REQUEST, launching)["phase"] == "Pending"
    assert "3 worker(s) launching" in decision_status(REQUEST, launching)["message"]
    settled = Decision(groups={"gpu": GroupDecision(current=3, replicas=3, launch=0, terminate=0)},
                       terminate=(), unmet=(), placements=())  # fmt: skip
    assert decision_status(REQUEST, settled, starting=2)["phase"] == "Pending"
    assert decision_status(REQUEST, settled)["phase"] == "Satisfied"
