"""The error of a failed call to Ray's GCS or a raylet, without the gRPC client: code that only
catches it (the autoscaler's round) does not load gRPC, which `rayscale.ray.client` imports when a
RayCluster first needs a GCS connection (gRPC and the protos are about 10 MiB of the process)."""

from __future__ import annotations

__all__ = ["GcsError"]


class GcsError(Exception):
    """A call to a Ray GCS (or, from ``RayletClient``, a raylet: `peer` says which) failed."""

    def __init__(self, address: str, method: str, code: str, details: str, *, peer: str = "GCS") -> None:
        super().__init__(f"{peer} {address}: {method} failed: {code}: {details}")
        self.address = address
        self.method = method
        # gRPC status code name, e.g. "UNAVAILABLE"; "GCS_STATUS_<n>" for an error the GCS put in
        # the reply's status (Ray's own status code n).
        self.code = code
        self.details = details
        self.peer = peer
