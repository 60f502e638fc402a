"""Ray's GCS and raylets, as rayscale sees them: cluster resource state, request_resources,
DrainNode, the GCS's tables of nodes, jobs, actors and placement groups, and resizing a node's
resources.

Modules (import them directly; this package imports nothing so that ``make proto`` can run
before the bindings exist):

- ``model``: plain typed dataclasses of what rayscale reads from Ray (no protobuf);
- ``address``: the GCS address and auth-token Secret of a RayCluster;
- ``client``: ``GcsClient``, the async gRPC client, its errors and the plumbing it shares
  (``RpcClient``);
- ``raylet``: ``RayletClient``, the async gRPC client of one node's raylet;
- ``convert``: protobuf messages <-> ``model``;
- ``wire``: the generated protobuf modules, the services and their method paths;
- ``protos``: the ``.proto`` sources and their generator;
- ``debug``: ``python -m rayscale.ray.debug HOST:PORT`` prints what rayscale reads, as JSON.

No Kubernetes or kopf code here.
"""
