"""What a RayCluster implies, derived in one place for the controller, the autoscaler and the CLI.

Every fact that more than one part of rayscale reads off a RayCluster lives here, once:

- ``naming``: the names of the objects KubeRay creates for a cluster, the head Service and the
  GCS address behind it (the cluster domain, ``$CLUSTER_DOMAIN``), the ports, the auth-token
  Secret;
- ``accelerators``: which Kubernetes resources are GPUs, TPUs and Neuron cores, and the Ray
  resources they become;
- ``host``: the Ray resources and labels of one host (pod) of a group, as ``ray start`` announces
  them and as the autoscaler assumes them;
- ``ft``: the GCS fault-tolerance switches.

Pure: these modules read plain mappings and the API models (`rayscale.api`), and import neither
the controller nor the autoscaler, nor kopf, a Kubernetes client, gRPC or asyncio. Import the
modules directly; this package imports nothing.
"""
