"""The MCO's own render and node controllers (openshift/machine-config-operator at 7ff337a4, built by
`make mco` into ocl-mco-harness) on the real kube-apiserver, with the daemon played by the test and
judged by the daemon's own reboot rule (tests/support/mcoreal.py). Here: the controllers alone, on
the objects our scenarios use, so that what the product's suites rest on is seen to hold. Expected
values are read in the MCO's source (paths given), never taken from a run."""

from __future__ import annotations

import time

import pytest

from tests.support import factory as F
from tests.support import mcoreal
from tests.unit.test_rollout import mco_pool, source_mc

pytestmark = pytest.mark.realapi
NODES = ("worker-0", "worker-1", "worker-2")


def seed_pool(real, *pools, nodes=NODES):
    pools = pools or (mco_pool("worker", ("worker",)),)
    for pool in pools:
        pool["status"] = {}
    real.seed([*pools, *(F.node(n, "worker") for n in nodes),
               source_mc("00-worker", "worker", {"/etc/base": "base"}, generated=True)])


def target(real, pool="worker"):
    return real.pool(pool)["spec"]["configuration"]["name"]


def annotations(real, node):
    return real.api.get("Node", "", node)["metadata"].get("annotations") or {}


def test_the_controllers_render_roll_out_and_the_daemon_rule_decides_reboots(real, mco):
    seed_pool(real)
    mco.settle()
    first = target(real)
    rendered = real.api.get("MachineConfig", "", first)
    # render_controller.go: rendered-<pool>-<hash>, owned by the pool, the base image of the
    # OSImageStream's default stream (getOSImageStreamForPool), our controller version
    assert first.startswith("rendered-worker-") and rendered["spec"]["osImageURL"] == F.BASE
    assert rendered["metadata"]["ownerReferences"][0]["name"] == "worker"
    assert rendered["metadata"]["annotations"][f"{F.MCO}/generated-by-controller-version"] == \
        mco.daemon.installed.version
    for node in NODES:
        ann = annotations(real, node)
        assert (ann[mcoreal.CURRENT], ann[mcoreal.DESIRED], ann[mcoreal.STATE]) == (first, first, "Done")
    status = real.pool()["status"]
    assert (status["machineCount"], status["updatedMachineCount"], status["readyMachineCount"],
            status["configuration"]["name"]) == (3, 3, 3, first)

    # a file no node disruption policy names: each node once, each move a reboot (update.go)
    real.api.create(source_mc("99-worker-motd", "worker", {"/etc/motd": "hello"}))
    moves = mco.settle()
    second = target(real)
    assert second != first
    assert moves.per_node() == dict.fromkeys(NODES, 1) and moves.reboots == 3 and moves.os_changes == 0
    assert {(m.from_config, m.to_config) for m in moves} == {(first, second)}
    assert {tuple(m.verdict["files"]) for m in moves} == {("/etc/motd",)}

    # the kubelet's pull secret: the built-in policy is None (apihelpers defaultClusterPolicies)
    real.api.create(source_mc("99-worker-auth", "worker", {"/var/lib/kubelet/config.json": "auth"}))
    moves = mco.settle()
    assert moves.per_node() == dict.fromkeys(NODES, 1) and moves.reboots == 0
    assert {tuple(a["type"] for a in m.verdict["actions"]) for m in moves} == {("None",)}

    # paused: rendered, not rolled out (node_controller.go syncMachineConfigPool; status.go)
    real.api.request("PATCH", real.api.path("MachineConfigPool", "", "worker"), {"spec": {"paused": True}},
                     content_type="application/merge-patch+json")
    real.api.create(source_mc("99-worker-issue", "worker", {"/etc/issue": "paused"}))
    moves = mco.settle()
    held = real.pool()
    assert len(moves) == 0 and held["spec"]["configuration"]["name"] != held["status"]["configuration"]["name"]
    updating = next(c for c in held["status"]["conditions"] if c["type"] == "Updating")
    assert (updating["status"], updating["message"]) == (
        "False", f"Pool is paused; will not update to MachineConfig {held['spec']['configuration']['name']}")


