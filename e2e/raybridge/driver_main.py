"""A Ray driver that takes commands: one JSON object a line on stdin, one framed JSON reply each on
a pipe of its own (replies.py).

Run by `e2e.raybridge.driver.RayDriver` as ``python driver_main.py GCS_ADDRESS NODE_IP REPLY_FD``
(with ``E2E_JOB_SUBMISSION_ID`` set, its job carries that submission id, as a submitted job does); it
is the only place in the e2e suite that imports ``ray`` (the test process must not: Ray's protobuf
messages clash with rayscale's). Each command has an ``id``; its reply carries it back. The first
reply, once connected, is ``{"id": 0, "ready": true}``. Replies go only to file descriptor
REPLY_FD, which no other process inherits; stdout and stderr are the driver's log, where Ray writes
what it likes.

Every command returns at once: work is submitted, and "is it done" questions use
``ray.wait(timeout=0)`` so that the test polls with its own deadline. Commands (``op``):

- ``actor`` name, num_cpus, num_gpus, resources, lifetime (``"detached"``: it outlives the driver),
  max_restarts (Ray's; -1: restarted elsewhere without end when its node dies): an actor that holds
  those resources while it lives
- ``actor_node`` name: the Ray node id it runs on, or null while it waits for a node
- ``kill`` name: kill the actor (also a detached one another driver created)
- ``pg`` name, bundles, strategy, bundle_label_selector (optional, one selector a bundle): a
  placement group; ``pg_nodes`` name: bundle -> node id once ready, else null; ``remove_pg`` name
- ``request_resources`` num_cpus, bundles: ``ray.autoscaler.sdk.request_resources``
- ``task`` name, num_cpus, num_gpus, resources, label_selector, fallback_strategy (both optional,
  Ray's task options), marker: a task that writes its node id to ``marker.started`` and returns
  once ``marker`` exists; ``task_result`` name: its return value or null while running (an error
  if it failed); ``task_outcome`` name: ``{"state": "running"}``, ``{"state": "done", "value":
  ...}`` or ``{"state": "failed", "error": "ExceptionType: message"}``
- ``burst`` name, count, num_cpus, seconds: `count` tasks that each sleep `seconds`;
  ``burst_done`` name: the node ids they ran on once all are done, else null
- ``nodes``: ``ray.nodes()``, reduced to id, alive, resources, labels
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from typing import Any

import ray
from ray.autoscaler.sdk import request_resources
from ray.util.placement_group import placement_group, placement_group_table, remove_placement_group
from replies import open_writer, write_frame  # replies.py beside it: a script's directory is on sys.path

SUBMISSION_ID_ENV = "E2E_JOB_SUBMISSION_ID"


@ray.remote
class Holder:
    def node(self) -> str:
        return str(ray.get_runtime_context().get_node_id())


@ray.remote
def wait_for(marker: str) -> str:
    node = str(ray.get_runtime_context().get_node_id())
    with open(marker + ".started", "w") as out:
        out.write(node)
    deadline = time.monotonic() + 600
    while not os.path.exists(marker) and time.monotonic() < deadline:
        time.sleep(0.05)
    return node if os.path.exists(marker) else "gave up"


@ray.remote
def sleep_for(seconds: float) -> str:
    time.sleep(seconds)
    return str(ray.get_runtime_context().get_node_id())


class Commands:
    def __init__(self) -> None:
        self.actors: dict[str, Any] = {}
        self.pings: dict[str, Any] = {}
        self.pgs: dict[str, Any] = {}
        self.tasks: dict[str, Any] = {}
        self.batches: dict[str, list[Any]] = {}

    @staticmethod
    def _done(ref: Any) -> Any:
        ready, _ = ray.wait([ref], timeout=0)
        return ray.get(ready[0]) if ready else None

    def actor(
        self,
        name: str,
        num_cpus: float = 1,
        num_gpus: float = 0,
        resources: Any = None,
        lifetime: str | None = None,
        max_restarts: int = 0,
    ) -> Any:
        handle = Holder.options(  # type: ignore[attr-defined]
            name=name,
            num_cpus=num_cpus,
            num_gpus=num_gpus,
            resources=resources or {},
            lifetime=lifetime,
            max_restarts=max_restarts,
        ).remote()
        self.actors[name] = handle
        self.pings[name] = handle.node.remote()
        return name

    def actor_node(self, name: str) -> Any:
        return self._done(self.pings[name])

    def kill(self, name: str) -> Any:
        handle = self.actors.pop(name, None)
        ray.kill(handle if handle is not None else ray.get_actor(name))  # another driver's (detached)
        self.pings.pop(name, None)
        return name

    def pg(
        self,
        name: str,
        bundles: list[dict[str, float]],
        strategy: str,
        bundle_label_selector: list[dict[str, str]] | None = None,
    ) -> Any:
        group = placement_group(
            bundles, strategy=strategy, name=name, bundle_label_selector=bundle_label_selector
        )
        self.pgs[name] = (group, group.ready())
        return group.id.hex()

    def pg_nodes(self, name: str) -> Any:
        group, ready = self.pgs[name]
        if self._done(ready) is None:
            return None
        return {str(k): v for k, v in placement_group_table(group)["bundles_to_node_id"].items()}

    def remove_pg(self, name: str) -> Any:
        remove_placement_group(self.pgs.pop(name)[0])
        return name

    def request_resources(self, num_cpus: int | None = None, bundles: Any = None) -> Any:
        request_resources(num_cpus=num_cpus, bundles=bundles)
        return True

    def task(
        self,
        name: str,
        marker: str,
        num_cpus: float = 1,
        num_gpus: float = 0,
        resources: Any = None,
        label_selector: dict[str, str] | None = None,
        fallback_strategy: list[dict[str, Any]] | None = None,
    ) -> Any:
        options: dict[str, Any] = {"num_cpus": num_cpus, "num_gpus": num_gpus, "resources": resources or {}}
        if label_selector is not None:
            options["label_selector"] = label_selector
        if fallback_strategy is not None:
            options["fallback_strategy"] = fallback_strategy
        self.tasks[name] = wait_for.options(**options).remote(marker)
        return name

    def task_result(self, name: str) -> Any:
        return self._done(self.tasks[name])

    def task_outcome(self, name: str) -> Any:
        ready, _ = ray.wait([self.tasks[name]], timeout=0)
        if not ready:
            return {"state": "running"}
        try:
            return {"state": "done", "value": ray.get(ready[0])}
        except Exception as exc:
            return {"state": "failed", "error": f"{type(exc).__name__}: {exc}"}

    def burst(self, name: str, count: int, seconds: float, num_cpus: float = 1) -> Any:
        task = sleep_for.options(num_cpus=num_cpus)
        self.batches[name] = [task.remote(seconds) for _ in range(count)]
        return name

    def burst_done(self, name: str) -> Any:
        refs = self.batches[name]
        ready, _ = ray.wait(refs, num_returns=len(refs), timeout=0)
        return ray.get(refs) if len(ready) == len(refs) else None

    def nodes(self) -> Any:
        return [
            {
                "node_id": n["NodeID"],
                "alive": n["Alive"],
                "resources": n.get("Resources", {}),
                "labels": n.get("Labels", {}),
            }
            for n in ray.nodes()  # type: ignore[no-untyped-call]  # Ray leaves ray.nodes() unannotated
        ]


def main() -> None:
    address, node_ip, reply_fd = sys.argv[1], sys.argv[2], int(sys.argv[3])
    out = open_writer(reply_fd)
    job_config = None
    submission_id = os.environ.get(SUBMISSION_ID_ENV)
    if submission_id:  # a driver that the GCS records like a job submission's (the dashboard is off)
        job_config = ray.job_config.JobConfig(metadata={"job_submission_id": submission_id})
    ray.init(
        address=address,
        _node_ip_address=node_ip,
        log_to_driver=False,
        namespace="e2e",
        job_config=job_config,  # type: ignore[arg-type]  # Ray annotates it JobConfig, None its default
    )
    commands = Commands()
    write_frame(out, {"id": 0, "ready": True})
    for line in sys.stdin:
        if not line.strip():
            continue
        request = json.loads(line)
        command_id, op = request.pop("id"), request.pop("op")
        try:
            reply = {"ok": True, "value": getattr(commands, op)(**request)}
        except Exception as exc:
            reply = {"ok": False, "error": f"{type(exc).__name__}: {exc}", "trace": traceback.format_exc()}
        write_frame(out, {"id": command_id, **reply})


if __name__ == "__main__":
    main()
