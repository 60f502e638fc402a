"""The RayJobs, their submitter Jobs and their head Services as kopf's handlers and an informer see
them, for the RayJob controller; each change marks the RayJob (`RayJobIndex.changed`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from rayscale.common import labels as L
from rayscale.common.types import ClusterKey, Obj
from rayscale.rayjob import consts as C

__all__ = ["RayJobIndex", "owner_key"]


def owner_key(obj: Obj) -> ClusterKey:
    """The RayJob an object it made belongs to: its namespace and its originated-from label."""
    meta = obj.get("metadata") or {}
    labels = meta.get("labels") or {}
    return str(meta.get("namespace") or ""), str(labels.get(L.ORIGINATED_FROM_CR_NAME) or "")


class RayJobIndex:
    """RayJobs, their submitter Jobs and their head Services, as kopf's handlers see them; each
    change marks the RayJob (`changed`)."""

    def __init__(self) -> None:
        self.rayjobs: dict[ClusterKey, Obj] = {}
        self.submitters: dict[ClusterKey, Obj] = {}
        self.services: dict[ClusterKey, Obj] = {}
        self.changed: Callable[[ClusterKey], None] = lambda key: None

    def rayjob_event(self, kind: str, obj: Obj) -> None:
        meta = obj.get("metadata") or {}
        key = (str(meta.get("namespace") or ""), str(meta.get("name") or ""))
        if kind == "DELETED":
            self.rayjobs.pop(key, None)
        elif _older(obj, self.rayjobs.get(key)):
            return  # the watch is behind this controller's own write (`newer`)
        else:
            self.rayjobs[key] = dict(obj.items())
        self.changed(key)

    def newer(self, key: ClusterKey, obj: Obj) -> None:
        """`obj` as this controller's write returned it: kept until the watch shows it or a later
        version, so the next reconcile does not write over a resourceVersion already replaced
        (a 409, a failed reconcile and its backoff)."""
        if not _older(obj, self.rayjobs.get(key)):
            self.rayjobs[key] = obj

    def submitter_event(self, kind: str, obj: Obj) -> None:
        """A submitter Job (labelled with its RayJob's name)."""
        self._owned(self.submitters, kind, obj)

    def _owned(self, table: dict[ClusterKey, Obj], kind: str, obj: Obj) -> None:
        labels = (obj.get("metadata") or {}).get("labels") or {}
        if labels.get(L.ORIGINATED_FROM_CRD) != C.CRD_LABEL_VALUE:
            return
        key = owner_key(obj)
        if kind == "DELETED":
            table.pop(key, None)
        else:
            table[key] = obj
        self.changed(key)

    # ---- the RayJobs' head Services, from an informer (`rayscale.kube.informer.Sink`)

    def upsert(self, obj: Obj) -> None:
        self._owned(self.services, "MODIFIED", obj)

    def delete(self, obj: Obj) -> None:
        self._owned(self.services, "DELETED", obj)

    def replace(self, namespace: str | None, objs: Sequence[Obj]) -> None:
        listed = {owner_key(o) for o in objs}
        for key in [k for k in self.services if (namespace is None or k[0] == namespace) and k not in listed]:
            del self.services[key]
            self.changed(key)
        for obj in objs:
            self.upsert(obj)


def _older(obj: Obj, than: Obj | None) -> bool:
    """Whether `obj` is an older version of the same object as `than`. A resourceVersion is opaque
    to clients; where both are decimal (etcd's revisions, as every API server stores them) a lower
    one is older. Anything else counts as not older: the watch's copy is taken."""
    if than is None:
        return False
    mine, theirs = obj.get("metadata") or {}, than.get("metadata") or {}
    if mine.get("uid") != theirs.get("uid"):
        return False
    a, b = str(mine.get("resourceVersion") or ""), str(theirs.get("resourceVersion") or "")
    return a.isdecimal() and b.isdecimal() and int(a) < int(b)
