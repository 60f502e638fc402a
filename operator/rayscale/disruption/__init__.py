"""Disruptions Kubernetes announces before it takes a Ray pod away.

``notice``: the announcements read off a Node (cordons, cluster-autoscaler's and Karpenter's
removals, out-of-service and shutdown taints, spot and maintenance notices, taints and node
conditions the user names) or off a Pod (its ``DisruptionTarget`` condition), each as a `Notice`
with its cause, its deadline and whether Ray can hold it off; and ``parse_notice_flag``, the
configuration of the ``--disruption-notice`` values.

Pure: no I/O, no asyncio, no Kubernetes client. Acting on a notice (draining the Ray node first)
is another module's job. Import the modules directly; this package imports nothing.
"""
