"""The `rayscale` command line.

Each subcommand lives in its own module and registers itself here; this module only
parses arguments and dispatches.
"""

from __future__ import annotations

import argparse
import platform
import sys
from collections.abc import Callable, Sequence

from rayscale import __version__, simulate
from rayscale import run as run_command
from rayscale.api import command as crds_command
from rayscale.status import command as status_command

Handler = Callable[[argparse.Namespace], int]


def _cmd_version(args: argparse.Namespace) -> int:
    print(f"rayscale {__version__} (Python {platform.python_version()})")
    return 0


def build_parser(prog: str = "rayscale") -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=prog,
        description=(
            "rayscale runs Ray clusters described by RayCluster (ray.io/v1) objects on Kubernetes "
            "and autoscales them with an embedded, explainable bin-packing scheduler."
        ),
    )
    parser.add_argument("--version", action="version", version=f"rayscale {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p = sub.add_parser("version", help="print the rayscale version")
    p.set_defaults(handler=_cmd_version)
    crds_command.register(sub)
    run_command.register(sub)
    simulate.register(sub)
    status_command.register(sub)
    return parser


def main(argv: Sequence[str] | None = None, prog: str = "rayscale") -> int:
    parser = build_parser(prog)
    args = parser.parse_args(argv)
    handler: Handler | None = getattr(args, "handler", None)
    if handler is None:
        parser.print_help()
        return 2
    return handler(args)


def kubectl_main() -> int:
    """The `kubectl-rayscale` executable: kubectl runs it for `kubectl rayscale ...` (a kubectl
    plugin), with the same subcommands as `rayscale`."""
    return main(prog="kubectl rayscale")


if __name__ == "__main__":
    sys.exit(main())
