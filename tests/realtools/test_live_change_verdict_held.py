"""Issue 50, behaviours 6 and 7 held to the machine-config daemon's own verdict
(`ocl-mco-harness verdict`, tests/tools/mco/, `make mco`: `newMachineConfigDiff`,
`ctrlcommon.CalculateConfigFileDiffs`, `GetChangedConfigUnitsByType`,
`calculatePostConfigChangeNodeDisruptionActionFromMCDiffs` and, before policies,
`calculatePostConfigChangeActionFromMCDiffs`, compiled from the MCO at 7ff337a4):

- a unit kept by name with other contents, `enabled` or drop-ins, and a file whose mode or owner
  changes with the same contents, are in the daemon's file or unit set and take that entry's action;
  the pool builds exactly where the daemon reboots for them;
- combined actions add up: the pull secret (None) with policy.json (reload crio) is a reload of crio,
  in the daemon's verdict and in what the pool records (`livechange.Verdict.said`).

The cases are tests/unit/test_live_change_held.py's; here their expected values are the daemon's."""

from __future__ import annotations

import json

import pytest

from reconcile.core.node import disruption, livechange
from tests.realtools.test_disruption_parity import LEGACY, as_dict, key, real
from tests.support import mcoreal, ndp
from tests.unit import test_live_change_held as H

KEPT = [(c[0], c[1]) for c in H.KEPT]
COMBINED = [(c[0], c[1]) for c in H.COMBINED]
#: the unit tests' expected actions under the built-in policies, with the unit's Restart, before policies
TABLE = {c[0]: (c[4], c[5], c[6]) for c in H.KEPT} | {c[0]: (c[2], None, c[3]) for c in H.COMBINED}


@pytest.fixture(scope="module")
def mco():
    """The harness (skips saying why where `make mco` has not built it; fails under OCL_MCO=require)."""
    return mcoreal.harness()


@pytest.fixture(scope="module")
def built_in(mco):
    """The MCO's own built-in node disruption policies, merged as its operator publishes them."""
    return mcoreal.default_policies(mco)


def said(actions: list[dict]) -> str:
    """The daemon's actions as the pool records them (`ocl-reconciler.io/live`)."""
    return disruption.said(disruption.Action(a["type"], (a.get("reload") or a.get("restart") or {}).get("serviceName", ""))
                           for a in actions)


def check(got: dict, new: dict, policies: dict) -> None:
    """Our port and our live verdict against the daemon's verdict `got` for OLD -> new (no case
    removes a file, a unit or a drop-in: the pool builds exactly where the daemon reboots)."""
    d = disruption.diff(H.OLD, new)
    assert (sorted(got["files"]), sorted(got["units"])) == (sorted(d.files), sorted(d.units)), (got, d)
    ours = disruption.actions(d, policies)
    assert key(got["actions"]) == key([as_dict(a) for a in ours]), (got, ours)
    v = livechange.verdict(H.OLD, new, policies)
    assert v.live is not got["reboot"], (got, v)
    # in the order of the daemon's file set, a Go map's (`CalculateConfigFileDiffs`): compared as a set
    assert sorted(v.said.split(", ")) == sorted(("reboot" if got["reboot"] else said(got["actions"])).split(", ")), \
        (got, v)


@pytest.mark.parametrize("case, new", KEPT + COMBINED, ids=[c[0] for c in KEPT + COMBINED])
def test_the_daemon_compares_whole_entries_and_adds_actions_up_under_its_built_in_policies(
        mco, built_in, tmp_path, case, new):
    got = real(mco, tmp_path, H.OLD, new, "--default-policies")
    assert not got.get("unreconcilable"), got
    assert got["files"] or got["units"], got                 # the daemon sees the change
    assert key(got["actions"]) == key([as_dict(a) for a in TABLE[case][0]]), got
    check(got, new, built_in)


@pytest.mark.parametrize("case, new", KEPT, ids=[c[0] for c in KEPT])
def test_the_daemon_restarts_a_unit_kept_by_name_under_an_administrators_entry(mco, tmp_path, case, new):
    (tmp_path / "mcop.json").write_text(json.dumps(ndp.machineconfiguration(H.UNIT_POLICY)))
    got = real(mco, tmp_path, H.OLD, new, "--policies", str(tmp_path / "mcop.json"))
    assert key(got["actions"]) == key([as_dict(a) for a in TABLE[case][1]]), got
    check(got, new, H.UNIT_POLICY)


@pytest.mark.parametrize("case, new", KEPT + COMBINED, ids=[c[0] for c in KEPT + COMBINED])
def test_the_daemons_rule_before_policies_keeps_the_strongest_action(mco, tmp_path, case, new):
    got = real(mco, tmp_path, H.OLD, new, "--rule", "legacy")
    assert got["legacyActions"] == [LEGACY[a] for a in TABLE[case][2]], got
    ours = disruption.actions(disruption.diff(H.OLD, new), None)
    assert got["legacyActions"] == [LEGACY[a] for a in ours], (got, ours)
    v = livechange.verdict(H.OLD, new, None)
    assert v.live is not got["reboot"], (got, v)


def test_the_pull_secret_with_policy_json_is_the_daemons_reload_of_crio(mco, built_in, tmp_path):
    """Behaviour 7 in the daemon's own words: None and a reload of crio give the reload alone (the
    None stripped, `calculatePostConfigChangeNodeDisruptionActionFromMCDiffs`), and "reload crio"
    before policies; the pool records "reload crio.service", not "none"."""
    (new,) = [c[1] for c in H.COMBINED if c[0] == "pull-secret+policy.json"]
    got = real(mco, tmp_path, H.OLD, new, "--default-policies")
    assert got["actions"] == [{"type": "Reload", "reload": {"serviceName": "crio.service"}}] and not got["reboot"]
    assert sorted(got["files"]) == [H.POLICY_JSON, H.PULL_SECRET]
    assert livechange.verdict(H.OLD, new, built_in).said == "reload crio.service"
    legacy = real(mco, tmp_path, H.OLD, new, "--rule", "legacy")
    assert legacy["legacyActions"] == ["reload crio"]
    assert livechange.verdict(H.OLD, new, None).said == "reload crio.service"
