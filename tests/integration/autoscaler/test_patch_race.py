"""A user edit racing the autoscaler's patch is not lost.

The autoscaler plans on the RayCluster its watch delivered, which can be a version behind the API
server: a user (kubectl, a CI job) edits the cluster in between. Its JSON patch addresses groups by
index and rewrites whole fields (``replicas``, ``scaleStrategy``) computed from the old version, so
applied blindly it would undo or misplace the edit. The patch starts with
``{"op": "test", "path": "/metadata/generation", "value": <the planned-on generation>}``: the
API server refuses it (422), and the loop re-plans on the cluster read fresh. A status write in
between (the controller's, every few seconds on a busy cluster) leaves the generation alone: the
patch lands without a second read.

The in-process tests make the race deterministic: an ``Autoscaler`` (rayscale.autoscaler.loop) runs
one round against the local control plane with a source whose RayCluster is a copy taken *before*
the user's edit reached the API server. Each case says what the stale patch would do without the
``test`` op; ``test_without_the_test_op_the_edit_is_lost`` proves it by stripping that op, so the
main test can fail. Pods come from the source (no controller runs): only the RayCluster races.

The last test runs ``rayscale run`` and edits the cluster while it scales (a race that may or may
not happen in a given run): the end state must hold both the edit and the request.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import pytest
from kubernetes_asyncio import client

from rayscale.api.names import RAYRESOURCEREQUEST
from rayscale.autoscaler import decide
from rayscale.autoscaler.loop import Autoscaler, AutoscalerConfig
from rayscale.autoscaler.patch import ClusterPatch, build_patch
from rayscale.common.retry import Failed
from rayscale.kube import ops
from tests.support.builders import BASIC as NAME
from tests.support.builders import cpu_and_gpu_cluster, gpu_request
from tests.support.fakes import EventLog, FakeSource
from tests.support.kube import Kube
from tests.support.operators import Operator
from tests.support.polling import eventually

pytestmark = pytest.mark.integration
Groups = dict[str, dict[str, Any]]


# ----------------------------------------------------------------------------- the races


@dataclass(frozen=True)
class Race:
    """A RayCluster, the user's edit (JSON patch ops) made after the autoscaler's copy was taken,
    and what must hold afterwards (`honoured`) and what the stale patch would leave (`lost`)."""

    id: str
    groups: Callable[[], list[dict[str, Any]]]
    edit: list[dict[str, Any]]
    cpu_bundles: int  # a RayResourceRequest for this many {CPU: 1} (0: none)
    pods: tuple[str, ...]  # running workers of group `cpu`
    honoured: Callable[[Groups], bool]
    lost: Callable[[Groups], bool]


def cpu_group(**fields: Any) -> dict[str, Any]:
    group: dict[str, Any] = cpu_and_gpu_cluster()["spec"]["workerGroupSpecs"][0]  # cpu, 1 CPU per pod
    group.update({"replicas": 0, "minReplicas": 0, "maxReplicas": 10, **fields})
    return group


def gpu_group() -> dict[str, Any]:
    group: dict[str, Any] = cpu_and_gpu_cluster()["spec"]["workerGroupSpecs"][1]  # gpu, 1 GPU per pod
    group.update({"replicas": 0, "minReplicas": 0, "maxReplicas": 4})
    return group


def _deletes(group: dict[str, Any]) -> list[str]:
    return list((group.get("scaleStrategy") or {}).get("workersToDelete") or [])


RACES = [
    # The user scales down by hand, naming the pod to go (KubeRay's way). The autoscaler's copy
    # still lists a pod deleted earlier; it clears that list now the pod is gone. Blind, its
    # `replace .../scaleStrategy` wipes the user's choice and replicas 1 deletes whichever pod.
    Race(
        "user-names-a-pod-to-delete",
        lambda: [cpu_group(replicas=2, scaleStrategy={"workersToDelete": ["cpu-gone"]})],
        [
            {"op": "replace", "path": "/spec/workerGroupSpecs/0/replicas", "value": 1},
            {
                "op": "replace",
                "path": "/spec/workerGroupSpecs/0/scaleStrategy",
                "value": {"workersToDelete": ["cpu-a"]},
            },
        ],
        0,
        ("cpu-a", "cpu-b"),
        honoured=lambda g: g["cpu"]["replicas"] == 1 and _deletes(g["cpu"]) == ["cpu-a"],
        lost=lambda g: g["cpu"]["replicas"] == 1 and _deletes(g["cpu"]) == [],
    ),
    # The user adds a group in front: `cpu` moves from index 0 to 1. Blind, the stale patch's
    # `replace /spec/workerGroupSpecs/0/replicas` scales the new GPU group instead of `cpu`.
    Race(
        "user-inserts-a-group-in-front",
        lambda: [cpu_group()],
        [{"op": "add", "path": "/spec/workerGroupSpecs/0", "value": gpu_group()}],
        2,
        (),
        honoured=lambda g: g["gpu"]["replicas"] == 0 and g["cpu"]["replicas"] == 2,
        lost=lambda g: g["gpu"]["replicas"] == 2 and g["cpu"]["replicas"] == 0,
    ),
    # The user raises minReplicas to 3 while 2 bundles are requested. Blind, the stale patch sets
    # replicas 2, below the user's minimum; re-planned, the group goes to its minimum.
    Race(
        "user-raises-min-replicas",
        lambda: [cpu_group()],
        [{"op": "replace", "path": "/spec/workerGroupSpecs/0/minReplicas", "value": 3}],
        2,
        (),
        honoured=lambda g: g["cpu"]["minReplicas"] == 3 and g["cpu"]["replicas"] == 3,
        lost=lambda g: g["cpu"]["minReplicas"] == 3 and g["cpu"]["replicas"] == 2,
    ),
]


# ----------------------------------------------------------------------------- in-process parts


def worker_pod(name: str, namespace: str) -> dict[str, Any]:
    labels = {"ray.io/cluster": NAME, "ray.io/group": "cpu", "ray.io/node-type": "worker"}
    meta = {
        "name": name,
        "namespace": namespace,
        "labels": labels,
        "creationTimestamp": "2026-01-01T00:00:00Z",
    }
    ready = [{"type": "Ready", "status": "True"}]
    return {"metadata": meta, "status": {"phase": "Running", "conditions": ready}}


class Spy:
    """The autoscaler's RayCluster patches (each with the HTTP status it got) and fresh reads."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.patches: list[tuple[list[dict[str, Any]], int]] = []
        self.reads = 0
        patch, read = ops.json_patch_raycluster, ops.get_raycluster

        async def json_patch(api: client.ApiClient, ns: str, name: str, body: list[dict[str, Any]]) -> None:
            try:
                await patch(api, ns, name, body)
            except ops.KubeError as exc:
                self.patches.append((body, exc.status))
                raise
            self.patches.append((body, 200))

        async def get(api: client.ApiClient, ns: str, name: str) -> dict[str, Any] | None:
            self.reads += 1
            return await read(api, ns, name)

        monkeypatch.setattr(ops, "json_patch_raycluster", json_patch)
        monkeypatch.setattr(ops, "get_raycluster", get)


