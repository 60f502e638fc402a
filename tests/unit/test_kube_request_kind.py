"""The verb and resource of an API request, as the client's metrics label it."""

from __future__ import annotations

import pytest

from rayscale.kube.request_kind import request_kind

BASE = "https://10.0.0.1:6443"


@pytest.mark.parametrize(
    ("method", "path", "kind"),
    [
        ("POST", "/api/v1/namespaces/ns/pods", ("create", "pods")),
        ("DELETE", "/api/v1/namespaces/ns/pods/p-1", ("delete", "pods")),
        ("DELETE", "/api/v1/namespaces/ns/pods", ("deletecollection", "pods")),
        ("GET", "/api/v1/namespaces/ns/secrets/s", ("get", "secrets")),
        ("GET", "/api/v1/namespaces/ns/events?fieldSelector=reason%3DX", ("list", "events")),
        ("PATCH", "/apis/ray.io/v1/namespaces/ns/rayclusters/rc", ("patch", "rayclusters")),
        ("PATCH", "/apis/ray.io/v1/namespaces/ns/rayclusters/rc/status", ("patch", "rayclusters/status")),
        ("GET", "/apis/ray.io/v1/rayclusters?limit=100", ("list", "rayclusters")),
        ("PUT", "/apis/coordination.k8s.io/v1/namespaces/ns/leases/l", ("update", "leases")),
        ("GET", "/api/v1/namespaces/ns", ("get", "namespaces")),
        ("GET", "/version", ("get", "other")),
        ("GET", "/apis", ("get", "other")),
    ],
)
def test_the_kind_of_a_request(method: str, path: str, kind: tuple[str, str]) -> None:
    assert request_kind(method, BASE + path) == kind
    assert request_kind(method, path) == kind
