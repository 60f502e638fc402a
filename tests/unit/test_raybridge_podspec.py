"""The Ray bridge's pure part: the Ray worker a pod stands for (e2e/raybridge/podspec.py)."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from e2e.raybridge import podspec
from e2e.raybridge.bridge import head_params
from tests.support.builders import cluster, container, group

from rayscale.api.raycluster import RayClusterSpec
from rayscale.cluster.meta import ClusterMeta
from rayscale.controller import pods


def _generated(body: dict[str, Any], index: int = 0, name: str = "rc-g-worker-abcde") -> dict[str, Any]:
    """A worker pod as rayscale's controller builds it, named and Running as kwok leaves it."""
    spec = RayClusterSpec.model_validate(body["spec"])
    pod = pods.worker_pod(ClusterMeta.from_body(body), spec, spec.workers[index], replica_index=0)
    pod["metadata"]["name"] = name
    pod["status"] = {"phase": "Running"}
    return pod


def test_spec_from_the_generated_command_of_a_gpu_group_with_custom_resources_and_labels() -> None:
    g = group(
        "g",
        rayStartParams={"num-cpus": "2", "resources": '"{\\"Custom\\": 3}"'},
        labels={"zone": "a", "tier": "gold"},
        template={
            "spec": {
                "containers": [container("ray-worker", cpu="4", memory="1Gi", **{"nvidia.com/gpu": "2"})]
            }
        },
    )
    spec = podspec.worker_spec(_generated(cluster(g)))
    assert spec == podspec.WorkerSpec(
        pod="rc-g-worker-abcde",
        group="g",
        num_cpus=2.0,  # rayStartParams wins over the container's 4 CPUs
        num_gpus=2.0,  # from the container limits
        memory=1024**3,
        resources={"Custom": 3.0},
        labels={"tier": "gold", "zone": "a"},
    )


def test_cpus_from_the_container_when_the_params_say_nothing() -> None:
    spec = podspec.worker_spec(_generated(cluster(group("g"))))
    assert (spec.num_cpus, spec.num_gpus, spec.resources, spec.labels) == (1.0, None, {}, {})
    assert spec.memory == 2 * 1024**3


def test_tpu_resources_of_a_multi_host_group() -> None:
    g = group(
        "g", hosts=2, template={"spec": {"containers": [container("ray-worker", **{"google.com/tpu": "4"})]}}
    )
    assert podspec.worker_spec(_generated(cluster(g))).resources == {"TPU": 4.0}


def test_command_from_the_args_when_the_env_var_is_missing() -> None:
    pod = _generated(cluster(group("g", rayStartParams={"num-cpus": "3"})))
    env = pod["spec"]["containers"][0]["env"]
    pod["spec"]["containers"][0]["env"] = [e for e in env if e["name"] != podspec.GEN_CMD_ENV]
    assert "ulimit" in pod["spec"]["containers"][0]["args"][0]  # the args hold more than ray start
    assert podspec.worker_spec(pod).num_cpus == 3.0


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("ray start --num-cpus=1 --block", {"num-cpus": "1", "block": "true"}),
        ("ray start --address host:6379 --block", {"address": "host:6379", "block": "true"}),
        ("ulimit -n 65536; ray start --resources='{\"a\": 1}'", {"resources": '{"a": 1}'}),
        ("ray start --head --port=6379", {"head": "true", "port": "6379"}),
    ],
)
def test_parse_ray_start(command: str, expected: dict[str, str]) -> None:
    assert podspec.parse_ray_start(command) == expected


@pytest.mark.parametrize("command", ["python app.py --num-cpus=1", "ray start --resources='{"])
def test_parse_ray_start_refuses(command: str) -> None:
    with pytest.raises(podspec.PodSpecError):
        podspec.parse_ray_start(command)


def test_labels_in_both_formats() -> None:
    assert podspec.parse_labels("a=1, b=x") == {"a": "1", "b": "x"}
    assert podspec.parse_labels('{"a": "1"}') == {"a": "1"}
    assert podspec.parse_labels("") == {}
    with pytest.raises(podspec.PodSpecError):
        podspec.parse_labels("novalue")


