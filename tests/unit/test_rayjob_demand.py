"""rayscale's two RayJob improvements on KubeRay, on scripted worlds (tests.support.rayjob_sim):
the entrypoint's resources as a RayResourceRequest made with the cluster (rayscale.rayjob.demand),
and the job-finished mark on an autoscaled cluster at the job's end (rayscale.rayjob.deletion)."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from tests.support.rayjob_sim import run_case

from rayscale.rayjob import consts as C
from rayscale.rayjob.demand import REQUEST_ANNOTATION

CLUSTER_SPEC: dict[str, Any] = {
    "rayVersion": "2.60.0",
    "enableInTreeAutoscaling": True,
    "headGroupSpec": {
        "rayStartParams": {},
        "template": {"spec": {"containers": [{"name": "ray-head", "image": "rayproject/ray:2.60.0"}]}},
    },
    "workerGroupSpecs": [
        {
            "groupName": "gpu",
            "replicas": 0,
            "minReplicas": 0,
            "maxReplicas": 4,
            "rayStartParams": {},
            "template": {"spec": {"containers": [{"name": "ray-worker", "image": "rayproject/ray:2.60.0"}]}},
        }
    ],
}
SUCCEEDED = {"jobStatus": "SUCCEEDED", "startTime": 1_767_225_600_000, "endTime": 1_767_225_660_000}
DONE = {"conditions": [{"type": "Complete", "status": "True"}]}
# New, cluster made, cluster ready (submitter made), the driver pending, the driver running
TO_RUNNING: list[dict[str, Any]] = [
    {},
    {},
    {"cluster_status": {"state": "ready"}},
    {"job_info": {"jobStatus": "PENDING"}},
    {"job_info": {"jobStatus": "RUNNING"}},
]


def rayjob(
    annotations: dict[str, str] | None = None, autoscaling: bool = True, **spec: Any
) -> dict[str, Any]:
    cluster = copy.deepcopy(CLUSTER_SPEC)
    cluster["enableInTreeAutoscaling"] = autoscaling
    body: dict[str, Any] = {"entrypoint": "python run.py", "rayClusterSpec": cluster}
    body.update(spec)
    meta: dict[str, Any] = {"name": "job", "annotations": annotations or {}}
    return {"apiVersion": "ray.io/v1", "kind": "RayJob", "metadata": meta, "spec": body}


def requests(step: dict[str, Any]) -> list[dict[str, Any]]:
    return list(step["requests"])


def test_the_entrypoints_resources_are_requested_with_the_cluster_until_the_driver_runs() -> None:
    result = run_case({"rayjob": rayjob(entrypointNumGpus=1, entrypointNumCpus=0.5), "steps": TO_RUNNING})
    steps = result["steps"]
    assert [len(requests(s)) for s in steps] == [0, 1, 1, 1, 0]
    made = requests(steps[1])[0]
    assert made["kind"] == "RayResourceRequest"
    assert made["apiVersion"] == "rayscale.io/v1alpha1"
    cluster = steps[1]["status"]["rayClusterName"]
    assert made["metadata"]["name"] == f"{cluster}-demand"
    assert made["metadata"]["labels"]["ray.io/originated-from-crd"] == "RayJob"
    assert made["metadata"]["labels"]["ray.io/originated-from-cr-name"] == "job"
    assert made["metadata"]["ownerReferences"][0]["kind"] == "RayJob"
    assert made["spec"] == {
        "clusterName": cluster,
        "bundles": [{"resources": {"CPU": "0.5", "GPU": 1}, "count": 1}],
    }
    # KubeRay's view is unchanged: the request is not among the objects the differential compares
    assert all(o["kind"] != "RayResourceRequest" for s in steps for o in s["objects"])


def test_entrypoint_resources_and_the_annotations_bundles_make_one_request() -> None:
    extra = json.dumps([{"resources": {"GPU": 1, "memory": "8Gi"}, "count": 2}])
    job = rayjob(
        annotations={REQUEST_ANNOTATION: extra},
        entrypointResources=json.dumps({"accel": 2, "none": 0}),
    )
    made = requests(run_case({"rayjob": job, "steps": [{}, {}]})["steps"][1])[0]
    assert made["spec"]["bundles"] == [
        {"resources": {"accel": 2}, "count": 1},
        {"resources": {"GPU": 1, "memory": "8Gi"}, "count": 2},
    ]


def test_annotation_alone_is_a_request() -> None:
    extra = json.dumps([{"resources": {"GPU": 1}}])
    made = requests(run_case({"rayjob": rayjob({REQUEST_ANNOTATION: extra}), "steps": [{}, {}]})["steps"][1])
    assert made[0]["spec"]["bundles"] == [{"resources": {"GPU": 1}}]


@pytest.mark.parametrize(
    "spec",
    [
        {"entrypointNumGpus": 1, "autoscaling": False},  # no autoscaler to read it
        {},  # nothing declared
        {"entrypointNumCpus": 0},
    ],
)
def test_no_request_without_autoscaling_or_declared_resources(spec: dict[str, Any]) -> None:
    result = run_case({"rayjob": rayjob(**spec), "steps": TO_RUNNING[:3]})
    assert all(requests(s) == [] for s in result["steps"])


def test_the_request_goes_when_the_job_fails_before_its_driver_runs() -> None:
    result = run_case(
        {"rayjob": rayjob(entrypointNumGpus=1, activeDeadlineSeconds=5), "steps": [{}, {}, {"age": 6}, {}]}
    )
    assert [s["status"].get("jobDeploymentStatus") for s in result["steps"]][2:] == [C.FAILED, C.FAILED]
    assert [len(requests(s)) for s in result["steps"]] == [0, 1, 0, 0]  # with the step that fails


def test_the_request_goes_when_the_job_is_suspended() -> None:
    steps = [{}, {}, {"spec": {"suspend": True}}, {}]
    result = run_case({"rayjob": rayjob(entrypointNumGpus=1, shutdownAfterJobFinishes=True), "steps": steps})
    assert result["steps"][2]["status"]["jobDeploymentStatus"] == C.SUSPENDING
    assert [len(requests(s)) for s in result["steps"]] == [0, 1, 0, 0]


@pytest.mark.parametrize(
    ("annotation", "autoscaling", "words"),
    [
        ("{not json", True, "Expecting property name"),
        ('{"resources": {"GPU": 1}}', True, "must be a JSON list of bundles"),
        ("[]", True, "must list at least one bundle"),
        ('[{"resources": {"GPU": "lots"}}]', True, "bundles[0].resources.GPU"),
        ('[{"resources": {"GPU": 1}, "count": 0}]', True, "bundles[0].count"),
        ('[{"resources": {"GPU": 1}}]', False, "only a RayJob whose own RayCluster autoscales"),
    ],
)
def test_a_bad_annotation_fails_validation_with_a_warning(
    annotation: str, autoscaling: bool, words: str
) -> None:
    result = run_case({"rayjob": rayjob({REQUEST_ANNOTATION: annotation}, autoscaling), "steps": [{}]})
    step = result["steps"][0]
    assert step["status"]["jobDeploymentStatus"] == C.VALIDATION_FAILED
    assert step["status"]["reason"] == C.VALIDATION_FAILED_REASON
    message = step["status"]["message"]
    assert message.startswith(f"metadata.annotations.{REQUEST_ANNOTATION}: ")
    assert words in message
    assert step["events"] == [f"Warning {C.EV_INVALID_METADATA} default/job: {message}"]
    assert step["objects"] == []


def _finish(job: dict[str, Any], after: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    steps = [
        *TO_RUNNING[:3],
        {"job_info": {"jobStatus": "RUNNING"}},
        {"submitter": DONE, "job_info": SUCCEEDED},
    ]
    return run_case({"rayjob": job, "steps": steps + (after or [{}, {}])})


def test_an_autoscaled_cluster_is_marked_finished_at_the_jobs_end_once() -> None:
    result = _finish(rayjob(shutdownAfterJobFinishes=True, ttlSecondsAfterFinished=600))
    steps = result["steps"]
    assert steps[4]["status"]["jobDeploymentStatus"] == C.COMPLETE
    cluster = steps[4]["status"]["rayClusterName"]
    assert steps[4]["marked"] == []  # the step that sees the end writes the status
    assert steps[5]["marked"] == [(cluster, "RayJob default/job finished (SUCCEEDED)")]
    assert steps[6]["marked"] == steps[5]["marked"]  # not again
    assert "RayCluster" in [o["kind"] for o in steps[6]["objects"]]  # the head stays for the TTL


@pytest.mark.parametrize(
    "spec",
    [
        {"shutdownAfterJobFinishes": False, "autoscaling": True},  # the cluster is kept: left alone
        {"shutdownAfterJobFinishes": True, "ttlSecondsAfterFinished": 600, "autoscaling": False},
        {  # a rule for another outcome
            "deletionStrategy": {
                "deletionRules": [{"policy": C.DELETE_CLUSTER, "condition": {"jobStatus": "FAILED"}}]
            }
        },
    ],
)
def test_no_mark_when_no_policy_takes_the_workers_or_no_autoscaler(spec: dict[str, Any]) -> None:
    assert all(s["marked"] == [] for s in _finish(rayjob(**spec))["steps"])


def test_a_delete_cluster_rule_with_a_ttl_marks_then_deletes() -> None:
    rules = [{"policy": C.DELETE_CLUSTER, "condition": {"jobStatus": "SUCCEEDED", "ttlSeconds": 30}}]
    result = _finish(rayjob(deletionStrategy={"deletionRules": rules}), [{}, {"age": 31}])
    assert len(result["steps"][5]["marked"]) == 1
    assert "RayCluster" not in [o["kind"] for o in result["steps"][6]["objects"]]


def test_no_mark_when_the_cluster_goes_at_once() -> None:
    result = _finish(rayjob(shutdownAfterJobFinishes=True))
    assert all(s["marked"] == [] for s in result["steps"])
    assert "RayCluster" not in [o["kind"] for o in result["steps"][5]["objects"]]


def test_delete_workers_on_an_autoscaled_cluster_is_the_mark_not_suspend() -> None:
    """KubeRay refuses DeleteWorkers with autoscaling (a suspended group is not allowed there);
    rayscale runs it as the job-finished mark: the autoscaler drains and removes the workers."""
    rules = [{"policy": C.DELETE_WORKERS, "condition": {"jobStatus": "SUCCEEDED", "ttlSeconds": 0}}]
    result = _finish(rayjob(deletionStrategy={"deletionRules": rules}), [{}, {}, {"age": 60}])
    steps = result["steps"]
    assert len(steps[5]["marked"]) == 1
    assert steps[6]["marked"] == steps[5]["marked"]  # done: not again
    assert steps[7]["marked"] == steps[5]["marked"]
    for step in steps:
        for cluster in (o for o in step["objects"] if o["kind"] == "RayCluster"):
            assert not any(g.get("suspend") for g in cluster["spec"]["workerGroupSpecs"])
    assert [s["result"]["error"] for s in steps[5:]] == [None, None, None]


def test_delete_workers_without_autoscaling_suspends_as_kuberay() -> None:
    rules = [{"policy": C.DELETE_WORKERS, "condition": {"jobStatus": "SUCCEEDED", "ttlSeconds": 0}}]
    result = _finish(rayjob(autoscaling=False, deletionStrategy={"deletionRules": rules}))
    cluster = next(o for o in result["steps"][5]["objects"] if o["kind"] == "RayCluster")
    assert [g.get("suspend") for g in cluster["spec"]["workerGroupSpecs"]] == [True]
    assert all(s["marked"] == [] for s in result["steps"])
