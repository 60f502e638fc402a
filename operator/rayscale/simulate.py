"""`rayscale simulate FILE|-`: run one scheduling decision offline and print it as JSON (with the
virtual clusters' outcome when the scenario has a ``virtualClusters`` key).

``--from-cluster [NS/]NAME`` takes the scenario of one of the cluster's newest decisions from the
operator instead (reached as `rayscale status` reaches it), ``--set PATH=VALUE`` changes the
scenario before it runs, and ``--save FILE`` writes the scenario that ran.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from typing import Any

import yaml

from rayscale.autoscaler.scenario import ScenarioError, parse_scenario
from rayscale.autoscaler.scheduler import schedule
from rayscale.autoscaler.virtual.plan import plan
from rayscale.autoscaler.virtual.scenario import outcome, parse_virtual
from rayscale.status import args as target_args

EXIT_UNREACHABLE = 1
EXIT_BAD_SCENARIO = 2
SCENARIOS_KEPT = 5  # the newest decisions that keep their input (docs/autoscaling.md)


class OverrideError(ValueError):
    pass


def register(subparsers: Any) -> None:
    """Add the `simulate` subcommand to the CLI."""
    p = subparsers.add_parser(
        "simulate",
        help="print the autoscaler's decision for a scenario file (YAML or JSON; - reads stdin), or for "
        "a decision the operator kept (--from-cluster)",
        description="Run one scheduling decision on a scenario (docs/scenario-format.md); print it as JSON.",
    )
    p.add_argument("file", nargs="?", help="scenario file, or - for standard input")
    p.add_argument("--indent", type=int, default=2, help="JSON indentation (0: one line)")
    p.add_argument("--from-cluster", metavar="[NS/]NAME",
                   help="replay a decision of this RayCluster: the scenario the operator kept for it "
                   "(instead of FILE)")  # fmt: skip
    p.add_argument("--decision", type=target_args.non_negative, default=0, metavar="N",
                   help=f"with --from-cluster: the N-th newest decision, 0 the newest (default: 0; the "
                   f"newest {SCENARIOS_KEPT} keep their scenario)")  # fmt: skip
    p.add_argument("--set", action="append", default=[], dest="overrides", metavar="PATH=VALUE",
                   help="change the scenario before it runs: groups.NAME.FIELD=VALUE or "
                   "options.FIELD=VALUE (e.g. groups.gpu.maxReplicas=8); repeatable")  # fmt: skip
    p.add_argument("--save", metavar="FILE",
                   help="write the scenario that ran (after --set) to FILE: JSON when it ends in .json, "
                   "else YAML")  # fmt: skip
    target_args.add_scope(p, every=False)
    target_args.add_operator_arguments(p)
    p.set_defaults(handler=run)


def load(source: str) -> Any:
    """Read a scenario document (YAML is a superset of JSON)."""
    if source == "-":
        text = sys.stdin.read()
    else:
        with open(source, encoding="utf-8") as fh:
            text = fh.read()
    return yaml.safe_load(text)


def override(doc: Any, assignment: str) -> None:
    """Apply one ``--set PATH=VALUE`` to a scenario document, in place.

    PATH is ``groups.NAME.FIELD`` (a group of the scenario's ``groups``, by name) or
    ``options.FIELD``, with deeper keys allowed (``groups.cpu.resources.CPU``); VALUE is read as
    YAML (``8``, ``true``, ``null``, ``Conservative``). The scenario parser then checks the result.
    """
    path, eq, text = assignment.partition("=")
    keys = path.strip().split(".")
    if not eq or len(keys) < 2 or not all(keys):
        raise OverrideError(f"--set {assignment!r}: expected groups.NAME.FIELD=VALUE or options.FIELD=VALUE")
    try:
        value = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise OverrideError(f"--set {assignment!r}: the value is not YAML: {exc}") from exc
    if not isinstance(doc, dict):
        raise OverrideError("--set needs a scenario document (a mapping)")
    target: Any
    if keys[0] == "options":
        if not isinstance(doc.get("options"), dict):
            doc["options"] = {}
        target = doc["options"]
        keys = keys[1:]
    elif keys[0] == "groups" and len(keys) >= 3:
        listed = doc.get("groups")
        groups: list[Any] = listed if isinstance(listed, list) else []
        target = next((g for g in groups if isinstance(g, dict) and g.get("name") == keys[1]), None)
        if target is None:
            known = ", ".join(str(g.get("name")) for g in groups if isinstance(g, dict)) or "none"
            raise OverrideError(
                f"--set {assignment!r}: the scenario has no group {keys[1]!r} (groups: {known})"
            )
        keys = keys[2:]
    else:
        raise OverrideError(f"--set {assignment!r}: expected groups.NAME.FIELD=VALUE or options.FIELD=VALUE")
    for key in keys[:-1]:
        inner = target.setdefault(key, {})
        if not isinstance(inner, dict):
            raise OverrideError(f"--set {assignment!r}: {key} is not a mapping")
        target = inner
    target[keys[-1]] = value


def save(doc: Any, path: str, source: str) -> None:
    """Write the scenario that runs; a YAML file says where it came from in a comment."""
    with open(path, "w", encoding="utf-8") as fh:
        if path.endswith(".json"):
            fh.write(json.dumps(doc, indent=2) + "\n")
        else:
            fh.write(f"# rayscale simulate scenario: {source}\n")
            fh.write(yaml.safe_dump(doc, sort_keys=False))


def _from_cluster(args: argparse.Namespace) -> tuple[Any, str] | int:
    """The scenario the operator kept (and where it came from), or an exit code after a message."""
    from rayscale.status import fetch, reach

    try:
        ns, name = target_args.parse_target(args.from_cluster, args.namespace)
    except target_args.UsageError as exc:
        print(f"rayscale simulate: --from-cluster: {exc}", file=sys.stderr)
        return EXIT_BAD_SCENARIO

    async def fetched() -> dict[str, Any]:
        api, default_namespace = None, "default"
        if not args.endpoint or ns is None:  # the API server: to find the operator, or the namespace
            api, default_namespace = await fetch.connect(args.kubeconfig, args.context)
        operator = reach.OperatorClient(api, target_args.operator_options(args))
        try:
            scenario = await fetch.fetch_scenario(operator, ns or default_namespace, name, args.decision)
            return {"scenario": scenario, "namespace": ns or default_namespace, "via": operator.via}
        finally:
            await operator.close()
            if api is not None:
                await api.close()

    try:
        got = asyncio.run(fetched())
    except reach.NotServed as exc:
        print(f"rayscale simulate: no scenario of decision {args.decision} of {name}: {exc}", file=sys.stderr)
        return EXIT_UNREACHABLE
    except (reach.Unreachable, fetch.KubeUnavailable) as exc:
        print(f"rayscale simulate: {exc}", file=sys.stderr)
        return EXIT_UNREACHABLE
    where = f"decision {args.decision} of RayCluster {got['namespace']}/{name} (from {got['via']})"
    return got["scenario"], where


def _scenario(args: argparse.Namespace) -> tuple[Any, str] | int:
    """The scenario document and where it came from, or an exit code after a message."""
    if (args.file is None) == (args.from_cluster is None):
        print("rayscale simulate: give a scenario FILE or --from-cluster NAME (one of them)", file=sys.stderr)
        return EXIT_BAD_SCENARIO
    if args.from_cluster is not None:
        return _from_cluster(args)
    if args.decision != 0:
        print("rayscale simulate: --decision goes with --from-cluster", file=sys.stderr)
        return EXIT_BAD_SCENARIO
    try:
        return load(args.file), args.file
    except OSError as exc:
        print(f"rayscale simulate: cannot read {args.file}: {exc.strerror}", file=sys.stderr)
    except yaml.YAMLError as exc:
        print(f"rayscale simulate: {args.file} is not valid YAML or JSON: {exc}", file=sys.stderr)
    return EXIT_BAD_SCENARIO


def run(args: argparse.Namespace) -> int:
    found = _scenario(args)
    if isinstance(found, int):
        return found
    doc, source = found
    try:
        for assignment in args.overrides:
            override(doc, assignment)
        snapshot = parse_scenario(doc)
        virtual = parse_virtual(doc, snapshot)
    except OverrideError as exc:
        print(f"rayscale simulate: {exc}", file=sys.stderr)
        return EXIT_BAD_SCENARIO
    except ScenarioError as exc:
        print(f"rayscale simulate: bad scenario: {exc}", file=sys.stderr)
        return EXIT_BAD_SCENARIO
    if args.save:
        if args.overrides:
            source += " with " + " ".join(f"--set {a}" for a in args.overrides)
        try:
            save(doc, args.save, source)
        except OSError as exc:
            print(f"rayscale simulate: cannot write {args.save}: {exc.strerror}", file=sys.stderr)
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
