"""`rayscale status` as text (rayscale.status.render): golden output for fixed documents, widths,
colour, ages, and purity.

The documents in data/status/ are what fetch.py builds: the operator's view (rayscale.autoscaler
.view, made with the operator's own code), and what was read from the Kubernetes API. After a
deliberate change of the output, rewrite the golden files with
``RAYSCALE_UPDATE_GOLDEN=1 pytest tests/unit/test_status_render.py`` and review the diff.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from rayscale.status.fleet import render_fleet
from rayscale.status.layout import WIDTH, age, amount, human
from rayscale.status.render import render_cluster

DATA = Path(__file__).parent / "data" / "status"
NOW = datetime(2026, 11, 23, 10, 15, 4, tzinfo=UTC)  # the documents' fetchedAt
ANSI = re.compile(r"\x1b\[[0-9;]*m")
CLUSTERS = ["cluster-live", "cluster-held", "cluster-no-operator", "cluster-not-autoscaled"]
FLEETS = ["fleet", "fleet-no-operator"]


def doc(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((DATA / f"{name}.json").read_text())
    return loaded


def rendered(name: str, **options: Any) -> str:
    if name.startswith("fleet"):
        return render_fleet(doc(name), now=NOW, **options)
    return render_cluster(doc(name), now=NOW, **options)


def golden(name: str, text: str) -> None:
    path = DATA / f"{name}.txt"
    if os.environ.get("RAYSCALE_UPDATE_GOLDEN"):
        path.write_text(text)
    assert text == path.read_text(), f"{name}: the output differs from {path} (see the module docstring)"


@pytest.mark.parametrize("name", CLUSTERS + FLEETS)
def test_golden_output(name: str) -> None:
    golden(name, rendered(name))


@pytest.mark.parametrize("name", CLUSTERS)
def test_a_cluster_fits_100_columns(name: str) -> None:
    long = [line for line in rendered(name).splitlines() if len(line) > WIDTH]
    assert not long, long


def test_the_fleet_table_fits_100_columns() -> None:
    table = rendered("fleet").split("\n\n")[0].splitlines()
    assert max(len(line) for line in table) <= WIDTH


def test_a_narrow_terminal_wraps_the_last_column_under_itself() -> None:
    text = render_cluster(doc("cluster-live"), now=NOW, width=80)
    events = text.split("Events (newest first)\n")[1].splitlines()
    assert all(len(line) <= 80 for line in events), events
    column = events[0].index("MESSAGE")
    continued = [line for line in events[1:] if line[:column].strip() == ""]
    assert continued, "no message wrapped at 80 columns"
    assert all(line[column : column + 2] == "  " and line[column + 2] != " " for line in continued)


def test_colour_changes_nothing_but_the_escape_codes() -> None:
    for name in CLUSTERS + FLEETS:
        plain, coloured = rendered(name), rendered(name, color=True)
        assert "\x1b[" not in plain
        assert "\x1b[" in coloured
        assert ANSI.sub("", coloured) == plain, name
    assert "\x1b[31mfailed\x1b[0m" in rendered("cluster-live", color=True)


def test_the_view_and_what_only_rayscale_knows_are_there() -> None:
    text = rendered("cluster-live")
    ray, rayscale = text.split("\nGroups\n")
    assert "demo-cpu-worker-x7k2p  cpu    RUNNING  -     CPU 6/8" in ray
    assert "6/16 CPU" in ray
    assert "0B/72.00GiB memory" in ray
    assert "1 x PACK [{CPU: 1}, {CPU: 1}] placement groups" in ray
    assert "2 x {CPU: 4} RayResourceRequest team-a/reserve" in ray
    assert "c9d8e7f6  demo-cpu-worker-q2w9e  cpu    DEAD     -     -" in ray  # a dead node has no usage
    assert re.search(r"gpu +0 +0 +0 +2 +1 +- +for 4m28s", rayscale)  # backing off
    assert re.search(r"demo-tpu-s1 +scheduling +42s +- +2 hosts", rayscale)
    assert "NODE_DEAD: the Ray node of pod" in rayscale
    assert "BACKOFF            2 x {GPU: 1} tasks/actors: every group that could hold it" in rayscale
    assert "reserve  2 x {CPU: 4}  Pending" in rayscale


def test_decisions_newest_first_bounded_and_repeats_said() -> None:
    view = doc("cluster-live")["view"]
    text = render_cluster(doc("cluster-live"), now=NOW, decisions=2)
    decisions = text.split("Decisions (newest first, 2 of 3)\n")[1].split("\n\n")[0]
    assert [line.split()[:2] for line in decisions.splitlines() if line[2] != " "][1:] == [
        ["32s", view["decisions"][0]["trigger"]],
        ["42s", "pod"],
    ]
    assert "the same in 6 more rounds, until 2s ago" in decisions
    assert "-1 cpu (NODE_DEAD): demo-cpu-worker-q2w9e" in decisions
    assert "demand: as above" in decisions
    assert "Decisions" not in render_cluster(doc("cluster-live"), now=NOW, decisions=0)


def test_a_hold_and_an_unreachable_gcs_are_said() -> None:
    text = rendered("cluster-held")
    assert "held      the head's raylet is not running in Ray's GCS" in text
    assert "NOT reachable (UNAVAILABLE: failed to" in text
    assert "unknown: the latest round could not read the GCS" in text
    assert "held: the head's raylet is not running in Ray's GCS" in text


def test_without_the_operator_one_line_says_why_and_status_autoscaler_is_shown() -> None:
    text = rendered("cluster-no-operator")
    header = text.split("\n\n")[0]
    assert header.count("live view") == 1
    assert "missing: no operator found: nobody holds the Lease rayscale-system/rayscale" in header
    assert "status.autoscaler of the latest round it was written for (42s ago)" in header
    assert "Ray (what" not in text  # only the operator knows what Ray said
    assert re.search(r"demo-cpu-worker-q2w9e +cpu +Running +yes +5m51s +2", text)  # the pods
    assert "NODE_DEAD: the Ray node of pod" in text


def test_the_fleet_marks_what_does_not_come_from_the_operator() -> None:
    rows = {line.split()[1]: line for line in rendered("fleet").splitlines()[1:4]}
    assert rows["demo"].split()[2:5] == ["ready", "2s", "yes"]
    assert "2 BACKOFF, 1 NO_MATCHING_GROUP" in rows["demo"]
    assert rows["demo"].endswith("cpu 3/2, gpu 0/0, tpu 1/1")
    assert rows["batch"].split()[3:5] == ["54s*", "NO"]
    assert rows["plain"].split()[3] == "off"
    assert rows["plain"].endswith("workers 1/2")  # live pods / spec replicas
    assert "live view missing: cannot reach the operator" in rendered("fleet-no-operator")
    assert rendered("fleet-no-operator").splitlines()[0].startswith("NAME ")  # one namespace: no column


def test_an_empty_namespace() -> None:
    empty = {"namespace": "team-b", "operator": {"reached": True}, "clusters": []}
    assert render_fleet(empty, now=NOW) == "No RayClusters in namespace team-b.\n"


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (-3, "0s"),
        (0, "0s"),
        (119, "119s"),
        (120, "2m"),
        (192, "3m12s"),
        (600, "10m"),
        (179 * 60, "179m"),
        (3 * 3600 + 720, "3h12m"),
        (8 * 3600, "8h"),
        (47 * 3600, "47h"),
        (49 * 3600, "2d"),
    ],
)
def test_ages_read_like_kubectls(seconds: float, text: str) -> None:
    assert human(seconds) == text


def test_times_and_amounts() -> None:
    assert age("2026-11-23T10:14:04Z", NOW) == "60s"
    assert age("2026-11-23T10:14:04.123456Z", NOW) == "59s"
    assert age(None, NOW) == "-"
    assert amount("memory", 1.5 * 2**30) == "1.50GiB"
    assert amount("object_store_memory", 512) == "512B"
    assert amount("CPU", 0.5) == "0.5"
    assert amount("GPU", 2) == "2"


def test_render_and_summary_are_pure() -> None:
    """No Kubernetes client, HTTP client or asyncio behind the text and the summaries."""
    modules = ("kopf", "kubernetes_asyncio", "aiohttp", "asyncio", "grpc")
    code = (
        "import sys\nimport rayscale.status.render, rayscale.status.fleet\n"
        "import rayscale.status.summary, rayscale.status.args\n"
        f"print(sorted(m for m in {modules!r} if m in sys.modules))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert done.stdout.strip() == "[]"


def test_placement_group_resources_are_left_out_as_ray_status_does() -> None:
    """Ray adds CPU_group_<pg>, CPU_group_<i>_<pg> and bundle_group_... resources for placed bundles."""
    live = doc("cluster-live")
    pg = "22fb75c2149518e3224aa20b9ce701000000"
    extra = {f"CPU_group_0_{pg}": 1, f"CPU_group_{pg}": 1, f"bundle_group_0_{pg}": 1000}
    for node in live["view"]["ray"]["nodes"]:
        node["total"].update(extra)
        node["available"].update(extra)
    live["view"]["ray"]["usage"].update({k: {"used": 0, "total": v} for k, v in extra.items()})
    assert render_cluster(live, now=NOW) == rendered("cluster-live")
    live["view"]["ray"]["usage"]["accel_group_a"] = {"used": 1, "total": 2}  # a custom resource stays
    assert "1/2 accel_group_a" in render_cluster(live, now=NOW)


def test_what_is_leaving_is_said_from_status_autoscaler() -> None:
    """The Disruption condition (pods draining before their deletion) and a refused removal
    deadline (RemovalDrain False) shown under "Leaving", the long message wrapped within the width."""
    document = doc("cluster-no-operator")
    pod = "demo-cpu-worker-q2w9e"
    draining = (
        f"Draining before deletion, deleted when idle or at the deadline: {pod} (group-removed, no"
        " deadline), demo-cpu-worker-x7k2q (cordon, no deadline), demo-cpu-worker-z9z9z (max-replicas,"
        " deadline 2026-11-23T10:20:00Z)."
    )
    document["kubernetes"]["rayCluster"]["autoscaler"]["conditions"] = [
        {"type": "Disruption", "status": "True", "reason": "Draining", "message": draining},
        {"type": "RemovalDrain", "status": "False", "reason": "InvalidAnnotation", "message": "refused: -1"},
        {"type": "Other", "status": "True", "reason": "X", "message": "not shown"},
    ]
    text = render_cluster(document, now=NOW)
    leaving = text.split("Leaving\n", 1)[1].split("\n\n", 1)[0]
    assert leaving.startswith("  Draining ")
    assert f"{pod} (group-removed, no" in leaving
    assert "InvalidAnnotation  refused: -1" in leaving
    assert "not shown" not in text
    assert all(len(line) <= WIDTH for line in leaving.splitlines())
    assert "Leaving" not in rendered("cluster-no-operator")  # nothing leaving: no section


def test_groups_kubernetes_holds_back_are_shown_while_refused() -> None:
    """The QuotaExceeded condition (a ResourceQuota refusing a group's pods, a scaleGate) shown
    under "Held back by Kubernetes" while True; nothing once it is False."""
    document = doc("cluster-no-operator")
    message = "group spot: ResourceQuota spot-quota refused its pods (exceeded quota: spot-quota, ...)"
    condition = {"type": "QuotaExceeded", "status": "True", "reason": "ResourceQuota", "message": message}
    document["kubernetes"]["rayCluster"]["autoscaler"]["conditions"] = [condition]
    held = render_cluster(document, now=NOW).split("Held back by Kubernetes\n", 1)[1].split("\n\n", 1)[0]
    assert held.startswith("  ResourceQuota  group spot: ResourceQuota spot-quota")
    condition.update(status="False", reason="QuotaAvailable")
    assert "Held back" not in render_cluster(document, now=NOW)
