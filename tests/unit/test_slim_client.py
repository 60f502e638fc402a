"""kubernetes-asyncio without its model classes (`rayscale.slim_client`), in fresh interpreters."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def probe(code: str) -> object:
    """Run `code` in a fresh interpreter with the operator on the path; what it prints, as JSON."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "operator")}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


MODELS = "sum(1 for m in sys.modules if m.startswith('kubernetes_asyncio.client.models.'))"


def test_the_operator_s_client_names_load_no_model_class() -> None:
    found = probe(
        "import sys, json, rayscale.run, rayscale.kube.client\n"
        "from kubernetes_asyncio import client, config\n"
        "names = [client.ApiClient, client.Configuration, client.CoreV1Api, client.CustomObjectsApi,\n"
        "         client.CoordinationV1Api, client.BatchV1Api, client.NetworkingV1Api,\n"
        "         client.RbacAuthorizationV1Api, client.ApiException, config.load_kube_config]\n"
        f"print(json.dumps([{MODELS}, [n.__module__ for n in names]]))\n"
    )
    assert found == [
        0,
        [
            "kubernetes_asyncio.client.api_client",
            "kubernetes_asyncio.client.configuration",
            "kubernetes_asyncio.client.api.core_v1_api",
            "kubernetes_asyncio.client.api.custom_objects_api",
            "kubernetes_asyncio.client.api.coordination_v1_api",
            "kubernetes_asyncio.client.api.batch_v1_api",
            "kubernetes_asyncio.client.api.networking_v1_api",
            "kubernetes_asyncio.client.api.rbac_authorization_v1_api",
            "kubernetes_asyncio.client.exceptions",
            "kubernetes_asyncio.config.kube_config",
        ],
    ]


def test_a_model_class_loads_its_own_module_and_anything_else_the_whole_library() -> None:
    found = probe(
        "import sys, json, rayscale, kopf\n"  # kopf imports V1ObjectMeta and V1OwnerReference
        "from kubernetes_asyncio import client\n"
        "import kubernetes_asyncio.client.models as models\n"
        f"kopf_only = {MODELS}\n"
        "pod, service = client.V1Pod.__name__, models.V1Service.__name__\n"
        f"named = {MODELS}\n"
        "from kubernetes_asyncio.watch import Watch\n"
        "import kubernetes_asyncio\n"
        "version = client.__version__\n"  # not a class: the real __init__ runs
        "print(json.dumps([kopf_only <= 3, named <= 8, pod, service, client.AppsV1Api.__name__,\n"
        f"  Watch.__name__, kubernetes_asyncio.__version__ == version, {MODELS} > 500]))\n"
    )
    assert found == [True, True, "V1Pod", "V1Service", "AppsV1Api", "Watch", True, True]


def test_a_library_imported_before_rayscale_is_left_as_it_is() -> None:
    found = probe(
        "import sys, json, kubernetes_asyncio.client\n"
        f"before = {MODELS}\n"
        "import rayscale\n"
        "from rayscale.slim_client import STAND_INS\n"
        "print(json.dumps([before > 500, sys.modules['kubernetes_asyncio.client'].V1Pod.__name__]))\n"
    )
    assert found == [True, "V1Pod"]


def test_the_operator_starts_without_grpc_or_the_model_classes() -> None:
    """gRPC and Ray's protos (about 10 MiB) load when a RayCluster first needs its GCS."""
    found = probe(
        "import sys, json, rayscale.run, rayscale.handlers, rayscale.web\n"
        "loaded = ('grpc', 'google.protobuf', 'rayscale.ray.client', 'rayscale.ray.raylet')\n"
        f"print(json.dumps([[m for m in loaded if m in sys.modules], {MODELS} <= 3]))\n"
    )
    assert found == [[], True]
