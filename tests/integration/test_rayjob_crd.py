"""The RayJob and RayCronJob CRDs of crds/ on a real API server, no operator running.

Every RayJob and RayCronJob of KubeRay v1.6.2's samples (config/samples/ray-job.*.yaml and
ray-cronjob.sample.yaml, each document as written) passes a server-side apply with
fieldValidation=Strict: no unknown field, no duplicate field, no warning; and comes back with every
field it set. What KubeRay's CRD refuses is refused, with the API server's message: a deletion rule
outside its enum or CEL rules, the deletionStrategy and managedBy CEL rules, a RayCronJob without a
schedule. RayJob's v1alpha1 is served (entrypoint required) and stored as v1; the printer columns
and the `all` category are KubeRay's.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from hack.localk8s import testcluster
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from rayscale.api.names import RAYCRONJOB, RAYJOB, ResourceName
from tests.kuberay.oracle import module_dir

ROOT = Path(__file__).resolve().parents[2]
FIELD_MANAGER = "rayscale-crd-test"
# KubeRay's messages of its CEL rules, as the API server gives them.
MIXED = (
    "legacy policies (onSuccess/onFailure) and deletionRules cannot be used together within the same "
    "deletionStrategy"
)
INCOMPLETE = (
    "deletionStrategy requires either BOTH onSuccess and onFailure, OR the deletionRules field "
    "(cannot be empty)"
)
MANAGERS = "the managedBy field value must be either 'ray.io/kuberay-operator' or 'kueue.x-k8s.io/multikueue'"


def _samples() -> list[tuple[str, str]]:
    """(id, YAML text as written) of every RayJob and RayCronJob document of KubeRay's sample files.
    The text, not a parsed copy: a YAML parser keeps the last of two duplicate keys silently."""
    samples = module_dir() / "config" / "samples"
    out = []
    for path in [*sorted(samples.glob("ray-job.*.yaml")), samples / "ray-cronjob.sample.yaml"]:
        for text in re.split(r"^---\s*$", path.read_text(), flags=re.MULTILINE):
            doc = yaml.safe_load(text)
            if doc and doc.get("kind") in ("RayJob", "RayCronJob"):
                meta = doc["metadata"]
                out.append((f"{path.name}:{meta.get('name') or meta['generateName']}", text))
    return out


SAMPLES = _samples()


@pytest.fixture(scope="module")
def crds(cluster: testcluster.ClusterHandle) -> None:
    """Every CRD of crds/ (put back over KubeRay's RayJob CRD, which the migration tests install),
    RayJob's and RayCronJob's established."""
    cluster.kubectl_run("apply", "--server-side", "--force-conflicts", "-f", str(ROOT / "crds"))
    cluster.kubectl_run("wait", "--for=condition=Established", "--timeout=60s",
                        f"crd/{RAYJOB.crd_name}", f"crd/{RAYCRONJOB.crd_name}")  # fmt: skip
    crd = json.loads(cluster.kubectl_run("get", f"crd/{RAYJOB.crd_name}", "-o", "json"))
    spec = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
    assert spec["submitterPodTemplate"].get("x-kubernetes-preserve-unknown-fields"), "KubeRay's RayJob CRD"


def _kubectl(
    cluster: testcluster.ClusterHandle, *args: str, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run([cluster.kubectl, *args], env=cluster.env, input=stdin, capture_output=True,
                          text=True, timeout=120, check=False)  # fmt: skip


def _missing(sample: Any, stored: Any, path: str = "") -> list[str]:
    """Where `stored` lacks or changed what `sample` sets (defaults `stored` adds are no matter)."""
    if isinstance(sample, dict) and isinstance(stored, dict):
        return [p for k, v in sample.items() for p in _missing(v, stored.get(k, KeyError), f"{path}.{k}")]
    if isinstance(sample, list) and isinstance(stored, list) and len(sample) == len(stored):
        return [
            p
            for i, (a, b) in enumerate(zip(sample, stored, strict=True))
            for p in _missing(a, b, f"{path}[{i}]")
        ]
    return [] if sample == stored else [path]


async def strict_apply(api: client.ApiClient, namespace: str, text: str) -> tuple[int, list[str], str]:
    """A server-side apply of `text` as written (YAML, duplicate keys and all) with
    fieldValidation=Strict: the HTTP status, the Warning headers and the body. (The client would
    send the patch as JSON, which keeps one of two duplicate keys; kubectl parses it first too.)"""
    doc = yaml.safe_load(text)
    names = RAYJOB if doc["kind"] == RAYJOB.kind else RAYCRONJOB
    objects: Any = client.CustomObjectsApi(api)
    try:
        response = await objects.patch_namespaced_custom_object(
            *names.at(namespace), doc["metadata"]["name"], text.encode(),
            field_manager=FIELD_MANAGER, field_validation="Strict",
            # with a parameter, the client sends the bytes as they are (the API server drops it)
            _content_type="application/apply-patch+yaml; charset=utf-8", _preload_content=False,
        )  # fmt: skip
    except ApiException as exc:
        return exc.status, [], str(exc.body)
    async with response:
        return response.status, response.headers.getall("Warning", []), await response.text()


@pytest.mark.parametrize("text", [t for _, t in SAMPLES], ids=[i for i, _ in SAMPLES])
async def test_kuberay_sample_passes_a_strict_server_side_apply(
    api: client.ApiClient, cluster: testcluster.ClusterHandle, namespace: str, crds: None, text: str
) -> None:
    # A server-side apply needs a name: the one sample with only generateName gets one.
    text = re.sub(r"^(\s+)generateName:\s*(\S+?)-?$", r"\1name: \2-strict", text, count=1, flags=re.MULTILINE)
    doc = yaml.safe_load(text)
    status, warnings, body = await strict_apply(api, namespace, text)
    assert status in (200, 201), body
    assert warnings == []  # no unknown or duplicate field, no deprecation
    kind = f"{doc['kind'].lower()}s.ray.io"
    stored = json.loads(
        cluster.kubectl_run("get", kind, doc["metadata"]["name"], "-n", namespace, "-o", "json")
    )
    assert _missing(doc["spec"], stored["spec"]) == []
    spec = stored["spec"] if doc["kind"] == "RayJob" else stored["spec"]["jobTemplate"]
    assert spec["submissionMode"] == doc["spec"].get("submissionMode", "K8sJobMode")  # the CRD's defaults
    assert spec["backoffLimit"] == doc["spec"].get("backoffLimit", 0)


async def test_strict_apply_refuses_unknown_and_duplicate_fields(
    api: client.ApiClient, namespace: str, crds: None
) -> None:
    """What the sample test would see of a sample with a field the CRD lacks, or one set twice."""
    head = "apiVersion: ray.io/v1\nkind: RayJob\nmetadata:\n  name: bad\nspec:\n  entrypoint: a\n"
    status, _, body = await strict_apply(api, namespace, head + "  entrypoint: b\n")
    assert status == 400, body
    assert 'key "entrypoint" already set in map' in json.loads(body)["message"], body
    status, _, body = await strict_apply(api, namespace, head + "  entryPoint: b\n")
    assert status >= 400, body  # (500 from this API server: its typed patch fails)
    assert ".spec.entryPoint: field not declared in schema" in json.loads(body)["message"], body


def test_every_kuberay_sample_is_here() -> None:
    assert len(SAMPLES) >= 16
    assert sum(1 for i, _ in SAMPLES if i.startswith("ray-cronjob.sample.yaml:")) == 1


# ---- what the API server refuses ----


class Objects:
    """RayJobs and RayCronJobs of one namespace, through the custom objects API."""

    def __init__(self, api: client.ApiClient, namespace: str) -> None:
        self.api: Any = client.CustomObjectsApi(api)
        self.ns = namespace

    async def create(
        self, names: ResourceName, spec: dict[str, Any], name: str, version: str = ""
    ) -> dict[str, Any]:
        version = version or names.version
        body = {"apiVersion": f"{names.group}/{version}", "kind": names.kind, "metadata": {"name": name},
                "spec": spec}  # fmt: skip
        obj: dict[str, Any] = await self.api.create_namespaced_custom_object(
            names.group, version, self.ns, names.plural, body
        )
        return obj

    async def refused(self, names: ResourceName, spec: dict[str, Any], version: str = "") -> str:
        """The API server's message refusing a new object of `spec`."""
        with pytest.raises(ApiException) as info:
            await self.create(names, spec, "refused", version)
        assert info.value.status == 422, info.value.body
        message: str = json.loads(str(info.value.body))["message"]
        return message


def job(**extra: Any) -> dict[str, Any]:
    return {"entrypoint": "python -c 'print(1)'", "clusterSelector": {"ray.io/cluster": "somewhere"}, **extra}


def rules(*rule: dict[str, Any]) -> dict[str, Any]:
    return {"deletionStrategy": {"deletionRules": list(rule)}}


def rule(policy: str = "DeleteCluster", **condition: Any) -> dict[str, Any]:
    return {"policy": policy, "condition": condition}


async def test_bad_deletion_rules_are_refused(api: client.ApiClient, namespace: str, crds: None) -> None:
    objects = Objects(api, namespace)
    path = "spec.deletionStrategy.deletionRules[0]"
    message = await objects.refused(RAYJOB, job(**rules(rule("DeleteEverything", jobStatus="FAILED"))))
    assert f'{path}.policy: Unsupported value: "DeleteEverything"' in message
    assert '"DeleteCluster", "DeleteWorkers", "DeleteSelf", "DeleteNone"' in message
    message = await objects.refused(RAYJOB, job(**rules(rule(jobStatus="STOPPED"))))
    assert f'{path}.condition.jobStatus: Unsupported value: "STOPPED"' in message
    message = await objects.refused(RAYJOB, job(**rules(rule(jobDeploymentStatus="Complete"))))
    assert f'{path}.condition.jobDeploymentStatus: Unsupported value: "Complete"' in message
    message = await objects.refused(RAYJOB, job(**rules(rule(jobStatus="FAILED", ttlSeconds=-1))))
    assert f"{path}.condition.ttlSeconds: Invalid value: -1" in message
    message = await objects.refused(
        RAYJOB, job(**rules(rule(jobStatus="FAILED", jobDeploymentStatus="Failed")))
    )
    assert f"{path}.condition: Invalid value" in message
    assert (
        "JobStatus and JobDeploymentStatus cannot be used together within the same deletion condition."
        in message
    )
    message = await objects.refused(RAYJOB, job(**rules(rule(ttlSeconds=10))))
    assert "the deletion condition requires either the JobStatus or the JobDeploymentStatus field." in message
    message = await objects.refused(RAYJOB, job(**rules({"policy": "DeleteSelf"})))
    assert f"{path}.condition: Required value" in message
    message = await objects.refused(RAYJOB, job(deletionStrategy={"deletionRules": []}))
    assert "spec.deletionStrategy.deletionRules in body should have at least 1 items" in message
    # Within the rules: created, ttlSeconds defaulted.
    created = await objects.create(RAYJOB, job(**rules(rule("DeleteWorkers", jobStatus="SUCCEEDED"))), "ok")
    assert created["spec"]["deletionStrategy"]["deletionRules"][0]["condition"]["ttlSeconds"] == 0


async def test_cel_rules_of_deletion_strategy_and_managed_by(
    api: client.ApiClient, namespace: str, crds: None, cluster: testcluster.ClusterHandle
) -> None:
    objects = Objects(api, namespace)
    legacy = {"onSuccess": {"policy": "DeleteCluster"}, "onFailure": {"policy": "DeleteNone"}}
    mixed = {"deletionStrategy": {**legacy, "deletionRules": [rule(jobStatus="FAILED")]}}
    message = await objects.refused(RAYJOB, job(**mixed))
    assert "spec.deletionStrategy: Invalid value" in message
    assert MIXED in message
    message = await objects.refused(RAYJOB, job(deletionStrategy={"onSuccess": {"policy": "DeleteSelf"}}))
    assert INCOMPLETE in message
    message = await objects.refused(RAYJOB, job(managedBy="someone-else"))
    assert "spec.managedBy: Invalid value" in message
    assert MANAGERS in message
    message = await objects.refused(RAYJOB, job(preRunningDeadlineSeconds=0))
    assert "spec.preRunningDeadlineSeconds: Invalid value: 0" in message
    # The same rules inside a RayCronJob's jobTemplate.
    message = await objects.refused(RAYCRONJOB, {"schedule": "*/5 * * * *", "jobTemplate": job(**mixed)})
    assert "spec.jobTemplate.deletionStrategy: Invalid value" in message
    assert "cannot be used together within the same deletionStrategy" in message
    # The legacy pair is accepted; managedBy is immutable.
    await objects.create(RAYJOB, job(deletionStrategy=legacy, managedBy="ray.io/kuberay-operator"), "legacy")
    patch = _kubectl(cluster, "patch", "rayjob", "legacy", "-n", namespace, "--type=merge",
                     "-p", '{"spec":{"managedBy":"kueue.x-k8s.io/multikueue"}}')  # fmt: skip
    assert patch.returncode != 0
    assert "the managedBy field is immutable" in patch.stderr


async def test_raycronjob_requires_schedule_and_job_template_and_takes_a_time_zone(
    api: client.ApiClient, namespace: str, crds: None
) -> None:
    objects = Objects(api, namespace)
    message = await objects.refused(RAYCRONJOB, {"jobTemplate": job()})
    assert "spec.schedule: Required value" in message
    message = await objects.refused(RAYCRONJOB, {"schedule": "@hourly"})
    assert "spec.jobTemplate: Required value" in message
    spec = {"schedule": "0 3 * * *", "timeZone": "Europe/Berlin", "suspend": True, "jobTemplate": job()}
    created = await objects.create(RAYCRONJOB, spec, "nightly")
    assert created["spec"]["timeZone"] == "Europe/Berlin"
    assert created["spec"]["jobTemplate"]["ttlSecondsAfterFinished"] == 0


async def test_v1alpha1_is_served_and_stored_as_v1(api: client.ApiClient, namespace: str, crds: None) -> None:
    objects = Objects(api, namespace)
    message = await objects.refused(RAYJOB, {"clusterSelector": {"ray.io/cluster": "x"}}, version="v1alpha1")
    assert "spec.entrypoint: Required value" in message
    await objects.create(RAYJOB, job(), "old", version="v1alpha1")
    as_v1 = await objects.api.get_namespaced_custom_object("ray.io", "v1", namespace, "rayjobs", "old")
    assert as_v1["apiVersion"] == "ray.io/v1"
    assert as_v1["spec"]["submissionMode"] == "K8sJobMode"  # v1's defaults on read


async def test_status_columns_and_category(
    api: client.ApiClient, namespace: str, crds: None, cluster: testcluster.ClusterHandle
) -> None:
    objects = Objects(api, namespace)
    await objects.create(RAYJOB, job(), "shown")
    status = {"jobStatus": "RUNNING", "jobDeploymentStatus": "Running", "rayClusterName": "shown-abcde",
              "startTime": "2026-01-02T03:04:05Z",
              "rayJobInfo": {"startTime": "2026-01-02T03:04:06Z"}}  # fmt: skip
    written = await objects.api.patch_namespaced_custom_object_status(
        "ray.io", "v1", namespace, "rayjobs", "shown", {"status": status},
        _content_type="application/merge-patch+json",
    )  # fmt: skip
    assert (written["status"]["succeeded"], written["status"]["failed"]) == (0, 0)  # defaulted
    table = cluster.kubectl_run("get", "rayjob", "shown", "-n", namespace).splitlines()
    assert re.split(r"\s{2,}", table[0].strip()) == [
        "NAME", "JOB STATUS", "DEPLOYMENT STATUS", "RAY CLUSTER NAME", "START TIME", "END TIME", "AGE",
    ]  # fmt: skip
    assert table[1].split()[:5] == ["shown", "RUNNING", "Running", "shown-abcde", "2026-01-02T03:04:05Z"]
    await objects.create(RAYCRONJOB, {"schedule": "@daily", "jobTemplate": job()}, "cron")
    assert set(cluster.kubectl_run("get", "all", "-n", namespace, "-o", "name").split()) >= {
        "rayjob.ray.io/shown", "raycronjob.ray.io/cron",
    }  # fmt: skip
