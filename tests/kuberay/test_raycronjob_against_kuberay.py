"""rayscale's RayCronJob plan against KubeRay v1.6.2's own RayCronJobReconciler, step by step.

Each case below runs through the oracle (tools/kuberay-oracle -raycronjob: KubeRay's reconciler on
the fake client with a fake clock, raycronjob.go) and through `plan_cron` with the same clock, the
status it wrote and the RayJobs it made. After every step the two are compared: which steps make a
RayJob, each RayJob's namespace, labels, annotation (the tick), owner reference and spec (the
template), ``status.lastScheduleTime``, the requeue, the error and every Event (type, reason,
message).

The differences allowed (``ALLOWED``), each deliberate and documented in rayscale.rayjob.cron and
docs/raycronjob.md, and each required to occur (an entry that explains nothing fails):

- ``name``: KubeRay names a RayJob ``<cronjob>-<5 random characters>``; rayscale after its tick;
- ``condition``: rayscale's status also holds ``SpecValid=False`` while the spec is refused;
- ``repeat``: KubeRay posts ``InvalidRayCronJobSpec`` on every reconcile of a refused spec; rayscale
  when the problem is new or changed;
- ``labels``: rayscale's RayJob also has the RayCronJob's own labels (KubeRay's has only
  ``ray.io/raycronjob``), so that a sharded fleet runs it on the RayCronJob's shard.
"""

from __future__ import annotations

import copy
import functools
import json
import re
from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from rayscale.common.timefmt import parse_time
from rayscale.rayjob.cron import plan_cron, rayjob_name
from tests.kuberay import oracle
from tests.kuberay.rayscale_side import merge_patch
from tests.support.builders import example

FAKE_UID = "00000000-0000-4000-8000-000000000001"  # the oracle's uid for the RayCronJob
SELECTOR = {"entrypoint": "python t.py", "clusterSelector": {"ray.io/cluster": "shared"}}
ALLOWED = ("name", "condition", "repeat", "labels")
KUBERAY_NAME = re.compile(r"[bcdfghjklmnpqrstvwxz2456789]{5}")  # apimachinery's rand.String(5)


def _cluster_template() -> dict[str, Any]:
    return {
        "entrypoint": "python t.py",
        "shutdownAfterJobFinishes": True,
        "ttlSecondsAfterFinished": 60,
        "rayClusterSpec": copy.deepcopy(example("raycluster-basic.yaml")["spec"]),
    }


def _at(start: str, *, every: timedelta, count: int) -> list[dict[str, Any]]:
    first = datetime.fromisoformat(start.replace("Z", "+00:00"))
    return [{"at": (first + every * i).isoformat().replace("+00:00", "Z")} for i in range(count)]


def _case(
    name: str,
    schedule: str,
    steps: list[dict[str, Any]],
    *,
    created: str = "2024-01-01T00:00:00Z",
    template: dict[str, Any] | None = None,
    status: dict[str, Any] | None = None,
    labels: dict[str, str] | None = None,
) -> dict[str, Any]:
    cron: dict[str, Any] = {
        "apiVersion": "ray.io/v1",
        "kind": "RayCronJob",
        "metadata": {"name": "cron", "namespace": "default", "creationTimestamp": created},
        "spec": {"schedule": schedule, "jobTemplate": template or SELECTOR},
    }
    if status:
        cron["status"] = status
    if labels:
        cron["metadata"]["labels"] = labels
    return {"name": name, "raycronjob": cron, "steps": steps}


