"""kopf's and the API client's settings: how fast rayscale recovers from API server outages, and
what each watch event and request costs."""

from __future__ import annotations

from typing import Any

import pytest

from rayscale.handlers import API_RETRY_BACKOFFS, registry
from rayscale.kube.client import PROXY_VARIABLES, _proxy_in_env


def test_failed_api_requests_are_retried_every_two_seconds_at_most_for_about_a_minute() -> None:
    # After an outage, a watch is back within one wait: at most 2 s (kopf's default grows to 21 s).
    assert max(API_RETRY_BACKOFFS) <= 2.0
    # Retried for as long as kopf's default (54 s) before the request is given up and started over.
    assert sum(API_RETRY_BACKOFFS) >= 54.0


def _watched(handlers: Any) -> set[tuple[str, str]]:
    return {(h.selector.group or "", h.selector.any_name or "") for h in handlers.get_all_handlers()}


def test_kopf_watches_every_custom_resource_and_writes_nothing_to_them() -> None:
    """The custom resources are kopf's: an event handler keeps rayscale's index of each kind. No
    resource-changing or daemon handler: kopf then adds no finalizer and writes no progress or
    diffbase annotation. The pods and Services are the informers' (rayscale.kube.informer): kopf's
    per-object machinery would cost a large share of the CPU per event (docs/architecture.md).
    RayJobs, RayCronJobs and the submitter Jobs are few: kopf watches them."""
    kinds = {
        ("ray.io", "rayclusters"),
        ("ray.io", "rayjobs"),
        ("ray.io", "raycronjobs"),
        ("batch", "jobs"),
        ("rayscale.io", "rayresourcerequests"),
        ("rayscale.io", "rayvirtualclusters"),
    }
    assert _watched(registry._watching) == kinds
    assert not registry._indexing.get_all_handlers()  # a second handler call per event
    assert not registry._changing.get_all_handlers()
    assert not registry._spawning.get_all_handlers()
    assert registry._activities.get_all_handlers()


def test_the_api_session_reads_the_environment_only_for_a_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    assert not _proxy_in_env()  # no ~/.netrc lookup on a thread per request
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.example:3128")
    assert _proxy_in_env()
