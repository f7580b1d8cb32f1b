"""Issue 50, behaviours no test held, on the daemon's rule (reconcile/imagebuild/disruption.py) and
what is live for our image (imagebuild/livechange.py):

- a unit or a file is compared by its contents, not its name: a systemd unit kept by name with other
  contents, another `enabled` or other drop-ins, and a file whose mode or owner changes with the same
  contents, are changes. The daemon's own sets compare the whole Ignition entry
  (`ctrlcommon.CalculateConfigFileDiffs` and `GetChangedConfigUnitsByType`: `reflect.DeepEqual` of
  the `ign3types.File` / `ign3types.Unit` kept under one path or name), so each is in its file or
  unit set and takes that entry's action: a unit without a policy and a plain file reboot, and the
  pool builds;
- combined actions add up: `calculatePostConfigChangeNodeDisruptionActionFromMCDiffs` appends every
  file's, unit's and the SSH key's actions and strips a `None` only when another action is there;
  `calculatePostConfigChangeActionFromMCDiffs` (before policies) keeps the strongest of none, reload
  crio, restart crio. A `None` never hides another action.

Expected values: the MCO's source at 7ff337a4 (`pkg/daemon/update.go`, `pkg/controller/common/
helpers.go`, the built-in policies of tests/support/ndp.py); the same cases are held to the daemon's
own verdict in tests/realtools/test_live_change_verdict_held.py."""

from __future__ import annotations

import copy

import pytest

from reconcile.contract import annotations as A
from reconcile.core.node import disruption, livechange
from reconcile.core.node.disruption import REBOOTS, Action
from tests.support import mconode, ndp
from tests.unit import test_disruption as T
from tests.unit.test_gate import cycle, pool
from tests.unit.test_live_change import change, world
from tests.unit.test_rollout import source_mc

UNIT = "foo.service"
X1, X2, Y1 = "[Service]\nX=1\n", "[Service]\nX=2\n", "[Service]\nY=1\n"
RESTART_UNIT = (Action("Restart", UNIT),)
#: the built-in policies with an administrator's entry for the unit (`MergeClusterPolicies`)
UNIT_POLICY = ndp.merged(units=[{"name": UNIT, "actions": [{"type": "Restart", "restart": {"serviceName": UNIT}}]}])
PULL_SECRET, POLICY_JSON, REGISTRIES = ("/var/lib/kubelet/config.json", "/etc/containers/policy.json",
                                        "/etc/containers/registries.conf")


def with_unit(contents: str = "[Service]\nExecStart=/bin/true\n", dropins=(("10-x.conf", X1),),
              files=None, keys=("ssh-ed25519 AAAA one",), **unit):
    """test_disruption's config (T.BASE's files) with one enabled unit and its drop-ins."""
    out = T.mc(T.BASE if files is None else files, keys=keys)
    out["spec"]["config"]["systemd"]["units"] = [{
        "name": UNIT, "enabled": True, "contents": contents,
        "dropins": [{"name": n, "contents": c} for n, c in dropins], **unit}]
    return out


def file_changed(path: str, **fields):
    """OLD with one file's entry changed in fields other than its contents."""
    out = with_unit()
    (entry,) = [f for f in out["spec"]["config"]["storage"]["files"] if f["path"] == path]
    entry.update(fields)
    return out


OLD = with_unit()

