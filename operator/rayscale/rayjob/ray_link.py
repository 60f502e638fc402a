"""The RayJob controller's link to each cluster's Ray: the submission's status read from the GCS
(Ray's job manager keeps it in the GCS's key-value store, so a dashboard that is down does not hide
a running job), and the dashboard's job API for what only it does: submit (HTTPMode) and stop. I/O.

Addresses: the GCS as the autoscaler dials it (``rayscale.ray.address.gcs_target``: the head
Service, or with ``--allow-gcs-address-override`` the ``rayscale.io/gcs-address`` annotation), read
on the autoscaler's own connection when it holds one to that address (`SharedGcs`: one connection
per cluster), else on a client of this link's own (``--mode controller``, a cluster the autoscaler
does not take, or before its first round); the dashboard at the head Service's ``dashboard`` port
(or, with the same flag, the ``rayscale.io/dashboard-address`` annotation). The cluster's Ray auth
token goes to both.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from rayscale.api.raycluster import RayClusterSpec
from rayscale.cluster import naming
from rayscale.cluster.meta import ClusterMeta
from rayscale.common.types import ClusterKey, Obj
from rayscale.kube import ops
from rayscale.ray.address import auth_token_secret, gcs_target
from rayscale.rayjob.plan import Submission

if TYPE_CHECKING:
    from rayscale.ray.client import GcsClient

__all__ = ["DASHBOARD_ADDRESS_ANNOTATION", "RayJobRay", "SharedGcs"]

DASHBOARD_ADDRESS_ANNOTATION = "rayscale.io/dashboard-address"


class SharedGcs(Protocol):
    """Whoever else holds each cluster's GCS connection (the autoscaler's ``GcsLink``)."""

    def lend(self, key: ClusterKey, address: str) -> GcsClient | None: ...


class RayJobRay:
    def __init__(
        self,
        api: Any,
        *,
        allow_gcs_address_override: bool = False,
        timeout: float = 5.0,
        shared: SharedGcs | None = None,
    ) -> None:
        self.api = api
        self.allow_override = allow_gcs_address_override
        self.timeout = timeout
        self.shared = shared  # None: the autoscaler does not run
        self._gcs: dict[tuple[str, str | None], GcsClient] = {}

    async def _token(self, meta: ClusterMeta, spec: RayClusterSpec) -> str | None:
        ref = auth_token_secret(meta, spec)
        if ref is None:
            return None
        return await ops.read_secret_key(self.api, ref.namespace, ref.name, ref.key)

    @staticmethod
    def _parse(cluster: Obj) -> tuple[ClusterMeta, RayClusterSpec]:
        return ClusterMeta.from_body(cluster), RayClusterSpec.model_validate(cluster.get("spec") or {})

    async def _client(self, cluster: Obj) -> GcsClient:
        from rayscale.ray.client import GcsClient

        meta, spec = self._parse(cluster)
        address = gcs_target(meta, spec, allow_override=self.allow_override).address
        lent = None if self.shared is None else self.shared.lend((meta.namespace, meta.name), address)
        if lent is not None:
            await self._close_own(address)
            return lent
        token = await self._token(meta, spec)
        client = self._gcs.get((address, token))
        if client is None:
            client = self._gcs[(address, token)] = GcsClient(
                address, token=token, timeout=self.timeout, retries=1
            )
        return client

    def dashboard_address(self, cluster: Obj) -> str:
        meta, spec = self._parse(cluster)
        override = str(meta.annotations.get(DASHBOARD_ADDRESS_ANNOTATION) or "").strip()
        if self.allow_override and override:
            return override if override.startswith("http") else f"http://{override}"
        head = spec.head_group_spec
        service = naming.head_service_name(meta.name, head.head_service)
        port = naming.DASHBOARD_PORT
        for container in ((head.template.get("spec") or {}).get("containers") or [{}])[:1]:
            for item in container.get("ports") or []:
                if item.get("name") == "dashboard":
                    port = int(item.get("containerPort") or port)
        return f"http://{naming.fqdn(service, meta.namespace)}:{port}"

    async def submission(self, cluster: Obj, job_id: str) -> Submission | None:
        info = await (await self._client(cluster)).get_submission(job_id)
        if info is None:
            return None
        return Submission(info.status, info.message, info.start_time_ms, info.end_time_ms)

    async def drain_workers(self, cluster: Obj, pods: Sequence[str]) -> set[str]:
        """Ask the Ray node of each worker pod that runs one to drain (``IDLE_TERMINATION``: a node
        with work refuses), before a DeleteWorkers policy deletes the pods; the pods whose node
        accepted. One after the other: a DeleteWorkers cluster is small and fixed."""
        client = await self._client(cluster)
        state = await client.get_cluster_resource_state()
        accepted = set()
        for pod in pods:
            node = state.node_by_instance(pod)
            if node is None or not node.alive:
                continue
            message = f"rayscale: RayJob finished (DeleteWorkers), removing pod {pod}"
            if (await client.drain_node(node.node_id, message=message)).accepted:
                accepted.add(pod)
        return accepted

    async def _dashboard(self, cluster: Obj) -> Any:
        from rayscale.ray.dashboard import DashboardClient

        meta, spec = self._parse(cluster)
        return DashboardClient(self.dashboard_address(cluster), token=await self._token(meta, spec))

    async def submit(self, cluster: Obj, submission_id: str, spec: Mapping[str, Any]) -> None:
        from rayscale.ray.jobrequest import SubmitRequest

        dashboard = await self._dashboard(cluster)
        try:
            await dashboard.submit(SubmitRequest.from_rayjob_spec(dict(spec), submission_id))
        finally:
            await dashboard.close()

    async def stop(self, cluster: Obj | None, namespace: str, job_id: str) -> None:
        if cluster is None or not job_id:
            return
        dashboard = await self._dashboard(cluster)
        try:
            await dashboard.stop(job_id)
        finally:
            await dashboard.close()

    async def _close_own(self, address: str) -> None:
        """Close this link's own clients of `address`, now that the autoscaler's serves it."""
        for key in [k for k in self._gcs if k[0] == address]:
            await self._gcs.pop(key).close()

    async def close(self) -> None:
        clients, self._gcs = list(self._gcs.values()), {}
        for client in clients:
            await client.close()