def cluster_body(race: Race) -> dict[str, Any]:
    body = cpu_and_gpu_cluster()  # GCS unreachable: running pods are kept, never idle
    body["spec"]["workerGroupSpecs"] = race.groups()
    return body


def cpu_request(count: int) -> dict[str, Any]:
    body = gpu_request(count)  # for `count` x {GPU: 1}
    body["metadata"]["name"] = "reserve-cpus"
    body["spec"]["bundles"][0]["resources"] = {"CPU": 1}
    return body


@dataclass(frozen=True)
class Round:
    stale_version: int  # the generation the autoscaler planned on first
    after: float | Failed | None  # what the round returned (seconds to the next one)
    groups: Groups  # as the API server has them after the round


async def race_one_round(
    api: client.ApiClient, namespace: str, race: Race, status: dict[str, Any] | None = None
) -> Round:
    """Create the cluster, take the autoscaler's copy, make the user's edit (and the `status`
    write, if any), run one round."""
    kube = Kube(api, namespace)
    stale = await kube.create(cluster_body(race))
    requests = []
    if race.cpu_bundles:
        requests.append(
            await kube.objects.create_namespaced_custom_object(
                *RAYRESOURCEREQUEST.at(namespace), cpu_request(race.cpu_bundles)
            )
        )
    if race.edit:
        await kube.patch_json(NAME, race.edit)  # the user, after the copy was taken
    if status is not None:
        assert await ops.patch_raycluster_status(api, namespace, NAME, {"status": status})
    pods = [worker_pod(n, namespace) for n in race.pods]
    config = AutoscalerConfig(gcs_timeout=0.5, gcs_retries=0)
    # What the autoscaler's watch-fed indexes hold: the cluster as it was before the user's edit.
    stale_source = FakeSource(stale, pods, requests)
    autoscaler = Autoscaler(api, stale_source, EventLog(), config)
    try:
        after = await autoscaler.step((namespace, NAME))
    finally:
        await autoscaler.close()  # the GCS channel
    specs = (await kube.get(NAME))["spec"]["workerGroupSpecs"]
    groups = {g["groupName"]: g for g in specs}
    return Round(stale["metadata"]["generation"], after, groups)


