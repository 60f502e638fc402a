"""docs/configuration.md documents every `rayscale run` flag and every chart value (no drift)."""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from rayscale import run
from rayscale.api import disruption_annotations
from rayscale.autoscaler import snapshot

ROOT = Path(__file__).resolve().parents[2]
DOC = (ROOT / "docs" / "configuration.md").read_text()
CHART = ROOT / "charts" / "rayscale"


def run_flags() -> list[str]:
    parser = argparse.ArgumentParser()
    run.register(parser.add_subparsers())
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return [
        flag
        for action in sub.choices["run"]._actions
        for flag in action.option_strings
        if flag.startswith("--") and flag != "--help"
    ]


def schema_leaves(schema: dict[str, Any], prefix: str = "") -> Iterator[str]:
    """Dotted paths of the values the schema spells out (free-form objects count as one value)."""
    for key, sub in schema.get("properties", {}).items():
        path = f"{prefix}{key}"
        if "properties" in sub:
            yield from schema_leaves(sub, f"{path}.")
        else:
            yield path


def test_every_run_flag_is_documented() -> None:
    flags = run_flags()
    assert "--leader-elect" in flags
    missing = [f for f in flags if f"`{f}" not in DOC]
    assert not missing, f"docs/configuration.md lacks {missing}"


def test_every_chart_value_is_documented_and_in_values_yaml() -> None:
    schema = json.loads((CHART / "values.schema.json").read_text())
    leaves = list(schema_leaves(schema))
    assert "metrics.serviceMonitor.interval" in leaves
    missing = [p for p in leaves if f"| `{p}` |" not in DOC]
    assert not missing, f"docs/configuration.md lacks {missing}"
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    for path in leaves:
        node = values
        for part in path.split("."):
            assert part in node, f"values.yaml has no default for {path}"
            node = node[part]


def test_every_autoscaler_annotation_is_documented() -> None:
    annotations = [
        snapshot.MAX_NODE_PROVISION_ANNOTATION,
        snapshot.MAX_NODE_BOOT_ANNOTATION,
        snapshot.UNPROVISIONED_GRACE_ANNOTATION,
        disruption_annotations.DISRUPTION_BUDGET_ANNOTATION,
        disruption_annotations.DRAIN_ON_STOP_ANNOTATION,
        disruption_annotations.REMOVAL_DRAIN_ANNOTATION,
    ]
    missing = [a for a in annotations if f"| `{a}: " not in DOC]
    assert not missing, f"docs/configuration.md lacks {missing}"
