"""When the rollout gate lets a held pool go (issue 42 items 1 and 2): only for our image, and always
after holdTimeout.

1. A held pool is unpaused only when its rendered config carries the image recorded for its
   content. Two ways it can carry another: a MachineConfig that sorts after `ocl-osimageurl-<pool>`
   sets `osImageURL` (the last one wins, `MergeMachineConfigs`,
   openshift/machine-config-operator `pkg/controller/common/helpers.go`), or the config still holds
   our earlier image because the render controller has not merged our new MachineConfig yet: it
   waits 5 s before it renders (`pkg/controller/render/render_controller.go`) while the node
   controller acts on an unpaused pool at once (`syncMachineConfigPool`,
   `pkg/controller/node/node_controller.go`). Unpaused then, the nodes would roll out the new files
   on the wrong image: the wrong OS, or two disruptions.
2. A hold is bounded even where the gate cannot know what the settings want (a typo, an unknown
   value) or the pool has since gained the MCO's label: past holdTimeout the pool is released.

The MCO is imitated (tests/support/mcorender.py, mconode.py); where the render controller lags, the
test runs the node controller and the daemons (mconode.sync, mconode.daemon) without it."""

from __future__ import annotations

import copy

import kubelet  # examples/kubelet.py
import pytest

from reconcile.contract import annotations as A
from reconcile.core.rollout import hold
from tests.support import factory as F
from tests.support import mconode
from tests.unit.test_gate import NODES, cluster, cycle, files, pool, rendered
from tests.unit.test_hold import built, step
from tests.unit.test_rollout import finish, ours, source_mc

OTHER = "quay.io/someone/else@sha256:" + "e" * 64
EARLIER = f"{F.REPO}@sha256:" + "2" * 64
#: 3 hours before F.NOW: past the default holdTimeout (2h)
LONG_AGO = "2026-11-29T09:00:00Z"


# --- 1. the gate releases only for our image: pure ----------------------------------------------

@pytest.mark.parametrize("checked", [OTHER, EARLIER], ids=["another-image", "our-earlier-image"])
def test_a_checked_config_that_holds_another_image_stays_held(checked):
    """The build for the config succeeded and its rendered config was checked, but the check found
    another image in it: no unpause (`hold.seen`'s `ready` compares the two)."""
    p = F.pool("worker", rendered="rendered-worker-2", annotations={
        A.GATE: hold.HELD, A.GATE_CONFIG: "rendered-worker-2", A.GATE_SINCE: "2026-11-29T11:00:00Z"})
    p["spec"]["paused"] = True
    p["status"] = {"machineCount": 2, "updatedMachineCount": 2, "configuration": {"name": "rendered-worker-1"}}
    after = {**built("rendered-worker-2"), A.ROLLOUT: f"rendered-worker-2={checked}"}
    move, left, _ = step(p, after)
    assert move is hold.Move.KEEP and left["spec"]["paused"] is True
    # the same pool once the check finds the image recorded for it: released
    assert step(p, built("rendered-worker-2"))[0] is hold.Move.ROLL


# --- 1. end to end ------------------------------------------------------------------------------

def test_a_machineconfig_that_overrides_our_image_keeps_the_pool_held(any_cli):
    """Another MachineConfig of the pool that sorts after ours sets osImageURL: the rendered config
    carries the new files and that image, never ours. The pool stays held; no node moves."""
    items = cycle(any_cli, cluster(), mconode.Counter())
    override = source_mc("zz-override", "worker", {"/etc/motd": "hello"}, osImageURL=OTHER)
    counter = mconode.Counter()
    items = cycle(any_cli, copy.deepcopy(items) + [override], counter)
    assert rendered(items)["spec"]["osImageURL"] == OTHER and "/etc/motd" in files(rendered(items))
    assert pool(items)["metadata"]["annotations"][A.OVERRIDDEN_BY] == "zz-override"
    assert pool(items)["spec"]["paused"] is True and pool(items)["metadata"]["annotations"][A.GATE] == hold.HELD
    assert len(counter) == 0, [(u.node, u.to_config) for u in counter]


