"""The GcsAddressOverride condition and its Event (rayscale.autoscaler.gcs_override)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from rayscale.autoscaler.gcs_override import find_override, override_condition, override_event
from rayscale.ray.address import GcsTarget

NOW = datetime(2026, 1, 1, tzinfo=UTC)
HEAD = "rc-head-svc.ns.svc.cluster.local:6379"
IGNORED = GcsTarget(HEAD, "10.0.0.5:6379")
FOLLOWED = GcsTarget("10.0.0.5:6379", "10.0.0.5:6379", override_allowed=True)


def test_no_other_address_no_condition_and_no_event() -> None:
    assert override_condition(GcsTarget(HEAD), NOW) is None
    old = override_condition(IGNORED, NOW)
    assert override_event(old, None) is None  # the annotation removed: nothing to say


def test_ignored_is_false_with_a_warning_naming_the_annotation_and_the_flag() -> None:
    condition = override_condition(IGNORED, NOW)
    assert condition is not None
    assert (condition["type"], condition["status"], condition["reason"]) == (
        "GcsAddressOverride", "False", "OverrideNotAllowed",
    )  # fmt: skip
    message = condition["message"]
    assert "rayscale.io/gcs-address='10.0.0.5:6379' is ignored" in message
    assert f"rayscale dials {HEAD}" in message
    assert "`rayscale run --allow-gcs-address-override`" in message
    assert "autoscaler.allowGcsAddressOverride: true" in message
    assert override_event(None, condition) == ("Warning", "GcsAddressIgnored", message)


def test_followed_is_true_with_a_normal_event() -> None:
    condition = override_condition(FOLLOWED, NOW)
    assert condition is not None
    assert (condition["status"], condition["reason"]) == ("True", "OverrideAllowed")
    assert "dials Ray's GCS at 10.0.0.5:6379" in condition["message"]
    assert "Ray auth token there" in condition["message"]
    assert override_event(None, condition) == ("Normal", "GcsAddressOverridden", condition["message"])


def test_the_same_condition_again_keeps_its_time_and_posts_nothing() -> None:
    first = override_condition(IGNORED, NOW)
    later = override_condition(IGNORED, NOW + timedelta(minutes=5), first)
    assert later == first
    assert override_event(first, later) is None


def test_a_new_annotation_value_or_allowing_it_is_a_change() -> None:
    first = override_condition(IGNORED, NOW)
    other = override_condition(GcsTarget(HEAD, "10.0.0.6:6379"), NOW + timedelta(minutes=1), first)
    assert other is not None
    assert first is not None
    assert other["lastTransitionTime"] == first["lastTransitionTime"]  # still False
    assert override_event(first, other) is not None  # another address: said again
    allowed = override_condition(FOLLOWED, NOW + timedelta(minutes=2), other)
    assert allowed is not None
    assert allowed["lastTransitionTime"] != first["lastTransitionTime"]
    assert override_event(other, allowed) == ("Normal", "GcsAddressOverridden", allowed["message"])


def test_find_override() -> None:
    condition = override_condition(IGNORED, NOW)
    status = {"conditions": [{"type": "RayCompatible", "status": "True"}, condition]}
    assert find_override(status) == condition
    assert find_override({"conditions": [{"type": "RayCompatible"}]}) is None
    assert find_override(None) is None
