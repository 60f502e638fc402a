"""Every generated block of the docs whose results are stored in the repository, rendered again.

    python -m bench.render_docs          # rewrite each block from its stored results
    python -m bench.render_docs --check  # exit 1 if a block differs from what its results render

Each entry names the page, the generator's `Block` and its `render`; the results file is the
block's `source`. Blocks whose results are not stored yet (a generator that has not run since it
began storing them) are skipped and listed.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from e2e import report
from e2e.chaos import results as chaos

from bench import (
    autoscaler_fleet_docs,
    autoscaler_reaction,
    ci_stages_docs,
    docs,
    limits,
    operator_fleet,
    operator_scale,
    rayjob_first_task_docs,
    rayjob_fleet_docs,
    scheduler_vs_ray,
    vs_kuberay,
)

ROOT = Path(__file__).resolve().parents[1]


@dataclasses.dataclass(frozen=True)
class Generated:
    page: Path
    block: docs.Block
    render: Callable[[Any], str]
    load: Callable[[Path], Any] = lambda path: json.loads(path.read_text())

    def stored(self) -> Path:
        return ROOT / self.block.source

    def expected(self) -> str:
        """The block as its generator renders it from the stored results."""
        return self.block.wrap(self.render(self.load(self.stored())))

    def current(self) -> str | None:
        """The block as it stands in its page."""
        return self.block.find(self.page.read_text())


GENERATED = (
    Generated(scheduler_vs_ray.DOCS, docs.SCHEDULER, docs.render),
    Generated(operator_scale.DOCS, operator_scale.BLOCK, operator_scale.render),
    Generated(autoscaler_reaction.DOCS, autoscaler_reaction.BLOCK, autoscaler_reaction.render),
    Generated(autoscaler_fleet_docs.BENCHMARKS, autoscaler_fleet_docs.BLOCK, autoscaler_fleet_docs.render),
    Generated(
        autoscaler_fleet_docs.SCALING,
        autoscaler_fleet_docs.SCALING_BLOCK,
        autoscaler_fleet_docs.render_scaling,
    ),
    Generated(report.DOCS, report.BLOCK, report.render),
    Generated(operator_scale.DOCS, operator_fleet.BLOCK, operator_fleet.render),
    Generated(operator_scale.DOCS, vs_kuberay.BLOCK, vs_kuberay.render),
    Generated(limits.DOCS, limits.BLOCK, limits.render),
    Generated(operator_scale.DOCS, rayjob_fleet_docs.BLOCK, rayjob_fleet_docs.render),
    Generated(operator_scale.DOCS, rayjob_first_task_docs.BLOCK, rayjob_first_task_docs.render),
    Generated(chaos.DOCS, chaos.BLOCK, chaos.section, chaos.load_stored),
    *(
        Generated(ci_stages_docs.DOCS, block, ci_stages_docs.render)
        for block in ci_stages_docs.BLOCKS.values()
    ),
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="only compare; exit 1 on a difference")
    args = parser.parse_args(argv)
    differ = 0
    for g in GENERATED:
        name = g.block.generator
        if not g.stored().exists():
            print(f"{name}: {g.block.source} not stored yet; its block stays as it is")
            continue
        current, expected = g.current(), g.expected()
        if current == expected:
            continue
        differ += 1
        print(f"{name}: {g.page.name} {'differs' if args.check else 'rewritten'}")
        if not args.check:
            g.block.write(g.page, g.render(g.load(g.stored())))
    return 1 if args.check and differ else 0


if __name__ == "__main__":
    sys.exit(main())