def test_a_config_that_still_holds_our_earlier_image_keeps_the_pool_held(any_cli):
    """The build for the new content succeeds and our MachineConfig gets its image; while the render
    controller has not merged it (down for a run, or behind), the pool's rendered config holds the
    new files on our earlier image, and the next run checks that config. The pool stays held, no
    node moves; once the config carries the new image each node updates once, to files and image."""
    items = cycle(any_cli, cluster(), mconode.Counter())
    earlier = ours(items)[0]["spec"]["osImageURL"]
    items, _ = mconode.settle(copy.deepcopy(items) + [source_mc("99-worker-motd", "worker", {"/etc/motd": "hi"})],
                              F.BASE)
    code, items, err = any_cli.run(items)                       # the build starts
    (build,) = [o for o in F.owned(items, "worker") if o["kind"] in ("Pod", "Build")]
    code, items, err = any_cli.run(finish(items, "worker", "Succeeded", kubelet.digest_for(build["metadata"]["name"])))
    assert code == 0 and ours(items)[0]["spec"]["osImageURL"] != earlier, err
    counter = mconode.Counter()
    items = mconode.daemon(mconode.sync(items), counter)        # the node controller acts; no render
    code, items, err = any_cli.run(items)
    assert rendered(items)["spec"]["osImageURL"] == earlier and "/etc/motd" in files(rendered(items))
    assert pool(items)["spec"]["paused"] is True, err
    items = mconode.daemon(mconode.sync(items), counter)
    assert len(counter) == 0, [(u.node, u.to_config) for u in counter]
    items = cycle(any_cli, items, counter)                      # the render controller is back
    final = rendered(items)
    assert final["spec"]["osImageURL"] == ours(items)[0]["spec"]["osImageURL"] and "/etc/motd" in files(final)
    assert counter.per_node() == dict.fromkeys(NODES, 1), [(u.node, u.to_config) for u in counter]
    assert all(u.to_config == final["metadata"]["name"] for u in counter)


# --- 2. holdTimeout releases a pool whatever the gate cannot know ---------------------------------

def held_too_long(cli, items):
    """A held pool waiting for the image of new content (a build started), since LONG_AGO."""
    items = copy.deepcopy(items) + [source_mc("99-worker-motd", "worker", {"/etc/motd": "hello"})]
    items, _ = mconode.settle(items, F.BASE)
    code, items, err = cli.run(items)
    assert code == 0 and hold.waiting(pool(items)), err
    items = copy.deepcopy(items)
    pool(items)["metadata"]["annotations"][A.GATE_SINCE] = LONG_AGO
    return items


def settings(items):
    return F.find(items, "ConfigMap", "on-cluster-build-config")[0]["data"]


@pytest.mark.parametrize("spoil", ["rolloutGate-typo", "rollout-unknown", "mco-label"])
def test_a_hold_past_holdtimeout_is_released_when_the_gate_cannot_know_more(any_cli, spoil):
    """Invalid settings (the run is Blocked, exit 2) or the MCO's label on the pool: the gate keeps
    every record (tests/unit/test_gate.py) but a hold older than holdTimeout, which it releases with
    the Warning Event, as it would with valid settings."""
    items = held_too_long(any_cli, cycle(any_cli, cluster(), mconode.Counter()))
    if spoil == "rolloutGate-typo":
        settings(items)["rolloutGate"] = "hodl"
    elif spoil == "rollout-unknown":
        settings(items)["rollout"] = "machineconfigs"
    else:
        pool(items)["metadata"]["labels"][A.MCO_LAYERING_LABEL] = ""
    code, after, err = any_cli.run(items)
    assert code in (0, 2), err
    left = pool(after)
    assert left["spec"]["paused"] is False, err
    assert left["metadata"]["annotations"][A.GATE] == hold.RELEASED
    assert left["metadata"]["annotations"][A.GATE_REASON].startswith(hold.TIMEOUT_REASON)
    (event,) = [e for e in F.find(after, "Event") if e["reason"] == hold.RELEASE_EVENT]
    assert event["type"] == "Warning"
    # the same pool held for less than holdTimeout stays held and paused
    fresh = copy.deepcopy(items)
    pool(fresh)["metadata"]["annotations"][A.GATE_SINCE] = "2026-11-29T11:00:00Z"
    code, after, err = any_cli.run(fresh)
    assert pool(after)["spec"]["paused"] is True and pool(after)["metadata"]["annotations"][A.GATE] == hold.HELD