# (case, new config, its file and unit sets, actions under the built-in policies, under them with an
# administrator's Restart for the unit, before policies)
KEPT = [
    ("unit-contents", with_unit("[Service]\nExecStart=/bin/false\n"), (), (UNIT,), REBOOTS, RESTART_UNIT, REBOOTS),
    ("unit-disabled", with_unit(enabled=False), (), (UNIT,), REBOOTS, RESTART_UNIT, REBOOTS),
    ("dropin-contents", with_unit(dropins=(("10-x.conf", X2),)), (), (UNIT,), REBOOTS, RESTART_UNIT, REBOOTS),
    ("dropin-added", with_unit(dropins=(("10-x.conf", X1), ("20-y.conf", Y1))), (), (UNIT,), REBOOTS,
     RESTART_UNIT, REBOOTS),
    ("file-mode", file_changed("/etc/base", mode=0o600), ("/etc/base",), (), REBOOTS, REBOOTS, REBOOTS),
    ("file-owner", file_changed("/etc/base", user={"name": "core"}), ("/etc/base",), (), REBOOTS, REBOOTS,
     REBOOTS),
    ("file-group", file_changed("/etc/base", group={"name": "wheel"}), ("/etc/base",), (), REBOOTS, REBOOTS,
     REBOOTS),
    ("policy-json-mode", file_changed(POLICY_JSON, mode=0o600), (POLICY_JSON,), (), (T.CRIO_RELOAD,),
     (T.CRIO_RELOAD,), (T.CRIO_RELOAD,)),
    ("policy-json-owner", file_changed(POLICY_JSON, user={"name": "core"}), (POLICY_JSON,), (),
     (T.CRIO_RELOAD,), (T.CRIO_RELOAD,), (T.CRIO_RELOAD,)),
]


def contents_of(mc, path):
    (entry,) = [f for f in mc["spec"]["config"]["storage"]["files"] if f["path"] == path]
    return entry["contents"]


@pytest.mark.parametrize("case, new, files, units, with_policy, with_unit_policy, before_policy", KEPT,
                         ids=[c[0] for c in KEPT])
def test_a_unit_or_file_kept_by_name_is_compared_by_its_whole_entry(case, new, files, units, with_policy,
                                                                    with_unit_policy, before_policy):
    if case.startswith(("file", "policy")):             # the contents are the same: only mode or owner moved
        path = files[0]
        assert contents_of(new, path) == contents_of(OLD, path)
    d = disruption.diff(OLD, new)
    assert (d.files, d.units, d.removed_files, d.removed_units) == (files, units, (), ())
    assert disruption.actions(d, ndp.DEFAULTS) == with_policy
    assert disruption.actions(d, UNIT_POLICY) == with_unit_policy
    assert disruption.actions(d, None) == before_policy


@pytest.mark.parametrize("case, new, files, units, with_policy, with_unit_policy, before_policy", KEPT,
                         ids=[c[0] for c in KEPT])
def test_a_changed_entry_kept_by_name_builds_where_the_daemon_reboots_for_it(case, new, files, units, with_policy,
                                                                             with_unit_policy, before_policy):
    """The pool builds (the image holds the old entry) exactly where the daemon reboots; where its
    policy reloads or restarts, the nodes take it live and the pool says what they do."""
    for policies, expected in ((ndp.DEFAULTS, with_policy), (UNIT_POLICY, with_unit_policy), (None, before_policy)):
        v = livechange.verdict(OLD, new, policies)
        assert v.live is not disruption.reboots(expected), (policies is None, v)
        assert v.said == ("reboot" if not v.live else disruption.said(expected))
        assert ("reboots for it" in v.why) is not v.live


@pytest.mark.parametrize("dropins, gone", [((("20-y.conf", X1),), "foo.service.d/10-x.conf"),
                                           ((("20-y.conf", X1), ("30-z.conf", Y1)), "foo.service.d/10-x.conf"),
                                           ((), "foo.service.d/10-x.conf")])
def test_other_dropins_of_a_kept_unit_build_whatever_the_policy(dropins, gone):
    """A drop-in renamed (same contents) is another drop-in: the old file stays in the image for
    every node that joins later, so the pool builds even where the policy restarts the unit."""
    new = with_unit(dropins=dropins)
    assert disruption.diff(OLD, new).units == (UNIT,)
    for policies in (ndp.DEFAULTS, UNIT_POLICY, None):
        v = livechange.verdict(OLD, new, policies)
        assert not v.live and v.why == f"removed from the config, still in the image: {gone}", v