# ----------------------------------------------------------------------------- tests


@pytest.mark.parametrize("race", RACES, ids=[r.id for r in RACES])
async def test_a_stale_patch_is_refused_and_the_round_replans_on_fresh_state(
    api: client.ApiClient, namespace: str, raycluster_crd: None, race: Race, monkeypatch: pytest.MonkeyPatch
) -> None:
    spy = Spy(monkeypatch)
    done = await race_one_round(api, namespace, race)

    first, status = spy.patches[0]
    assert first[0] == {"op": "test", "path": "/metadata/generation", "value": done.stale_version}
    assert status in ops.TEST_FAILED, f"the stale patch was not refused: {status}"
    assert spy.reads == 1, "the round did not re-read the cluster"
    assert all(s == 200 for _, s in spy.patches[1:])
    assert done.after == AutoscalerConfig().interval  # the round ended with a decision, no retry
    assert race.honoured(done.groups), done.groups
    assert not race.lost(done.groups)


@pytest.mark.parametrize("race", RACES, ids=[r.id for r in RACES])
async def test_without_the_test_op_the_edit_is_lost(
    api: client.ApiClient, namespace: str, raycluster_crd: None, race: Race, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The control: the same round with the generation test stripped from the patch."""
    build = build_patch  # the round's, which the test replaces

    def untested(*args: Any) -> ClusterPatch | None:
        patch = build(*args)
        return None if patch is None else replace(patch, ops=[op for op in patch.ops if op["op"] != "test"])

    monkeypatch.setattr(decide, "build_patch", untested)
    done = await race_one_round(api, namespace, race)
    assert race.lost(done.groups), done.groups
    assert not race.honoured(done.groups)


async def test_a_status_write_in_between_refuses_nothing(
    api: client.ApiClient, namespace: str, raycluster_crd: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The controller writes the status after the autoscaler's copy was taken: the resourceVersion
    moved, the spec did not, and the patch planned on the copy lands at once."""
    spy = Spy(monkeypatch)
    untouched = replace(RACES[2], edit=[])  # two bundles requested, nobody edits the spec
    done = await race_one_round(api, namespace, untouched, status={"observedGeneration": 1})
    assert [s for _, s in spy.patches] == [200]
    assert spy.reads == 0
    assert done.groups["cpu"]["replicas"] == 2


async def test_user_edits_while_the_operator_scales(
    api: client.ApiClient, namespace: str, autoscaling_operator: Operator
) -> None:
    """`rayscale run` scales the GPU group for a request while the user inserts a group in front
    and raises the CPU group's minimum: the end state holds every edit and the request."""
    kube = Kube(api, namespace)
    await kube.create(cpu_and_gpu_cluster())  # groups cpu (index 0) and gpu (index 1)
    await kube.objects.create_namespaced_custom_object(*RAYRESOURCEREQUEST.at(namespace), gpu_request(3))
    spare = cpu_group(groupName="spare", replicas=1, minReplicas=1, maxReplicas=1)
    await kube.patch_json(
        NAME,
        [{"op": "add", "path": "/spec/workerGroupSpecs/0", "value": spare},
         {"op": "replace", "path": "/spec/workerGroupSpecs/1/minReplicas", "value": 2}],
    )  # fmt: skip

    async def settled() -> Groups | None:
        body = await kube.objects.get_namespaced_custom_object(
            *RAYRESOURCEREQUEST.at(namespace), "reserve-gpus"
        )
        if (body.get("status") or {}).get("phase") != "Satisfied":
            return None
        specs = (await kube.get(NAME))["spec"]["workerGroupSpecs"]
        groups = {g["groupName"]: g for g in specs}
        replicas = {name: g.get("replicas") for name, g in groups.items()}
        return groups if replicas == {"spare": 1, "cpu": 2, "gpu": 3} else None

    groups = await eventually(settled, timeout=90, message="request Satisfied with spare 1, cpu 2, gpu 3")
    assert list(groups) == ["spare", "cpu", "gpu"]
    assert groups["cpu"]["minReplicas"] == 2
    for name, count in {"spare": 1, "cpu": 2, "gpu": 3}.items():
        running = functools.partial(kube.running_workers, NAME, count, group=name)
        await eventually(running, timeout=60, message=f"{count} {name} workers Running")
