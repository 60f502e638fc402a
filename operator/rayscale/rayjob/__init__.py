"""RayJobs and RayCronJobs (ray.io/v1), as KubeRay v1.6 runs them: the state machine (`plan`), what
it builds (`build`: the RayCluster, the submitter Job, the head Service), its checks (`validation`),
the deletion policies (`deletion`), the cron schedule (`cron`), and the controller that reads the
indexes, runs the plan and writes (`controller`)."""
