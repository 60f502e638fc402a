"""The autoscaler's flags of `rayscale run` (`add_autoscaler_flags`) and what they configure:
`autoscaler_config` (the `AutoscalerConfig`) and `notice_config` (the ``--disruption-notice``
values, read by rayscale.disruption.notice.parse_notice_flag); and the controller's
``--batch-scheduler`` (`add_batch_scheduler_flag`)."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from rayscale.batch.registry import NAMES, check_name
from rayscale.disruption.notice import NoticeConfig, parse_notice_flag
from rayscale.kube.scope import Scope

if TYPE_CHECKING:
    from rayscale.autoscaler.config import AutoscalerConfig

__all__ = ["add_autoscaler_flags", "add_batch_scheduler_flag", "autoscaler_config", "notice_config"]


class _NoticeFlag(argparse.Action):
    """``--disruption-notice``, repeatable: each value is checked with the ones before it (a taint,
    a condition or the grace given twice is refused too), so a bad one stops `rayscale run` with
    its message before anything starts."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: str | Sequence[Any] | None,
        option_string: str | None = None,
    ) -> None:
        del option_string  # argparse's; the flag has one name
        given = [*(getattr(namespace, self.dest, None) or ()), str(values)]
        try:
            parse_notice_flag(given)
        except ValueError as exc:
            parser.error(str(exc))
        setattr(namespace, self.dest, given)


def add_autoscaler_flags(p: argparse.ArgumentParser) -> None:
    from rayscale.autoscaler import config as defaults

    p.add_argument("--autoscaler-interval", type=float, default=5.0,
                   help="autoscale every cluster at least this often, in seconds (default: 5)")  # fmt: skip
    p.add_argument("--gcs-poll-interval", type=float, default=defaults.DEFAULT_GCS_POLL_SECONDS,
                   help="between those rounds, read each cluster's Ray demand this often and start a "
                   "round when it changed, in seconds; 0: no reads between rounds (default: "
                   "%(default)s)")  # fmt: skip
    p.add_argument("--gcs-poll-budget", type=float, default=defaults.DEFAULT_GCS_POLL_BUDGET,
                   help="those reads per second over all clusters, at most: more clusters are read "
                   "less often; 0: no budget (default: %(default)s)")  # fmt: skip
    p.add_argument("--max-node-provision-seconds", type=float, default=900.0,
                   help="pods of a group pending longer are removed and the group backs off (default: "
                   "900; per cluster: annotation rayscale.io/max-node-provision-seconds)")  # fmt: skip
    p.add_argument("--max-node-boot-seconds", type=float, default=3600.0,
                   help="a worker pod scheduled (or running) this long without a Ray node is removed and "
                   "its group backs off (default: 3600; per cluster: annotation "
                   "rayscale.io/max-node-boot-seconds)")  # fmt: skip
    p.add_argument("--unprovisioned-grace-seconds", type=float, default=120.0,
                   help="an unschedulable worker pod no node provisioner is scaling up for (a "
                   "NotTriggerScaleUp Event, or none at all) fails to launch after this long (default: "
                   "120; per cluster: annotation rayscale.io/unprovisioned-grace-seconds)")  # fmt: skip
    p.add_argument("--head-restart-grace-seconds", type=float, default=120.0,
                   help="after Ray's GCS session changes (the head restarted), remove no worker for this "
                   "long while workers re-register (default: 120)")  # fmt: skip
    p.add_argument("--allow-gcs-address-override", action="store_true",
                   help="follow a RayCluster's rayscale.io/gcs-address annotation and send its Ray auth "
                   "token there; without it rayscale always dials the cluster's head Service and reports "
                   "the annotation as ignored (default: off)")  # fmt: skip
    p.add_argument("--disruption-notice", action=_NoticeFlag, default=[], metavar="NOTICE",
                   help="also read this as a disruption notice of a node, repeatable: taint:KEY[=SECONDS], "
                   "condition:TYPE[=SECONDS] (with SECONDS: the pods go that long after the taint or "
                   "condition appeared, whatever Ray says; without: they wait for Ray), or "
                   "cluster-autoscaler-grace=SECONDS (600 s when not given); see "
                   "docs/disruptions.md")  # fmt: skip


def notice_config(args: argparse.Namespace) -> NoticeConfig:
    """The disruption notices configured with ``--disruption-notice`` (checked by the parser)."""
    return parse_notice_flag(getattr(args, "disruption_notice", None) or ())


def autoscaler_config(args: argparse.Namespace, scope: Scope) -> AutoscalerConfig:
    """The autoscaler's configuration from `rayscale run`'s flags; `scope`: which RayClusters this
    operator owns."""
    from rayscale.autoscaler.config import AutoscalerConfig

    return AutoscalerConfig(
        interval=args.autoscaler_interval,
        gcs_poll_interval=args.gcs_poll_interval,
        gcs_poll_budget=args.gcs_poll_budget,
        concurrency=args.autoscaler_concurrency,
        max_node_provision_seconds=args.max_node_provision_seconds,
        max_node_boot_seconds=args.max_node_boot_seconds,
        unprovisioned_grace_seconds=args.unprovisioned_grace_seconds,
        head_restart_grace_seconds=args.head_restart_grace_seconds,
        beside_kuberay=args.mode == "autoscaler",
        notices_only=args.mode == "controller",
        max_pods=args.max_pods_per_cluster,
        allow_gcs_address_override=args.allow_gcs_address_override,
        owns=scope.owns,
    )


def _batch_scheduler(text: str) -> str:
    """argparse's type of ``--batch-scheduler``: an unknown name stops `rayscale run` with its
    message (status 2) before anything starts."""
    try:
        return check_name(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def add_batch_scheduler_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument("--batch-scheduler", type=_batch_scheduler, default="", metavar="NAME",
                   help="send every RayCluster's pods to this batch scheduler, with the PodGroup, labels "
                   f"and annotations KubeRay's --batch-scheduler gives them: {', '.join(NAMES)}. Without "
                   "it the pods go to the default scheduler (see docs/queues-and-gangs.md)")  # fmt: skip
