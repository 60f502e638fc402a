"""`rayscale simulate FILE|-`: run one scheduling decision offline and print it as JSON (with the
virtual clusters' outcome when the scenario has a ``virtualClusters`` key)."""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

import yaml

from rayscale.autoscaler.scenario import ScenarioError, parse_scenario
from rayscale.autoscaler.scheduler import schedule
from rayscale.autoscaler.virtual.plan import plan
from rayscale.autoscaler.virtual.scenario import outcome, parse_virtual

EXIT_BAD_SCENARIO = 2


def register(subparsers: Any) -> None:
    """Add the `simulate` subcommand to the CLI."""
    p = subparsers.add_parser(
        "simulate",
        help="print the autoscaler's decision for a scenario file (YAML or JSON; - reads stdin)",
        description="Run one scheduling decision on a scenario (docs/scenario-format.md); print it as JSON.",
    )
    p.add_argument("file", help="scenario file, or - for standard input")
    p.add_argument("--indent", type=int, default=2, help="JSON indentation (0: one line)")
    p.set_defaults(handler=run)


def load(source: str) -> Any:
    """Read a scenario document (YAML is a superset of JSON)."""
    if source == "-":
        text = sys.stdin.read()
    else:
        with open(source, encoding="utf-8") as fh:
            text = fh.read()
    return yaml.safe_load(text)


def run(args: argparse.Namespace) -> int:
    try:
        doc = load(args.file)
        snapshot = parse_scenario(doc)
        virtual = parse_virtual(doc, snapshot)
    except OSError as exc:
        print(f"rayscale simulate: cannot read {args.file}: {exc.strerror}", file=sys.stderr)
        return EXIT_BAD_SCENARIO
    except yaml.YAMLError as exc:
        print(f"rayscale simulate: {args.file} is not valid YAML or JSON: {exc}", file=sys.stderr)
        return EXIT_BAD_SCENARIO
    except ScenarioError as exc:
        print(f"rayscale simulate: bad scenario: {exc}", file=sys.stderr)
        return EXIT_BAD_SCENARIO
    start = time.perf_counter()
    result = None if virtual is None else plan(snapshot, virtual.vcs, virtual.members, virtual.finished)
    decision = schedule(snapshot) if result is None else result.decision
    elapsed = time.perf_counter() - start
    out = decision.to_dict()
    if virtual is not None and result is not None:
        out["virtualClusters"] = outcome(result, virtual.vcs)
    out["elapsedSeconds"] = round(elapsed, 6)
    print(json.dumps(out, indent=args.indent or None))
    return 0
