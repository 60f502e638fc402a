"""Kueue (sigs.k8s.io/kueue, its manager unchanged) as a local process beside the local control
plane, for the tests that run RayClusters and RayJobs under Kueue.

- build.sh: Kueue's manager, its CRDs and webhook manifests into ~/.cache/rayscale;
- `local`: install what it needs on a cluster, start it, wait until the API server reaches its
  webhooks, stop it (the command line: ``python -m hack.kueue``).

See README.md beside this file.
"""
