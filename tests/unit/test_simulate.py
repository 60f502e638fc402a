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
from rayscale.autoscaler.scheduling.model import Head, LabelConstraint, LabelOp, NodeState
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
                    "spec": {
                        "headGroupSpec": {"template": {"spec": {"containers": [{}]}}},
                        "workerGroupSpecs": [
                            {"groupName": "g", "rayStartParams": {"num-cpus": "x"}, "template": {}}
                        ],
                    }
                }
            },
            "cluster.spec.workerGroupSpecs[0]",
        ),
        ({"surprise": 1}, "surprise"),
        ([1, 2], "scenario"),
        ({"demands": [{"fallbacks": "zone=a"}]}, "demands[0].fallbacks"),
        ({"demands": [{"fallbacks": [{"zone": "a"}, "zone=b"]}]}, "demands[0].fallbacks[1]"),
        (
            {"demands": [{"fallbacks": [[{"key": "z", "op": "near", "values": ["a"]}]]}]},
            "demands[0].fallbacks[0][0].op",
        ),
        ({"demands": [{"labelSelector": "zone=a"}]}, "demands[0].labelSelector"),
        (
            {"gangs": [{"bundles": [{"CPU": 1}, {"CPU": 1}], "bundleSelectors": [{"zone": "a"}]}]},
            "gangs[0].bundleSelectors",
        ),
        ({"gangs": [{"bundles": [{"CPU": 1}], "bundleSelectors": [7]}]}, "gangs[0].bundleSelectors[0]"),
        ({"constraints": [{"resources": {"CPU": 1}, "unit": 3}]}, "constraints[0].unit"),
        ({"constraints": [{"labelSelector": [{"op": "in"}]}]}, "constraints[0].labelSelector[0].key"),
        ({"head": [1]}, "head"),
        ({"head": {"cpus": 1}}, "head.cpus"),
        ({"head": {"resources": {"CPU": "x"}}}, "head.resources.CPU"),
        ({"head": {"available": {"CPU": -1}}}, "head.available.CPU"),
        ({"head": {"labels": {"zone": ["a"]}}}, "head.labels.zone"),
        (
            {"groups": [{"name": "a"}], "nodes": [{"name": "n", "group": "a", "booting": "yes"}]},
            "nodes[0].booting",
        ),
        (
            {"groups": [{"name": "a"}], "nodes": [{"name": "n", "group": "a", "labels": "x"}]},
            "nodes[0].labels",
        ),
        ({"options": {"maxNodeBootSeconds": -1}}, "options.maxNodeBootSeconds"),
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
            "headGroupSpec": {"template": {"spec": {"containers": [{}]}}},
            "autoscalerOptions": {"idleTimeoutSeconds": 30, "upscalingMode": "Conservative"},
            "workerGroupSpecs": [
                {
                    "groupName": "gpu",
                    "minReplicas": 1,
                    "maxReplicas": 4,
                    "numOfHosts": 1,
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


def test_new_fields_reach_the_snapshot() -> None:
    snapshot = parse_scenario(
        {
            "head": {"resources": {"CPU": 4}, "available": {"CPU": 1}, "labels": {"kind": "head"}},
            "groups": [{"name": "a"}],
            "nodes": [
                {"name": "d", "group": "a", "state": "draining", "labels": {"zone": "b"}},
                {"name": "x", "group": "a", "state": "dead"},
                {"name": "p", "group": "a", "state": "pending", "booting": True},
            ],
            "demands": [{"labelSelector": {"zone": "a"}, "fallbacks": [{"zone": "b"}, None]}],
            "gangs": [{"bundles": [{"CPU": 1}, {"CPU": 1}], "bundleSelectors": [None, {"zone": "a"}]}],
            "constraints": [{"resources": {"CPU": 1}, "labelSelector": {"zone": "a"}, "unit": "ns/r"}],
            "options": {"maxNodeBootSeconds": 60},
        }
    )
    a, b = ((LabelConstraint("zone", LabelOp.IN, (v,)),) for v in "ab")
    assert snapshot.head == Head({"CPU": 4.0}, {"CPU": 1.0}, {"kind": "head"})
    assert [n.state for n in snapshot.nodes] == [NodeState.DRAINING, NodeState.DEAD, NodeState.PENDING]
    assert [n.booting for n in snapshot.nodes] == [False, False, True]
    assert [n.labels for n in snapshot.nodes] == [{"zone": "b"}, None, None]
    assert snapshot.demands[0].selectors == (a, b, ())
    assert snapshot.gangs[0].bundle_selectors == ((), a)
    assert (snapshot.constraints[0].label_selector, snapshot.constraints[0].unit) == (a, "ns/r")
    assert snapshot.options.max_node_boot_seconds == 60
    assert parse_scenario({}).head is None
    assert parse_scenario({"constraints": [{"resources": {"CPU": 1}}]}).constraints[0].unit == ""


# What some examples must show (launches per group, removals per host), beyond explaining every unit.
EXPECTED: dict[str, tuple[dict[str, int], dict[str, str]]] = {
    "fallback-selectors": ({"on-demand": 2}, {}),
    "bundle-selectors": ({"zone-b-ssd": 1}, {}),
    "constraint-units": ({"cpu": 1, "cpu-b": 2}, {}),
    "head-node": ({"workers": 1}, {}),
    "lost-nodes": (
        {"cpu": 2},
        {"cpu-a1": "DRAINED", "cpu-a2": "NODE_DEAD", "slice-r1-0": "DRAINED", "slice-r1-1": "DRAINED"},
    ),
    "slow-boot": ({}, {"gpu-unscheduled": "LAUNCH_FAILED"}),
    "node-labels": ({}, {}),
    "virtual-clusters": ({"cpu": 3}, {}),
}


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_examples_run_and_explain_every_unit(path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, str(path))
    assert code == 0
    doc = yaml.safe_load(path.read_text())
    for kind, section in (("demand", "demands"), ("gang", "gangs"), ("constraint", "constraints")):
        asked = sum(d.get("count", 1) for d in doc.get(section) or [])
        answered = sum(p["count"] for p in out["placements"] if p["kind"] == kind)
        answered += sum(u["count"] for u in out["unmet"] if u["kind"] == kind)
        assert answered == asked, kind
    if path.stem in EXPECTED:
        launched = {name: g["launch"] for name, g in out["groups"].items() if g["launch"]}
        removed = {t["name"]: t["reason"] for t in out["terminate"]}
        assert (launched, removed) == EXPECTED[path.stem]
