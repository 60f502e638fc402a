"""`rayscale status [[NS/]NAME]`: the RayClusters as the operator sees them, beside Kubernetes.

Without NAME, a table of every RayCluster of the namespace (``-A``: of every namespace); with it,
one cluster: Ray's nodes, usage and demand (what ``ray status`` shows) beside what only rayscale
knows (groups, replicas and their states, unmet demand and why, backoffs, holds, recent
decisions), its RayResourceRequests and Events. See docs/status-cli.md.

Exit codes: 0 shown (also without the operator's view, said in one line), 1 the RayCluster does
not exist or the Kubernetes API cannot be read, 2 usage.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import sys
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import yaml

from rayscale.status.args import (
    UsageError,
    add_operator_arguments,
    add_scope,
    non_negative,
    operator_options,
    parse_target,
)

if TYPE_CHECKING:
    from rayscale.status import fetch, reach

__all__ = ["EXIT_NOT_FOUND", "EXIT_USAGE", "register", "run"]

EXIT_NOT_FOUND = 1
EXIT_USAGE = 2
CLEAR = "\x1b[H\x1b[2J"  # cursor home, clear the screen


def _positive(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be more than 0 ({text})")
    return value


def register(subparsers: Any) -> None:
    """Add the `status` subcommand to the CLI."""
    p = subparsers.add_parser(
        "status",
        help="show RayClusters as the operator sees them, beside Kubernetes and Ray",
        description=(
            "Without NAME: a table of every RayCluster of the namespace. With NAME: one cluster: Ray's "
            "nodes, usage and demand beside what only rayscale knows (groups, replicas, unmet demand "
            "and why, backoffs, holds, recent decisions), its RayResourceRequests and Events. Reads "
            "the Kubernetes API and the operator's API (through the API server's proxy to the leader "
            "pod, or --endpoint); never Ray's GCS. See docs/status-cli.md."
        ),
    )
    p.add_argument("cluster", nargs="?", metavar="[NS/]NAME", help="one RayCluster (default: all of them)")
    add_scope(p, every=True)
    p.add_argument("-o", "--output", choices=("text", "json", "yaml"), default="text",
                   help="text (default), or the whole document as JSON or YAML")  # fmt: skip
    p.add_argument("-w", "--watch", action="store_true", help="redraw every --interval seconds until Ctrl-C")
    p.add_argument("--interval", type=_positive, default=2.0, metavar="SECONDS",
                   help="seconds between redraws with --watch (default: %(default)s)")  # fmt: skip
    p.add_argument("--decisions", type=non_negative, default=5, metavar="N",
                   help="the newest decisions shown (default: %(default)s; -o json has all)")  # fmt: skip
    add_operator_arguments(p)
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    target: tuple[str | None, str] | None = None
    try:
        if args.cluster:
            target = parse_target(args.cluster, args.namespace, args.all_namespaces)
    except UsageError as exc:
        print(f"rayscale status: {exc}", file=sys.stderr)
        return EXIT_USAGE
    try:
        return asyncio.run(_main(args, target))
    except KeyboardInterrupt:  # the end of --watch
        return 0


async def _main(args: argparse.Namespace, target: tuple[str | None, str] | None) -> int:
    from rayscale.status import fetch, reach

    try:
        api, default_namespace = await fetch.connect(args.kubeconfig, args.context)
    except fetch.KubeUnavailable as exc:
        print(f"rayscale status: {exc}", file=sys.stderr)
        return EXIT_NOT_FOUND
    operator = reach.OperatorClient(api, operator_options(args))
    reader = fetch.Reader(api)
    tty = sys.stdout.isatty()
    try:
        while True:
            code, text = await _once(args, target, default_namespace, reader, operator, tty)
            if not args.watch:
                if code == 0:
                    sys.stdout.write(text)
                else:
                    print(f"rayscale status: {text}", file=sys.stderr)
                return code
            if args.output == "yaml":
                text = "---\n" + text
            sys.stdout.write((CLEAR if tty else "") + (text if code == 0 else f"rayscale status: {text}\n"))
            sys.stdout.flush()
            await asyncio.sleep(args.interval)
    finally:
        await operator.close()
        await api.close()


async def _once(
    args: argparse.Namespace,
    target: tuple[str | None, str] | None,
    default_namespace: str,
    reader: fetch.Reader,
    operator: reach.OperatorClient,
    tty: bool,
) -> tuple[int, str]:
    """(0, the output) or (1, why nothing could be shown)."""
    from rayscale.status import fetch

    now = datetime.now(UTC).replace(microsecond=0)
    try:
        if target is not None:
            ns, name = target
            doc = await fetch.cluster_document(reader, operator, ns or default_namespace, name, now)
        else:
            scope = None if args.all_namespaces else args.namespace or default_namespace
            doc = await fetch.fleet_document(reader, operator, scope, now)
    except (fetch.NotFound, fetch.KubeUnavailable) as exc:
        return EXIT_NOT_FOUND, str(exc)
    return 0, _format(doc, args, now, tty, target is not None)


def _format(doc: dict[str, Any], args: argparse.Namespace, now: datetime, tty: bool, one: bool) -> str:
    if args.output == "json":
        return json.dumps(doc, indent=2) + "\n"
    if args.output == "yaml":
        return str(yaml.safe_dump(doc, sort_keys=False))
    from rayscale.status.fleet import render_fleet
    from rayscale.status.layout import WIDTH
    from rayscale.status.render import render_cluster

    color = tty and not os.environ.get("NO_COLOR")
    width = shutil.get_terminal_size((WIDTH, 24)).columns  # $COLUMNS, the terminal's, else 100
    if one:
        return render_cluster(doc, now=now, color=color, width=width, decisions=args.decisions)
    return render_fleet(doc, now=now, color=color, width=width)
