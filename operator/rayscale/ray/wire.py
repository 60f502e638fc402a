"""The generated protobuf modules and the AutoscalerStateService method paths.

Everything else in ``rayscale.ray`` imports the bindings from here, so a checkout where
``make proto`` has not run fails with an error that says so.
"""

from __future__ import annotations

try:
    from rayscale.ray.protos import autoscaler_pb2, common_pb2
except ImportError as exc:  # pragma: no cover - a checkout without `make proto`
    if not (exc.name or "").startswith("rayscale.ray.protos"):
        raise
    raise ImportError(
        "rayscale.ray: the protobuf bindings of the Ray GCS protos are not generated. "
        "Run `make proto` (or `python operator/rayscale/ray/protos/generate.py` with grpcio-tools "
        "installed) before using the GCS client."
    ) from exc

__all__ = ["SERVICE", "autoscaler_pb2", "common_pb2", "method_path"]

SERVICE = autoscaler_pb2.DESCRIPTOR.services_by_name["AutoscalerStateService"]


def method_path(name: str) -> str:
    """The gRPC path of one method, e.g. ``/ray.rpc.autoscaler.AutoscalerStateService/DrainNode``."""
    method = SERVICE.methods_by_name[name]  # KeyError for a method the proto does not declare
    return f"/{SERVICE.full_name}/{method.name}"
