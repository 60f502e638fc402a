"""What a RayCluster implies, derived in one place for the controller, the autoscaler and the CLI.

Every fact that more than one part of rayscale reads off a RayCluster lives here, once:

- ``naming``: the names of the objects KubeRay creates for a cluster, the head Service and the
  GCS address behind it (the cluster domain, ``$CLUSTER_DOMAIN``), the ports, the auth-token
  Secret;
- ``meta``: the RayCluster's metadata as plain data, and the owner reference of what it owns;
- ``accelerators``: which Kubernetes resources are GPUs, TPUs and Neuron cores, and the Ray
  resources they become;
- ``host``: the Ray resources and labels of one host (pod) of a group, as ``ray start`` announces
  them and as the autoscaler assumes them;
- ``ft``: the GCS fault-tolerance switches;
- ``replicas``: the replicas and pods a worker group keeps (``clamp(replicas, min, max)`` x
  ``numOfHosts``);
- ``limits``: the worker pods one RayCluster may ask for;
- ``validation`` (with ``fields``, the checks of single fields, and ``rayversion``): whether a
  RayCluster may be acted on at all, and the problem when not.

Pure: these modules read plain mappings and the API models (`rayscale.api`) and the pure shared
modules (`rayscale.common`), and import neither the controller nor the autoscaler, nor kopf, a
Kubernetes client, gRPC or asyncio (`make lint` checks it with lint-imports). Import the modules
directly; this package imports nothing.
"""
