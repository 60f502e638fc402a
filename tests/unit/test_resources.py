"""Quantities and the Ray resources of one host, as KubeRay and Ray's autoscaler derive them."""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Any

import pytest

from rayscale.api.raycluster import HeadGroupSpec, WorkerGroupSpec
from rayscale.cluster.accelerators import tpu_accelerator_type
from rayscale.cluster.host import host_labels
from rayscale.cluster.host import host_resources as typed_host_resources
from rayscale.resources import QuantityError, parse_quantity, parse_resource_map, parse_resources_param

GI = 1024**3


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1", Decimal(1)),
        ("500m", Decimal("0.5")),
        ("1500m", Decimal("1.5")),
        ("100n", Decimal("1E-7")),
        ("250u", Decimal("0.00025")),
        ("1Ki", Decimal(1024)),
        ("32Gi", Decimal(32 * GI)),
        ("1Ti", Decimal(1024**4)),
        ("1Mi", Decimal(1024**2)),
        ("4k", Decimal(4000)),
        ("2M", Decimal(2_000_000)),
        ("3G", Decimal(3 * 10**9)),
        ("1T", Decimal(10**12)),
        ("1E", Decimal(10**18)),
        ("1e3", Decimal(1000)),
        ("1.5E2", Decimal(150)),
        ("2e-3", Decimal("0.002")),
        (" 0.25 ", Decimal("0.25")),
        (".5", Decimal("0.5")),
        (7, Decimal(7)),
        (0.5, Decimal("0.5")),
    ],
)
def test_parse_quantity(text: str | int | float, expected: Decimal) -> None:
    assert parse_quantity(text) == expected


@pytest.mark.parametrize("bad", ["", "abc", "1ki", "Gi", "1.2.3", "1_000", "nan", "inf", "1Gb", True, None])
def test_parse_quantity_rejects(bad: Any) -> None:
    with pytest.raises(QuantityError):
        parse_quantity(bad)


def test_parse_resource_map_accepts_quantities() -> None:
    assert parse_resource_map({"CPU": 8, "memory": "32Gi", "GPU": "1"}) == {
        "CPU": 8.0,
        "memory": float(32 * GI),
        "GPU": 1.0,
    }
    with pytest.raises(QuantityError, match="memory"):
        parse_resource_map({"memory": "lots"})


@pytest.mark.parametrize(
    "text",
    ['{"TPU": 4}', "'{\"TPU\": 4}'", '"{\\"TPU\\": 4}"', " '{\"TPU\":4}' "],
)
def test_resources_param_forms(text: str) -> None:
    assert parse_resources_param(text) == {"TPU": 4.0}


@pytest.mark.parametrize("text", ["[1]", "{TPU: 4}", '{"TPU": "x"}'])
def test_resources_param_rejects(text: str) -> None:
    with pytest.raises(QuantityError, match=r"rayStartParams\.resources"):
        parse_resources_param(text)


@pytest.mark.parametrize(
    ("topology", "accelerator", "expected"),
    [
        ("2x2x1", "tpu-v4-podslice", "v4-8"),
        ("4x4", "tpu-v6e-slice", "v6e-16"),
        ("2x4", "tpu-v5-lite-podslice", "v5e-8"),
        ("2x2x2", "tpu-v5p-slice", "v5p-16"),
        ("4x4", "tpu-unknown", None),
        ("", "tpu-v6e-slice", None),
        ("4xq", "tpu-v6e-slice", None),
    ],
)
def test_tpu_accelerator_type(topology: str, accelerator: str, expected: str | None) -> None:
    assert tpu_accelerator_type(topology, accelerator) == expected


def host_resources(spec: dict[str, Any]) -> dict[str, float]:
    """`host_resources` of a group given as YAML (a plain mapping)."""
    return typed_host_resources(WorkerGroupSpec.model_validate({"groupName": "g", "template": {}} | spec))


