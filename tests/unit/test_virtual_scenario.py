"""Virtual clusters in scenario files: parsing, errors, and `rayscale simulate`'s output for them."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from rayscale.autoscaler.scenario import ScenarioError, parse_scenario
from rayscale.autoscaler.virtual.model import Member, VcGroup, VirtualCluster
from rayscale.autoscaler.virtual.scenario import VirtualScenario, parse_virtual
from rayscale.cli import main

EXAMPLE = Path(__file__).parents[2] / "examples" / "scenarios" / "virtual-clusters.yaml"
GROUPS = [{"name": "cpu", "resources": {"CPU": 4}, "maxReplicas": 10}, {"name": "tpu", "numOfHosts": 2}]


def simulate(capsys: pytest.CaptureFixture[str], doc: Any, tmp_path: Path) -> tuple[int, Any, str]:
    path = tmp_path / "scenario.json"
    path.write_text(json.dumps(doc))
    code = main(["simulate", str(path)])
    out, err = capsys.readouterr()
    return code, json.loads(out) if code == 0 else None, err


def parse(doc: dict[str, Any]) -> VirtualScenario | None:
    return parse_virtual(doc, parse_scenario(doc))


def test_virtual_clusters_members_and_finished_jobs_are_read() -> None:
    doc: dict[str, Any] = {
        "groups": GROUPS,
        "virtualClusters": [
            {"name": "team-a", "groups": [{"groupName": "cpu", "nodes": 1, "maxNodes": 3}]},
            {
                "name": "jobs",
                "divisible": True,
                "removing": True,
                "groups": [{"groupName": "cpu", "nodes": 2, "minNodes": 0, "maxNodes": 4, "desired": 3}],
            },
        ],
        "nodes": [
            {"name": "a1", "group": "cpu", "virtualCluster": "team-a"},
            {"name": "j1", "group": "cpu", "virtualCluster": "jobs", "jobCluster": "raysubmit_1"},
            {"name": "free", "group": "cpu"},
        ],
        "finishedJobs": ["raysubmit_1", "raysubmit_0"],
    }
    assert parse(doc) == VirtualScenario(
        vcs=(
            VirtualCluster("team-a", (VcGroup("cpu", 1, 1, 3, 1),)),
            VirtualCluster("jobs", (VcGroup("cpu", 2, 0, 4, 3),), divisible=True, removing=True),
        ),
        members={"a1": Member("team-a"), "j1": Member("jobs", "raysubmit_1")},
        finished=frozenset({"raysubmit_0", "raysubmit_1"}),
    )
    without = {k: v for k, v in doc.items() if k not in ("virtualClusters", "finishedJobs")}
    without["nodes"] = [{"name": n["name"], "group": "cpu"} for n in doc["nodes"]]
    assert parse_scenario(doc) == parse_scenario(without)


def test_a_scenario_without_virtual_clusters_has_none() -> None:
    assert parse({"groups": GROUPS, "finishedJobs": ["x"]}) is None
    assert parse({"virtualClusters": []}) == VirtualScenario((), {}, frozenset())


def vc(name: str | None = "a", **fields: Any) -> dict[str, Any]:  # None: a VC without a name
    return {"name": name, "groups": [{"groupName": "cpu", "nodes": 1}], **fields}


def share(**fields: Any) -> dict[str, Any]:
    """A scenario whose one VC has one share of "cpu" with `fields`."""
    return {"virtualClusters": [vc(groups=[{"groupName": "cpu", **fields}])]}


def member(node: dict[str, Any], **fields: Any) -> dict[str, Any]:
    return {"virtualClusters": [vc(**fields)], "nodes": [{"name": "n", "group": "cpu", **node}]}


@pytest.mark.parametrize(
    ("doc", "field"),
    [
        ({"virtualClusters": {"name": "a"}}, "virtualClusters"),
        ({"virtualClusters": [vc(name=None)]}, "virtualClusters[0].name"),
        ({"virtualClusters": [vc("Team_A")]}, "virtualClusters[0].name"),
        ({"virtualClusters": [vc("a/b")]}, "virtualClusters[0].name"),
        ({"virtualClusters": [vc(size=1)]}, "virtualClusters[0].size"),
        ({"virtualClusters": [vc(groups=None)]}, "virtualClusters[0].groups"),
        ({"virtualClusters": [vc(groups=[])]}, "virtualClusters[0].groups"),
        ({"virtualClusters": [vc(divisible="yes")]}, "virtualClusters[0].divisible"),
        ({"virtualClusters": [vc(removing=1)]}, "virtualClusters[0].removing"),
        ({"virtualClusters": [vc(), vc()]}, "virtualClusters[1].name"),
        ({"virtualClusters": [vc(groups=[{"nodes": 1}])]}, "virtualClusters[0].groups[0].groupName"),
        (
            {"virtualClusters": [vc(groups=[{"groupName": "gpu", "nodes": 1}])]},
            "virtualClusters[0].groups[0].groupName",
        ),
        (
            {"virtualClusters": [vc(groups=[{"groupName": "tpu", "nodes": 1}])]},
            "virtualClusters[0].groups[0].groupName",
        ),
        (
            {"virtualClusters": [vc(groups=[{"groupName": "cpu", "nodes": 1}] * 2)]},
            "virtualClusters[0].groups[1].groupName",
        ),
        (share(), "virtualClusters[0].groups[0].nodes"),
        (share(nodes=-1), "virtualClusters[0].groups[0].nodes"),
        (share(nodes=1.5), "virtualClusters[0].groups[0].nodes"),
        (share(nodes=1, minNodes=2), "virtualClusters[0].groups[0].minNodes"),
        (share(nodes=2, maxNodes=1), "virtualClusters[0].groups[0].maxNodes"),
        (share(nodes=1, maxNodes=2, desired=3), "virtualClusters[0].groups[0].desired"),
        (share(nodes=1, spare=0), "virtualClusters[0].groups[0].spare"),
        ({"nodes": [{"name": "n", "group": "cpu", "virtualCluster": "a"}]}, "nodes[0].virtualCluster"),
        (member({"virtualCluster": "b"}), "nodes[0].virtualCluster"),
        (member({"virtualCluster": 3}), "nodes[0].virtualCluster"),
        (member({"virtualCluster": "a", "group": "tpu"}), "nodes[0].virtualCluster"),
        (member({"jobCluster": "j"}), "nodes[0].jobCluster"),
        (member({"virtualCluster": "a", "jobCluster": "j"}), "nodes[0].jobCluster"),
        (member({"virtualCluster": "a", "jobCluster": ""}, divisible=True), "nodes[0].jobCluster"),
        ({"finishedJobs": "raysubmit_1"}, "finishedJobs"),
        ({"finishedJobs": ["ok", 7]}, "finishedJobs[1]"),
    ],
)
def test_bad_virtual_clusters_name_the_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], doc: dict[str, Any], field: str
) -> None:
    doc = {"groups": GROUPS, **doc}
    code, _, err = simulate(capsys, doc, tmp_path)
    assert code == 2
    assert f"bad scenario: {field}:" in err
    with pytest.raises(ScenarioError, match="^" + re.escape(field) + ":"):
        parse(doc)


def test_the_example_grows_a_vc_to_its_max_and_fills_another_from_a_free_host(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["simulate", str(EXAMPLE)]) == 0
    out = json.loads(capsys.readouterr().out)
    vcs = out["virtualClusters"]
    assert vcs["assign"] == {"cpu-free1": "team-b"}
    team_a, team_b = vcs["clusters"]["team-a"], vcs["clusters"]["team-b"]
    assert team_a["desired"] == {"cpu": 3}
    assert [(u["reason"], u["count"]) for u in team_a["unmet"]] == [("VIRTUAL_CLUSTER_MAX", 1)]
    assert (team_b["desired"], team_b["unmet"]) == ({"cpu": 2}, [])
    assert team_a["jobClusters"] == team_b["jobClusters"] == []
    # two new pods for team-a, one for the work outside the VCs; the free host is team-b's now
    assert out["groups"]["cpu"] == {"current": 3, "replicas": 6, "launch": 3, "terminate": 0}
    assert out["terminate"] == []
    assert [(u["reason"], u["count"]) for u in out["unmet"]] == [("VIRTUAL_CLUSTER_MAX", 1)]
    outside = next(p for p in out["placements"] if p["resources"] == {"CPU": 4})
    assert [t["on"] for t in outside["targets"]] == ["new"]
    team_b_work = next(p for p in out["placements"] if p["resources"] == {"CPU": 2})
    assert [t.get("nodes") for t in team_b_work["targets"]] == [["cpu-b1"]]
    assert list(out) == ["groups", "terminate", "unmet", "placements", "virtualClusters", "elapsedSeconds"]


def test_job_clusters_removal_and_unknown_vcs_in_the_output(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = {
        "groups": GROUPS,
        "virtualClusters": [
            {"name": "jobs", "divisible": True, "groups": [{"groupName": "cpu", "nodes": 2, "maxNodes": 4}]},
            {"name": "old", "removing": True, "groups": [{"groupName": "cpu", "nodes": 1}]},
        ],
        "nodes": [
            {
                "name": "j1",
                "group": "cpu",
                "virtualCluster": "jobs",
                "jobCluster": "busy",
                "available": {"CPU": 0},
            },
            {"name": "j2", "group": "cpu", "virtualCluster": "jobs", "jobCluster": "idle", "idleSeconds": 5},
            {"name": "o1", "group": "cpu", "virtualCluster": "old", "idleSeconds": 5},
        ],
        "finishedJobs": ["busy", "idle"],
        "demands": [
            {"resources": {"CPU": 4, "rayscale.io/vc/jobs/new": 0.001}},
            {"resources": {"CPU": 1, "rayscale.io/vc/nowhere": 0.001}},
        ],
    }
    code, out, _ = simulate(capsys, doc, tmp_path)
    assert code == 0
    vcs = out["virtualClusters"]
    # j2's job ended and it is idle: back to its VC; o1 leaves the VC being removed and the new
    # job cluster takes it
    assert vcs["assign"] == {"j2": "jobs", "o1": "jobs/new"}
    assert vcs["clusters"]["jobs"]["jobClusters"] == [
        {"name": "busy", "hosts": {"cpu": 1}, "destroying": True, "reason": "its job ended"},
        {"name": "new", "hosts": {"cpu": 1}, "destroying": False, "reason": ""},
    ]
    assert vcs["clusters"]["old"] == {"desired": {}, "jobClusters": [], "unmet": [], "removed": True}
    (unmet,) = vcs["clusters"]["nowhere"]["unmet"]
    assert (unmet["reason"], unmet["count"], unmet["resources"]) == ("NO_VIRTUAL_CLUSTER", 1, {"CPU": 1})
    assert list(vcs["clusters"]["nowhere"]) == ["unmet"]
    assert out["groups"]["cpu"]["launch"] == 0


def test_without_the_key_the_output_is_the_schedulers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc: dict[str, Any] = {
        "groups": GROUPS,
        "demands": [{"resources": {"CPU": 1, "rayscale.io/vc/a": 0.001}}],
    }
    code, out, _ = simulate(capsys, doc, tmp_path)
    assert code == 0
    assert "virtualClusters" not in out
    assert out["unmet"][0]["reason"] == "NO_MATCHING_GROUP"  # an unknown resource, as before
    code, out, _ = simulate(capsys, {**doc, "virtualClusters": []}, tmp_path)
    assert out["unmet"][0]["reason"] == "NO_VIRTUAL_CLUSTER"
    assert out["virtualClusters"]["assign"] == {}
    assert list(out["virtualClusters"]["clusters"]) == ["a"]