def test_only_running_workers_of_the_cluster_that_are_not_deleted_are_wanted() -> None:
    body = cluster(group("g"))
    running = _generated(body, name="w-running")
    pending = copy.deepcopy(running) | {"status": {"phase": "Pending"}}
    pending["metadata"] = running["metadata"] | {"name": "w-pending"}
    deleting = copy.deepcopy(running)
    deleting["metadata"] |= {"name": "w-deleting", "deletionTimestamp": "2026-01-01T00:00:00Z"}
    other = copy.deepcopy(running)
    other["metadata"] |= {
        "name": "w-other",
        "labels": running["metadata"]["labels"] | {"ray.io/cluster": "x"},
    }
    broken = copy.deepcopy(running)
    broken["metadata"]["name"] = "w-broken"
    broken["spec"]["containers"][0] |= {"env": [], "args": ["sleep infinity"]}
    wanted, errors = podspec.wanted_workers([running, pending, deleting, other, broken], "rc")
    assert list(wanted) == ["w-running"]
    assert list(errors) == ["w-broken"]
    assert "no generated" in errors["w-broken"]


def test_head_params_from_the_head_group() -> None:
    body = cluster(group("g"))
    assert head_params(body) == {"num_cpus": 0.0}
    body["spec"]["headGroupSpec"]["rayStartParams"] = {
        "num-cpus": "2",
        "num-gpus": "1",
        "resources": '{"h": 1}',
    }
    assert head_params(body) == {"num_cpus": 2.0, "num_gpus": 1.0, "resources": {"h": 1.0}}


@pytest.mark.parametrize(
    ("init", "seconds"),
    [
        pytest.param([{"name": "init-sleep", "command": ["sleep", "15"]}], 15, id="command"),
        pytest.param([{"name": "i", "command": ["sleep"], "args": ["2.5"]}], 2.5, id="args"),
        pytest.param([{"name": "i", "command": ["/bin/sh", "-c", "sleep 3"]}], 3, id="shell"),
        pytest.param(
            [{"name": "a", "command": ["sleep", "1"]}, {"name": "b", "args": ["sleep", "2"]}], 3, id="two"
        ),
        pytest.param(
            [{"name": "i", "command": ["sh", "-c", "until nslookup x; do sleep 2; done"]}],
            0,
            id="not-just-a-sleep",
        ),
        pytest.param([], 0, id="none"),
    ],
)
def test_init_containers_that_sleep_delay_the_start(init: list[dict[str, Any]], seconds: float) -> None:
    pod = _generated(cluster(group("g")))
    pod["spec"]["initContainers"] = init
    assert podspec.worker_spec(pod).start_delay == seconds


def _head(name: str, uid: str, phase: str = "Running", *, deleting: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": name,
        "uid": uid,
        "labels": {"ray.io/cluster": "rc", "ray.io/node-type": "head"},
    }
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {"metadata": meta, "status": {"phase": phase}}


def test_the_live_head_is_the_running_head_pod_that_is_not_being_deleted() -> None:
    worker = _generated(cluster(group("g")), name="w")
    assert podspec.live_head([worker], "rc") is None
    assert podspec.live_head([_head("h1", "u1", "Pending"), worker], "rc") is None
    assert podspec.live_head([_head("h1", "u1", deleting=True)], "rc") is None
    assert podspec.live_head([_head("h1", "u1", deleting=True), _head("h1", "u2")], "rc") == "h1 u2"
    assert podspec.live_head([_head("h1", "u1")], "other") is None


@pytest.mark.parametrize(
    ("running", "bound", "live", "action"),
    [
        pytest.param(True, None, None, "keep", id="the first head runs before any head pod"),
        pytest.param(True, None, "h u1", "adopt", id="the first Running head pod adopts it"),
        pytest.param(True, "h u1", "h u1", "keep", id="its pod runs"),
        pytest.param(True, "h u1", None, "stop", id="its pod is deleted"),
        pytest.param(False, None, None, "keep", id="no head pod runs: none"),
        pytest.param(False, None, "h u2", "start", id="a new head pod runs: a new head"),
        pytest.param(True, "h u1", "h u2", "restart", id="replaced before the bridge saw it go"),
        pytest.param(False, "h u1", "h u1", "start", id="the head exited while its pod runs"),
    ],
)
def test_the_ray_head_follows_the_head_pod(
    running: bool, bound: str | None, live: str | None, action: str
) -> None:
    assert podspec.head_action(running=running, bound=bound, live=live) == action
