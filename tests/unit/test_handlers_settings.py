"""kopf's and the API client's settings: how fast rayscale recovers from API server outages, and
what each watch event and request costs."""

from __future__ import annotations

import kopf
import pytest

from rayscale.handlers import API_RETRY_BACKOFFS, registry
from rayscale.kube.client import PROXY_VARIABLES, _proxy_in_env
from rayscale.kube.kopf_storage import NoDiffBase


def test_failed_api_requests_are_retried_every_two_seconds_at_most_for_about_a_minute() -> None:
    # After an outage, a watch is back within one wait: at most 2 s (kopf's default grows to 21 s).
    assert max(API_RETRY_BACKOFFS) <= 2.0
    # Retried for as long as kopf's default (54 s) before the request is given up and started over.
    assert sum(API_RETRY_BACKOFFS) >= 54.0


def test_no_handler_needs_the_diff_base_that_kopf_is_told_not_to_keep() -> None:
    """NoDiffBase keeps no essence of an object: right only while no handler diffs one."""
    assert not registry._changing.get_all_handlers()  # on.create/update/delete/resume/field
    assert not registry._spawning.get_all_handlers()  # daemons and timers (their idle reset)
    assert registry._watching.get_all_handlers()  # on.event, which needs no diff
    store = NoDiffBase()
    body = kopf.Body({"metadata": {"name": "p"}, "spec": {}, "status": {"phase": "Running"}})
    assert store.build(body=body) is None
    assert store.fetch(body=body) is None


def test_the_api_session_reads_the_environment_only_for_a_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    assert not _proxy_in_env()  # no ~/.netrc lookup on a thread per request
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.example:3128")
    assert _proxy_in_env()
