"""A gang scheduler (scheduler-plugins' kube-scheduler with its Coscheduling plugin, unchanged) as a
local process beside the local control plane's default scheduler, for the tests that check gangs are
admitted all or nothing.

- build.sh: the scheduler and its PodGroup CRD into ~/.cache/rayscale;
- `local`: install the CRD on a cluster, start the scheduler, wait until it is ready, stop it (the
  command line: ``python -m hack.gang``).

See README.md beside this file.
"""
