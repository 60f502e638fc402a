"""A cluster named by RAYSCALE_TARGET_KUBECONFIG, on a real API server (a private local control
plane standing in for someone's cluster): refused while it holds another owner's ray.io CRD, used
with RAYSCALE_TARGET_FORCE=1 and claimed, accepted on the next acquisition because of the claim; the
context named is the one used, and a named cluster that does not answer fails (no fallback)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from hack.localk8s import target, testcluster
from hack.localk8s.target import TARGET_CONTEXT, TARGET_FORCE, TARGET_KUBECONFIG, TargetError
from hack.localk8s.testcluster import ClusterHandle

# Someone else's ray.io CRD (as KubeRay's RayJob would be): the tests did not put it there.
FOREIGN_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "rayjobs.ray.io"},
    "spec": {
        "group": "ray.io",
        "names": {"kind": "RayJob", "plural": "rayjobs", "singular": "rayjob", "listKind": "RayJobList"},
        "scope": "Namespaced",
        "versions": [{
            "name": "v1", "served": True, "storage": True,
            "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}},
        }],
    },
}  # fmt: skip


@pytest.fixture(scope="module")
def someones() -> Iterator[ClusterHandle]:
    """A private control plane standing in for a cluster the tests do not own."""
    handle = testcluster.start_private()
    try:
        yield handle
    finally:
        handle.stop()


def two_contexts(cluster: ClusterHandle, path: Path) -> Path:
    """A copy of the cluster's kubeconfig whose current context is a cluster that does not answer,
    and whose context `localk8s` is the real one: a user's file, not the control plane's own."""
    config = json.loads(cluster.kubeconfig.read_text())
    real = config["clusters"][0]["cluster"]
    config["clusters"].append({"name": "elsewhere", "cluster": {**real, "server": "https://127.0.0.1:1"}})
    config["contexts"].append({"name": "elsewhere", "context": {"cluster": "elsewhere", "user": "admin"}})
    config["current-context"] = "elsewhere"
    path.write_text(json.dumps(config))
    return path


def marker(cluster: ClusterHandle) -> dict[str, str] | None:
    out = cluster.kubectl_run("get", "configmap", target.MARKER_NAME, "-n", target.MARKER_NAMESPACE,
                              "-o", "json", "--ignore-not-found")  # fmt: skip
    return dict(json.loads(out)["data"]) if out.strip() else None


def test_a_foreign_ray_crd_is_refused_until_forced_then_the_claim_is_accepted(
    someones: ClusterHandle, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = two_contexts(someones, tmp_path / "config")
    someones.kubectl_run("apply", "-f", "-", input=json.dumps(FOREIGN_CRD))
    monkeypatch.delenv(TARGET_FORCE, raising=False)
    monkeypatch.delenv(TARGET_CONTEXT, raising=False)
    monkeypatch.setenv(TARGET_KUBECONFIG, str(source))

    # The file's current context does not answer: a clear failure, no local control plane instead.
    with pytest.raises(TargetError, match="does not answer"):
        testcluster.acquire()

    monkeypatch.setenv(TARGET_CONTEXT, "localk8s")
    with pytest.raises(TargetError) as refused:
        testcluster.acquire()
    assert "CustomResourceDefinition rayjobs.ray.io" in str(refused.value)
    assert f"{TARGET_FORCE}=1" in str(refused.value)
    assert marker(someones) is None  # nothing written

    monkeypatch.setenv(TARGET_FORCE, "1")
    forced = testcluster.acquire()
    try:
        assert forced.origin == "target"
        assert not forced.local
        pinned = json.loads(forced.kubeconfig.read_text())
        assert [c["name"] for c in pinned["contexts"]] == ["localk8s"]
        assert forced.env["KUBECONFIG"] == str(forced.kubeconfig)
        assert "rayjobs.ray.io" in forced.kubectl_run("get", "crd", "-o", "name")
    finally:
        forced.stop()
    assert not forced.kubeconfig.exists()
    claim = marker(someones)
    assert claim is not None
    assert claim["forced"] == "true"
    assert "rayjobs.ray.io" in claim["found"]

    monkeypatch.delenv(TARGET_FORCE)
    again = testcluster.acquire()  # the claim: accepted without force, the CRD still there
    again.stop()
    assert again.origin == "target"
    assert target.answers(target.kubectl_at(someones.kubectl), someones.kubeconfig) is None  # still runs
