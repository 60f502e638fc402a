"""`rayscale run`: start the operator (controller and/or autoscaler) on kopf."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import signal
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import TYPE_CHECKING, Any, TypeVar

import uvloop

from rayscale import run_flags
from rayscale.common.tasks import cancel_and_wait
from rayscale.kube.scope import Scope, check_namespace_pattern, check_shard_name, parse_selector

if TYPE_CHECKING:
    from prometheus_client import Gauge

    from rayscale import handlers
    from rayscale.metrics import Metrics
    from rayscale.web import api as web_api

log = logging.getLogger("rayscale")
MODES = ("all", "controller", "autoscaler")
LOST_STOP_SECONDS = 3.0  # the renew deadline (10 s) + this stays below the lease duration (15 s)
T = TypeVar("T")


def register(subparsers: Any) -> None:
    from rayscale.autoscaler import config as defaults

    p = subparsers.add_parser("run", help="run the operator")
    scope = p.add_mutually_exclusive_group()
    scope.add_argument("-n", "--namespace", action="append", dest="namespaces", metavar="NS",
                       type=_checked(check_namespace_pattern),
                       help="watch this namespace, or every namespace matching a pattern (repeatable; "
                       "a namespace matching any -n is watched): a glob with '*' and '?' ('team-*'), "
                       "and after it, joined by commas, '!glob' to leave some out ('team-*,!team-test'); "
                       "a pattern that starts with '!' means every namespace but those ('!kube-*'). Quote "
                       "patterns in a shell")  # fmt: skip
    scope.add_argument("-A", "--all-namespaces", action="store_true", help="watch every namespace (default)")
    p.add_argument("--cluster-selector", type=_checked(parse_selector), metavar="SELECTOR",
                   help="act only on the RayClusters whose labels match this Kubernetes label selector "
                   "('shard=a', 'shard in (a,b)', '!shard', 'tier!=batch,shard'): the controller, the "
                   "autoscaler and the status API leave every other RayCluster, its pods and its "
                   "requests alone, and let go of a RayCluster whose labels stop matching (another "
                   "shard's operator takes it). Default: every RayCluster")  # fmt: skip
    p.add_argument("--shard", type=_checked(check_shard_name), metavar="NAME",
                   help="name of this operator's shard (a DNS label); its Lease is then "
                   "'rayscale-NAME' unless --leader-election-id names one")  # fmt: skip
    p.add_argument("--mode", choices=MODES, default="all", help="which halves to run (default: all)")
    p.add_argument("--kubeconfig", help="kubeconfig file (default: $KUBECONFIG, in-cluster, ~/.kube/config)")
    p.add_argument("--liveness", default="http://0.0.0.0:8081/healthz",
                   help="liveness endpoint URL, or '' to disable (default: %(default)s)")  # fmt: skip
    p.add_argument("--metrics-port", type=int, default=8080,
                   help="serve Prometheus metrics on this port at /metrics, 0 to disable "
                   "(default: %(default)s)")  # fmt: skip
    p.add_argument("--metrics-address", default="0.0.0.0",
                   help="address the metrics endpoint binds (default: %(default)s)")  # fmt: skip
    p.add_argument("--status-port", type=int, default=8082,
                   help="serve what the autoscaler sees about each cluster as JSON on this port "
                   "(/api/v1/clusters), 0 to disable (default: %(default)s)")  # fmt: skip
    p.add_argument("--status-address", default="0.0.0.0",
                   help="address the status API and the status page bind (default: %(default)s)")  # fmt: skip
    p.add_argument("--status-page", action="store_true",
                   help="also serve the status page (HTML, read-only) on --status-page-port "
                   "(default: off)")  # fmt: skip
    p.add_argument("--status-page-port", type=int, default=8083,
                   help="port of the status page, which also answers the JSON API's paths "
                   "(default: %(default)s)")  # fmt: skip
    p.add_argument("--leader-elect", action="store_true",
                   help="take a Lease before acting, so only one of several replicas is active")  # fmt: skip
    p.add_argument("--leader-election-namespace", default=os.environ.get("POD_NAMESPACE") or "default",
                   help="namespace of the Lease (default: $POD_NAMESPACE or 'default')")  # fmt: skip
    p.add_argument("--leader-election-id", metavar="NAME",
                   help="name of the Lease; shards need one each (default: 'rayscale-SHARD' with "
                   "--shard; 'rayscale' for an operator of every RayCluster or of namespaces named "
                   "one by one; else 'rayscale-' and a digest of -n and --cluster-selector, so that "
                   "shards started without --shard never share a Lease)")  # fmt: skip
    p.add_argument("--kube-api-qps", type=float, default=100.0,
                   help="sustained requests per second rayscale sends to the API server, 0 for no "
                   "limit (default: %(default)s)")  # fmt: skip
    p.add_argument("--kube-api-burst", type=int, default=200,
                   help="requests allowed in a burst above --kube-api-qps "
                   "(default: %(default)s)")  # fmt: skip
    p.add_argument(
        "--concurrency", type=int, default=16, help="clusters reconciled in parallel (default: 16)"
    )
    p.add_argument("--rayjob-concurrency", type=int, default=256,
                   help="RayJobs and RayCronJobs reconciled in parallel: a reconcile mostly waits for "
                   "the cluster's GCS (default: %(default)s)")  # fmt: skip
    p.add_argument("--autoscaler-concurrency", type=int, default=defaults.DEFAULT_AUTOSCALER_CONCURRENCY,
                   help="clusters autoscaled in parallel: a round mostly waits for its cluster's GCS "
                   "(default: %(default)s)")  # fmt: skip
    p.add_argument("--resync-seconds", type=float, default=60.0, help="periodic full resync (default: 60)")
    p.add_argument("--stuck-terminating-seconds", type=float, default=600.0,
                   help="a pod terminating this long past its deadline stops blocking its group "
                   "(default: 600)")  # fmt: skip
    run_flags.add_autoscaler_flags(p)
    run_flags.add_batch_scheduler_flag(p)
    p.add_argument("--max-pods-per-cluster", type=_at_least_one, default=10_000, metavar="N",
                   help="worker pods one RayCluster may ask for (replicas x numOfHosts over its groups); "
                   "a cluster asking for more is refused as invalid, and the autoscaler never scales past "
                   "it (default: %(default)s)")  # fmt: skip
    p.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    p.set_defaults(handler=_cmd_run)


def _checked(check: Callable[[str], T]) -> Callable[[str], T]:
    """An argparse type from a check that raises ValueError: argparse then refuses the value with
    the check's message and exits with status 2, before anything starts."""

    def convert(text: str) -> T:
        try:
            return check(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from exc

    convert.__name__ = check.__name__  # what argparse names in "invalid <name> value" without a message
    return convert


def scope_of(args: argparse.Namespace) -> Scope:
    """What this operator owns: its namespaces (or every one), its RayClusters, its shard name."""
    return Scope(tuple(args.namespaces or ()), args.cluster_selector, args.shard or "")


def lease_of(args: argparse.Namespace) -> str:
    """The Lease this operator's replicas elect a leader on: ``--leader-election-id``, else named
    after its shard (`Scope.lease_name`)."""
    return str(args.leader_election_id or scope_of(args).lease_name())


def _log_scope(args: argparse.Namespace, scope: Scope) -> None:
    if scope == Scope():
        return
    shard = f"shard {scope.shard}: " if scope.shard else ""
    lease = f"; Lease {args.leader_election_namespace}/{lease_of(args)}" if args.leader_elect else ""
    log.info("%sacting on the RayClusters of %s%s", shard, scope.describe(), lease)
    if args.leader_elect and not args.leader_election_id and scope.sharded and not scope.shard:
        log.warning(
            "the Lease's name is derived from -n and --cluster-selector: when they change, so does "
            "the Lease, and a new replica does not wait for an old one; name the shard (--shard) to "
            "keep one Lease"
        )
    elif args.leader_elect and not args.leader_election_id and not scope.sharded:
        log.info(
            "other rayscale operators watching other namespaces must elect on other Leases "
            "(--shard or --leader-election-id), or they wait for this one"
        )


def _at_least_one(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1 ({value})")
    return value


def _cmd_run(args: argparse.Namespace) -> int:
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    if not args.verbose:
        logging.getLogger("kopf.objects").setLevel(logging.WARNING)
    if args.kubeconfig:
        os.environ["KUBECONFIG"] = args.kubeconfig  # read by kopf's login and by our client
    # uvloop's event loop and TLS transport (libuv, Cython) instead of asyncio's pure-Python ones:
    # about a tenth less CPU per API request, and 14 MiB less peak memory (docs/architecture.md).
    return uvloop.run(run_operator(args))


async def run_operator(args: argparse.Namespace) -> int:
    from rayscale.metrics import Metrics, process_registry, serve
    from rayscale.web.api import Served

    # Served from the start, also while a standby waits for the Lease.
    metrics = Metrics(process_registry())
    server = serve(metrics, args.metrics_address, args.metrics_port) if args.metrics_port else None
    if server is not None:
        log.info("serving metrics on %s:%d/metrics", args.metrics_address, args.metrics_port)
    served = Served(autoscaling=args.mode != "controller")
    if args.leader_elect:
        served.leading = lambda: False  # until the Lease is ours (run_as_leader)
    try:
        async with _status_servers(args, served):
            return await _run(args, metrics, served)
    finally:
        if server is not None:
            await asyncio.to_thread(server.shutdown)


@contextlib.asynccontextmanager
async def _status_servers(args: argparse.Namespace, served: web_api.Served) -> AsyncIterator[None]:
    """The status API (``--status-port``) and the status page (``--status-page``) on this event
    loop, from the start: a standby answers too (503, naming the leader)."""
    from rayscale.web import server

    wanted = [("status API", args.status_port, False)] if args.status_port else []
    if args.status_page:
        wanted.append(("status page", args.status_page_port, True))
    runners = []
    try:
        for what, port, html in wanted:
            try:
                runners.append(await server.start(served, args.status_address, port, html=html))
            except OSError as exc:
                log.error("cannot serve the %s on %s:%d: %s", what, args.status_address, port, exc)
                raise
            log.info("serving the %s on %s:%d", what, args.status_address, port)
        yield
    finally:
        for runner in runners:
            await runner.cleanup()


async def _run(args: argparse.Namespace, metrics: Metrics, served: web_api.Served) -> int:
    import kopf

    from rayscale import handlers
    from rayscale.controller.runner import ControllerConfig

    config = ControllerConfig(
        concurrency=args.concurrency,
        rayjob_concurrency=args.rayjob_concurrency,
        resync_seconds=args.resync_seconds,
        stuck_terminating_seconds=args.stuck_terminating_seconds,
        random_delete=os.environ.get("ENABLE_RANDOM_POD_DELETE", "").lower() == "true",
        sidecar_autoscaler=args.mode == "controller",
        max_pods=args.max_pods_per_cluster,
        batch_scheduler=args.batch_scheduler,
    )
    scope = scope_of(args)
    _log_scope(args, scope)
    namespaces: list[str] | None = args.namespaces or None
    # --mode controller too: there it acts only on the disruption notices of the clusters without
    # in-tree autoscaling (Ray's own autoscaler scales the others)
    autoscaler = run_flags.autoscaler_config(args, scope)
    runtime = handlers.Runtime(
        config=config,
        namespaces=namespaces,
        scope=scope,
        autoscaler_config=autoscaler,
        run_controller=args.mode in ("all", "controller"),
        metrics=metrics,
        kube_api_qps=args.kube_api_qps,
        kube_api_burst=args.kube_api_burst,
        disruption_notices=run_flags.notice_config(args),
    )
    served.autoscaler = lambda: runtime.autoscaler  # set by kopf's startup (handlers.configure)

    def run_kopf() -> Coroutine[Any, Any, None]:
        return kopf.operator(
            registry=handlers.registry,
            clusterwide=namespaces is None,
            namespaces=namespaces or [],
            standalone=True,
            liveness_endpoint=args.liveness or None,
            memo=kopf.Memo(runtime=runtime),
        )

    if args.leader_elect:
        leading = metrics.leader.labels(lease_of(args))
        return await run_as_leader(args, run_kopf, leading, runtime, served)
    await run_kopf()
    return 0


async def run_as_leader(
    args: argparse.Namespace,
    run_kopf: Callable[[], Coroutine[Any, Any, None]],
    leading: Gauge,
    runtime: handlers.Runtime,
    served: web_api.Served,
) -> int:
    """Wait for the Lease, run kopf while we hold it; stop at once (exit 1) when we lose it, as
    controller-runtime does: the pod restarts and competes again. A clean stop releases it first
    thing (`runtime.hand_over`, from kopf's cleanup; writes are fenced from then on), so a standby
    takes over while this replica winds down. `leading` is 1 while we hold the Lease. `served`
    (the status API) answers as the leader while we hold it and may write; else it names the holder."""
    from rayscale.fence import WRITE_FENCE
    from rayscale.kube import standby
    from rayscale.kube.client import make_api_client
    from rayscale.kube.leader import KubeLeaseStore, LeaderElector, default_identity

    # A client of its own, without the rate limit or the fence: renewals never queue behind
    # reconciles. Every other write waits for the Lease (the fence opens with each renewal).
    WRITE_FENCE.close()
    api = await make_api_client()
    store = KubeLeaseStore(api, args.leader_election_namespace, lease_of(args))
    elector = LeaderElector(store, default_identity(), fence=WRITE_FENCE)
    served.leading = lambda: elector.is_leader and WRITE_FENCE.is_open
    served.holder = lambda: elector.holder
    leading.set(0)
    try:
        health = await standby.serve(args.liveness) if args.liveness else None
        try:
            if not await _unless_signalled(elector.acquire()):
                log.info("stopped while waiting for leadership")
                return 0
        finally:
            if health is not None:
                await health.cleanup()
        leading.set(1)
        operator = asyncio.create_task(run_kopf(), name="rayscale-kopf")
        keeper = asyncio.create_task(elector.hold(), name="rayscale-lease")

        async def hand_over() -> None:
            if keeper.done():  # lost: nothing to hand over
                return
            await cancel_and_wait([keeper])
            await elector.release()
            leading.set(0)

        runtime.hand_over = hand_over
        await asyncio.wait({operator, keeper}, return_when=asyncio.FIRST_COMPLETED)
        if keeper.done() and not keeper.cancelled():
            return await _stop_lost(operator)
        try:
            await operator  # kopf's own stop; the keeper was cancelled by the hand-over
        finally:
            await hand_over()  # does nothing when kopf's cleanup handed over already
        return 0
    finally:
        leading.set(0)
        await api.close()


async def _unless_signalled(work: Coroutine[Any, Any, None]) -> bool:
    """Run `work`; False when SIGTERM or SIGINT came first (kopf handles them once it runs)."""
    loop = asyncio.get_running_loop()
    task = asyncio.create_task(work)
    signals = (signal.SIGTERM, signal.SIGINT)
    for sig in signals:
        loop.add_signal_handler(sig, task.cancel)
    try:
        await task
    except asyncio.CancelledError:
        if not task.cancelled():
            raise
        return False
    finally:
        for sig in signals:
            loop.remove_signal_handler(sig)
    return True


async def _stop_lost(operator: asyncio.Task[None]) -> int:
    """Leadership lost: cancel kopf (our handlers stop at their next await) and exit 1; if it
    does not stop within a few seconds, exit anyway, before a standby can take over."""
    log.error("leadership lost: stopping")
    operator.cancel()
    done, _ = await asyncio.wait({operator}, timeout=LOST_STOP_SECONDS)
    if not done:
        log.error("kopf did not stop within %ss after losing leadership: exiting", LOST_STOP_SECONDS)
        logging.shutdown()
        os._exit(1)
    return 1
