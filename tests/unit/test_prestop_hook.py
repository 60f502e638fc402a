"""The drain-on-stop preStop hook (rayscale.controller.prestop, annotation rayscale.io/drain-on-stop):
rendered into each worker's Ray container with the pod's grace period, merged as KubeRay merges (the
template's own preStop kept, with a Warning Event; the rest of its lifecycle kept), never on the
head, and nothing at all without the annotation. The script is valid shell and its program valid
Python."""

from __future__ import annotations

import re
import shutil
import subprocess
from typing import Any

import pytest
from tests.support.builders import cluster, group, pod

from rayscale.api.disruption_annotations import DRAIN_ON_STOP_ANNOTATION
from rayscale.api.raycluster import RayClusterSpec
from rayscale.cluster.meta import ClusterMeta
from rayscale.controller import pods, prestop
from rayscale.controller.expectations import ScaleExpectations
from rayscale.controller.plan import EventType
from rayscale.controller.reconcile import plan_cluster
from rayscale.controller.snapshot import ClusterSnapshot

USERS = {"exec": {"command": ["/bin/sh", "-c", "my-drain"]}}


def body(*groups: dict[str, Any], on: str | None = "true") -> dict[str, Any]:
    out = cluster(*(groups or (group("small"),)))
    if on is not None:
        out["metadata"]["annotations"] = {DRAIN_ON_STOP_ANNOTATION: on}
    return out


def built(b: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The head's and the first group's Ray containers."""
    meta, spec = ClusterMeta.from_body(b), RayClusterSpec.model_validate(b["spec"])
    head = pods.head_pod(meta, spec)
    worker = pods.worker_pod(meta, spec, spec.workers[0], replica_index=0)
    return head["spec"]["containers"][0], worker["spec"]["containers"][0]


def with_template(lifecycle: dict[str, Any] | None = None, grace: int | None = None) -> dict[str, Any]:
    g = group("small")
    if lifecycle is not None:
        g["template"]["spec"]["containers"][0]["lifecycle"] = lifecycle
    if grace is not None:
        g["template"]["spec"]["terminationGracePeriodSeconds"] = grace
    return g


def test_workers_get_the_hook_with_the_grace_period_and_the_head_none() -> None:
    head, worker = built(body())
    assert "lifecycle" not in head
    command = worker["lifecycle"]["preStop"]["exec"]["command"]
    assert command[:2] == ["/bin/sh", "-c"]
    assert command[2] == prestop.script(prestop.DEFAULT_GRACE)
    assert "+ 30 * 1000" in command[2]  # Ray's deadline: the end of the grace period
    assert "time.monotonic() + 25" in command[2]  # the hook returns 5 s before it
    assert "DRAIN_NODE_REASON_PREEMPTION" in command[2]

    _, worker = built(body(with_template(grace=600)))
    script = worker["lifecycle"]["preStop"]["exec"]["command"][2]
    assert "+ 600 * 1000" in script
    assert "time.monotonic() + 595" in script
    _, worker = built(body(with_template(grace=2)))
    assert "time.monotonic() + 0" in worker["lifecycle"]["preStop"]["exec"]["command"][2]


@pytest.mark.parametrize("on", [None, "false"])
def test_without_the_annotation_nothing_changes(on: str | None) -> None:
    head, worker = built(body(with_template(grace=600), on=on))
    assert "lifecycle" not in head
    assert "lifecycle" not in worker
    users = {"preStop": USERS, "postStart": USERS}
    _, worker = built(body(with_template(users), on=on))
    assert worker["lifecycle"] == users


def test_the_templates_own_pre_stop_is_kept_and_the_rest_of_its_lifecycle_too() -> None:
    _, worker = built(body(with_template({"preStop": USERS})))
    assert worker["lifecycle"] == {"preStop": USERS}
    _, worker = built(body(with_template({"postStart": USERS})))
    assert worker["lifecycle"]["postStart"] == USERS
    assert worker["lifecycle"]["preStop"] == prestop.hook(prestop.DEFAULT_GRACE)


def test_a_kept_pre_stop_is_said_in_a_warning_event_when_its_pods_are_created() -> None:
    b = body(with_template({"preStop": USERS}), group("other"))
    plan, _ = plan_cluster(ClusterSnapshot(b, [pod("h", "headgroup")], []), ScaleExpectations())
    warned = [e for e in plan.events if e.reason == "DrainOnStopSkipped"]
    assert [e.type for e in warned] == [EventType.WARNING]
    assert warned[0].message.startswith("Worker group small: its Ray container has a preStop hook of its own")
    assert DRAIN_ON_STOP_ANNOTATION in warned[0].message
    # no Event without the annotation, nor when no pod of the group is created
    b = body(with_template({"preStop": USERS}), on=None)
    plan, _ = plan_cluster(ClusterSnapshot(b, [pod("h", "headgroup")], []), ScaleExpectations())
    assert not [e for e in plan.events if e.reason == "DrainOnStopSkipped"]
    b = body(with_template({"preStop": USERS}))
    running = [pod("h", "headgroup"), pod("rc-small-worker-a", "small", index=0)]
    plan, _ = plan_cluster(ClusterSnapshot(b, running, []), ScaleExpectations())
    assert not [e for e in plan.events if e.reason == "DrainOnStopSkipped"]


def test_the_script_is_shell_and_its_program_python() -> None:
    script = prestop.script(45)
    (program,) = re.findall(r"<<'EOF' \|\| true\n(.*?)\nEOF$", script, re.S)
    compile(program, "prestop", "exec")
    sh = shutil.which("sh")
    assert sh is not None
    checked = subprocess.run([sh, "-n", "-c", script], capture_output=True, text=True, check=False)
    assert checked.returncode == 0, checked.stderr
