"""The cluster's Ray auth token goes only to its own head Service unless overrides are allowed.

A listener on this machine stands in for whatever a RayCluster's editor wants to point rayscale at
with ``rayscale.io/gcs-address``: a gRPC server that records the metadata of every call it gets,
whatever the method (it answers ``GetClusterResourceState`` as a GCS would, so a rayscale that
follows the annotation keeps calling it). The cluster has token auth, so the controller makes its
Secret with a random token.

Without ``--allow-gcs-address-override`` the listener never hears from rayscale over several rounds
(each dials the head Service instead, which has no Ray here), and rayscale says once that it ignored
the annotation (a Warning Event and ``GcsAddressOverride=False``). Restarted with the flag, the
listener gets the calls, each with the cluster's token, and the condition turns True.
"""

from __future__ import annotations

import base64
import contextlib
from collections.abc import AsyncIterator, Iterator
from typing import Any

import grpc
import pytest
from hack.localk8s import testcluster
from kubernetes_asyncio import client

from rayscale.ray.address import OVERRIDE_FLAG
from rayscale.ray.wire import SERVICE
from tests.support.builders import example
from tests.support.fakes import FakeGcsServer
from tests.support.grpcserve import serving
from tests.support.kube import Kube
from tests.support.operators import Observed, autoscaler_rounds
from tests.support.polling import eventually

pytestmark = pytest.mark.integration
NAME = "raycluster-basic"
HEAD_GCS = "{name}-head-svc.{namespace}.svc.cluster.local:6379"


class Listener(grpc.GenericRpcHandler):  # type: ignore[misc]  # grpc has no type stubs: its classes are Any
    """A gRPC server that records (method, authorization metadata) of every call it receives; it
    answers GetClusterResourceState as a GCS with a running head would."""

    def __init__(self) -> None:
        self.address = ""
        self.calls: list[tuple[str, str | None]] = []
        self._state = FakeGcsServer(NAME).state_handler()

    def service(self, details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler | None:
        metadata = dict(details.invocation_metadata or ())
        method: str = details.method
        self.calls.append((method, metadata.get("authorization")))
        return self._state if method.endswith("/GetClusterResourceState") else None


@pytest.fixture
async def listener() -> AsyncIterator[Listener]:
    found = Listener()
    async with serving(found) as found.address:
        yield found


@contextlib.contextmanager
def operator(cluster: testcluster.ClusterHandle, namespace: str, *, allow: bool) -> Iterator[Observed]:
    """`rayscale run --mode all` (rounds every second, /metrics served), with
    ``--allow-gcs-address-override`` if `allow`; its log is printed when the block fails."""
    op = Observed(cluster, namespace, allow_override=allow)
    op.start()
    try:
        yield op
    except BaseException:
        print(f"--- rayscale log ({op.log}) ---\n{op.output()}")
        raise
    finally:
        op.stop()
        op.log.unlink(missing_ok=True)


def token_cluster(address: str) -> dict[str, Any]:
    body = example("raycluster-basic.yaml")
    body["metadata"]["annotations"] = {"rayscale.io/gcs-address": address}
    body["spec"]["enableInTreeAutoscaling"] = True
    body["spec"]["authOptions"] = {"mode": "token"}  # the controller makes the Secret `NAME`
    return body


async def override_condition(kube: Kube) -> dict[str, Any] | None:
    auto = ((await kube.get(NAME)).get("status") or {}).get("autoscaler") or {}
    found = [c for c in auto.get("conditions") or [] if c.get("type") == "GcsAddressOverride"]
    return found[0] if found else None


async def test_the_token_goes_to_the_annotations_address_only_when_overrides_are_allowed(
    api: client.ApiClient,
    cluster: testcluster.ClusterHandle,
    namespace: str,
    raycluster_crd: None,
    listener: Listener,
) -> None:
    kube = Kube(api, namespace)
    head = HEAD_GCS.format(name=NAME, namespace=namespace)
    await kube.create(token_cluster(listener.address))

    async def token() -> str:
        secret = await kube.core.read_namespaced_secret(NAME, namespace)
        return base64.b64decode(secret.data["auth_token"]).decode()

    with operator(cluster, namespace, allow=False) as op:  # the default
        ignored = await eventually(
            lambda: kube.events("GcsAddressIgnored"), timeout=60, message="a GcsAddressIgnored Event"
        )
        message = ignored[0].message
        for part in (f"rayscale.io/gcs-address='{listener.address}'", OVERRIDE_FLAG, head):
            assert part in message
        condition = await eventually(lambda: override_condition(kube), timeout=60, message="the condition")
        assert (condition["status"], condition["reason"]) == ("False", "OverrideNotAllowed")
        assert (await kube.get(NAME))["status"]["autoscaler"]["gcs"]["address"] == head
        # Several more rounds, each dialing the head Service: nothing reached the listener.
        start = await autoscaler_rounds(op)

        async def rounds() -> bool:
            return await autoscaler_rounds(op) >= start + 3

        await eventually(rounds, timeout=60, message="three more autoscaling rounds")
        assert listener.calls == []
        assert len(await kube.events("GcsAddressIgnored")) == 1  # once, not every round
        secret = await token()  # the token exists: rayscale had one to send

    with operator(cluster, namespace, allow=True):  # an administrator allows overrides

        async def called() -> bool:
            return len(listener.calls) >= 3

        await eventually(called, timeout=60, message="rayscale calling the annotation's address")
        assert {auth for _, auth in listener.calls} == {f"Bearer {secret}"}
        assert f"/{SERVICE.full_name}/GetClusterResourceState" in {m for m, _ in listener.calls}

        async def allowed() -> dict[str, Any] | None:
            found = await override_condition(kube)
            return found if found is not None and found["status"] == "True" else None

        condition = await eventually(allowed, timeout=60, message="GcsAddressOverride=True")
        assert condition["reason"] == "OverrideAllowed"
        assert len(await kube.events("GcsAddressOverridden")) == 1
        assert len(await kube.events("GcsAddressIgnored")) == 1
