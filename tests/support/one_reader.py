"""What the one-reader tests of both halves share: a RayCluster manifest that refuses reads once
its reader has read it, and the source checks that find a manifest read or taken after it."""

from __future__ import annotations

import ast
from collections.abc import Collection, Iterator
from typing import Any

LATE: list[str] = []  # the keys read after the reader, in every test (each test module clears it)


class Manifest(dict[str, Any]):
    """A RayCluster manifest that records (and refuses) every read once the reader has read it."""

    sealed = False

    def _late(self, what: str) -> None:
        if self.sealed:
            LATE.append(what)
            raise AssertionError(f"the RayCluster manifest was read after the reader: {what}")

    def __getitem__(self, key: str) -> Any:
        self._late(key)
        return super().__getitem__(key)

    def get(self, key: str, default: Any = None) -> Any:
        self._late(key)
        return super().get(key, default)

    def __contains__(self, key: object) -> bool:
        self._late(str(key))
        return super().__contains__(key)

    def __iter__(self) -> Iterator[str]:
        self._late("iter")
        return super().__iter__()

    def keys(self) -> Any:
        self._late("keys")
        return super().keys()

    def items(self) -> Any:
        self._late("items")
        return super().items()

    def values(self) -> Any:
        self._late("values")
        return super().values()


def name_of(node: ast.expr) -> str | None:
    return node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else None


def key_reads(
    function: ast.AST, names: Collection[str], keys: Collection[str] | None = None
) -> Iterator[str]:
    """``cluster.get("spec")``, ``cluster["metadata"]`` and the like in `function`: a constant key
    (one of `keys`, if any are given) read of something called one of `names`."""
    for node in ast.walk(function):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get":
            receiver, key = node.func.value, node.args[0] if node.args else None
        elif isinstance(node, ast.Subscript):
            receiver, key = node.value, node.slice
        else:
            continue
        if not (isinstance(key, ast.Constant) and isinstance(key.value, str)):
            continue
        if name_of(receiver) in names and (not keys or key.value in keys):
            yield f"{name_of(receiver)}[{key.value!r}]"


Function = ast.FunctionDef | ast.AsyncFunctionDef


def mapping_parameters(function: Function, names: Collection[str]) -> Iterator[str]:
    """Parameters called one of `names` and typed as a plain mapping (``Obj``, ``Mapping[...]``)."""
    for arg in [*function.args.args, *function.args.kwonlyargs]:
        shape = ast.unparse(arg.annotation) if arg.annotation is not None else ""
        if arg.arg in names and ("Obj" in shape or "Mapping" in shape):
            yield f"{arg.arg}: {shape}"
