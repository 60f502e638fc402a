"""`NodeNotices`: each Node's disruption notice, kept by node name as the Node watch delivers the
Nodes (pure: no I/O, no asyncio).

Only the `Notice` of a node that gives one is kept, never the Node itself: a fleet's Nodes change
every few seconds (their status, their conditions) and are large, and the autoscaler needs only
what each announces. `upsert` and `delete` say whether a node's notice changed, so that the
caller starts the rounds of the RayClusters with pods on that node only then.

A notice's deadline counted from the moment it was read (a taint without ``timeAdded``, see
notice.py) would move later at every event of the node: the same announcement (the same source,
message and hardness) keeps the earliest deadline it was given. A new announcement replaces it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from datetime import datetime

from rayscale.common.types import Obj
from rayscale.disruption.notice import Notice, NoticeConfig, node_notice

__all__ = ["NodeNotices"]


def _same(old: Notice, new: Notice) -> bool:
    return (old.source, old.message, old.hard) == (new.source, new.message, new.hard)


def _kept(old: Notice | None, new: Notice) -> Notice:
    """`new`, or `old` when it is the same announcement with a deadline no later."""
    if old is None or not _same(old, new):
        return new
    if old.deadline is not None and (new.deadline is None or old.deadline <= new.deadline):
        return old
    return new


class NodeNotices(Mapping[str, Notice]):
    """Node name -> its notice, for the nodes that have one. `clock`: now, timezone-aware."""

    def __init__(self, config: NoticeConfig, clock: Callable[[], datetime]) -> None:
        self.config = config
        self.clock = clock
        self._notices: dict[str, Notice] = {}

    def __getitem__(self, name: str) -> Notice:
        return self._notices[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._notices)

    def __len__(self) -> int:
        return len(self._notices)

    def upsert(self, node: Obj) -> bool:
        """Read `node` (a Node as listed or watched); whether its notice changed."""
        name = str((node.get("metadata") or {}).get("name") or "")
        if not name:
            return False
        new = node_notice(node, self.clock(), self.config)
        old = self._notices.get(name)
        if new is None:
            return self._notices.pop(name, None) is not None
        kept = _kept(old, new)
        self._notices[name] = kept
        return kept != old

    def delete(self, name: str) -> bool:
        """The node `name` is gone; whether it had a notice."""
        return self._notices.pop(name, None) is not None
