"""KubeRay's batch scheduler integration (``--batch-scheduler``): what each scheduler asks of a
RayCluster's pods (schedulerName, labels, annotations) and the PodGroup it needs, as KubeRay
v1.6.2's operator builds them. Pure: the controller creates what these modules describe."""
