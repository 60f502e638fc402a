"""How `make integration`'s pytest-xdist workers share the tests (``-n 3 --dist loadgroup``).

Registered for every suite by ``-p tests.support.xdist_groups`` in pyproject.toml's addopts; it does
nothing unless pytest runs workers. Every test file is a group of its own (its tests, and its
module-scoped fixtures, stay on one worker, in the file's order), except the files with a test that
starts Ray nodes (the `bridge` or `ray_head` fixture, or the `ray` marker): they are one group,
"ray", run one after another on one worker while the others work through the rest. Two or three Ray
clusters starting side by side on 2 cores, beside a control plane per worker, timed out at starting
("the GCS has become overloaded").

xdist's own `loadgroup` reads `xdist_group` markers through a worker's node ids, which pytest 9 no
longer lets it change; so the workers write each test's group to a file the controller names
(`GROUPS_ENV`, set before the workers start, which inherit it) and the controller's scheduler
(`GroupScheduling`) reads it when the workers have collected.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

GROUPS_ENV = "RAYSCALE_XDIST_GROUPS"  # the file the workers write {node id: group} to
# The fixtures that start real Ray nodes on this machine (e2e/conftest.py's Ray bridge and RayJob
# bridge, the Ray tests' heads); a test that starts them otherwise is marked `ray`.
RAY_FIXTURES = frozenset({"bridge", "jobs", "ray_head"})
RAY_GROUP = "ray"


def starts_ray(item: pytest.Item) -> bool:
    fixtures = set(getattr(item, "fixturenames", ()))
    return item.get_closest_marker("ray") is not None or bool(RAY_FIXTURES & fixtures)


def file_of(nodeid: str) -> str:
    return nodeid.split("::")[0]


def groups(items: list[pytest.Item]) -> dict[str, str]:
    """Each test's group: "ray" for every test of a file where one starts Ray, else its file."""
    ray_files = {file_of(item.nodeid) for item in items if starts_ray(item)}
    return {
        item.nodeid: RAY_GROUP if file_of(item.nodeid) in ray_files else file_of(item.nodeid)
        for item in items
    }


def pytest_configure(config: pytest.Config) -> None:
    """In the controller of ``pytest -n N`` (N > 0): the file its workers write the groups to."""
    workers = config.getoption("numprocesses", None)
    if os.environ.get("PYTEST_XDIST_WORKER") is None and workers not in (None, 0):
        os.environ[GROUPS_ENV] = str(Path(tempfile.mkdtemp(prefix="rayscale-xdist-")) / "groups.json")


def pytest_unconfigure(config: pytest.Config) -> None:
    target = os.environ.get(GROUPS_ENV)
    if os.environ.get("PYTEST_XDIST_WORKER") is None and target is not None:
        shutil.rmtree(Path(target).parent, ignore_errors=True)


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """In a worker: every test's group into the controller's file (each worker writes the same)."""
    target = os.environ.get(GROUPS_ENV)
    if os.environ.get("PYTEST_XDIST_WORKER") is None or target is None:
        return
    part = Path(f"{target}.{os.environ['PYTEST_XDIST_WORKER']}")
    part.write_text(json.dumps(groups(items)))
    part.replace(target)


def read_groups(path: str | None) -> Mapping[str, str]:
    if path is None or not Path(path).exists():
        return {}
    found: dict[str, str] = json.loads(Path(path).read_text())
    return found


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """`--dist loadgroup`: whole groups to a worker, the groups the workers wrote."""
    if config.getoption("dist", None) != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling  # type: ignore[import-untyped]  # only with workers

    class GroupScheduling(LoadScopeScheduling):  # type: ignore[misc]
        """LoadScopeScheduling whose scope of a test is its group."""

        def _split_scope(self, nodeid: str) -> str:
            known = read_groups(os.environ.get(GROUPS_ENV))
            return known.get(nodeid, file_of(nodeid))

    return GroupScheduling(config, log)
