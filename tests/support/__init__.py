"""What the test suites share, defined once; no test module imports another test module or a conftest.

- builders.py: RayCluster bodies, groups, pods and containers for unit tests; the examples/
  RayClusters (`example`), the CPU-and-GPU cluster and its RayResourceRequest for integration tests
- fuzz_specs.py, invalid_specs.py: generated and hand-written specs at and past the schema's edges
- scenarios.py: scheduler scenarios written briefly, and the decision read back
- views.py: one cluster's view as the autoscaler observes it (the view and the status page)
- fakes.py: the fakes: clocks, an Event sink, the controller's and the autoscaler's sources and
  Kubernetes writes (rayscale.kube.ops monkeypatched), Ray's GCS (client, and gRPC server with a
  raylet), the autoscaler as the status server asks it
- fake_kube_api.py: a fake Kubernetes API server on a thread, for `rayscale status`
- polling.py: `eventually` (integration and e2e tests wait only with it) and `until` (unit tests)
- kube.py, watching.py, grpcserve.py: over a real API server: RayClusters, pods, Events, fresh
  namespaces, CRDs; every version a watch shows; an in-process gRPC server
- operators.py: `rayscale run` and KubeRay's operator as processes
- kueue.py: Kueue's own manager (hack/kueue) for the session, a test's Kueue objects (queues),
  Kueue's RayCluster test builder
- gang_scheduler.py: the gang scheduler (hack/gang) for the session, kwok GPU Nodes of a test's own
- quota.py: a PriorityClass-scoped ResourceQuota and the QuotaExceeded condition
- fixtures.py: the shared fixtures (cluster, api, namespace, operator, ...), a pytest plugin
  registered once in pyproject.toml's addopts (``-p tests.support.fixtures``)
- xdist_groups.py: how `make integration`'s pytest-xdist workers share the tests (a file per
  group, the files that start Ray nodes one group), a plugin too (``-p tests.support.xdist_groups``)
"""
