"""Label and annotation keys KubeRay puts on Ray pods and services, as both halves read them."""

from __future__ import annotations

RAY_CLUSTER = "ray.io/cluster"
NODE_TYPE = "ray.io/node-type"
GROUP = "ray.io/group"
IDENTIFIER = "ray.io/identifier"
IS_RAY_NODE = "ray.io/is-ray-node"
REPLICA_INDEX = "ray.io/worker-group-replica-index"
REPLICA_NAME = "ray.io/worker-group-replica-name"
HOST_INDEX = "ray.io/replica-host-index"
HEADLESS_WORKER_SVC = "ray.io/headless-worker-svc"
SERVE = "ray.io/serve"
ORIGINATED_FROM_CR_NAME = "ray.io/originated-from-cr-name"
ORIGINATED_FROM_CRD = "ray.io/originated-from-crd"
ORIGIN_RAYJOB = "RayJob"  # ORIGINATED_FROM_CRD on a RayJob's RayCluster (KubeRay's RayJobCRD)
APP_NAME = "app.kubernetes.io/name"
CREATED_BY = "app.kubernetes.io/created-by"

APP_NAME_VALUE = "kuberay"
CREATED_BY_VALUE = "kuberay-operator"
HEAD = "head"
WORKER = "worker"
HEAD_GROUP = "headgroup"

OVERWRITE_CMD_ANNOTATION = "ray.io/overwrite-container-cmd"
KUBERAY_VERSION_ANNOTATION = "ray.io/kuberay-version"
DISABLE_HEAD_RESTART_ANNOTATION = "ray.io/disable-provisioned-head-restart"
#: on the head pod: the hash of the spec it was built from (``upgradeStrategy.type: Recreate``,
#: `rayscale.controller.upgrade`)
HASH_ANNOTATION = "ray.io/upgrade-strategy-recreate-hash"

PROTECTED = (RAY_CLUSTER, NODE_TYPE, GROUP)
