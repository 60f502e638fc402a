"""What the code defines that users set, read from the code itself: the flags of every command
(the real argparse parsers), the chart's value paths (values.schema.json, values.yaml), the
environment variables operator/rayscale reads, and its annotation and finalizer keys (module
constants, classified by name in `kind_of`: the one place that says what a key is)."""

from __future__ import annotations

import argparse
import ast
import importlib
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NoReturn
from unittest import mock

from rayscale import cli

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "operator" / "rayscale"
CHART = ROOT / "charts" / "rayscale"

# Commands


class _Built(Exception):
    def __init__(self, parser: argparse.ArgumentParser) -> None:
        self.parser = parser


def _capture(parser: argparse.ArgumentParser, *_: object, **__: object) -> NoReturn:
    raise _Built(parser)


def _module_parser(module: str) -> argparse.ArgumentParser:
    """The parser a `python -m` module's main() builds (stopped before it parses anything)."""
    main = importlib.import_module(module).main
    with mock.patch.object(argparse.ArgumentParser, "parse_args", _capture):
        try:
            main([])
        except _Built as built:
            return built.parser
    raise AssertionError(f"{module}.main() parsed no arguments")


def _module_commands() -> list[str]:
    """The modules besides cli.py that build a parser of their own (run as `python -m`)."""
    return sorted(
        "rayscale." + ".".join(path.relative_to(PACKAGE).with_suffix("").parts)
        for path in PACKAGE.rglob("*.py")
        if path.name != "cli.py" and "argparse.ArgumentParser(" in path.read_text()
    )


def parsers() -> dict[str, argparse.ArgumentParser]:
    """Every command line: "" is `rayscale` itself, then each subcommand by name, then each
    `python -m` module by its dotted name."""
    top = cli.build_parser()
    found: dict[str, argparse.ArgumentParser] = {"": top}
    for action in top._actions:
        if isinstance(action, argparse._SubParsersAction):
            found.update(action.choices)
    for module in _module_commands():
        found[module] = _module_parser(module)
    return found


