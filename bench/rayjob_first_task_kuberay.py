"""What KubeRay's side of bench/rayjob_first_task.py needs beyond its operator: the way its operator
reaches each cluster's dashboard, and Ray's autoscaler sidecar of the head pod as a local process.

- `DashboardProxy`: KubeRay's operator reads a K8sJobMode job's status from
  ``http://<cluster>-head-svc.<ns>.svc.cluster.local:8265/api/jobs/<id>``. That name does not resolve
  here, so the operator's process gets ``HTTP_PROXY`` = this proxy (bench.rayjob_fleet's
  `ProxiedBench`): Go's net/http then sends such requests here in absolute form, and the proxy
  forwards each to the real dashboard the Ray bridge runs for that cluster
  (`JobBridge.dashboard`). Every forwarded call is counted; a KubeRay run with none is a failure.
- `sidecar`: ``ray kuberay-autoscaler`` (Ray's autoscaler v1, KubeRay's default) as KubeRay's
  autoscaler container runs it in the head pod, started when the head pod is Running (the
  container starts with the pod; it waits for the head's GCS as in the pod, checking every 5 s),
  with the container's environment (the cluster's name and namespace, the head pod's name) and the
  API server's address and the kubeconfig's client certificate (bench.ray_sidecar.credentials).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import aiohttp
from aiohttp import web
from e2e.raybridge import rayproc
from e2e.raybridge.jobbridge import JobBridge

from bench.operator_scale import process
from bench.ray_sidecar import V2_ENV, credentials
from bench.rayjob_fake_ray import serving_http

HEAD_SERVICE_SUFFIX = "-head-svc"  # KubeRay's head Service: <cluster>-head-svc
V1 = {V2_ENV: "0"}  # Ray's autoscaler v1, KubeRay's default (no autoscalerOptions.version)
HOP_BY_HOP = frozenset(
    {"connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade", "host", "content-length"}
)


def cluster_of_host(host: str) -> str | None:
    """The RayCluster a head Service's host name stands for (``c-head-svc.ns.svc...`` -> ``c``)."""
    first = host.split(".", 1)[0]
    return first.removesuffix(HEAD_SERVICE_SUFFIX) if first.endswith(HEAD_SERVICE_SUFFIX) else None


class DashboardProxy:
    """An HTTP proxy on 127.0.0.1 that sends each head Service's requests to its cluster's real
    dashboard (the `bridge` of the current run; set it before the operator's first call)."""

    def __init__(self) -> None:
        self.bridge: JobBridge | None = None
        self.forwarded = 0
        self.refused = 0  # no such cluster (yet), or not a proxy request

    async def handle(self, request: web.BaseRequest) -> web.StreamResponse:
        cluster = cluster_of_host(request.url.host or "")
        target = None
        if request.raw_path.startswith("http://") and cluster is not None and self.bridge is not None:
            target = self.bridge.dashboard(cluster)
        if target is None:
            self.refused += 1
            return web.Response(status=502, text=f"no dashboard for {request.url.host!r}")
        headers = {k: v for k, v in request.headers.items() if k.lower() not in HOP_BY_HOP}
        body = await request.read() if request.can_read_body else None
        try:
            async with (
                aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as session,
                session.request(
                    request.method, target + request.rel_url.path_qs, headers=headers, data=body
                ) as answer,
            ):
                payload = await answer.read()
                kept = {k: v for k, v in answer.headers.items() if k.lower() not in HOP_BY_HOP}
        except (aiohttp.ClientError, TimeoutError) as exc:
            self.refused += 1
            return web.Response(status=502, text=f"{target}: {exc}")
        self.forwarded += 1
        return web.Response(status=answer.status, body=payload, headers=kept)

    def serving(self) -> contextlib.AbstractAsyncContextManager[str]:
        """Listening on a port of 127.0.0.1; yields ``http://127.0.0.1:PORT``."""
        return serving_http(self.handle)


def sidecar_command(cluster: str, namespace: str, gcs: str) -> list[str]:
    return [rayproc.ray_cli(), "kuberay-autoscaler", "--cluster-name", cluster,
            "--cluster-namespace", namespace, "--gcs-address", gcs]  # fmt: skip


@contextlib.contextmanager
def sidecar(
    kubeconfig: Path, scratch: Path, cluster: str, namespace: str, head_pod: str, gcs: str
) -> Iterator[subprocess.Popen[bytes]]:
    """Ray's autoscaler sidecar of `cluster`'s head pod `head_pod`, its GCS at `gcs`; stopped (its
    process group) on the way out. Blocking on the way out (up to 20 s): leave it off the loop."""
    host, port, env = credentials(kubeconfig, scratch)
    ray = rayproc.ray_cli()
    env |= V1 | {
        "KUBERNETES_SERVICE_HOST": host,  # not https://...: Ray adds the scheme after the port
        "KUBERNETES_SERVICE_PORT_HTTPS": str(port),
        "KUBERAY_CRD_VER": "v1",
        "RAY_CLUSTER_NAME": cluster,
        "RAY_CLUSTER_NAMESPACE": namespace,
        "RAY_HEAD_POD_NAME": head_pod,
        "PATH": f"{Path(ray).parent}{os.pathsep}{os.environ.get('PATH', '')}",  # it runs `ray health-check`
    }
    log = scratch / f"ray-sidecar-{namespace}.log"
    command = sidecar_command(cluster, namespace, gcs)
    with process(command, rayproc.driver_env(env), "ray-sidecar", namespace, log) as proc:
        yield proc
