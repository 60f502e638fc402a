"""kopf's settings that decide how fast rayscale recovers from API server outages."""

from __future__ import annotations

from rayscale.handlers import API_RETRY_BACKOFFS


def test_failed_api_requests_are_retried_every_two_seconds_at_most_for_about_a_minute() -> None:
    # After an outage, a watch is back within one wait: at most 2 s (kopf's default grows to 21 s).
    assert max(API_RETRY_BACKOFFS) <= 2.0
    # Retried for as long as kopf's default (54 s) before the request is given up and started over.
    assert sum(API_RETRY_BACKOFFS) >= 54.0