H = timedelta(hours=1)
CASES = [
    # KubeRay's unit tests: the first schedule, a create after a missed tick
    _case(
        "first-schedule",
        "*/5 * * * *",
        [
            {"at": "2024-01-01T00:00:00Z"},
            {"at": "2024-01-01T00:00:01Z"},
            {"at": "2024-01-01T00:05:00.400Z"},
            {"at": "2024-01-01T00:07:00Z"},
            {"at": "2024-01-01T00:31:10Z"},
            {"at": "2024-01-01T00:35:00Z"},
        ],
        created="2023-12-31T23:58:30Z",
    ),
    _case(
        "last-schedule-given",
        "*/5 * * * *",
        [{"at": "2024-01-01T00:10:00Z"}, {"at": "2024-01-01T00:15:00Z"}],
        created="2023-12-01T00:00:00Z",
        status={"lastScheduleTime": "2024-01-01T00:00:00Z"},
    ),
    _case("every-5s", "@every 5s", _at("2024-01-01T00:00:02Z", every=timedelta(seconds=3.7), count=40)),
    _case("every-90s", "@every 1m30s", _at("2024-01-01T00:00:00Z", every=timedelta(seconds=41), count=30)),
    _case("hourly", "@hourly", _at("2024-01-01T00:10:00Z", every=timedelta(minutes=25), count=20)),
    _case("daily-jumps", "@daily", _at("2024-01-01T00:00:00Z", every=timedelta(hours=31), count=12)),
    _case("weekly", "@weekly", _at("2024-01-01T00:00:00Z", every=timedelta(hours=20), count=30)),
    _case("monthly", "@monthly", _at("2024-01-01T00:00:00Z", every=timedelta(days=9), count=20)),
    _case("dom-or-dow", "0 0 1,15 * sun", _at("2024-01-01T00:00:00Z", every=timedelta(hours=13), count=80)),
    _case("dom-and-dow", "0 12 * * mon-fri", _at("2024-01-01T00:00:00Z", every=timedelta(hours=7), count=50)),
    _case(
        "named-months", "30 6 1 jan,jul *", _at("2024-01-01T00:00:00Z", every=timedelta(days=20), count=30)
    ),
    _case(
        "steps-ranges",
        "5-50/15 */3 * * *",
        _at("2024-01-01T00:00:00Z", every=timedelta(minutes=17), count=60),
    ),
    _case("leap-day", "0 0 29 2 *", _at("2024-01-01T00:00:00Z", every=timedelta(days=61), count=16)),
    _case(
        "new-york-fall-back",
        "CRON_TZ=America/New_York 30 1 * * *",
        _at("2024-11-02T00:00:00Z", every=H, count=72),
    ),
    _case(
        "new-york-hourly",
        "TZ=America/New_York 0 * * * *",
        _at("2024-11-03T03:00:00Z", every=timedelta(minutes=20), count=18),
    ),
    _case(
        "berlin-spring", "CRON_TZ=Europe/Berlin 30 2 * * *", _at("2024-03-30T00:00:00Z", every=H, count=72)
    ),
    _case(
        "sao-paulo-midnight", "TZ=America/Sao_Paulo 0 0 * * *", _at("2018-11-02T00:00:00Z", every=H, count=72)
    ),
    _case(
        "suspend-and-resume",
        "*/10 * * * *",
        [
            {"at": "2024-01-01T00:10:00Z"},
            {"at": "2024-01-01T00:15:00Z", "spec": {"suspend": True}},
            {"at": "2024-01-01T00:40:00Z"},
            {"at": "2024-01-01T01:05:00Z", "spec": {"suspend": False}},
            {"at": "2024-01-01T01:10:00Z"},
            {"at": "2024-01-01T01:20:00Z"},
        ],
    ),
    _case(
        "schedule-changed",
        "0 * * * *",
        [
            {"at": "2024-01-01T01:00:00Z"},
            {"at": "2024-01-01T01:10:00Z", "spec": {"schedule": "*/2 * * * *"}},
            {"at": "2024-01-01T01:12:00Z"},
            {"at": "2024-01-01T01:14:30Z"},
        ],
    ),
    _case(
        "bad-then-fixed",
        "every day",
        [
            {"at": "2024-01-01T00:01:00Z"},
            {"at": "2024-01-01T00:02:00Z"},
            {"at": "2024-01-01T00:03:00Z", "spec": {"schedule": "* * * * 7"}},
            {"at": "2024-01-01T00:04:00Z"},
            {"at": "2024-01-01T00:05:00Z", "spec": {"schedule": "@every x"}},
            {"at": "2024-01-01T00:06:00Z", "spec": {"schedule": "TZ=Nowhere/Land * * * * *"}},
            {"at": "2024-01-01T00:07:00Z", "spec": {"schedule": "*/2 * * * *"}},
            {"at": "2024-01-01T00:08:00Z"},
        ],
    ),
    _case("bad-template", "* * * * *", [{"at": "2024-01-01T00:01:00Z"}], template={"entrypoint": "x"}),
    _case(
        "bad-template-suspend",
        "* * * * *",
        [{"at": "2024-01-01T00:01:00Z"}],
        template={**SELECTOR, "suspend": True},
    ),
    _case(
        "cluster-template",
        "*/30 * * * *",
        _at("2024-01-01T00:00:00Z", every=timedelta(minutes=20), count=6),
        template=_cluster_template(),
    ),
    _case(
        "labelled",
        "*/30 * * * *",
        _at("2024-01-01T00:00:00Z", every=timedelta(minutes=20), count=4),
        labels={"shard": "a", "team": "ml"},
    ),
]


@functools.cache
def _kuberay() -> dict[str, dict[str, Any]]:
    answers = oracle.build().run(["-raycronjob"], json.dumps(CASES))
    return {a["name"]: a for a in answers}


