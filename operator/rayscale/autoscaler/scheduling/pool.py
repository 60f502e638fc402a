"""Free capacity of the hosts that can take work, grouped into equivalence classes.

Hosts with the same group, the same kind (head, running, pending, new), the same free vector
and the same label set form one class; placing n units of a shape on a class moves whole runs
of hosts to the class of their new free vector, so the work of a placement grows with the
number of classes, not with the number of hosts or units. A checkpoint/rollback log makes gang
placement atomic.
"""

from __future__ import annotations

from dataclasses import dataclass

from rayscale.autoscaler.scheduling.catalog import GROUP_LABELS, Catalog, Shape
from rayscale.autoscaler.scheduling.space import Vec, fit_count, sub

Key = tuple[int, int, Vec, int]  # (kind rank, group index, free vector, label set)

HEAD, RUNNING, PENDING, NEW = 0, 1, 2, 3


@dataclass(slots=True)
class Move:
    """Units of one shape put on a run of hosts that shared a class."""

    group: int
    rank: int
    hosts: list[int]
    units_each: int

    @property
    def units(self) -> int:
        return self.units_each * len(self.hosts)


class Pool:
    """One free-resource ledger (pending demand, or request_resources constraints)."""

    __slots__ = ("_classes", "_key", "_log", "catalog")

    def __init__(self, catalog: Catalog) -> None:
        self.catalog = catalog
        self._classes: dict[Key, list[int]] = {}
        self._key: dict[int, Key] = {}
        self._log: list[tuple[int, Key | None]] | None = None

    # -- membership ------------------------------------------------------------------
    def add(self, host: int, group: int, rank: int, free: Vec, label_set: int = GROUP_LABELS) -> None:
        key = (rank, group, free, label_set)
        self._classes.setdefault(key, []).append(host)
        self._key[host] = key
        if self._log is not None:
            self._log.append((host, None))

    def discard(self, host: int) -> None:
        key = self._key.pop(host, None)
        if key is not None:
            self._drop(key, host)

    def free(self, host: int) -> Vec | None:
        key = self._key.get(host)
        return None if key is None else key[2]

    def _drop(self, key: Key, host: int) -> None:
        members = self._classes[key]
        members.remove(host)
        if not members:
            del self._classes[key]

    def _move(self, host: int, new_free: Vec) -> None:
        old = self._key[host]
        self._drop(old, host)
        key = (old[0], old[1], new_free, old[3])
        self._classes.setdefault(key, []).append(host)
        self._key[host] = key
        if self._log is not None:
            self._log.append((host, old))

    def _move_first(self, key: Key, count: int, new_free: Vec) -> list[int]:
        """Move the first ``count`` hosts of a class to the class of ``new_free``."""
        members = self._classes[key]
        hosts, rest = members[:count], members[count:]
        if rest:
            self._classes[key] = rest
        else:
            del self._classes[key]
        new_key = (key[0], key[1], new_free, key[3])
        self._classes.setdefault(new_key, []).extend(hosts)
        for h in hosts:
            self._key[h] = new_key
        if self._log is not None:
            self._log.extend((h, key) for h in hosts)
        return hosts

    # -- transactions ----------------------------------------------------------------
    def checkpoint(self) -> None:
        self._log = []

    def commit(self) -> None:
        self._log = None

    def rollback(self) -> None:
        log, self._log = self._log or [], None
        for host, old in reversed(log):
            key = self._key.pop(host)
            self._drop(key, host)
            if old is not None:
                self._classes.setdefault(old, []).append(host)
                self._key[host] = old

    # -- placement -------------------------------------------------------------------
    def candidates(self, shape: Shape) -> list[Key]:
        """Classes that can take at least one unit, best first.

        Order: hosts matching an earlier selector of the shape first (its preferred selector,
        then its fallbacks), then hosts the shape does not avoid (GPU avoidance), the head before
        running before pending before new hosts, fullest first (best fit, scaled so no unit
        dominates), then the key itself.
        """
        catalog = self.catalog
        found = []
        for key in self._classes:
            kind, group, free, label_set = key
            order = catalog.rank(shape, group, label_set)
            if order is None or fit_count(free, shape.vec, shape.idx) == 0:
                continue
            found.append((order, catalog.avoids(shape, group), kind, catalog.space.size(free), key))
        found.sort()
        return [item[4] for item in found]

    def place_bulk(self, shape: Shape, units: int) -> tuple[list[Move], int]:
        """Put up to ``units`` units on the best classes; returns the moves and what is left."""
        moves: list[Move] = []
        for key in self.candidates(shape):
            if units <= 0:
                break
            rank, group, free, _ = key
            members = self._classes[key]
            per_host = fit_count(free, shape.vec, shape.idx)
            take = min(units, per_host * len(members))
            full, rest = divmod(take, per_host)
            if full:
                hosts = self._move_first(key, full, sub(free, shape.vec, per_host))
                moves.append(Move(group, rank, hosts, per_host))
            if rest:
                hosts = self._move_first(key, 1, sub(free, shape.vec, rest))
                moves.append(Move(group, rank, hosts, rest))
            units -= take
        return moves, units

    def best_host(self, shape: Shape, exclude: set[int]) -> int | None:
        """The best single host for one unit, skipping ``exclude`` (STRICT_SPREAD)."""
        for key in self.candidates(shape):
            for h in self._classes[key]:
                if h not in exclude:
                    return h
        return None

    def place_one(self, host: int, vec: Vec) -> None:
        self._move(host, sub(self._key[host][2], vec))

    def group_of(self, host: int) -> int:
        return self._key[host][1]

    def rank_of(self, host: int) -> int:
        return self._key[host][0]
