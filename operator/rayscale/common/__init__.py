"""What the controller and the autoscaler both use that is not about a RayCluster's spec.

- ``labels``: the label and annotation keys KubeRay puts on Ray pods and services;
- ``pods``: reading a Ray pod (phase, conditions, group, health), and the slim copy of it that
  the operator's pod index keeps;
- ``timefmt``: times as the Kubernetes API writes them;
- ``retry``: per-key exponential backoff after failed runs;
- ``workqueue``: the queue of dirty keys that runs each key's reconcile or autoscaling round.
- ``types``: the type aliases every part shares (an object as read, a manifest, a cluster's key).

The layer below both halves and the Kubernetes and Ray clients: nothing here imports
`rayscale.controller`, `rayscale.autoscaler`, `rayscale.kube` or `rayscale.ray` (`make lint` checks
it with lint-imports). All but ``workqueue`` (asyncio) are pure. Import the modules directly; this
package imports nothing.
"""
