"""Disruptions Kubernetes announces before it takes a Ray pod away.

``notice``: the announcements read off a Node (cordons, cluster-autoscaler's and Karpenter's
removals, out-of-service and shutdown taints, spot and maintenance notices, taints and node
conditions the user names) or off a Pod (its ``DisruptionTarget`` condition), each as a `Notice`
with its cause, its deadline and whether Ray can hold it off; and ``parse_notice_flag``, the
configuration of the ``--disruption-notice`` values. ``nodes``: each Node's notice, kept as the
Node watch delivers them. ``podslim``: the indexed copy of a pod, with what its notice reads.
``units``: a cluster's pods grouped into the units that go as one (a worker pod, a multi-host
replica). ``plan``: for one RayCluster, what to do about the notices (Ray drains, pod deletes,
replacements, the head's warning).

Pure: no I/O, no asyncio, no Kubernetes client. Carrying out a plan (asking Ray, deleting pods) is
the autoscaler's round (rayscale.autoscaler.disruptions); the Nodes are watched by
rayscale.nodewatch. Import the modules directly; this package imports nothing.
"""
