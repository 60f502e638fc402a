"""What one operator owns when a fleet is sharded over several: its namespaces and its RayClusters.

A `Scope` is the part of `rayscale run`'s arguments that says which RayClusters this operator acts
on (docs/scaling.md):

- ``namespaces``: names or kopf's namespace patterns (``-n``); empty means every namespace. A
  pattern is a glob (``*``, ``?``) or several globs joined by commas, where ``!glob`` excludes; the
  first glob decides, a later plain glob only takes back what a ``!glob`` excluded (kopf's rules,
  `namespace_matches`). kopf itself follows the namespaces that match, as they come and go.
- ``selector``: a Kubernetes label selector on the RayCluster (``--cluster-selector``), parsed here
  with the API server's grammar and meaning (`parse_selector`); None means every RayCluster.
- ``shard``: the shard's name (``--shard``), which names its leader-election Lease (`lease_name`).

Pure: parsing, matching, naming. kopf, the handlers and the watch-health check use it.
"""

from __future__ import annotations

import dataclasses
import enum
import fnmatch
import hashlib
import re
from collections.abc import Mapping
from typing import Any

__all__ = [
    "DEFAULT_LEASE",
    "LabelSelector",
    "Requirement",
    "Scope",
    "check_namespace_pattern",
    "check_shard_name",
    "is_pattern",
    "namespace_matches",
    "parse_selector",
]

DEFAULT_LEASE = "rayscale"  # the Lease of an operator that owns everything (as before sharding)
_NAME = r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?"
_LABEL_NAME = re.compile(rf"^{_NAME}$")
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_GLOB = re.compile(r"^[a-z0-9*?-]+$")  # a namespace name with kopf's wildcards
_SPECIAL = "=!(),<>"  # the characters of the selector grammar besides names and blanks
MAX_SHARD_NAME = 50  # "rayscale-" + the name stays a valid label value (63)


# ---------------------------------------------------------------------------- label selectors


class SelectorOp(enum.Enum):
    """The operators of a label selector requirement, as the API server names them."""

    EQUALS = "="
    NOT_EQUALS = "!="
    IN = "in"
    NOT_IN = "notin"
    EXISTS = "exists"
    DOES_NOT_EXIST = "!"
    GREATER_THAN = ">"
    LESS_THAN = "<"


@dataclasses.dataclass(frozen=True)
class Requirement:
    key: str
    operator: SelectorOp
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        """What the API server answers (k8s.io/apimachinery/pkg/labels): ``!=`` and ``notin`` also
        match a RayCluster without the label; ``>`` and ``<`` only an integer label value."""
        present = self.key in labels
        value = labels.get(self.key, "")
        match self.operator:
            case SelectorOp.EQUALS | SelectorOp.IN:
                return present and value in self.values
            case SelectorOp.NOT_EQUALS | SelectorOp.NOT_IN:
                return not present or value not in self.values
            case SelectorOp.EXISTS:
                return present
            case SelectorOp.DOES_NOT_EXIST:
                return not present
            case SelectorOp.GREATER_THAN | SelectorOp.LESS_THAN:
                if not present or not re.fullmatch(r"[+-]?[0-9]+", value):
                    return False
                limit = int(self.values[0])
                return int(value) > limit if self.operator is SelectorOp.GREATER_THAN else int(value) < limit
        raise AssertionError(self.operator)  # pragma: no cover (every operator is handled above)

    def __str__(self) -> str:
        match self.operator:
            case SelectorOp.EXISTS:
                return self.key
            case SelectorOp.DOES_NOT_EXIST:
                return f"!{self.key}"
            case SelectorOp.IN | SelectorOp.NOT_IN:
                return f"{self.key} {self.operator.value} ({','.join(self.values)})"
            case _:
                return f"{self.key}{self.operator.value}{self.values[0]}"


