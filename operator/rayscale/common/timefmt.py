"""Times as the Kubernetes API writes them (RFC 3339, UTC, whole seconds) and reads them back."""

from __future__ import annotations

from datetime import datetime
from typing import Any

__all__ = ["parse_time", "rfc3339"]


def rfc3339(when: datetime) -> str:
    return when.strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(value: Any) -> datetime | None:
    """A timestamp of an API object (or a datetime already); None when it is empty."""
    if not value:
        return None
    if isinstance(value, datetime):
        return value
    return datetime.fromisoformat(str(value).replace("Z", "+00:00"))