def options(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    """Each option string of the parser (not -h/--help, not the subcommands) -> its action."""
    return {
        flag: action
        for action in parser._actions
        if not isinstance(action, argparse._HelpAction)
        for flag in action.option_strings
    }


def same_default(literal: str, default: object) -> bool:
    """Whether a default as a doc or a help text writes it (`60`, `off`, `crds/`) is `default`."""
    if isinstance(default, bool):
        return literal == ("on" if default else "off")
    if isinstance(default, int | float):
        try:
            return float(literal) == float(default)
        except ValueError:
            return False
    return literal.rstrip("/") == str(default).rstrip("/")


_HELP_DEFAULT = re.compile(r"\(default:\s*'?([^;,)'\s]+)")


def help_default(action: argparse.Action) -> str | None:
    """The literal default a flag's help text states, `%(default)s` filled in, if any."""
    text = (action.help or "") % {"default": action.default}
    match = _HELP_DEFAULT.search(text)
    return match.group(1) if match else None


# Chart values


def _resolve(schema: dict[str, Any], root: dict[str, Any]) -> dict[str, Any]:
    ref = schema.get("$ref")
    if not isinstance(ref, str):
        return schema
    node: Any = root
    for part in ref.removeprefix("#/").split("/"):
        node = node[part]
    return _resolve(node, root)


def schema_tree(
    schema: dict[str, Any] | None = None, root: dict[str, Any] | None = None, prefix: str = ""
) -> Iterator[tuple[str, bool]]:
    """(path, whether it is a value) for each property values.schema.json allows: a property
    with properties of its own is a map of values, others are values (a free-form object is one
    value); a list is a value whose items' properties follow as `list[].key`."""
    root = root if root is not None else json.loads((CHART / "values.schema.json").read_text())
    node = _resolve(schema if schema is not None else root, root)
    for key, sub in node.get("properties", {}).items():
        path, sub = f"{prefix}{key}", _resolve(sub, root)
        yield path, "properties" not in sub
        if "properties" in sub:
            yield from schema_tree(sub, root, f"{path}.")
        items = sub.get("items")
        if isinstance(items, dict) and "properties" in _resolve(items, root):
            yield from schema_tree(items, root, f"{path}[].")


def parents(path: str) -> Iterator[tuple[str, str]]:
    """(ancestor, the key below it): `a.b[].c` -> (`a.b`, `c`), (`a`, `b`)."""
    for i in reversed([i for i, c in enumerate(path) if c == "."]):
        yield path[:i].removesuffix("[]"), re.split(r"[.\[]", path[i + 1 :])[0]


def value_leaves(node: object, prefix: str = "") -> Iterator[str]:
    """The dotted path of every value in values.yaml that is not a non-empty map."""
    if isinstance(node, dict) and node:
        for key, sub in node.items():
            yield from value_leaves(sub, f"{prefix}{key}.")
    else:
        yield prefix.rstrip(".")


# Environment variables and keys, from the modules' syntax trees

Tree = tuple[str, ast.Module]


def modules() -> list[Tree]:
    """(dotted name, syntax tree) of every module of operator/rayscale."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found.append((name, ast.parse(path.read_text(), str(path))))
    return found


def constants(tree: ast.Module) -> dict[str, tuple[str, ...]]:
    """The module's top-level names bound to a string or a tuple of strings."""
    found: dict[str, tuple[str, ...]] = {}
    for stmt in tree.body:
        target = stmt.targets[0] if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 else None
        target = stmt.target if isinstance(stmt, ast.AnnAssign) else target
        value = stmt.value if isinstance(stmt, ast.Assign | ast.AnnAssign) else None
        if isinstance(target, ast.Name) and value is not None:
            strings = _strings(value)
            if strings is not None:
                found[target.id] = strings
    return found


def _strings(node: ast.expr) -> tuple[str, ...] | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return (node.value,)
    if isinstance(node, ast.Tuple | ast.List):
        items = [_strings(item) for item in node.elts]
        if all(item is not None and len(item) == 1 for item in items):
            return tuple(item[0] for item in items if item is not None)
    return None


class _EnvReads(ast.NodeVisitor):
    """The variable names of os.environ.get(X), os.getenv(X), os.environ[X] and X in os.environ,
    X resolved through module constants, comprehension variables and the literal arguments of
    the calls of the function X is a parameter of; `unresolved` lists what could not be."""

    def __init__(self, name: str, tree: ast.Module, everywhere: dict[str, dict[str, tuple[str, ...]]]):
        self.module, self.tree, self.everywhere = name, tree, everywhere
        self.names: set[str] = set()
        self.unresolved: list[str] = []
        self.scopes: list[ast.AST] = []

    def generic_visit(self, node: ast.AST) -> None:
        self.scopes.append(node)
        super().generic_visit(node)
        self.scopes.pop()

    def visit_Call(self, node: ast.Call) -> None:
        if ast.unparse(node.func) in ("os.environ.get", "os.getenv", "environ.get", "getenv") and node.args:
            self._read(node.args[0])
        self.generic_visit(node)

    def visit_Subscript(self, node: ast.Subscript) -> None:
        if isinstance(node.ctx, ast.Load) and ast.unparse(node.value) in ("os.environ", "environ"):
            self._read(node.slice)
        self.generic_visit(node)

    def visit_Compare(self, node: ast.Compare) -> None:
        if isinstance(node.ops[0], ast.In | ast.NotIn) and ast.unparse(node.comparators[0]) == "os.environ":
            self._read(node.left)
        self.generic_visit(node)

    def _read(self, node: ast.expr) -> None:
        found = self._resolve(node)
        if found is None:
            self.unresolved.append(f"{self.module}:{node.lineno}: {ast.unparse(node)}")
        else:
            self.names.update(found)

    def _resolve(self, node: ast.expr) -> tuple[str, ...] | None:
        direct = _strings(node)
        if direct is not None or not isinstance(node, ast.Name | ast.Attribute):
            return direct
        if isinstance(node, ast.Attribute):
            return self._imported(ast.unparse(node.value), node.attr)
        for scope in reversed(self.scopes):
            if isinstance(scope, ast.GeneratorExp | ast.ListComp | ast.SetComp | ast.DictComp):
                for loop in scope.generators:
                    if ast.unparse(loop.target) == node.id:
                        return self._resolve(loop.iter)
            if isinstance(scope, ast.FunctionDef | ast.AsyncFunctionDef):
                params = [a.arg for a in scope.args.args]
                if node.id in params:
                    return self._arguments(scope.name, params.index(node.id))
        local = constants(self.tree).get(node.id)
        return local if local is not None else self._imported(None, node.id)

    def _arguments(self, function: str, index: int) -> tuple[str, ...] | None:
        calls = [
            c for c in ast.walk(self.tree) if isinstance(c, ast.Call) and ast.unparse(c.func) == function
        ]
        values = [self._resolve(c.args[index]) if index < len(c.args) else None for c in calls]
        if not calls or any(v is None for v in values):
            return None
        return tuple(name for v in values if v is not None for name in v)

    def _imported(self, alias: str | None, name: str) -> tuple[str, ...] | None:
        for stmt in self.tree.body:
            if isinstance(stmt, ast.ImportFrom) and stmt.module:
                for imported in stmt.names:
                    bound = imported.asname or imported.name
                    if alias is None and bound == name:
                        return self.everywhere.get(stmt.module, {}).get(imported.name)
                    if alias == bound:
                        return self.everywhere.get(f"{stmt.module}.{imported.name}", {}).get(name)
        return None


def environment() -> tuple[set[str], list[str]]:
    """The environment variables operator/rayscale reads, and the reads it could not name."""
    trees = modules()
    everywhere = {name: constants(tree) for name, tree in trees}
    names: set[str] = set()
    unresolved: list[str] = []
    for name, tree in trees:
        reads = _EnvReads(name, tree, everywhere)
        reads.visit(tree)
        names |= reads.names
        unresolved += reads.unresolved
    return names, unresolved


# rayscale.io/... and ray.io/... keys

KEY = re.compile(r"^(?:ray|rayscale)\.io/(?!v\d+(?:alpha\d+|beta\d+)?$)[a-z0-9](?:[a-z0-9-]*[a-z0-9])?$")
#: The keys whose constant's name does not say what they are.
OTHER_KEYS = {
    ("rayscale.api.raycluster", "KUBERAY_MANAGER"): "value",  # a spec.managedBy value
    ("rayscale.autoscaler.virtual.model", "VC_KEY"): "label",  # the scheduler's, never written
}


def kind_of(module: str, name: str) -> str | None:
    """What the key a constant holds is: annotation, finalizer, label or value; None: unknown."""
    if name.endswith("_ANNOTATION"):
        return "annotation"
    if name == "FINALIZER" or name.endswith("_FINALIZER"):
        return "finalizer"
    if name.endswith("_LABEL") or module == "rayscale.common.labels":
        return "label"
    return OTHER_KEYS.get((module, name))


def _docstrings(tree: ast.Module) -> set[int]:
    found: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            first = node.body[0] if node.body else None
            if isinstance(first, ast.Expr):
                found.add(id(first.value))
    return found


def keys() -> tuple[dict[str, set[str]], list[str]]:
    """kind -> the keys of that kind the code names; and what breaks the rule that every key is a
    module constant of a known kind."""
    by_kind: dict[str, set[str]] = {}
    problems: list[str] = []
    for module, tree in modules():
        named: set[int] = set()
        for stmt in tree.body:
            if isinstance(stmt, ast.Assign | ast.AnnAssign) and isinstance(stmt.value, ast.Constant):
                named.add(id(stmt.value))
        for name, (value, *more) in constants(tree).items():
            if more or not KEY.match(value):
                continue
            kind = kind_of(module, name)
            if kind is None:
                problems.append(f"{module}.{name} = {value!r}: no kind (see kind_of)")
            by_kind.setdefault(kind or "?", set()).add(value)
        skip = named | _docstrings(tree)
        literals = (n for n in ast.walk(tree) if isinstance(n, ast.Constant) and id(n) not in skip)
        for node in literals:
            if isinstance(node.value, str) and KEY.match(node.value):
                problems.append(f"{module}:{node.lineno}: {node.value!r} is not a module constant")
    return by_kind, problems
