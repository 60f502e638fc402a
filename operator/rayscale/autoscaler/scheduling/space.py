"""Resource vectors: every resource name of a snapshot gets an index; amounts become tuples."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

Vec = tuple[float, ...]

EPS = 1e-9
IMPLICIT_PREFIX = "node:__internal_implicit_resource_"
BIG = 1 << 40  # "unlimited" fit count for shapes that request nothing


class Space:
    """The resource names of one snapshot."""

    __slots__ = ("implicit", "index", "names")

    def __init__(self, names: Iterable[str]) -> None:
        self.names: tuple[str, ...] = tuple(sorted(set(names)))
        self.index = {name: i for i, name in enumerate(self.names)}
        self.implicit = tuple(i for i, n in enumerate(self.names) if n.startswith(IMPLICIT_PREFIX))

    def vec(self, amounts: Mapping[str, float]) -> Vec:
        out = [0.0] * len(self.names)
        for name, amount in amounts.items():
            out[self.index[name]] = amount
        return tuple(out)

    def capacity(self, amounts: Mapping[str, float]) -> Vec:
        """A host's capacity: like vec, but every host holds one of each implicit resource."""
        out = list(self.vec(amounts))
        for i in self.implicit:
            out[i] = 1.0
        return tuple(out)

    def mapping(self, v: Vec) -> dict[str, float]:
        return {n: a for n, a in zip(self.names, v, strict=True) if a}


def nonzero(v: Vec) -> tuple[int, ...]:
    return tuple(i for i, a in enumerate(v) if a > 0)


def fit_count(free: Vec, need: Vec, idx: tuple[int, ...]) -> int:
    """How many units of ``need`` (non-zero at ``idx``) fit in ``free``."""
    best = BIG
    for i in idx:
        k = int((free[i] + EPS) / need[i])
        if k < best:
            best = k
            if k == 0:
                return 0
    return best


def sub(free: Vec, need: Vec, times: int = 1) -> Vec:
    return tuple(max(round(f - n * times, 9), 0.0) if n else f for f, n in zip(free, need, strict=True))


def add(a: Vec, b: Vec) -> Vec:
    return tuple(x + y for x, y in zip(a, b, strict=True))


def fits(free: Vec, need: Vec) -> bool:
    return all(n <= f + EPS for f, n in zip(free, need, strict=True))
