"""Print what rayscale reads from a Ray GCS, as JSON: ``python -m rayscale.ray.debug HOST:PORT``.

For checking connectivity and auth from wherever the operator runs (``kubectl exec`` into the
operator pod, or a laptop with a port-forward). The token, when the cluster uses token auth, comes
from ``$RAY_AUTH_TOKEN`` or ``--token-file``, never from the command line.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from rayscale.ray.client import GcsClient, GcsError


async def _read(address: str, token: str | None, per_call: float) -> dict[str, object]:
    async with GcsClient(address, token=token, timeout=per_call, retries=0) as client:
        return dataclasses.asdict(await client.get_cluster_resource_state())


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rayscale.ray.debug", description=__doc__.split("\n")[0])
    parser.add_argument("address", help="the GCS as host:port, e.g. demo-head-svc.team-a.svc:6379")
    parser.add_argument("--token-file", type=Path, help="file holding the Ray auth token")
    parser.add_argument("--timeout", type=float, default=5.0, help="seconds (default 5)")
    args = parser.parse_args(argv)
    token = args.token_file.read_text() if args.token_file else os.environ.get("RAY_AUTH_TOKEN")
    try:
        state = asyncio.run(_read(args.address, token, args.timeout))
    except GcsError as exc:
        print(f"{type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    json.dump(state, sys.stdout, indent=2, sort_keys=True)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