# --- combined actions add up ----------------------------------------------------------------------

def files_with(**changes):
    """OLD's files with these changed (keyword: a path's short name, value: its new contents)."""
    paths = {"pull_secret": PULL_SECRET, "policy_json": POLICY_JSON, "registries": REGISTRIES, "ca": T.CA,
             "plain": "/etc/base", "kubelet_ca": "/etc/kubernetes/kubelet-ca.crt"}
    return {**T.BASE, **{paths[k]: v for k, v in changes.items()}}


CA_RESTARTS = (Action("Restart", "coreos-update-ca-trust.service"), Action("Restart", "crio.service"))
# (case, new config, actions under the built-in policies (the daemon's order), before policies)
COMBINED = [
    ("pull-secret+policy.json", with_unit(files=files_with(pull_secret="{}", policy_json="{}")),
     (T.CRIO_RELOAD,), (T.CRIO_RELOAD,)),
    ("ssh+policy.json", with_unit(files=files_with(policy_json="{}"), keys=("ssh-ed25519 AAAA two",)),
     (T.CRIO_RELOAD,), (T.CRIO_RELOAD,)),
    ("pull-secret+registries.conf", with_unit(files=files_with(pull_secret="{}", registries=T.REGISTRIES + "# x\n")),
     (Action("Special"),), (T.CRIO_RELOAD,)),
    ("pull-secret+ca", with_unit(files=files_with(pull_secret="{}", ca="ca2")), CA_RESTARTS,
     (Action("Restart", "crio.service"),)),
    ("ssh+pull-secret+policy.json+ca", with_unit(files=files_with(pull_secret="{}", policy_json="{}", ca="ca2"),
                                                 keys=("k2",)),
     (T.CRIO_RELOAD, *CA_RESTARTS), (Action("Restart", "crio.service"),)),
    ("ssh+pull-secret", with_unit(files=files_with(pull_secret="{}"), keys=("k2",)), (Action("None"),),
     (Action("None"),)),
    ("pull-secret+plain-file", with_unit(files=files_with(pull_secret="{}", plain="b2")), REBOOTS, REBOOTS),
    ("pull-secret+policy.json+kubelet-ca", with_unit(files=files_with(pull_secret="{}", policy_json="{}",
                                                                      kubelet_ca="kca2")),
     REBOOTS, (T.CRIO_RELOAD,)),
]


def by_type(actions):
    return sorted(actions, key=repr)


@pytest.mark.parametrize("case, new, with_policy, before_policy", COMBINED, ids=[c[0] for c in COMBINED])
def test_combined_actions_add_up_and_none_hides_nothing(case, new, with_policy, before_policy):
    d = disruption.diff(OLD, new)
    assert by_type(disruption.actions(d, ndp.DEFAULTS)) == by_type(with_policy)
    assert disruption.actions(d, None) == before_policy
    for policies, expected in ((ndp.DEFAULTS, with_policy), (None, before_policy)):
        v = livechange.verdict(OLD, new, policies)
        assert (v.live, v.said) == (not disruption.reboots(expected),
                                    "reboot" if disruption.reboots(expected) else disruption.said(expected)), v


@pytest.mark.parametrize("release", ["4.18.3", "4.16.12"])
def test_the_pull_secret_with_policy_json_is_recorded_as_a_reload_of_crio(any_cli, release):
    """End to end: one MachineConfig that adds the pull secret (None) and policy.json (reload crio),
    under the cluster's policy (4.18) and the list before policies (4.16): no build, and the pool
    records the reload, not "none"."""
    items = cycle(any_cli, world(release), mconode.Counter())
    both = source_mc("99-worker-pull-and-policy", "worker", {PULL_SECRET: "{}", POLICY_JSON: "{}"})
    items, counter, started = change(any_cli, copy.deepcopy(items), both)
    assert started == [] and counter.os_changes == 0
    assert pool(items)["metadata"]["annotations"][A.LIVE] == "reload crio.service"