def group(
    limits: dict[str, Any] | None = None,
    requests: dict[str, Any] | None = None,
    params: dict[str, str] | None = None,
    resources: dict[str, str] | None = None,
    node_selector: dict[str, str] | None = None,
) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "ray-worker", "resources": {}}
    if limits is not None:
        container["resources"]["limits"] = limits
    if requests is not None:
        container["resources"]["requests"] = requests
    spec: dict[str, Any] = {
        "containers": [container, {"name": "sidecar", "resources": {"limits": {"cpu": 9}}}]
    }
    if node_selector is not None:
        spec["nodeSelector"] = node_selector
    out: dict[str, Any] = {"groupName": "g", "template": {"spec": spec}}
    if params is not None:
        out["rayStartParams"] = params
    if resources is not None:
        out["resources"] = resources
    return out


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        # CPU rounds up from limits; memory from limits; the sidecar is ignored.
        (group(limits={"cpu": "500m", "memory": "1Gi"}), {"CPU": 1, "memory": GI}),
        (group(limits={"cpu": "8", "memory": "32Gi"}), {"CPU": 8, "memory": 32 * GI}),
        # requests only when limits are missing
        (group(requests={"cpu": "2", "memory": "4Gi"}), {"CPU": 2, "memory": 4 * GI}),
        (group(limits={"cpu": "3"}, requests={"cpu": "1", "memory": "2Gi"}), {"CPU": 3, "memory": 2 * GI}),
        # GPU: the first GPU-like limits key, rounded up
        (group(limits={"cpu": "4", "nvidia.com/gpu": "1"}), {"CPU": 4, "GPU": 1}),
        (group(limits={"cpu": "4", "amd.com/gpu": "0", "nvidia.com/gpu": "2"}), {"CPU": 4, "GPU": 2}),
        # TPUs and Neuron cores from limits
        (group(limits={"cpu": "8", "google.com/tpu": "4"}), {"CPU": 8, "TPU": 4}),
        (group(limits={"cpu": "8", "aws.amazon.com/neuroncore": "2"}), {"CPU": 8, "neuron_cores": 2}),
        # rayStartParams override the container
        (
            group(limits={"cpu": "8", "nvidia.com/gpu": "1"}, params={"num-cpus": "1", "num-gpus": "0"}),
            {"CPU": 1},
        ),
        (group(limits={"cpu": "1"}, params={"memory": "1000"}), {"CPU": 1, "memory": 1000}),
        (group(limits={"cpu": "1"}, params={"num-cpus": "0"}), {}),
        (
            group(limits={"cpu": "1"}, params={"resources": "'{\"CustomResource\": 1}'"}),
            {"CPU": 1, "CustomResource": 1},
        ),
        # a TPU named in params suppresses the container's accelerator
        (
            group(limits={"cpu": "1", "google.com/tpu": "8"}, params={"resources": '{"TPU": 4}'}),
            {"CPU": 1, "TPU": 4},
        ),
        # the group resources map overrides everything
        (
            group(
                limits={"cpu": "8", "memory": "32Gi"},
                params={"num-cpus": "4"},
                resources={"cpu": "2", "memory": "1Gi", "nvidia.com/gpu": "0.5", "Custom": "3"},
            ),
            {"CPU": 2, "memory": GI, "GPU": 1, "Custom": 3},
        ),
        # whole CPUs, as ray start gets them; NVIDIA MIG slices are GPUs
        (group(limits={"cpu": "8"}, resources={"cpu": "500m"}), {"CPU": 1}),
        (group(limits={"cpu": "2", "nvidia.com/mig-1g.5gb": "2"}), {"CPU": 2, "GPU": 2}),
        # GKE TPU node selectors add the slice head resource
        (
            group(
                limits={"cpu": "1", "google.com/tpu": "4"},
                node_selector={
                    "cloud.google.com/gke-tpu-topology": "4x4",
                    "cloud.google.com/gke-tpu-accelerator": "tpu-v6e-slice",
                },
            ),
            {"CPU": 1, "TPU": 4, "TPU-v6e-16-head": 1},
        ),
        (
            group(
                params={"num-cpus": "1", "resources": "'{\"TPU\":4}'"},
                node_selector={
                    "cloud.google.com/gke-tpu-topology": "2x2x1",
                    "cloud.google.com/gke-tpu-accelerator": "tpu-v4-podslice",
                },
            ),
            {"CPU": 1, "TPU": 4, "TPU-v4-8-head": 1},
        ),
        # no CPU anywhere: no CPU key (Ray would detect the machine's cores)
        ({"groupName": "g", "template": {"spec": {"containers": [{"name": "c"}]}}}, {}),
        ({"groupName": "g"}, {}),
    ],
)
def test_host_resources(spec: dict[str, Any], expected: dict[str, float]) -> None:
    assert host_resources(spec) == {key: float(value) for key, value in expected.items()}


