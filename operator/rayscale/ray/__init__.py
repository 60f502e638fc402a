"""Ray's GCS, as rayscale sees it: cluster resource state, request_resources and DrainNode.

Modules (import them directly; this package imports nothing so that ``make proto`` can run
before the bindings exist):

- ``model``: plain typed dataclasses of what rayscale reads from Ray (no protobuf);
- ``address``: the GCS address and auth-token Secret of a RayCluster;
- ``client``: ``GcsClient``, the async gRPC client, and its errors;
- ``convert``: protobuf messages <-> ``model``;
- ``wire``: the generated protobuf modules and the service's method paths;
- ``protos``: the ``.proto`` sources and their generator;
- ``debug``: ``python -m rayscale.ray.debug HOST:PORT`` prints what rayscale reads, as JSON.

No Kubernetes or kopf code here.
"""
