"""The generated protobuf modules, the gRPC services rayscale calls and their method paths.

Everything else in ``rayscale.ray`` imports the bindings from here, so a checkout where
``make proto`` has not run fails with an error that says so.

Each service is its descriptor in the generated module of the ``.proto`` that declares it, so a
method path (``/<package>.<Service>/<Method>``) always comes from the ``.proto``, never from a
string spelled here.
"""

from __future__ import annotations

from google.protobuf.descriptor import ServiceDescriptor

try:
    from rayscale.ray.protos import (
        autoscaler_pb2,
        common_pb2,
        gcs_pb2,
        gcs_service_pb2,
        node_manager_pb2,
    )
except ImportError as exc:  # pragma: no cover - a checkout without `make proto`
    if not (exc.name or "").startswith("rayscale.ray.protos"):
        raise
    raise ImportError(
        "rayscale.ray: the protobuf bindings of the Ray GCS protos are not generated. "
        "Run `make proto` (or `python operator/rayscale/ray/protos/generate.py` with grpcio-tools "
        "installed) before using the GCS client."
    ) from exc

__all__ = [
    "ACTOR_INFO",
    "INTERNAL_KV",
    "JOB_INFO",
    "NODE_INFO",
    "NODE_MANAGER",
    "PLACEMENT_GROUP_INFO",
    "SERVICE",
    "SERVICES",
    "autoscaler_pb2",
    "common_pb2",
    "gcs_pb2",
    "gcs_service_pb2",
    "method_path",
    "node_manager_pb2",
]

# The GCS's ray.rpc.autoscaler.AutoscalerStateService: the default of `method_path`.
SERVICE: ServiceDescriptor = autoscaler_pb2.DESCRIPTOR.services_by_name["AutoscalerStateService"]
# The GCS's info services (ray.rpc.*GcsService).
NODE_INFO: ServiceDescriptor = gcs_service_pb2.DESCRIPTOR.services_by_name["NodeInfoGcsService"]
JOB_INFO: ServiceDescriptor = gcs_service_pb2.DESCRIPTOR.services_by_name["JobInfoGcsService"]
ACTOR_INFO: ServiceDescriptor = gcs_service_pb2.DESCRIPTOR.services_by_name["ActorInfoGcsService"]
PLACEMENT_GROUP_INFO: ServiceDescriptor = gcs_service_pb2.DESCRIPTOR.services_by_name[
    "PlacementGroupInfoGcsService"
]
# The GCS's internal key-value store (ray.rpc.InternalKVGcsService): rayscale only reads it.
INTERNAL_KV: ServiceDescriptor = gcs_service_pb2.DESCRIPTOR.services_by_name["InternalKVGcsService"]
# Each raylet's ray.rpc.NodeManagerService.
NODE_MANAGER: ServiceDescriptor = node_manager_pb2.DESCRIPTOR.services_by_name["NodeManagerService"]

# Every service declared in the protos.
SERVICES: tuple[ServiceDescriptor, ...] = (
    SERVICE,
    NODE_INFO,
    JOB_INFO,
    ACTOR_INFO,
    PLACEMENT_GROUP_INFO,
    INTERNAL_KV,
    NODE_MANAGER,
)


def method_path(name: str, service: ServiceDescriptor = SERVICE) -> str:
    """The gRPC path of one method of `service` (default: the AutoscalerStateService), e.g.
    ``/ray.rpc.autoscaler.AutoscalerStateService/DrainNode`` or, with ``service=NODE_INFO``,
    ``/ray.rpc.NodeInfoGcsService/GetAllNodeInfo``."""
    method = service.methods_by_name[name]  # KeyError for a method the proto does not declare
    return f"/{service.full_name}/{method.name}"