def test_host_resources_head_is_derived_the_same_way() -> None:
    spec = group(limits={"cpu": "2", "memory": "4G"}, params={"num-cpus": "0"})
    del spec["groupName"]
    assert typed_host_resources(HeadGroupSpec.model_validate(spec)) == {"memory": 4e9}


def test_host_resources_names_the_bad_field() -> None:
    with pytest.raises(QuantityError, match="num-cpus"):
        host_resources(group(params={"num-cpus": "many"}))
    with pytest.raises(QuantityError, match=r"resources\.cpu"):
        host_resources(group(resources={"cpu": "x"}))


def test_host_labels() -> None:
    spec = {"rayStartParams": {"labels": "zone=a, tier=gold"}, "labels": {"zone": "b", "pool": "x"}}
    assert host_labels(WorkerGroupSpec.model_validate({"groupName": "g", "template": {}} | spec)) == {
        "zone": "b",
        "tier": "gold",
        "pool": "x",
    }
    assert host_labels(WorkerGroupSpec(group_name="g", template={})) == {}


# ----------------------------------------------------------------------------- bounded quantities

TOO_LARGE = "out of range: quantities are limited to ±9223372036854775807 (2^63-1)"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("9223372036854775807", Decimal(2**63 - 1)),  # 2^63-1, Kubernetes' own cap
        ("7Ei", Decimal(7 * 2**60)),
        ("9.2e18", Decimal("9.2e18")),
        ("9223372036854775807000m", Decimal(2**63 - 1)),
        (2**63 - 1, Decimal(2**63 - 1)),
        ("1e-999999", Decimal("1e-9")),  # below a nano unit: 1n, as Kubernetes rounds it
        ("-1e-999999", Decimal("-1e-9")),
        ("0e999999", Decimal(0)),
        ("1.5n", Decimal("1.5e-9")),
    ],
)
def test_quantities_up_to_the_cap(value: str | int, expected: Decimal) -> None:
    assert parse_quantity(value) == expected


@pytest.mark.parametrize(
    "value",
    ["1e999999", "1e9999999999999", "-1e999999", "9223372036854775808", "8Ei", "1e19", "10E", 2**63, 1e300],
)
def test_quantities_beyond_the_cap_are_refused_before_any_arithmetic(value: str | int | float) -> None:
    with pytest.raises(QuantityError, match=re.escape(TOO_LARGE)):
        parse_quantity(value)


def test_a_huge_integer_is_refused_by_its_size() -> None:
    # Python cannot even print it (more than 4300 digits): the message gives its size instead.
    with pytest.raises(QuantityError, match=r"^an integer of 16610 bits is out of range"):
        parse_quantity(10**5000)


def test_a_long_text_is_not_a_quantity() -> None:
    with pytest.raises(QuantityError, match="longer than 64 characters"):
        parse_quantity("1" * 65)
    with pytest.raises(QuantityError, match="not a quantity"):
        parse_quantity(Decimal("NaN"))


def test_errors_name_the_field() -> None:
    with pytest.raises(QuantityError, match=r"^resources\.memory: '1e999999' is out of range"):
        parse_resource_map({"memory": "1e999999"})
    with pytest.raises(QuantityError, match=r"^rayStartParams\.resources\.CPU: .* is out of range"):
        parse_resources_param('{"CPU": 1e400}')
    with pytest.raises(QuantityError, match=r"^x\.resources: not a JSON object"):
        parse_resources_param('{"CPU": ' + "9" * 5000 + "}", field="x.resources")
    group = {"template": {"spec": {"containers": [{"resources": {"limits": {"cpu": "1e999999"}}}]}}}
    with pytest.raises(QuantityError, match=r"^template\.spec\.containers\[0\]\.resources\.limits\.cpu: "):
        host_resources(group)
    with pytest.raises(QuantityError, match=r"^rayStartParams\.num-cpus: not a quantity: 'abc'"):
        host_resources({"rayStartParams": {"num-cpus": "abc"}})
