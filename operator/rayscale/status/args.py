"""The command-line arguments `rayscale status` and `rayscale simulate --from-cluster` share: which
cluster, which namespace, and where the Kubernetes API and the operator are (pure, light: no
Kubernetes client, so that `rayscale simulate FILE` starts as fast as before)."""

from __future__ import annotations

import argparse
from dataclasses import dataclass

__all__ = [
    "DEFAULT_LEASE",
    "DEFAULT_OPERATOR_NAMESPACE",
    "DEFAULT_PORT",
    "DEFAULT_SELECTOR",
    "OperatorOptions",
    "UsageError",
    "add_operator_arguments",
    "add_scope",
    "non_negative",
    "operator_options",
    "parse_target",
]

DEFAULT_OPERATOR_NAMESPACE = "rayscale-system"
DEFAULT_PORT = 8082  # `rayscale run --status-port`
DEFAULT_LEASE = "rayscale"  # the chart's full name for release "rayscale"; `rayscale run`'s default
DEFAULT_SELECTOR = "app.kubernetes.io/name=rayscale"  # the chart's pod label


class UsageError(Exception):
    pass


@dataclass(frozen=True, slots=True)
class OperatorOptions:
    endpoint: str | None = None
    namespace: str = DEFAULT_OPERATOR_NAMESPACE
    port: int = DEFAULT_PORT
    lease: str = DEFAULT_LEASE
    selector: str = DEFAULT_SELECTOR


def non_negative(text: str) -> int:
    """An argparse type: an integer of 0 or more."""
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more ({text})")
    return value


def _port(text: str) -> int:
    value = int(text)
    if not 0 < value < 65536:
        raise argparse.ArgumentTypeError(f"not a port: {value}")
    return value


def add_operator_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags that say where the Kubernetes API and the operator are."""
    parser.add_argument("--kubeconfig", help="kubeconfig file (default: $KUBECONFIG, ~/.kube/config)")
    parser.add_argument("--context", help="the kubeconfig context to use (default: its current one)")
    parser.add_argument("--endpoint", metavar="URL",
                        help="the operator's API at this URL (e.g. http://localhost:8082 through a "
                        "port-forward) instead of through the API server's proxy")  # fmt: skip
    parser.add_argument("--operator-namespace", default=DEFAULT_OPERATOR_NAMESPACE, metavar="NS",
                        help="namespace of the operator's pods and Lease (default: %(default)s)")  # fmt: skip
    parser.add_argument("--operator-port", type=_port, default=DEFAULT_PORT, metavar="PORT",
                        help="the operator's --status-port (default: %(default)s)")  # fmt: skip
    parser.add_argument("--operator-lease", default=DEFAULT_LEASE, metavar="NAME",
                        help="the operator's leader-election Lease (default: %(default)s)")  # fmt: skip
    parser.add_argument("--operator-selector", default=DEFAULT_SELECTOR, metavar="SELECTOR",
                        help="label selector of the operator's pods, used when there is no Lease "
                        "(default: %(default)s)")  # fmt: skip


def operator_options(args: argparse.Namespace) -> OperatorOptions:
    return OperatorOptions(
        endpoint=args.endpoint or None,
        namespace=args.operator_namespace,
        port=args.operator_port,
        lease=args.operator_lease,
        selector=args.operator_selector,
    )


def add_scope(parser: argparse.ArgumentParser, *, every: bool) -> None:
    """``-n``/``--namespace`` (and ``-A``/``--all-namespaces`` when `every`)."""
    scope = parser.add_mutually_exclusive_group()
    scope.add_argument("-n", "--namespace", metavar="NS",
                       help="the RayClusters' namespace (default: the kubeconfig context's, else "
                       "'default')")  # fmt: skip
    if every:
        scope.add_argument("-A", "--all-namespaces", action="store_true",
                           help="every namespace (the table; not with NAME)")  # fmt: skip


def parse_target(
    text: str | None, namespace: str | None, all_namespaces: bool = False
) -> tuple[str | None, str]:
    """``NS/NAME`` or ``NAME`` -> (namespace, or None for the default; name). UsageError if malformed."""
    if not text:
        raise UsageError("no cluster named")
    ns, slash, name = text.rpartition("/")
    if (slash and not ns) or not name or "/" in ns:
        raise UsageError(f"{text!r} is not NAME or NAMESPACE/NAME")
    if all_namespaces:
        raise UsageError("-A lists every namespace: give NAMESPACE/NAME for one cluster instead")
    if slash and namespace and namespace != ns:
        raise UsageError(f"{text!r} names namespace {ns}, -n says {namespace}")
    return (ns if slash else namespace), name
