"""A Snapshot as a scenario document (docs/scenario-format.md), and back, to replay a case.

``to_scenario`` (the operator's own writer, ``rayscale.autoscaler.scenario_write``) writes every
field the case uses; ``roundtrip`` checks that rayscale's own parser reads the document back into
the very same Snapshot, so a failure file replays exactly the case that failed
(``rayscale simulate FILE``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from rayscale.autoscaler.scenario import ScenarioError, parse_scenario
from rayscale.autoscaler.scenario_write import to_scenario
from rayscale.autoscaler.scheduling.model import Snapshot

__all__ = ["answer_path", "read", "read_answer", "roundtrip", "to_scenario", "write", "write_answer"]

_Dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def roundtrip(snapshot: Snapshot) -> str | None:
    """None when the scenario parser reads ``snapshot``'s document back unchanged, else why not."""
    try:
        text = yaml.dump(to_scenario(snapshot), Dumper=_Dumper, sort_keys=False)
        parsed = parse_scenario(yaml.load(text, Loader=_Loader))
    except ScenarioError as exc:
        return f"the scenario parser rejects it: {exc}"
    if parsed == snapshot:
        return None
    for name in ("groups", "nodes", "demands", "gangs", "constraints", "options", "head"):
        if getattr(parsed, name) != getattr(snapshot, name):
            return f"the scenario parser reads {name} differently"
    return "the scenario parser reads it differently"


def write(path: Path, snapshot: Snapshot, comment: str) -> None:
    """Write ``snapshot`` as a scenario file headed by ``comment`` (one ``#`` line per line)."""
    header = "".join(f"# {line}".rstrip() + "\n" for line in comment.splitlines())
    body = yaml.safe_dump(to_scenario(snapshot), sort_keys=False, default_flow_style=None, width=110)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(header + body, encoding="utf-8")


def read(path: Path) -> Snapshot:
    """The snapshot of a scenario file."""
    return parse_scenario(yaml.safe_load(path.read_text(encoding="utf-8")))


def answer_path(path: Path) -> Path:
    """Where Ray's answer to a scenario file's case is kept: ``<name>.ray.json`` beside it."""
    return path.with_name(path.stem + ".ray.json")


def write_answer(path: Path, case_id: str, ray: dict[str, Any], differences: list[dict[str, str]]) -> None:
    """Ray 2.60's answer to the case of scenario file ``path`` (and what differed), beside it."""
    doc = {"case_id": case_id, "ray": ray, "differences": differences}
    answer_path(path).write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n", encoding="utf-8")


def read_answer(path: Path) -> tuple[str, dict[str, Any]]:
    """The case id and Ray's answer recorded beside scenario file ``path``."""
    doc = json.loads(answer_path(path).read_text(encoding="utf-8"))
    return str(doc["case_id"]), dict(doc["ray"])
