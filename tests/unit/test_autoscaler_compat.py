"""compat: the RayCompatible condition of clusters rayscale cannot fully serve, and its Events."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from rayscale.api.raycluster import RayClusterSpec
from rayscale.autoscaler.compat import (
    CLUSTER_STATE,
    DRAIN,
    REPORT,
    GcsSupport,
    Reason,
    autoscaler_protocol,
    compat_condition,
    compat_event,
    find_condition,
    problems,
)

NOW = datetime(2025, 6, 1, 12, 0, 0, tzinfo=UTC)


def _cluster(version: str | None = None, env: list[dict[str, Any]] | None = None) -> RayClusterSpec:
    """The typed spec of a cluster whose head's Ray container has `env`."""
    spec: dict[str, Any] = {
        "enableInTreeAutoscaling": True,
        "headGroupSpec": {"template": {"spec": {"containers": [{"name": "ray-head", "env": env or []}]}}},
    }
    if version is not None:
        spec["autoscalerOptions"] = {"version": version}
    return RayClusterSpec.model_validate(spec)


def _env(value: str) -> list[dict[str, Any]]:
    return [{"name": "RAY_enable_autoscaler_v2", "value": value}]


@pytest.mark.parametrize(
    ("cluster", "expected"),
    [
        (_cluster(), "v2"),
        (_cluster("v2"), "v2"),
        (_cluster("v1"), "v1"),
        (_cluster(env=_env("false")), "v1"),
        (_cluster(env=_env("0")), "v1"),
        (_cluster(env=_env("")), "v1"),
        (_cluster(env=_env("TRUE")), "v2"),
        (_cluster(env=_env("1")), "v2"),
        # the head's own env wins over autoscalerOptions.version (rayscale adds it only when absent)
        (_cluster("v1", env=_env("true")), "v2"),
        (_cluster("v2", env=_env("false")), "v1"),
        # a value from a ConfigMap cannot be read: not held against the cluster
        (_cluster(env=[{"name": "RAY_enable_autoscaler_v2", "valueFrom": {"configMapKeyRef": {}}}]), "v2"),
        (RayClusterSpec.model_validate({"headGroupSpec": {"template": {}}}), "v2"),
    ],
)
def test_autoscaler_protocol(cluster: RayClusterSpec, expected: str) -> None:
    assert autoscaler_protocol(cluster) == expected


def test_gcs_support_learns_only_from_answers_and_unimplemented() -> None:
    support = GcsSupport(session="s1")
    support = support.seen(CLUSTER_STATE, None).seen(DRAIN, "UNIMPLEMENTED").seen(REPORT, "UNAVAILABLE")
    assert (support.cluster_state, support.drain, support.report) == (True, False, None)
    assert support.seen(DRAIN, "DEADLINE_EXCEEDED").drain is False  # a timeout says nothing
    assert support.seen(DRAIN, None).drain is True
    assert support.seen("Unknown", "UNIMPLEMENTED") == support
    # a new head (another session) may run another Ray
    assert support.for_session("s1") == support
    assert support.for_session("s2") == GcsSupport(session="s2")
    # knowledge from before any session is kept for the first one
    early = GcsSupport(drain=False)
    assert early.for_session("s1") == GcsSupport(session="s1", drain=False)


def test_a_restarted_operator_remembers_what_the_condition_said() -> None:
    written = compat_condition(_cluster(), GcsSupport(drain=False, report=False), NOW)
    support = GcsSupport.remembered(written)
    assert (support.cluster_state, support.drain, support.report) == (None, False, False)
    again = compat_condition(_cluster(), support.for_session("s1"), NOW, written)
    assert again == written
    assert compat_event(written, again) is None  # no Events from a restart
    assert GcsSupport.remembered(None) == GcsSupport()
    assert GcsSupport.remembered(compat_condition(_cluster(), GcsSupport(), NOW)) == GcsSupport()
    too_old = compat_condition(_cluster(), GcsSupport(cluster_state=False), NOW)
    assert GcsSupport.remembered(too_old).cluster_state is False


def test_find_condition() -> None:
    condition = compat_condition(_cluster(), GcsSupport(), NOW)
    other = {"type": "Other", "status": "True"}
    assert find_condition({"conditions": [other, condition]}) == condition
    assert find_condition({"conditions": [other]}) is None
    assert find_condition(None) is None


def test_problems_most_severe_first() -> None:
    everything = GcsSupport(cluster_state=False, drain=False, report=False)
    assert problems(_cluster("v1"), everything) == (
        Reason.RAY_TOO_OLD,
        Reason.AUTOSCALER_V1,
        Reason.DRAIN_UNSUPPORTED,
        Reason.REPORT_UNSUPPORTED,
    )
    assert problems(_cluster(), GcsSupport()) == ()  # nothing known against it yet
    assert problems(_cluster(), GcsSupport(cluster_state=True, drain=True, report=True)) == ()


def test_condition_true_when_fine() -> None:
    condition = compat_condition(_cluster(), GcsSupport(cluster_state=True), NOW)
    assert condition == {
        "type": "RayCompatible",
        "status": "True",
        "reason": "Compatible",
        "message": condition["message"],
        "lastTransitionTime": "2025-06-01T12:00:00Z",
    }


def test_condition_false_names_every_problem() -> None:
    condition = compat_condition(_cluster("v1"), GcsSupport(drain=False), NOW)
    assert (condition["status"], condition["reason"]) == ("False", "AutoscalerV1")
    assert "request_resources()" in condition["message"]
    assert "DrainNode" in condition["message"]


def test_transition_time_moves_only_with_the_status() -> None:
    old = compat_condition(_cluster("v1"), GcsSupport(), NOW)
    later = NOW + timedelta(minutes=5)
    same = compat_condition(_cluster("v1"), GcsSupport(drain=False), later, old)
    assert same["lastTransitionTime"] == old["lastTransitionTime"]
    fixed = compat_condition(_cluster(), GcsSupport(), later, same)
    assert fixed["lastTransitionTime"] == "2025-06-01T12:05:00Z"


def test_events_on_transitions_only() -> None:
    fine = compat_condition(_cluster(), GcsSupport(), NOW)
    v1 = compat_condition(_cluster("v1"), GcsSupport(), NOW, fine)
    assert compat_event(None, fine) is None
    assert compat_event(fine, fine) is None
    event = compat_event(fine, v1)
    assert event is not None
    assert event[:2] == ("Warning", "AutoscalerV1")
    assert "autoscaler v1" in event[2]
    assert compat_event(v1, v1) is None  # not repeated every round
    assert compat_event(None, v1) == event  # a cluster first seen incompatible
    # another problem while still False: said again
    both = compat_condition(_cluster("v1"), GcsSupport(drain=False), NOW, v1)
    again = compat_event(v1, both)
    assert again is not None
    assert again[:2] == ("Warning", "AutoscalerV1")
    assert "DrainNode" in again[2]
    # fixed
    back = compat_event(both, fine)
    assert back is not None
    assert back[:2] == ("Normal", "RayCompatible")


@pytest.mark.parametrize("containers", [2**63 - 1, {"name": "ray-head"}, "ray-head", [None]])
def test_a_head_template_of_the_wrong_shape_reads_as_v2(containers: Any) -> None:
    """`--mode autoscaler` (beside KubeRay) reads specs rayscale's controller never validated."""
    cluster = RayClusterSpec.model_validate(
        {"headGroupSpec": {"template": {"spec": {"containers": containers}}}}
    )
    assert autoscaler_protocol(cluster) == "v2"
