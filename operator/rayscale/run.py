"""`rayscale run`: start the operator (controller and/or autoscaler) on kopf."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
from typing import Any

log = logging.getLogger("rayscale")
MODES = ("all", "controller", "autoscaler")


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("run", help="run the operator")
    scope = p.add_mutually_exclusive_group()
    scope.add_argument("-n", "--namespace", action="append", dest="namespaces", metavar="NS",
                       help="watch this namespace (repeatable)")  # fmt: skip
    scope.add_argument("-A", "--all-namespaces", action="store_true", help="watch every namespace (default)")
    p.add_argument("--mode", choices=MODES, default="all", help="which halves to run (default: all)")
    p.add_argument("--kubeconfig", help="kubeconfig file (default: $KUBECONFIG, in-cluster, ~/.kube/config)")
    p.add_argument("--liveness", default="http://0.0.0.0:8081/healthz",
                   help="liveness endpoint URL, or '' to disable (default: %(default)s)")  # fmt: skip
    p.add_argument("--metrics-port", type=int, default=8080,
                   help="serve Prometheus metrics on this port at /metrics, 0 to disable "
                   "(default: %(default)s)")  # fmt: skip
    p.add_argument("--metrics-address", default="0.0.0.0",
                   help="address the metrics endpoint binds (default: %(default)s)")  # fmt: skip
    p.add_argument("--leader-elect", action="store_true",
                   help="take a Lease before acting, so only one of several replicas is active")  # fmt: skip
    p.add_argument("--leader-election-namespace", default=os.environ.get("POD_NAMESPACE") or "default",
                   help="namespace of the Lease (default: $POD_NAMESPACE or 'default')")  # fmt: skip
    p.add_argument("--leader-election-id", default="rayscale",
                   help="name of the Lease (default: %(default)s)")  # fmt: skip
    p.add_argument("--kube-api-qps", type=float, default=50.0,
                   help="sustained requests per second rayscale sends to the API server, 0 for no "
                   "limit (default: %(default)s)")  # fmt: skip
    p.add_argument("--kube-api-burst", type=int, default=100,
                   help="requests allowed in a burst above --kube-api-qps "
                   "(default: %(default)s)")  # fmt: skip
    p.add_argument(
        "--concurrency", type=int, default=16, help="clusters reconciled in parallel (default: 16)"
    )
    p.add_argument("--resync-seconds", type=float, default=60.0, help="periodic full resync (default: 60)")
    p.add_argument("--stuck-terminating-seconds", type=float, default=600.0,
                   help="a pod terminating this long past its deadline stops blocking its group "
                   "(default: 600)")  # fmt: skip
    p.add_argument("--autoscaler-interval", type=float, default=5.0,
                   help="autoscale every cluster at least this often, in seconds (default: 5)")  # fmt: skip
    p.add_argument("--max-node-provision-seconds", type=float, default=900.0,
                   help="pods of a group pending longer are removed and the group backs off (default: "
                   "900; per cluster: annotation rayscale.io/max-node-provision-seconds)")  # fmt: skip
    p.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    p.set_defaults(handler=_cmd_run)


def _cmd_run(args: argparse.Namespace) -> int:
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    if not args.verbose:
        logging.getLogger("kopf.objects").setLevel(logging.WARNING)
    if args.kubeconfig:
        os.environ["KUBECONFIG"] = args.kubeconfig  # read by kopf's login and by our client
    return asyncio.run(run_operator(args))


async def run_operator(args: argparse.Namespace) -> int:
    import kopf

    from rayscale import handlers
    from rayscale.autoscaler.loop import AutoscalerConfig
    from rayscale.controller.runner import ControllerConfig

    config = ControllerConfig(
        concurrency=args.concurrency,
        resync_seconds=args.resync_seconds,
        stuck_terminating_seconds=args.stuck_terminating_seconds,
        random_delete=os.environ.get("ENABLE_RANDOM_POD_DELETE", "").lower() == "true",
    )
    namespaces: list[str] | None = args.namespaces or None
    autoscaler = None
    if args.mode in ("all", "autoscaler"):
        autoscaler = AutoscalerConfig(
            interval=args.autoscaler_interval,
            concurrency=args.concurrency,
            max_node_provision_seconds=args.max_node_provision_seconds,
        )
    runtime = handlers.Runtime(
        config=config,
        namespaces=namespaces,
        autoscaler_config=autoscaler,
        run_controller=args.mode in ("all", "controller"),
        metrics_port=args.metrics_port,
        metrics_address=args.metrics_address,
        kube_api_qps=args.kube_api_qps,
        kube_api_burst=args.kube_api_burst,
    )
    await kopf.operator(
        registry=handlers.registry,
        clusterwide=namespaces is None,
        namespaces=namespaces or [],
        standalone=True,
        liveness_endpoint=args.liveness or None,
        memo=kopf.Memo(runtime=runtime),
    )
    return 0
