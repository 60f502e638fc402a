"""`rayscale simulate`: scenario files in, the decision as JSON out; bad files exit 2."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from rayscale.autoscaler.scenario import ScenarioError, parse_scenario
from rayscale.cli import main

EXAMPLES = sorted((Path(__file__).parents[2] / "examples" / "scenarios").glob("*.yaml"))


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, Any, str]:
    code = main(["simulate", *argv])
    out, err = capsys.readouterr()
    return code, json.loads(out) if code == 0 else None, err


def test_simulate_file_prints_the_decision(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(
        yaml.safe_dump(
            {"groups": [{"name": "a", "resources": {"CPU": 4}}], "demands": [{"resources": {"CPU": 4}}]}
        )
    )
    code, out, _ = run(capsys, str(path))
    assert code == 0
    assert out["groups"] == {"a": {"current": 0, "replicas": 1, "launch": 1, "terminate": 0}}
    assert set(out) == {"groups", "terminate", "unmet", "placements", "elapsedSeconds"}
    assert isinstance(out["elapsedSeconds"], float)


def test_simulate_reads_json_from_stdin(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = {"groups": [{"name": "a", "resources": {"CPU": 1}, "minReplicas": 2}]}
    monkeypatch.setattr("sys.stdin", io.StringIO(json.dumps(doc)))
    code, out, _ = run(capsys, "-")
    assert code == 0
    assert out["groups"]["a"]["launch"] == 2


@pytest.mark.parametrize(
    ("doc", "field"),
    [
        ({"groups": [{"resources": {"CPU": 1}}]}, "groups[0].name"),
        ({"groups": [{"name": "a", "maxReplicas": -1}]}, "groups[0].maxReplicas"),
        ({"groups": [{"name": "a", "minReplicas": 3, "maxReplicas": 2}]}, "groups[0].minReplicas"),
        ({"groups": [{"name": "a", "resources": {"memory": "lots"}}]}, "groups[0].resources.memory"),
        ({"groups": [{"name": "a"}, {"name": "a"}]}, "groups[1].name"),
        ({"groups": [{"name": "a", "colour": "red"}]}, "groups[0].colour"),
        ({"groups": [{"name": "a"}], "nodes": [{"name": "n", "group": "b"}]}, "nodes[0].group"),
        (
            {"groups": [{"name": "a"}], "nodes": [{"name": "n", "group": "a", "state": "gone"}]},
            "nodes[0].state",
        ),
        ({"demands": [{"resources": {"CPU": 1}, "count": "many"}]}, "demands[0].count"),
        (
            {"demands": [{"labelSelector": [{"key": "z", "op": "near", "values": ["a"]}]}]},
            "demands[0].labelSelector[0].op",
        ),
        ({"gangs": [{"strategy": "CLUSTER", "bundles": [{"CPU": 1}]}]}, "gangs[0].strategy"),
        ({"gangs": [{"strategy": "PACK", "bundles": []}]}, "gangs[0].bundles"),
        ({"constraints": "x"}, "constraints"),
        ({"options": {"upscalingMode": "Fast"}}, "options.upscalingMode"),
        ({"options": {"maxWorkers": -2}}, "options.maxWorkers"),
        ({"cluster": {"spec": {}}, "groups": []}, "groups"),
        (
            {
                "cluster": {
                    "spec": {"workerGroupSpecs": [{"groupName": "g", "rayStartParams": {"num-cpus": "x"}}]}
                }
            },
            "cluster.spec.workerGroupSpecs[0]",
        ),
        ({"surprise": 1}, "surprise"),
        ([1, 2], "scenario"),
    ],
)
def test_bad_scenario_names_the_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], doc: Any, field: str
) -> None:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(doc))
    code, _, err = run(capsys, str(path))
    assert code == 2
    assert f"bad scenario: {field}" in err
    with pytest.raises(ScenarioError, match="^" + re.escape(field)):
        parse_scenario(doc)


def test_unreadable_and_invalid_files_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(capsys, str(tmp_path / "missing.yaml"))[0] == 2
    broken = tmp_path / "broken.yaml"
    broken.write_text("groups: [\n")
    code, _, err = run(capsys, str(broken))
    assert code == 2
    assert "not valid YAML" in err


def test_cluster_manifest_derives_groups_and_options() -> None:
    cluster = {
        "spec": {
            "autoscalerOptions": {"idleTimeoutSeconds": 30, "upscalingMode": "Conservative"},
            "workerGroupSpecs": [
                {
                    "groupName": "gpu",
                    "minReplicas": 1,
                    "maxReplicas": 4,
                    "numOfHosts": 0,
                    "labels": {"zone": "a"},
                    "template": {
                        "spec": {
                            "containers": [
                                {"resources": {"limits": {"cpu": "8", "memory": "32Gi", "nvidia.com/gpu": 1}}}
                            ]
                        }
                    },
                },
                {"groupName": "off", "suspend": True, "template": {"spec": {"containers": [{}]}}},
            ],
        }
    }
    snapshot = parse_scenario({"cluster": cluster, "options": {"maxWorkers": 3}})
    (group,) = snapshot.groups
    assert group.name == "gpu"
    assert dict(group.resources) == {"CPU": 8.0, "GPU": 1.0, "memory": float(32 * 1024**3)}
    assert (group.min_replicas, group.max_replicas, group.num_of_hosts) == (1, 4, 1)
    assert dict(group.labels) == {"zone": "a"}
    assert snapshot.options.idle_timeout_seconds == 30
    assert snapshot.options.upscaling_mode == "Conservative"
    assert snapshot.options.max_workers == 3


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_examples_run_and_explain_every_unit(path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, str(path))
    assert code == 0
    doc = yaml.safe_load(path.read_text())
    asked = sum(d.get("count", 1) for d in doc.get("demands", []))
    answered = sum(p["count"] for p in out["placements"] if p["kind"] == "demand")
    answered += sum(u["count"] for u in out["unmet"] if u["kind"] == "demand")
    assert answered == asked