def test_a_render_failure_is_the_real_controllers_message(real, mco):
    """A MachineConfig whose Ignition does not parse: RenderDegraded with the controller's own words
    (render_controller.go `syncFailingStatus` "Failed to render configuration for pool %s: %v",
    `syncGeneratedMachineConfig` "could not generate rendered MachineConfig: %w", helpers.go
    `IgnParseWrapper` "parsing Ignition config failed: unknown version. ..."): it does not name the
    MachineConfig, and the pool keeps its last rendered config."""
    seed_pool(real)
    mco.settle()
    before = target(real)
    bad = source_mc("99-worker-bad", "worker")
    bad["spec"]["config"] = {"ignition": {"version": "9.9.9"}}
    real.api.create(bad)
    mco.settle()
    degraded = next(c for c in real.pool()["status"]["conditions"] if c["type"] == "RenderDegraded")
    assert degraded["status"] == "True" and degraded["message"].startswith(
        "Failed to render configuration for pool worker: could not generate rendered MachineConfig: "
        "parsing Ignition config failed: unknown version. Supported spec versions: "), degraded
    assert target(real) == before


def set_updated(api, node, value):
    mcn = api.request("GET", f"{mcoreal.MCN_PATH}/{node}")[1]
    for c in mcn["status"]["conditions"]:
        if c["type"] == "Updated":
            c["status"] = value
    api.request("PUT", f"{mcoreal.MCN_PATH}/{node}/status", mcn)


def updated_count(real, want, timeout=20):
    """The pool's updatedMachineCount once it is `want` (the node controller re-syncs the pool on a
    MachineConfigNode's update), or what it is after `timeout` seconds."""
    import time
    deadline = time.monotonic() + timeout
    while True:
        got = real.pool()["status"]["updatedMachineCount"]
        if got == want or time.monotonic() > deadline:
            return got
        time.sleep(0.2)


@pytest.mark.parametrize("feature_set", ["Default", "TechPreviewNoUpgrade"])
def test_updated_machines_come_from_the_machineconfignodes_only_with_image_mode_status_reporting(
        real, mco, tmp_path, feature_set):
    """status.go `calculateStatus`: with the ImageModeStatusReporting gate (TechPreviewNoUpgrade, not
    Default) a machine is updated when its MachineConfigNode's Updated condition is True and its
    status.configVersion.desired is the pool's config (`IsMachineUpdatedMCN`); without it, from the
    Node's annotations (`GetMachinesByState`). The played daemon writes both; a MachineConfigNode
    that says Updated False counts only with the gate."""
    controllers = mco.controllers
    if feature_set != "Default":
        controllers.stop()
        controllers = mcoreal.Controllers(mco.daemon.installed, tmp_path, feature_set).start()
    try:
        cluster = mcoreal.Cluster(controllers, mco.daemon)
        seed_pool(real)
        cluster.settle()
        assert real.pool()["status"]["updatedMachineCount"] == 3
        set_updated(real.api, "worker-0", "False")
        # with the gate the count drops to 2; without, it stays 3 (given 3 s to drop, as the gate's does
        # within a second)
        expected = 2 if feature_set == "TechPreviewNoUpgrade" else 3
        assert updated_count(real, 2, timeout=20 if expected == 2 else 3) == expected
        set_updated(real.api, "worker-0", "True")
        assert updated_count(real, 3) == 3
    finally:
        controllers.stop()


def test_the_queues_say_busy_until_the_render_delay_has_passed_and_the_pool_is_rendered(real, mco):
    """settle's `idle` (the harness's queues.go): a MachineConfig change queues the pool behind the
    render delay (render_controller.go `enqueueAfter(pool, renderDelay)`), so the controllers are not
    idle before the rendered config exists, and are once it does and the nodes are done."""
    seed_pool(real, nodes=("worker-0",))
    mco.settle()
    assert mco.controllers.idle()
    first = target(real)
    real.api.create(source_mc("99-worker-motd", "worker", {"/etc/motd": "hello"}))
    busy, deadline = [], time.monotonic() + 30
    while target(real) == first and time.monotonic() < deadline:
        busy.append(mco.controllers.idle())
        time.sleep(0.05)
    assert target(real) != first and busy and not any(busy[3:]), busy
    mco.settle()
    assert mco.controllers.idle()