@dataclasses.dataclass(frozen=True)
class LabelSelector:
    """Requirements that must all hold; none: every RayCluster."""

    requirements: tuple[Requirement, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        return all(r.matches(labels) for r in self.requirements)

    def __str__(self) -> str:
        return ",".join(str(r) for r in self.requirements)


def _tokens(text: str) -> list[str]:
    """The selector's tokens: names (anything between blanks and the grammar's characters),
    ``=``, ``==``, ``!=``, ``!``, ``(``, ``)``, ``,``, ``<``, ``>``."""
    out: list[str] = []
    i = 0
    while i < len(text):
        c = text[i]
        if c.isspace():
            i += 1
        elif text.startswith(("==", "!="), i):
            out.append(text[i : i + 2])
            i += 2
        elif c in _SPECIAL:
            out.append(c)
            i += 1
        else:
            j = i
            while j < len(text) and not text[j].isspace() and text[j] not in _SPECIAL:
                j += 1
            out.append(text[i:j])
            i = j
    return out


def _check_key(key: str) -> str:
    prefix, slash, name = key.rpartition("/")
    if slash and (not prefix or len(prefix) > 253 or not _DNS_SUBDOMAIN.match(prefix)):
        raise ValueError(f"label key {key!r}: its prefix must be a DNS subdomain (e.g. example.com/shard)")
    if not name or len(name) > 63 or not _LABEL_NAME.match(name):
        raise ValueError(
            f"label key {key!r}: a name of at most 63 letters, digits, '-', '_' or '.', "
            "beginning and ending with a letter or digit"
        )
    return key


def _check_value(value: str, key: str) -> str:
    if value and (len(value) > 63 or not _LABEL_NAME.match(value)):
        raise ValueError(
            f"value {value!r} of {key!r}: at most 63 letters, digits, '-', '_' or '.', beginning and "
            "ending with a letter or digit (or empty)"
        )
    return value


class _Parser:
    def __init__(self, text: str) -> None:
        self.tokens = _tokens(text)
        self.at = 0

    def peek(self) -> str | None:
        return self.tokens[self.at] if self.at < len(self.tokens) else None

    def take(self) -> str | None:
        token = self.peek()
        self.at += token is not None
        return token

    def name(self, what: str) -> str:
        token = self.take()
        if token is None or (len(token) == 1 and token in _SPECIAL) or token in ("==", "!="):
            found = "the end" if token is None else repr(token)
            raise ValueError(f"expected {what}, found {found}")
        return token

    def requirement(self) -> Requirement:
        if self.peek() == "!":
            self.take()
            key = _check_key(self.name("a label key after '!'"))
            return Requirement(key, SelectorOp.DOES_NOT_EXIST)
        key = _check_key(self.name("a label key"))
        token = self.peek()
        if token is None or token == ",":
            return Requirement(key, SelectorOp.EXISTS)
        self.take()
        if token in ("=", "=="):
            return Requirement(key, SelectorOp.EQUALS, (self.value(key),))
        if token == "!=":
            return Requirement(key, SelectorOp.NOT_EQUALS, (self.value(key),))
        if token in (">", "<"):
            number = self.name(f"an integer after {key}{token}")
            if not re.fullmatch(r"[+-]?[0-9]+", number):
                raise ValueError(f"{key}{token}{number}: '>' and '<' compare with an integer")
            return Requirement(key, SelectorOp(token), (number,))
        if token in ("in", "notin"):
            return Requirement(key, SelectorOp.IN if token == "in" else SelectorOp.NOT_IN, self.values(key))
        raise ValueError(
            f"after the key {key!r}: expected =, ==, !=, in, notin, <, > or ',', found {token!r}"
        )

    def value(self, key: str) -> str:
        token = self.peek()
        if token is None or token == ",":  # `key=`: the empty value
            return ""
        return _check_value(self.name(f"a value of {key!r}"), key)

    def values(self, key: str) -> tuple[str, ...]:
        if self.take() != "(":
            raise ValueError(f"{key!r}: 'in' and 'notin' take a list in parentheses, e.g. {key} in (a,b)")
        values: list[str] = []
        while True:
            token = self.peek()
            if token in (",", ")") or token is None:
                values.append("")  # an empty value, as the API server reads `(a,)`
            else:
                values.append(_check_value(self.name(f"a value of {key!r}"), key))
            token = self.take()
            if token == ")":
                break
            if token != ",":
                raise ValueError(f"{key!r}: the list of values is not closed with ')'")
        if values == [""]:
            raise ValueError(f"{key!r}: 'in' and 'notin' need at least one value")
        return tuple(sorted(set(values)))


def parse_selector(text: str) -> LabelSelector:
    """A label selector as ``kubectl get -l`` takes it: requirements joined by commas, each
    ``key``, ``!key``, ``key=value`` (or ``==``), ``key!=value``, ``key in (a,b)``,
    ``key notin (a,b)``, ``key>N`` or ``key<N``. ValueError says what is wrong."""
    parser = _Parser(text)
    requirements: list[Requirement] = []
    if parser.peek() is None:
        return LabelSelector()
    try:
        while True:
            requirements.append(parser.requirement())
            token = parser.take()
            if token is None:
                break
            if token != ",":
                raise ValueError(f"expected ',' between requirements, found {token!r}")
    except ValueError as exc:
        raise ValueError(f"{text!r} is not a label selector: {exc}") from exc
    # sorted by key, as the API server sorts them: one selector, one canonical text
    return LabelSelector(tuple(sorted(requirements, key=lambda r: (r.key, r.operator.value, r.values))))


# ---------------------------------------------------------------------------- namespaces


def is_pattern(namespace: str) -> bool:
    """A kopf namespace pattern (wildcards, exclusions or several globs), not one name."""
    return any(c in namespace for c in "*?!,")


def check_namespace_pattern(text: str) -> str:
    """A namespace name or kopf pattern, checked; ValueError says what is wrong."""
    globs = [g.strip() for g in text.split(",")]
    if not text.strip():
        raise ValueError("empty namespace: name one, or use -A for every namespace")
    for glob in globs:
        bare = glob[1:] if glob.startswith("!") else glob
        if not bare:
            raise ValueError(f"{text!r}: an empty glob (two commas, a trailing comma, or a lone '!')")
        if not _GLOB.match(bare) or len(bare) > 63:
            raise ValueError(
                f"{text!r}: {glob!r} is not a namespace name or glob (lower-case letters, digits and '-', "
                "at most 63, with '*' and '?' as wildcards; '!' before a glob excludes it)"
            )
    first = globs[0]
    if len(globs) > 1 and not is_pattern(first):
        # kopf: the first glob decides, so `a,b` is `a`, never `b`
        raise ValueError(
            f"{text!r}: the first glob of a pattern decides, so this never matches beyond {first!r}; "
            "to watch several namespaces repeat -n (e.g. -n team-a -n team-b)"
        )
    for i, glob in enumerate(globs[1:], start=1):
        if not glob.startswith("!") and not any(g.startswith("!") for g in globs[:i]):
            # a later plain glob only takes back what an earlier '!glob' excluded
            raise ValueError(
                f"{text!r}: {glob!r} follows no '!glob', so it changes nothing (the first glob decides); "
                "to watch several patterns repeat -n (e.g. -n 'team-*' -n 'ml-*')"
            )
    if not is_pattern(text) and not _DNS_LABEL.match(text):
        raise ValueError(f"{text!r} is not a namespace name")
    return text


def namespace_matches(name: str, pattern: str) -> bool:
    """kopf's meaning of a namespace pattern (``kopf.run(namespaces=...)``): the globs left to
    right, an implied ``*`` before a leading ``!glob``; the first glob decides, an exclusion
    removes, a later plain glob takes back only what the first one matched."""
    globs = [g.strip() for g in pattern.split(",")]
    if globs[0].startswith("!"):
        globs.insert(0, "*")
    matched = first = fnmatch.fnmatchcase(name, globs[0])
    for glob in globs[1:]:
        if glob.startswith("!"):
            matched = matched and not fnmatch.fnmatchcase(name, glob[1:])
        else:
            matched = matched or (first and fnmatch.fnmatchcase(name, glob))
    return matched


def check_shard_name(text: str) -> str:
    if len(text) > MAX_SHARD_NAME or not _DNS_LABEL.match(text):
        raise ValueError(
            f"{text!r}: a shard name is lower-case letters, digits and '-', at most {MAX_SHARD_NAME}, "
            "beginning and ending with a letter or digit"
        )
    return text


# ---------------------------------------------------------------------------- the scope


@dataclasses.dataclass(frozen=True)
class Scope:
    """Which RayClusters this operator owns; by default every one in every namespace."""

    namespaces: tuple[str, ...] = ()  # names or patterns; empty: every namespace
    selector: LabelSelector | None = None  # None: every RayCluster in those namespaces
    shard: str = ""

    @property
    def patterned(self) -> bool:
        """Some namespace is a pattern: which namespaces are watched changes as they come and go."""
        return any(is_pattern(n) for n in self.namespaces)

    @property
    def sharded(self) -> bool:
        """Started as one shard of several: a shard name, a selector or namespace patterns. An
        operator given only namespace names is not (its Lease stays `DEFAULT_LEASE`)."""
        return bool(self.shard or self.selector is not None or self.patterned)

    def owns(self, body: Mapping[str, Any]) -> bool:
        """Is this RayCluster (a body from the watch or the API) this operator's to act on? Its
        namespace is kopf's to filter; this is the selector."""
        if self.selector is None:
            return True
        labels = (body.get("metadata") or {}).get("labels") or {}
        return self.selector.matches(labels)

    def lease_name(self) -> str:
        """The Lease this scope's operators elect a leader on, unless ``--leader-election-id`` names
        one: ``rayscale-<shard>`` for a named shard; `DEFAULT_LEASE` for an operator that is no shard;
        for one that is and has no name, ``rayscale-`` and a digest of its scope, so two shards
        started with default settings never wait on each other's Lease (replicas of one shard, started
        with the same arguments, get the same name)."""
        if self.shard:
            return f"{DEFAULT_LEASE}-{self.shard}"
        if not self.sharded:
            return DEFAULT_LEASE
        digest = hashlib.sha256(self.describe().encode()).hexdigest()[:10]
        return f"{DEFAULT_LEASE}-{digest}"

    def describe(self) -> str:
        """One line for the logs, canonical (the same scope always reads the same)."""
        where = " ".join(f"-n {n}" for n in sorted(set(self.namespaces))) or "-A"
        return where + (f" --cluster-selector {self.selector}" if self.selector is not None else "")
