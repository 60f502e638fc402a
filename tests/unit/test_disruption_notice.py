"""Disruption notices: what a Node's cordon, taints and conditions and a Pod's DisruptionTarget
condition announce (source, deadline, hard or soft), which notice of several is the strongest, and
the --disruption-notice values with the messages a bad one gets."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from rayscale.disruption.notice import Notice, NoticeConfig, node_notice, parse_notice_flag, pod_notice

NOW = datetime(2026, 11, 29, 7, 0, 0, tzinfo=UTC)
DEFAULT = NoticeConfig()


def at(seconds: float) -> datetime:
    return NOW + timedelta(seconds=seconds)


def stamp(when: datetime) -> str:
    return when.strftime("%Y-%m-%dT%H:%M:%SZ")


def taint(key: str, value: str | None = None, added: datetime | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"key": key, "effect": "NoSchedule"}
    if value is not None:
        out["value"] = value
    if added is not None:
        out["timeAdded"] = stamp(added)
    return out


def node(
    *taints: dict[str, Any],
    unschedulable: bool = False,
    annotations: dict[str, str] | None = None,
    conditions: tuple[dict[str, Any], ...] = (),
) -> dict[str, Any]:
    spec: dict[str, Any] = {"taints": list(taints)}
    if unschedulable:
        spec["unschedulable"] = True
    return {
        "metadata": {"name": "n1", "annotations": annotations or {}},
        "spec": spec,
        "status": {"conditions": [{"type": "Ready", "status": "True"}, *conditions]},
    }


def condition(kind: str, status: str = "True", since: datetime | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"type": kind, "status": status, "reason": "SpotNotice"}
    if since is not None:
        out["lastTransitionTime"] = stamp(since)
    return out


# (what, node, source, deadline, hard)
NODE_CASES = [
    ("a cordoned node", node(unschedulable=True), "cordon", None, False),
    ("the unschedulable taint", node(taint("node.kubernetes.io/unschedulable")), "cordon", None, False),
    (
        "cluster-autoscaler's taint, deadline its timestamp plus 600 s",
        node(taint("ToBeDeletedByClusterAutoscaler", str(int(at(-100).timestamp())))),
        "cluster-autoscaler",
        at(500),
        True,
    ),
    (
        "cluster-autoscaler's taint with no timestamp in its value counts from timeAdded",
        node(taint("ToBeDeletedByClusterAutoscaler", "", added=at(-10))),
        "cluster-autoscaler",
        at(590),
        True,
    ),
    (
        "Karpenter's taint without the annotation: no deadline",
        node(taint("karpenter.sh/disrupted")),
        "karpenter",
        None,
        False,
    ),
    (
        "Karpenter's taint with the termination timestamp annotation",
        node(
            taint("karpenter.sh/disrupted"),
            annotations={"karpenter.sh/nodeclaim-termination-timestamp": stamp(at(900))},
        ),
        "karpenter",
        at(900),
        False,
    ),
    (
        "Karpenter's taint before v1 (karpenter.sh/disruption=disrupting)",
        node(taint("karpenter.sh/disruption", "disrupting")),
        "karpenter",
        None,
        False,
    ),
    (
        "out-of-service",
        node(taint("node.kubernetes.io/out-of-service", "nodeshutdown")),
        "out-of-service",
        NOW,
        True,
    ),
    (
        "a shut-down node",
        node(taint("node.cloudprovider.kubernetes.io/shutdown")),
        "node-shutdown",
        NOW,
        True,
    ),
    (
        "GKE's spot notice with timeAdded",
        node(taint("cloud.google.com/impending-node-termination", added=at(-20))),
        "spot",
        at(10),
        True,
    ),
    (
        "GKE's spot notice without timeAdded counts from now",
        node(taint("cloud.google.com/impending-node-termination")),
        "spot",
        at(30),
        True,
    ),
    (
        "an AWS spot interruption with timeAdded",
        node(taint("aws-node-termination-handler/spot-itn", added=at(-60))),
        "spot",
        at(60),
        True,
    ),
    (
        "an AWS spot interruption without timeAdded counts from now",
        node(taint("aws-node-termination-handler/spot-itn", "event-id-1")),
        "spot",
        at(120),
        True,
    ),
    (
        "an AWS Auto Scaling group termination",
        node(taint("aws-node-termination-handler/asg-lifecycle-termination")),
        "spot",
        at(120),
        True,
    ),
    (
        "an AWS scheduled maintenance event",
        node(taint("aws-node-termination-handler/scheduled-maintenance")),
        "spot",
        at(120),
        True,
    ),
]


@pytest.mark.parametrize(
    ("what", "obj", "source", "deadline", "hard"), NODE_CASES, ids=[case[0] for case in NODE_CASES]
)
def test_a_node_announcement_is_read_as_its_notice(
    what: str, obj: dict[str, Any], source: str, deadline: datetime | None, hard: bool
) -> None:
    notice = node_notice(obj, NOW, DEFAULT)
    assert notice is not None, what
    assert (notice.source, notice.deadline, notice.hard) == (source, deadline, hard)
    assert "n1" in notice.message


def test_the_message_names_the_node_and_the_cause() -> None:
    notice = node_notice(node(taint("aws-node-termination-handler/spot-itn")), NOW, DEFAULT)
    assert notice is not None
    assert notice.message == (
        "Node n1 has an EC2 Spot interruption notice (taint aws-node-termination-handler/spot-itn)."
    )


@pytest.mark.parametrize(
    "obj",
    [
        node(),
        node(taint("DeletionCandidateOfClusterAutoscaler", "1764399600")),
        node(taint("nvidia.com/gpu", "present")),
        node(taint("karpenter.sh/disruption", "candidate")),
        node(unschedulable=False),
        {"metadata": {"name": "bare"}},
    ],
    ids=[
        "an untainted node",
        "cluster-autoscaler's deletion candidate",
        "an unrelated taint",
        "a karpenter.sh/disruption value other than disrupting",
        "unschedulable false",
        "a node without spec or status",
    ],
)
def test_no_notice(obj: dict[str, Any]) -> None:
    assert node_notice(obj, NOW, DEFAULT) is None


def test_the_strongest_of_several_is_the_earliest_deadline() -> None:
    obj = node(
        taint("aws-node-termination-handler/spot-itn", added=NOW),  # at(120)
        taint("cloud.google.com/impending-node-termination", added=NOW),  # at(30)
        taint("ToBeDeletedByClusterAutoscaler", str(int(NOW.timestamp()))),  # at(600)
        unschedulable=True,  # no deadline
    )
    notice = node_notice(obj, NOW, DEFAULT)
    assert notice is not None
    assert (notice.deadline, notice.message) == (
        at(30),
        "Node n1 is about to be terminated by Google Cloud"
        " (taint cloud.google.com/impending-node-termination).",
    )


def test_a_notice_with_a_deadline_beats_one_without() -> None:
    annotations = {"karpenter.sh/nodeclaim-termination-timestamp": stamp(at(3600))}
    obj = node(taint("karpenter.sh/disrupted"), unschedulable=True, annotations=annotations)
    notice = node_notice(obj, NOW, DEFAULT)
    assert notice is not None
    assert (notice.source, notice.deadline) == ("karpenter", at(3600))


def test_at_the_same_deadline_a_hard_notice_beats_a_soft_one() -> None:
    config = NoticeConfig(taints={"example.com/reclaim": 0})
    annotations = {"karpenter.sh/nodeclaim-termination-timestamp": stamp(NOW)}
    obj = node(taint("karpenter.sh/disrupted"), taint("example.com/reclaim"), annotations=annotations)
    notice = node_notice(obj, NOW, config)
    assert notice is not None
    assert (notice.source, notice.hard) == ("taint:example.com/reclaim", True)


def test_the_cluster_autoscaler_grace_is_configurable() -> None:
    obj = node(taint("ToBeDeletedByClusterAutoscaler", str(int(NOW.timestamp()))))
    notice = node_notice(obj, NOW, NoticeConfig(cluster_autoscaler_grace=60))
    assert notice is not None
    assert notice.deadline == at(60)


def test_a_configured_taint_with_seconds_is_hard_from_its_time_added() -> None:
    config = NoticeConfig(taints={"example.com/reclaim": 45.0})
    notice = node_notice(node(taint("example.com/reclaim", added=at(-15))), NOW, config)
    assert notice == Notice(
        source="taint:example.com/reclaim",
        message="Node n1 has the taint example.com/reclaim, configured as a disruption notice.",
        deadline=at(30),
        hard=True,
    )


def test_a_configured_taint_without_seconds_is_soft() -> None:
    config = NoticeConfig(taints={"example.com/maintenance": None})
    notice = node_notice(node(taint("example.com/maintenance")), NOW, config)
    assert notice is not None
    assert (notice.source, notice.deadline, notice.hard) == ("taint:example.com/maintenance", None, False)


def test_a_configured_taint_replaces_the_builtin_reading_of_its_key() -> None:
    config = NoticeConfig(taints={"cloud.google.com/impending-node-termination": 3600})
    obj = node(taint("cloud.google.com/impending-node-termination", added=NOW))
    notice = node_notice(obj, NOW, config)
    assert notice is not None
    assert (notice.source, notice.deadline) == ("taint:cloud.google.com/impending-node-termination", at(3600))


def test_a_configured_condition_true_is_a_notice_from_its_transition() -> None:
    config = NoticeConfig(conditions={"SpotTermination": 30})
    notice = node_notice(node(conditions=(condition("SpotTermination", since=at(-10)),)), NOW, config)
    assert notice == Notice(
        source="condition:SpotTermination",
        message=(
            "Node n1 has the condition SpotTermination=True (SpotNotice), configured as a disruption notice."
        ),
        deadline=at(20),
        hard=True,
    )


@pytest.mark.parametrize("status", ["False", "Unknown"])
def test_a_configured_condition_not_true_is_no_notice(status: str) -> None:
    config = NoticeConfig(conditions={"SpotTermination": 30})
    assert node_notice(node(conditions=(condition("SpotTermination", status),)), NOW, config) is None


def test_an_unconfigured_condition_is_no_notice() -> None:
    assert node_notice(node(conditions=(condition("SpotTermination"),)), NOW, DEFAULT) is None


def test_a_bad_time_on_the_node_is_no_deadline_or_now() -> None:
    annotations = {"karpenter.sh/nodeclaim-termination-timestamp": "soon"}
    karpenter = node_notice(node(taint("karpenter.sh/disrupted"), annotations=annotations), NOW, DEFAULT)
    assert karpenter is not None
    assert karpenter.deadline is None
    spot = {"key": "aws-node-termination-handler/spot-itn", "timeAdded": "yesterday"}
    notice = node_notice(node(spot), NOW, DEFAULT)
    assert notice is not None
    assert notice.deadline == at(120)


def test_a_naive_now_is_refused() -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        node_notice(node(), NOW.replace(tzinfo=None), DEFAULT)


def pod(
    reason: str | None, status: str = "True", deleted: datetime | None = None, grace: int | None = None
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "w1", "namespace": "team-a"}
    if deleted is not None:
        meta["deletionTimestamp"] = stamp(deleted)
    spec: dict[str, Any] = {"nodeName": "n1"}
    if grace is not None:
        spec["terminationGracePeriodSeconds"] = grace
    conditions: list[dict[str, Any]] = [{"type": "Ready", "status": "True"}]
    if reason is not None:
        conditions.append(
            {"type": "DisruptionTarget", "status": status, "reason": reason, "lastTransitionTime": stamp(NOW)}
        )
    return {"metadata": meta, "spec": spec, "status": {"conditions": conditions}}


@pytest.mark.parametrize(
    "reason",
    [
        "EvictionByEvictionAPI",
        "PreemptionByScheduler",
        "DeletionByTaintManager",
        "DeletionByPodGC",
        "TerminationByKubelet",
    ],
)
def test_a_pods_disruption_target_is_hard_with_its_deletion_as_deadline(reason: str) -> None:
    notice = pod_notice(pod(reason, deleted=at(45)), NOW)
    assert notice is not None
    assert (notice.source, notice.deadline, notice.hard) == (f"pod:{reason}", at(45), True)
    assert notice.message.startswith("Pod team-a/w1 on node n1 is ")
    assert notice.message.endswith(f"(condition DisruptionTarget, reason {reason}).")


def test_an_eviction_not_yet_a_deletion_ends_after_the_pods_grace_period() -> None:
    notice = pod_notice(pod("EvictionByEvictionAPI", grace=90), NOW)
    assert notice is not None
    assert notice.deadline == at(90)
    default = pod_notice(pod("PreemptionByScheduler"), NOW)
    assert default is not None
    assert default.deadline == at(30)


def test_a_pod_without_a_true_disruption_target_has_no_notice() -> None:
    assert pod_notice(pod(None), NOW) is None
    assert pod_notice(pod("EvictionByEvictionAPI", status="False"), NOW) is None
    assert pod_notice({}, NOW) is None


def test_flag_values_make_the_config() -> None:
    config = parse_notice_flag(
        [
            "taint:example.com/reclaim=45",
            "taint:example.com/maintenance",
            "condition:SpotTermination=30",
            "condition:example.com/Draining",
            "cluster-autoscaler-grace=120.5",
        ]
    )
    assert config == NoticeConfig(
        taints={"example.com/reclaim": 45.0, "example.com/maintenance": None},
        conditions={"SpotTermination": 30.0, "example.com/Draining": None},
        cluster_autoscaler_grace=120.5,
    )


def test_no_flag_values_are_the_defaults() -> None:
    assert parse_notice_flag([]) == NoticeConfig()
    assert NoticeConfig().cluster_autoscaler_grace == 600.0


BAD_VALUES = [
    (
        "spot",
        "--disruption-notice 'spot': expected taint:KEY[=SECONDS], condition:TYPE[=SECONDS] "
        "or cluster-autoscaler-grace=SECONDS",
    ),
    (
        "taint:",
        "--disruption-notice 'taint:': '' is not a taint key such as example.com/reclaim "
        "(expected taint:KEY[=SECONDS])",
    ),
    (
        "taint:bad key=5",
        "--disruption-notice 'taint:bad key=5': 'bad key' is not a taint key such as example.com/reclaim "
        "(expected taint:KEY[=SECONDS])",
    ),
    (
        "taint:Example.com/x=5",
        "--disruption-notice 'taint:Example.com/x=5': 'Example.com/x' is not a taint key",
    ),
    (
        "taint:example.com/reclaim=soon",
        "--disruption-notice 'taint:example.com/reclaim=soon': 'soon' is not a number of seconds, "
        "0 or more (expected taint:KEY[=SECONDS])",
    ),
    ("taint:example.com/reclaim=", "'' is not a number of seconds"),
    ("taint:example.com/reclaim=-1", "'-1' is not a number of seconds"),
    ("taint:example.com/reclaim=nan", "'nan' is not a number of seconds"),
    ("taint:example.com/reclaim=inf", "'inf' is not a number of seconds"),
    (
        "condition:Spot Termination=30",
        "--disruption-notice 'condition:Spot Termination=30': 'Spot Termination' is not a condition type "
        "such as SpotTermination (expected condition:TYPE[=SECONDS])",
    ),
    (
        "cluster-autoscaler-grace=ten",
        "--disruption-notice 'cluster-autoscaler-grace=ten': 'ten' is not a number of seconds, 0 or more "
        "(expected cluster-autoscaler-grace=SECONDS)",
    ),
    ("cluster-autoscaler-grace", "expected taint:KEY[=SECONDS]"),
]


@pytest.mark.parametrize(("value", "message"), BAD_VALUES, ids=[v for v, _ in BAD_VALUES])
def test_a_bad_flag_value_is_refused_with_its_form(value: str, message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)) as caught:
        parse_notice_flag([value])
    assert str(caught.value).startswith(f"--disruption-notice {value!r}: ")


@pytest.mark.parametrize(
    ("values", "message"),
    [
        (
            ["taint:example.com/reclaim=5", "taint:example.com/reclaim"],
            "the taint example.com/reclaim is given twice",
        ),
        (
            ["condition:SpotTermination", "condition:SpotTermination=1"],
            "the condition SpotTermination is given twice",
        ),
        (
            ["cluster-autoscaler-grace=1", "cluster-autoscaler-grace=2"],
            "cluster-autoscaler-grace is given twice",
        ),
    ],
    ids=["a taint", "a condition", "the grace"],
)
def test_a_value_given_twice_is_refused(values: list[str], message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        parse_notice_flag(values)
