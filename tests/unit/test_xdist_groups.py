"""How `make integration`'s pytest workers share the tests (tests/support/xdist_groups.py): a file per
group, every file with a test that starts Ray nodes in one group; the workers write the groups, the
controller's scheduler reads them; nothing happens outside ``pytest -n``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import cast

import pytest
from tests.support import xdist_groups


class FakeItem:
    """What the hooks read of a pytest.Item."""

    def __init__(self, nodeid: str, *fixturenames: str, marks: tuple[pytest.MarkDecorator, ...] = ()) -> None:
        self.nodeid = nodeid
        self.fixturenames = list(fixturenames)
        self.marks = {m.name: m.mark for m in marks}

    def get_closest_marker(self, name: str) -> pytest.Mark | None:
        return self.marks.get(name)


SMOKE = "tests/integration/test_smoke.py"
RAY_GCS = "tests/integration/test_ray_gcs.py"


def items() -> list[pytest.Item]:
    found = [
        FakeItem(f"{SMOKE}::test_a", "cluster", "namespace"),
        FakeItem(f"{RAY_GCS}::test_b", "ray_head", "gcs"),
        FakeItem(f"{RAY_GCS}::test_token_auth"),  # starts its own heads: its file's group
        FakeItem("tests/integration/test_demo.py::test_d", "cluster", marks=(pytest.mark.ray,)),
        FakeItem("e2e/test_lifecycle_e2e.py::test_e[x::y]", "scenario", "bridge", "cluster"),
        FakeItem(f"{SMOKE}::test_f", "cluster"),
    ]
    return cast(list[pytest.Item], found)


def test_each_file_is_a_group_but_the_files_that_start_ray_are_one() -> None:
    assert xdist_groups.groups(items()) == {
        f"{SMOKE}::test_a": SMOKE,
        f"{RAY_GCS}::test_b": "ray",
        f"{RAY_GCS}::test_token_auth": "ray",
        "tests/integration/test_demo.py::test_d": "ray",
        "e2e/test_lifecycle_e2e.py::test_e[x::y]": "ray",
        f"{SMOKE}::test_f": SMOKE,
    }


def test_a_worker_writes_the_groups_where_the_controller_reads_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "groups.json"
    monkeypatch.setenv(xdist_groups.GROUPS_ENV, str(target))
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    xdist_groups.pytest_collection_modifyitems(items())
    assert not target.exists(), "only a worker writes them"
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw1")
    xdist_groups.pytest_collection_modifyitems(items())
    assert json.loads(target.read_text()) == xdist_groups.groups(items())
    assert xdist_groups.read_groups(str(target))[f"{RAY_GCS}::test_token_auth"] == "ray"
    assert xdist_groups.read_groups(str(tmp_path / "absent.json")) == {}
    assert list(tmp_path.iterdir()) == [target]
