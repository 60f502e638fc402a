"""What kopf keeps of each watched object between events: nothing, since rayscale needs nothing.

kopf compares an object's "essence" with the one it last handled to find the changes its
create/update/resume handlers should see. It builds that essence on every watch event of every
resource, with a deep copy of the whole object (status included), whether or not any handler
wants a diff. rayscale has none of those handlers (only indexes and event handlers; tests hold the
registry to that), so `NoDiffBase` builds and keeps no essence: a pod event costs a parse and the
handlers, not a parse, a deep copy and a diff (a sixth of the operator's CPU in a 1,500-pod fleet).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import kopf

__all__ = ["NoDiffBase"]


class NoDiffBase(kopf.DiffBaseStorage):
    """A diff-base storage for an operator without create/update/delete/resume handlers."""

    def build(self, *, body: Any, extra_fields: Iterable[Any] | None = None) -> Any:
        del body, extra_fields  # kopf's keywords; nothing is built from them
        return None

    def fetch(self, *, body: Any) -> Any:
        del body
        return None

    def store(self, *, body: Any, patch: Any, essence: Any) -> None:
        del body, patch, essence  # nothing is kept