def _ours(case: dict[str, Any]) -> list[dict[str, Any]]:
    cron = copy.deepcopy(case["raycronjob"])
    cron["metadata"].update(uid=FAKE_UID, generation=1)
    made: dict[str, dict[str, Any]] = {}
    steps = []
    for st in case["steps"]:
        if "spec" in st:
            cron["spec"] = merge_patch(cron["spec"], st["spec"])
        now = parse_time(st["at"])
        assert now is not None
        step = plan_cron(cron, now.astimezone(UTC), made)
        created = []
        if step.create is not None and step.error is None:
            made[step.create.manifest["metadata"]["name"]] = step.create.manifest
            created.append(step.create.manifest)
        if step.status is not None:
            cron["status"] = step.status
        steps.append(
            {
                "created": created,
                "status": copy.deepcopy(cron.get("status") or {}),
                "events": [f"{e.type} {e.reason} {e.message}" for e in step.events],
                "result": {"requeueAfter": step.requeue or 0, "error": step.error},
            }
        )
    return steps


def _differences(case: dict[str, Any], theirs: dict[str, Any], used: Counter[str]) -> list[str]:
    found: list[str] = []
    cron_spec = dict(case["raycronjob"]["spec"])
    for i, (ours, kuberay) in enumerate(zip(_ours(case), theirs["steps"], strict=True)):
        where = f"{case['name']} step {i} ({case['steps'][i]['at']})"
        if "spec" in case["steps"][i]:
            cron_spec = merge_patch(cron_spec, case["steps"][i]["spec"])
        if len(ours["created"]) != len(kuberay["created"]):
            found.append(
                f"{where}: created {len(ours['created'])} RayJobs, KubeRay {len(kuberay['created'])}"
            )
            continue
        for mine, made in zip(ours["created"], kuberay["created"], strict=True):
            m, k = mine["metadata"], made["metadata"]
            for key in ("namespace", "labels", "annotations", "ownerReferences"):
                own = case["raycronjob"]["metadata"].get("labels") or {}
                if key == "labels" and own and m.get(key) == {**own, **(k.get(key) or {})}:
                    used["labels"] += 1
                elif m.get(key) != k.get(key):
                    found.append(f"{where}: RayJob {key} {m.get(key)!r} != KubeRay's {k.get(key)!r}")
            tick = parse_time(m["annotations"]["ray.io/cronjob-scheduled-timestamp"])
            assert tick is not None
            prefix = f"{case['raycronjob']['metadata']['name']}-"
            if (
                m["name"] == rayjob_name("cron", tick)
                and k["name"].startswith(prefix)
                and KUBERAY_NAME.fullmatch(k["name"][len(prefix) :])
            ):
                used["name"] += 1
            else:
                found.append(f"{where}: RayJob name {m['name']} / KubeRay's {k['name']}")
            if mine["spec"] != cron_spec["jobTemplate"] or made["spec"] != theirs["template"]:
                found.append(f"{where}: the RayJob's spec is not the jobTemplate")
        mine_status = dict(ours["status"])
        if mine_status.pop("conditions", None) is not None:
            used["condition"] += 1
        if mine_status != kuberay["status"]:
            found.append(f"{where}: status {mine_status} != KubeRay's {kuberay['status']}")
        if abs(ours["result"]["requeueAfter"] - kuberay["result"]["requeueAfter"]) > 1e-6:
            found.append(f"{where}: requeue {ours['result']} != KubeRay's {kuberay['result']}")
        if ours["result"]["error"] != kuberay["result"]["error"]:
            found.append(f"{where}: error {ours['result']} != KubeRay's {kuberay['result']}")
        if ours["events"] != kuberay["events"]:
            repeat = (
                ours["events"] == []
                and len(kuberay["events"]) == 1
                and kuberay["events"][0].startswith("Warning InvalidRayCronJobSpec ")
                and any(
                    kuberay["events"][0].endswith(c.get("message", "@"))
                    for c in ours["status"].get("conditions") or []
                )
            )
            if repeat:
                used["repeat"] += 1
            else:
                found.append(f"{where}: Events {ours['events']} != KubeRay's {kuberay['events']}")
    return found


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_step_by_step_as_kuberay(case: dict[str, Any]) -> None:
    theirs = _kuberay()[case["name"]]
    assert _differences(case, theirs, Counter()) == []


def test_the_cases_make_rayjobs_and_every_allowed_difference_occurs() -> None:
    used: Counter[str] = Counter()
    created = 0
    for case in CASES:
        _differences(case, _kuberay()[case["name"]], used)
        created += sum(len(s["created"]) for s in _kuberay()[case["name"]]["steps"])
    assert created > 100
    assert set(used) == set(ALLOWED), used


def test_the_judge_fails_on_a_planted_difference() -> None:
    """A RayJob KubeRay made for another tick, and an Event it did not post, are both found."""
    case = CASES[0]
    theirs = copy.deepcopy(_kuberay()[case["name"]])
    theirs["steps"][0]["created"][0]["metadata"]["annotations"]["ray.io/cronjob-scheduled-timestamp"] = "x"
    theirs["steps"][1]["events"] = [
        "Normal SuspendedRayCronJob RayCronJob suspended, no new RayJobs will be created"
    ]
    found = _differences(case, theirs, Counter())
    assert len(found) == 2, found
