"""rayscale.batch: the PodGroups, pod metadata and gang sizes of KubeRay v1.6.2's batch scheduler
plugins, from plain RayCluster bodies (the KubeRay differential checks them against KubeRay's code)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from tests.support.builders import cluster, container, group

from rayscale.api.raycluster import RayClusterSpec
from rayscale.batch import gojson
from rayscale.batch.gang import Counts, desired_counts, gang, kuberay_counts, min_counts
from rayscale.batch.kai import Kai
from rayscale.batch.model import PodGroupWant, PodMetadata, resized
from rayscale.batch.registry import NAMES, check_name, label_notes, lookup
from rayscale.batch.scheduler_plugins import SchedulerPlugins
from rayscale.batch.volcano import Volcano
from rayscale.batch.yunikorn import YuniKorn, task_groups
from rayscale.cluster.meta import ClusterMeta


def _spec(body: dict[str, Any]) -> RayClusterSpec:
    return RayClusterSpec.model_validate(body["spec"])


def _meta(labels: dict[str, str] | None = None, annotations: dict[str, str] | None = None) -> ClusterMeta:
    return ClusterMeta("ns", "rc", "uid-1", labels=labels or {}, annotations=annotations or {})


# ----------------------------------------------------------------------------- gang sizes


def test_desired_counts_clamp_members_but_not_resources_and_skip_suspended_groups() -> None:
    spec = _spec(cluster(group("a", replicas=5, max_replicas=3), group("b", replicas=2, suspend=True)))
    counts = desired_counts(spec)
    assert counts == Counts({"a": 3, "b": 0}, {"a": 5, "b": 0})
    size = gang(spec, counts)
    assert size.min_member == 4  # the head and a's 3 replicas
    assert size.min_resources == {"cpu": "7", "memory": "14Gi"}  # head 2 CPU 4Gi, a 5 x (1, 2Gi)


def test_min_counts_for_an_autoscaled_cluster() -> None:
    spec = _spec(cluster(group("a", replicas=4, min_replicas=1, hosts=2), autoscaling=True))
    assert kuberay_counts(spec) == min_counts(spec) == Counts({"a": 1}, {"a": 1})
    size = gang(spec, kuberay_counts(spec))
    assert (size.min_member, size.min_resources) == (3, {"cpu": "4", "memory": "8Gi"})


def test_gang_takes_any_replica_counts() -> None:
    """What a later caller (the autoscaler's launches) passes."""
    spec = _spec(cluster(group("a", hosts=4)))
    assert gang(spec, Counts({"a": 2}, {"a": 2})).min_member == 9


def test_quantities_keep_the_first_non_zero_amounts_format() -> None:
    body = cluster(group("a", replicas=1))
    body["spec"]["headGroupSpec"]["template"]["spec"]["containers"] = [
        container("ray-head", cpu="500m", memory="1536Mi"),
        {"name": "side", "resources": {"limits": {"cpu": "250m", "memory": "512M"}}},
    ]
    body["spec"]["workerGroupSpecs"][0]["template"]["spec"]["containers"] = [
        {"name": "w", "resources": {"requests": {"cpu": "1"}, "limits": {"cpu": "9", "memory": "1G"}}}
    ]
    size = gang(_spec(body), desired_counts(_spec(body)))
    # 1536Mi + 512M + 1G = 3122612736 bytes, binary (the head's first), not a whole Ki: no suffix
    assert size.min_resources == {"cpu": "1750m", "memory": "3122612736"}
    body["spec"]["workerGroupSpecs"][0]["template"]["spec"]["containers"][0]["resources"]["limits"][
        "memory"
    ] = "1Gi"
    size = gang(_spec(body), desired_counts(_spec(body)))
    assert size.min_resources["memory"] == "3121440Ki"  # 1536Mi + 512M + 1Gi: a whole Ki, not a whole Mi


# ----------------------------------------------------------------------------- Volcano

VOLCANO_LABELS = {
    "volcano.sh/queue-name": "q",
    "ray.io/priority-class-name": "high",
    "volcano.sh/network-topology-mode": "hard",
    "volcano.sh/network-topology-highest-tier-allowed": "2",
}


def test_volcano_pod_group() -> None:
    meta = _meta(VOLCANO_LABELS, {"a": "b"})
    want = Volcano().pod_group(meta, _spec(cluster(group("a", replicas=2))))
    assert want is not None
    assert (want.group, want.version, want.plural, want.resize) == (
        "scheduling.volcano.sh",
        "v1beta1",
        "podgroups",
        True,
    )
    m = want.manifest
    assert m["metadata"]["name"] == "ray-rc-pg"
    assert m["metadata"]["annotations"] == {"a": "b"}
    assert m["metadata"]["ownerReferences"] == [
        {"apiVersion": "ray.io/v1", "kind": "RayCluster", "name": "rc", "uid": "uid-1", "controller": True,
         "blockOwnerDeletion": True}
    ]  # fmt: skip
    assert m["spec"] == {
        "minMember": 3,
        "minResources": {"cpu": "4", "memory": "8Gi"},
        "networkTopology": {"mode": "hard", "highestTierAllowed": 2},
        "queue": "q",
        "priorityClassName": "high",
    }


def test_volcano_refuses_a_tier_that_is_not_a_number() -> None:
    meta = _meta({**VOLCANO_LABELS, "volcano.sh/network-topology-highest-tier-allowed": "2.0"})
    with pytest.raises(
        ValueError, match=r'parsing "2.0": invalid syntax for podgroup ray-rc-pg in namespace ns'
    ):
        Volcano().pod_group(meta, _spec(cluster(group())))


def test_volcano_pods_and_a_rayjobs_cluster() -> None:
    meta = _meta({"volcano.sh/queue-name": "q", "ray.io/priority-class-name": ""})
    assert Volcano().pod_metadata(meta, _spec(cluster()), "headgroup") == PodMetadata(
        "volcano", {"volcano.sh/queue-name": "q"},
        {"scheduling.k8s.io/group-name": "ray-rc-pg", "volcano.sh/task-spec": "headgroup"},
    )  # fmt: skip
    job = _meta({"ray.io/originated-from-crd": "RayJob", "ray.io/originated-from-cr-name": "j"})
    assert Volcano().pod_group(job, _spec(cluster())) is None
    assert (
        Volcano().pod_metadata(job, _spec(cluster()), "g").annotations["scheduling.k8s.io/group-name"]
        == "ray-j-pg"
    )
    assert "RayJob" in Volcano().notes(job)[0]


def _want(resize: bool = True) -> PodGroupWant:
    manifest = {
        "metadata": {"name": "pg", "namespace": "ns"},
        "spec": {"minMember": 2, "minResources": {"cpu": "1"}},
    }
    return PodGroupWant("g", "v", "podgroups", manifest, resize)


def test_resized_as_volcanos_update_rule() -> None:
    spec: dict[str, Any] = {"minMember": 2, "queue": "q", "minResources": {"cpu": "1000m"}}
    existing: dict[str, Any] = {"metadata": {"name": "pg", "resourceVersion": "7"}, "spec": spec}
    assert resized(existing, _want()) is None  # the same amounts, spelled differently
    bigger = {**existing, "spec": {**spec, "minMember": 1}}
    assert resized(bigger, _want()) == {
        **existing,
        "spec": {"minMember": 2, "queue": "q", "minResources": {"cpu": "1"}},
    }
    no_resources = {"metadata": {}, "spec": {"minMember": 2}}
    assert resized(no_resources, _want()) == {
        "metadata": {},
        "spec": {"minMember": 2, "minResources": {"cpu": "1"}},
    }
    assert resized(bigger, _want(resize=False)) is None
    other_keys = {"metadata": {}, "spec": {"minMember": 2, "minResources": {"cpu": "1", "memory": "0"}}}
    assert resized(other_keys, _want()) is not None


def test_pod_metadata_applied_to_a_pod() -> None:
    pod = {"metadata": {"labels": {"a": "1"}}, "spec": {"containers": []}}
    out = PodMetadata("s", {"b": "2"}, {"c": "3"}).applied(pod)
    assert out == {"metadata": {"labels": {"a": "1", "b": "2"}, "annotations": {"c": "3"}},
                   "spec": {"containers": [], "schedulerName": "s"}}  # fmt: skip
    assert pod == {"metadata": {"labels": {"a": "1"}}, "spec": {"containers": []}}


# ----------------------------------------------------------------------------- scheduler-plugins, KAI


def test_scheduler_plugins_gang_only_when_labelled() -> None:
    plugins = SchedulerPlugins()
    spec = _spec(cluster(group(replicas=2), autoscaling=True))
    assert plugins.pod_group(_meta(), spec) is None
    assert plugins.pod_metadata(_meta(), spec, "g") == PodMetadata("scheduler-plugins-scheduler")
    meta = _meta({"ray.io/gang-scheduling-enabled": "false"})  # present is enough, as KubeRay
    want = plugins.pod_group(meta, spec)
    assert want is not None
    assert not want.resize
    assert want.manifest["metadata"] == {"name": "rc", "namespace": "ns", "ownerReferences": [
        {"apiVersion": "ray.io/v1", "kind": "RayCluster", "name": "rc", "uid": "uid-1"}]}  # fmt: skip
    assert want.manifest["spec"]["minMember"] == 3  # the replicas, also when autoscaling
    assert plugins.pod_metadata(meta, spec, "g").labels == {"scheduling.x-k8s.io/pod-group": "rc"}


def test_kai_queue() -> None:
    assert Kai().pod_metadata(_meta({"kai.scheduler/queue": "q"}), _spec(cluster()), "g") == PodMetadata(
        "kai-scheduler", {"kai.scheduler/queue": "q"}
    )
    assert Kai().notes(_meta({"kai.scheduler/queue": "q"})) == []
    assert "kai.scheduler/queue" in Kai().notes(_meta())[0]
    assert Kai().pod_group(_meta(), _spec(cluster())) is None


# ----------------------------------------------------------------------------- YuniKorn


def test_yunikorn_labels_and_gang_annotations() -> None:
    yk = YuniKorn()
    spec = _spec(cluster(group("w", min_replicas=2, hosts=2)))
    plain = _meta({"yunikorn.apache.org/app-id": "app", "yunikorn.apache.org/queue": "root.a"})
    assert yk.pod_metadata(plain, spec, "w") == PodMetadata(
        "yunikorn", {"applicationId": "app", "queue": "root.a"}
    )
    gang_meta = _meta({"ray.io/gang-scheduling-enabled": "true"})
    annotations = yk.pod_metadata(gang_meta, spec, "w").annotations
    assert annotations["yunikorn.apache.org/task-group-name"] == "w"
    groups = json.loads(annotations["yunikorn.apache.org/task-groups"])
    assert [(g["name"], g["minMember"]) for g in groups] == [("headgroup", 1), ("w", 4)]
    own = _meta({"ray.io/gang-scheduling-enabled": ""}, {"yunikorn.apache.org/task-groups": "[]"})
    assert yk.pod_metadata(own, spec, "w").annotations["yunikorn.apache.org/task-groups"] == "[]"


def test_task_groups_as_go_writes_them() -> None:
    body = cluster(group("w", min_replicas=1))
    head = body["spec"]["headGroupSpec"]["template"]["spec"]
    head["nodeSelector"] = {"z": "a&b", "a": "1"}
    worker = body["spec"]["workerGroupSpecs"][0]["template"]["spec"]
    worker["tolerations"] = [{"operator": "Exists", "key": "k"}]
    worker["affinity"] = {
        "podAffinity": {},
        "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {}},
    }
    assert task_groups(_spec(body)) == (
        '[{"minResource":{"cpu":"2","memory":"4Gi"},"nodeSelector":{"a":"1","z":"a\\u0026b"},'
        '"name":"headgroup","minMember":1},'
        '{"minResource":{"cpu":"1","memory":"2Gi"},'
        '"affinity":{"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":null}},'
        '"podAffinity":{}},"name":"w","tolerations":[{"key":"k","operator":"Exists"}],"minMember":1}]'
    )


def test_gojson_struct_fields_in_go_order() -> None:
    term = {
        "topologyKey": "t",
        "labelSelector": {"matchExpressions": [{"values": ["x"], "key": "k", "operator": "In"}]},
    }
    assert gojson.dumps(gojson.encode("PodAffinityTerm", term)) == (
        '{"labelSelector":{"matchExpressions":[{"key":"k","operator":"In","values":["x"]}]},"topologyKey":"t"}'
    )
    assert gojson.dumps(gojson.encode("PreferredSchedulingTerm", {})) == '{"weight":0,"preference":{}}'


# ----------------------------------------------------------------------------- the registry


def test_names_are_kuberays() -> None:
    assert NAMES == ("volcano", "yunikorn", "scheduler-plugins", "kai-scheduler")
    assert lookup("") is None
    assert lookup("volcano") is not None
    assert check_name("kai-scheduler") == "kai-scheduler"
    with pytest.raises(ValueError, match="'kueue' is not supported: use one of volcano, yunikorn"):
        check_name("kueue")


def test_label_notes() -> None:
    volcano = lookup("volcano")
    assert (
        label_notes(volcano, _meta({"ray.io/scheduler-name": "volcano", "volcano.sh/queue-name": "q"})) == []
    )
    [note] = label_notes(volcano, _meta({"ray.io/scheduler-name": "yunikorn"}))
    assert note.startswith(
        "its label ray.io/scheduler-name=yunikorn is ignored: this operator runs with the batch"
    )
    [note] = label_notes(
        volcano, _meta({"ray.io/gang-scheduling-enabled": "true", "kai.scheduler/queue": "q"})
    )
    assert note == (
        "its labels kai.scheduler/queue (read by kai-scheduler), ray.io/gang-scheduling-enabled (read by"
        " yunikorn and scheduler-plugins) are ignored: this operator runs with the batch scheduler volcano"
        " (--batch-scheduler)"
    )
    plugins = lookup("scheduler-plugins")
    assert label_notes(plugins, _meta({"ray.io/scheduler-name": "scheduler-plugins-scheduler"})) == []
    notes = label_notes(None, _meta({"ray.io/scheduler-name": "volcano", "volcano.sh/queue-name": "q"}))
    assert len(notes) == 2
    assert "no batch scheduler" in notes[0]
    assert "the default scheduler" in notes[0]
