"""The operator's liveness endpoint answers while it watches."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

from hack.localk8s import testcluster

from tests.support.operators import Operator, free_port
from tests.support.polling import eventually


async def test_liveness_endpoint_reports_the_watch_probe(
    cluster: testcluster.ClusterHandle, namespace: str, raycluster_crd: None
) -> None:
    url = f"http://127.0.0.1:{free_port()}/healthz"
    op = Operator(cluster, namespace, liveness=url)
    op.start()
    try:

        def probe() -> dict[str, object] | None:
            try:
                with urllib.request.urlopen(url, timeout=2) as resp:
                    return dict(json.loads(resp.read()))
            except (urllib.error.URLError, ConnectionError):
                return None

        body = await eventually(probe, timeout=60, message=f"{url} answers 200")
        assert body.get("watch") == "ok", body
    finally:
        op.stop()
        op.log.unlink(missing_ok=True)
