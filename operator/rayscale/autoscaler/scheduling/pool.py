"""Free capacity of the hosts that can take work, grouped into equivalence classes.

Hosts with the same group, the same kind (running, pending, new) and the same free vector
form one class; placing n units of a shape on a class moves whole runs of hosts to the class
of their new free vector, so the work of a placement grows with the number of classes, not
with the number of hosts or units. A checkpoint/rollback log makes gang placement atomic.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from rayscale.autoscaler.scheduling.catalog import Shape
from rayscale.autoscaler.scheduling.space import Space, Vec, fit_count, sub

Key = tuple[int, int, Vec]  # (kind rank, group index, free vector)

RUNNING, PENDING, NEW = 0, 1, 2


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

    __slots__ = ("_classes", "_key", "_log", "space")

    def __init__(self, space: Space) -> None:
        self.space = space
        self._classes: dict[Key, list[int]] = {}
        self._key: dict[int, Key] = {}
        self._log: list[tuple[int, Key | None]] | None = None

    # -- membership ------------------------------------------------------------------
    def add(self, host: int, group: int, rank: int, free: Vec) -> None:
        key = (rank, group, free)
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
        key = (old[0], old[1], new_free)
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
        new_key = (key[0], key[1], new_free)
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
    def candidates(self, shape: Shape, allowed: Callable[[int, int], bool] | None = None) -> list[Key]:
        """Classes that can take at least one unit, best first.

        Order: groups the shape does not avoid (GPU avoidance), running before pending before
        new hosts, fullest first (best fit, scaled so no unit dominates), then the key itself.
        """
        eligible = set(shape.eligible)
        found = []
        for key in self._classes:
            rank, group, free = key
            if group not in eligible or fit_count(free, shape.vec, shape.idx) == 0:
                continue
            if allowed is not None and not allowed(rank, group):
                continue
            found.append((shape.avoids(group), rank, self.space.size(free), key))
        found.sort()
        return [item[3] for item in found]

    def place_bulk(self, shape: Shape, units: int) -> tuple[list[Move], int]:
        """Put up to ``units`` units on the best classes; returns the moves and what is left."""
        moves: list[Move] = []
        for key in self.candidates(shape):
            if units <= 0:
                break
            rank, group, free = key
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
