"""`run --wait` on the real kube-apiserver (issue 40), as the reconciler's ServiceAccount with the
rollout Component: one run follows a MachineConfig change from its build to the pool's release, from
watch events, while a thread plays the kubelet (a build of a fixed time) and the daemon, and the MCO's
render and node controllers are the real ones (`mco`: ocl-mco-harness) or, where that is not built,
the imitations (tests/support/playing.py says which). Without `--wait` the same change takes three
runs (issue 40), measured here too."""

from __future__ import annotations

import pytest

from reconcile.contract import annotations as A
from reconcile.core.rollout import hold
from tests.realapi.test_realapi_rollout import component as component  # noqa: F401 - the module fixture
from tests.support.playing import Scenario

pytestmark = pytest.mark.realapi


def scenario(real, tmp_path, mco=None):
    """The render delay is the harness's 0.5 s (tests/tools/mco/build.sh), played or real, not
    upstream's 5 s (bench/one_run.py plays that)."""
    s = Scenario(real.api, tmp_path, 2.0, mco, render_delay=0.5)
    s.world.start()
    return s


def check(s, result, runs):
    try:
        assert result["runs"] == runs, result
        pool = s.api.get("MachineConfigPool", "", "worker")
        assert pool["metadata"]["annotations"][A.STATE] == A.SUCCEEDED
        assert pool["metadata"]["annotations"].get(A.GATE) in (hold.ROLLING, hold.HELD)
    finally:
        s.world.stop.set()


def test_one_waiting_run_takes_a_change_to_its_nodes_played_controllers(component, real, tmp_path):
    s = scenario(real, tmp_path)
    result = s.measure("change", wait=True)
    check(s, result, 1)
    assert result["seconds"] is not None and result["seconds"] <= 15, result


def test_without_waiting_a_change_takes_three_runs(component, real, tmp_path):
    s = scenario(real, tmp_path)
    check(s, s.measure("change", wait=False), 3)


def test_one_waiting_run_with_the_mcos_real_controllers(component, real, mco, tmp_path):
    s = scenario(real, tmp_path, mco)
    result = s.measure("change", wait=True)
    check(s, result, 1)
    assert result["seconds"] is not None and result["seconds"] <= 15, result
