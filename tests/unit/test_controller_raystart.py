"""`ray start` flags from rayStartParams and container resources."""

from __future__ import annotations

from typing import Any

import pytest

from rayscale.cluster import naming
from rayscale.controller import raystart


@pytest.mark.parametrize(
    ("params", "head", "expected"),
    [
        ({"block": "true", "num-cpus": "2"}, True, "ray start --head --block --num-cpus=2"),
        ({"disable-usage-stats": "True", "x": "False"}, False, "ray start --disable-usage-stats"),
        ({"log-color": "true", "include-dashboard": "false"}, True,
         "ray start --head --include-dashboard=false --log-color=true"),
        ({"b": "1", "a": "2"}, False, "ray start --a=2 --b=1"),
    ],
)  # fmt: skip
def test_render(params: dict[str, str], head: bool, expected: str) -> None:
    assert raystart.render(params, is_head=head) == expected


def _params(
    container: dict[str, Any], *, head: bool = False, autoscaling: bool = False, **kw: Any
) -> dict[str, str]:
    return raystart.start_params(
        user_params=kw.get("user"),
        group_resources=kw.get("resources"),
        group_labels=kw.get("labels"),
        container=container,
        is_head=head,
        head_address="rc-head-svc.ns.svc.cluster.local:6379",
        autoscaling=autoscaling,
    )


def _limits(**limits: str) -> dict[str, Any]:
    return {"resources": {"limits": limits}}


@pytest.mark.parametrize(
    ("container", "key", "value"),
    [
        (_limits(cpu="500m"), "num-cpus", "1"),
        (_limits(cpu="2500m"), "num-cpus", "3"),
        ({"resources": {"requests": {"cpu": "1500m"}}}, "num-cpus", "2"),
        ({"resources": {"limits": {"cpu": "0"}, "requests": {"cpu": "4"}}}, "num-cpus", "4"),
        (_limits(memory="2Gi"), "memory", "2147483648"),
        ({"resources": {"requests": {"memory": "2Gi"}}}, "memory", None),
        (_limits(**{"nvidia.com/gpu": "2"}), "num-gpus", "2"),
        (_limits(**{"amd.com/gpu": "1", "nvidia.com/gpu": "0"}), "num-gpus", "1"),
        (_limits(**{"google.com/tpu": "4"}), "resources", """'{"TPU":4}'"""),
        (_limits(**{"aws.amazon.com/neuroncore": "2"}), "resources", """'{"neuron_cores":2}'"""),
        (_limits(**{"nvidia.com/mig-1g.5gb": "2"}), "num-gpus", "2"),
        (_limits(memory="1.5"), "memory", "2"),
    ],
)
def test_container_resources(container: dict[str, Any], key: str, value: str | None) -> None:
    assert _params(container).get(key) == value


def test_user_params_win_over_container() -> None:
    params = _params(_limits(cpu="8", memory="1Gi"), user={"num-cpus": "0", "memory": "5"})
    assert params["num-cpus"] == "0"
    assert params["memory"] == "5"


def test_tpu_not_added_when_resources_param_has_tpu() -> None:
    params = _params(_limits(**{"google.com/tpu": "4"}), user={"resources": "'{\"TPU\": 8}'"})
    assert params["resources"] == "'{\"TPU\": 8}'"


def test_tpu_merged_into_existing_resources_param() -> None:
    params = _params(_limits(**{"google.com/tpu": "4"}), user={"resources": "'{\"Custom\": 1}'"})
    assert params["resources"] == """'{"Custom":1,"TPU":4}'"""


def test_group_resources_and_labels_override() -> None:
    params = _params(
        _limits(cpu="8"),
        resources={"cpu": "3", "memory": "1Gi", "nvidia.com/gpu": "1", "Custom": "2"},
        labels={"zone": "a", "accel": "x"},
    )
    assert params["num-cpus"] == "3"
    assert params["memory"] == "1073741824"
    assert params["num-gpus"] == "1"
    assert params["resources"] == """'{"Custom":2}'"""
    assert params["labels"] == "accel=x,zone=a"


def test_group_resources_round_up_to_what_ray_start_takes() -> None:
    resources = {"cpu": "500m", "memory": "1.5", "nvidia.com/mig-2g.10gb": "1"}
    params = _params(_limits(cpu="8"), resources=resources)
    assert (params["num-cpus"], params["memory"], params["num-gpus"]) == ("1", "2", "1")


def test_worker_defaults() -> None:
    params = _params({}, user={"block": "false"})
    assert params == {
        "address": "rc-head-svc.ns.svc.cluster.local:6379",
        "block": "true",
        "dashboard-agent-listen-port": "52365",
        "metrics-export-port": "8080",
    }


def test_head_defaults_with_autoscaling() -> None:
    params = _params({}, head=True, autoscaling=True, user={"no-monitor": "false"})
    assert params["no-monitor"] == "true"
    assert params["dashboard-host"] == "0.0.0.0"
    assert "address" not in params
    assert raystart.render(params, is_head=True).startswith("ray start --head --block ")


def test_head_port() -> None:
    assert naming.gcs_port(None) == 6379
    assert naming.gcs_port({"port": "6380"}) == 6380
