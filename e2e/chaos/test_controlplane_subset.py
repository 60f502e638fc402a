"""The subset of the control-plane fault suite that `make test` runs: one run each of an operator
SIGKILL mid-scale, 500s to 30 % of writes and watch streams cut, on a private control plane, with
every invariant checked (see e2e/chaos/controlplane.py; `make chaos` runs every fault several
times)."""

from __future__ import annotations

import pytest
from e2e.chaos.controlplane import main_async

pytestmark = [pytest.mark.integration, pytest.mark.chaos]


async def test_control_plane_faults_break_no_invariant() -> None:
    faults = ["operator-killed", "server-errors", "watches-cut"]
    outcomes = await main_async(faults, runs=1, seed=7, record=False)
    assert [o.violations for o in outcomes] == [(), (), ()], [o.detail for o in outcomes]
    assert all(o.converged_seconds is not None for o in outcomes)
