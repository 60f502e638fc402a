"""Names that vulture (`make lint`, the dead-code check) cannot see used: each is read by a library or
called by name. Vulture only parses this file: each `_.name` below marks `name` as used wherever it is
defined. Decorated kopf handlers, pytest fixtures and hooks, `pytestmark` and the differential
allowlist's predicates are left out by [tool.vulture] in pyproject.toml instead.

Before adding a name, make sure it is not simply dead: delete dead code rather than list it here.
"""

from typing import Any

_: Any = None

# The CRD models (operator/rayscale/api/): pydantic fields that make the schema `rayscale crds` writes
# and that objects are validated against; the operator reads and writes these objects as dicts.
_.path_type
_.claim_name
_.storage_class_name
_.access_modes
_.sub_path
_.deletion_policy
_.observed_generation
_.last_transition_time
_.pod_ip
_.service_ip
_.service_name
_.last_contact_time
_.oldest_starting
_.last_decision_time
_.state_transition_times
_.ready_worker_replicas
_.available_worker_replicas
_.desired_worker_replicas
_.min_worker_replicas
_.max_worker_replicas
_.desired_cpu
_.desired_memory
_.desired_gpu
_.desired_tpu
_.last_update_time
_.ray_resource
_.job_clusters
_.model_config  # pydantic's class configuration
# The RayJob and RayCronJob models (api/rayjob.py, rayjob_v1alpha1.py, raycronjob.py): KubeRay's fields
_.active_deadline_seconds
_.deletion_rules
_.deletion_strategy
_.end_time
_.entrypoint_num_cpus
_.entrypoint_num_gpus
_.entrypoint_resources
_.job_deployment_status
_.job_template
_.last_schedule_time
_.pre_running_deadline_seconds
_.ray_cluster_spec
_.ray_cluster_status
_.ray_job_info
_.runtime_env_yaml
_.shutdown_after_job_finishes
_.start_time
_.submitter_config
_.submitter_pod_template
_.time_zone

# UpscalingMode.AGGRESSIVE: a value of spec.autoscalerOptions.upscalingMode, read by UpscalingMode(value)
_.AGGRESSIVE

# kopf's settings, set in handlers.configure and read by kopf
_.level
_.loggers
_.reporting_component
_.server_timeout
_.client_timeout
_.connect_timeout
_.inactivity_timeout
_.request_timeout
_.error_backoffs
_.diffbase_storage
_.chunk_size
_.idle_timeout
_._original  # kopf's Patch, set as kopf's own __init__ does (kube/kopf_views.py)
_._fns

# kubernetes_asyncio's Configuration, read by its connection pool (kube/client.py)
_.connection_pool_maxsize

# Parameters a protocol fixes: __aexit__(exc_type, exc, tb), signal handlers (signum, frame)
_.exc_type
_.tb
_.signum

# html.parser.HTMLParser callbacks (the status page tests)
_.handle_starttag
_.handle_data

# e2e/raybridge/driver_main.py: commands, called by the name a JSON command gives (getattr)
_.actor_node
_.remove_pg
_.task_result
_.task_outcome
_.burst_done

# pytest fixtures that tests request only for what they set up
_.redis
_.rrr_crd
_.rvc_crd
_.fake_ray
_.raycluster_crd  # the RayCluster CRD established (tests/support/fixtures.py)

# tests/support/xdist_groups.py: pytest-xdist's LoadScopeScheduling calls it (a scope per test)
_._split_scope

# operator/rayscale/slim_client.py: Python calls a module's __getattr__ (PEP 562) and a loader's
# create_module (the import system)
_.__getattr__
_.create_module
