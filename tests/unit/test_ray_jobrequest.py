"""SubmitRequest: the body of ``POST /api/jobs/``, and the one KubeRay builds of a RayJob.

The RayJob cases and their expected requests are in tests/unit/data/kuberay_submit_requests_1.6.2.json:
what KubeRay v1.6.2's own ``dashboardclient.ConvertRayJobToReq`` made of each spec (the file says
how); the first three are KubeRay's own unit test cases. Compared as parsed JSON and as JSON text
(sorted keys), so an integer where Go writes one (``1``, not ``1.0``) counts too.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from rayscale.ray.jobrequest import SubmitRequest

DATA = json.loads((Path(__file__).parent / "data" / "kuberay_submit_requests_1.6.2.json").read_text())
CASES: list[dict[str, Any]] = DATA["cases"]


def canonical(body: object) -> str:
    return json.dumps(body, sort_keys=True)


@pytest.mark.parametrize("case", [c for c in CASES if "request" in c], ids=lambda c: c["name"])
def test_the_request_kuberay_builds(case: dict[str, Any]) -> None:
    body = SubmitRequest.from_rayjob_spec(case["spec"], case["submission_id"]).to_json()
    assert body == case["request"]
    assert canonical(body) == canonical(json.loads(case["request_json"]))


@pytest.mark.parametrize("case", [c for c in CASES if "error" in c], ids=lambda c: c["name"])
def test_what_kuberay_refuses(case: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match=r"runtimeEnvYAML|RuntimeEnvYAML|entrypointResources"):
        SubmitRequest.from_rayjob_spec(case["spec"], case["submission_id"])


def test_kuberays_own_unit_test_cases() -> None:
    """dashboard_httpclient_test.go, read: 4 runtime env keys with working_dir "./"; the numbers
    and resources as float32s; an error for a resource that is not a number."""
    runtime_env_yaml = CASES[0]["spec"]["runtimeEnvYAML"]
    request = SubmitRequest.from_rayjob_spec(
        {
            "entrypoint": "python samply.py",
            "metadata": {"owner": "test1"},
            "runtimeEnvYAML": runtime_env_yaml,
        },
        "raysubmit_test001",
    )
    assert request.runtime_env is not None
    assert len(request.runtime_env) == 4
    assert request.runtime_env["working_dir"] == "./"
    assert request.metadata == {"owner": "test1"}
    assert request.submission_id == "raysubmit_test001"
    numbers = SubmitRequest.from_rayjob_spec(
        {"entrypointResources": '{"r1": 0.1, "r2": 0.2}', "entrypointNumCpus": 1.1, "entrypointNumGpus": 2.2},
        "",
    )
    assert (numbers.entrypoint_num_cpus, numbers.entrypoint_num_gpus) == (1.1, 2.2)
    assert numbers.entrypoint_resources == {"r1": 0.1, "r2": 0.2}
    assert numbers.submission_id is None  # no job id yet: left out
    with pytest.raises(ValueError, match="not a number"):
        SubmitRequest.from_rayjob_spec({"entrypointResources": '{"r1": "string"}'}, "x")


@pytest.mark.parametrize("value", [True, "1", [1]])
def test_numbers_that_are_not(value: object) -> None:
    with pytest.raises(ValueError, match="entrypointNumCpus"):
        SubmitRequest.from_rayjob_spec({"entrypointNumCpus": value}, "x")


def test_to_json_leaves_out_what_is_none() -> None:
    assert SubmitRequest("python x.py").to_json() == {"entrypoint": "python x.py"}
    full = SubmitRequest(
        entrypoint="python x.py",
        submission_id="s1",
        runtime_env={"env_vars": {"A": "1"}},
        metadata={"k": "v"},
        entrypoint_num_cpus=0.5,
        entrypoint_num_gpus=0,
        entrypoint_memory=1024,
        entrypoint_resources={"TPU": 4},
    )
    assert full.to_json() == {
        "entrypoint": "python x.py",
        "submission_id": "s1",
        "runtime_env": {"env_vars": {"A": "1"}},
        "metadata": {"k": "v"},
        "entrypoint_num_cpus": 0.5,
        "entrypoint_num_gpus": 0,  # a 0 that is given is sent
        "entrypoint_memory": 1024,
        "entrypoint_resources": {"TPU": 4},
    }
    # the field names are Ray 2.60's JobSubmitRequest's (minus job_id, deprecated, and the label selector)
    assert set(full.to_json()) == {
        "entrypoint",
        "submission_id",
        "runtime_env",
        "metadata",
        "entrypoint_num_cpus",
        "entrypoint_num_gpus",
        "entrypoint_memory",
        "entrypoint_resources",
    }
