"""The node controller imitation (tests/support/mconode.py) against upstream's rules, each test naming
the one it holds: openshift/machine-config-operator pkg/controller/node (node_controller.go, status.go),
pkg/controller/common/layered_node_state.go, pkg/daemon/writer.go, and k8s.io/apimachinery intstr. The
module docstring gives the index ids."""

from __future__ import annotations

import pytest

from tests.support import factory as F
from tests.support import mconode as N
from tests.support import mcorender
from tests.unit.test_rollout import source_mc

NEW_IMAGE = "quay.io/example/os@sha256:" + "b" * 64


def world(nodes: int = 5, max_unavailable: int | str | None = None, paused: bool = False,
          booted: bool = True, extra: tuple = ()) -> list[dict]:
    """A worker pool of `nodes` nodes, rendered; the nodes booted on that config unless `booted` is
    False (then the daemon has never run on them)."""
    pool = F.pool("worker")
    if max_unavailable is not None:
        pool["spec"]["maxUnavailable"] = max_unavailable
    if paused:
        pool["spec"]["paused"] = True
    items = [pool, *(F.node(f"worker-{i}") for i in range(nodes)),
             source_mc("00-worker", "worker", {"/etc/base": "base"}, generated=True), *extra]
    items = mcorender.sync(items, base_image=F.BASE)
    if not booted:
        return items
    return N.settle(N.first_boot(items), base_image=F.BASE)[0]       # the pool's status as the MCO keeps it


def change(items: list[dict], *mcs: dict) -> list[dict]:
    return [*items, *mcs]


def one(items, kind, name):
    (found,) = F.find(items, kind, name)
    return found


def ann(items, node):
    return one(items, "Node", node)["metadata"].get("annotations") or {}


def conditions(pool):
    return {c["type"]: (c["status"], c.get("message", "")) for c in pool["status"]["conditions"]}


MOTD = source_mc("99-worker-motd", "worker", {"/etc/motd": "hello"})


# maxUnavailable: node_controller.go maxUnavailable -> intstr.GetScaledValueFromIntOrPercent(.., false);
# 0 -> 1. The table is upstream's TestMaxUnavailable (node_controller_test.go).
@pytest.mark.parametrize("value, nodes, expected", [
    (None, 4, 1), (2, 4, 2), (0, 4, 1), ("50%", 4, 2), ("60%", 4, 2),
    ("10%", 5, 1),                     # floor(0.5) = 0, and 0 becomes 1
    ("40%", 5, 2)])
def test_max_unavailable_as_upstream(value, nodes, expected):
    pool = F.pool()
    if value is not None:
        pool["spec"]["maxUnavailable"] = value
    assert N.max_unavailable(pool, nodes) == expected


@pytest.mark.parametrize("value, message", [
    ("50 percent", "invalid value for IntOrString: invalid type: string is not a percentage"),
    ("60", "invalid value for IntOrString: invalid type: string is not a percentage"),
    ("half%", 'invalid value for IntOrString: invalid value "half%": strconv.Atoi: ')])
def test_max_unavailable_refuses_what_upstream_refuses(value, message):
    pool = F.pool()
    pool["spec"]["maxUnavailable"] = value
    with pytest.raises(ValueError) as err:
        N.max_unavailable(pool, 4)
    assert str(err.value).startswith(f'"maxUnavailable" {message}')


# GetScaledValueFromIntOrPercent: math.Ceil when roundUp, math.Floor when not; an int is itself
@pytest.mark.parametrize("value, total, round_up, expected", [
    ("50%", 5, False, 2), ("50%", 5, True, 3), ("10%", 5, False, 0), ("10%", 5, True, 1),
    ("100%", 7, False, 7), ("0%", 7, True, 0), (3, 10, True, 3), (12, 10, False, 12)])
def test_scaled_rounds_as_intstr(value, total, round_up, expected):
    assert N.scaled(value, total, round_up) == expected


def test_an_invalid_max_unavailable_moves_nothing_but_the_status_is_synced():
    items = world(3, max_unavailable="x")
    out, counter = N.settle(change(items, MOTD), base_image=F.BASE)
    assert len(counter) == 0                      # syncStatusOnly, then the error
    assert F.the_pool(out)["status"]["machineCount"] == 3


# getAllCandidateMachines / updateCandidateMachines: at most maxUnavailable nodes targeted at a time;
# a node targeted and not done is unavailable (IsUnavailableForUpdate) and holds its unit of capacity.
def test_max_unavailable_two_of_five_takes_three_rounds():
    items, counter = N.settle(change(world(5, max_unavailable=2), MOTD), base_image=F.BASE)
    target = F.the_pool(items)["spec"]["configuration"]["name"]
    assert counter.per_node() == {f"worker-{i}": 1 for i in range(5)}
    assert [sum(u.round == r for u in counter) for r in sorted({u.round for u in counter})] == [2, 2, 1]
    assert counter.rounds == 3 and {u.to_config for u in counter} == {target}
    assert counter.os_changes == 0                # a file changed, not the image
    status = F.the_pool(items)["status"]
    assert (status["machineCount"], status["updatedMachineCount"], status["readyMachineCount"],
            status["unavailableMachineCount"], status["degradedMachineCount"]) == (5, 5, 5, 0, 0)
    assert status["configuration"] == F.the_pool(items)["spec"]["configuration"]
    assert conditions(F.the_pool(items))["Updated"] == ("True", f"All nodes are updated with MachineConfig {target}")


def test_a_percent_is_scaled_to_the_pool_rounding_down():
    _, counter = N.settle(change(world(5, max_unavailable="50%"), MOTD), base_image=F.BASE)
    assert [sum(u.round == r for u in counter) for r in sorted({u.round for u in counter})] == [2, 2, 1]


def test_targeted_nodes_hold_capacity_until_their_daemon_is_done():
    items = mcorender.sync(change(world(5, max_unavailable=2), MOTD), base_image=F.BASE)
    target = F.the_pool(items)["spec"]["configuration"]["name"]
    once = N.sync(items)
    twice = N.sync(once)                        # no daemon in between: still the same two
    targeted = [f"worker-{i}" for i in range(5) if ann(twice, f"worker-{i}")[N.DESIRED] == target]
    assert targeted == ["worker-0", "worker-1"]   # no zones, equal ages: by name (the tie-break is ours)
    status = F.the_pool(twice)["status"]
    assert (status["updatedMachineCount"], status["unavailableMachineCount"]) == (0, 2)
    assert conditions(F.the_pool(twice))["Updating"] == ("True", f"All nodes are updating to MachineConfig {target}")
    assert status["configuration"]["name"] != target     # only once every machine is updated


# syncMachineConfigPool: spec.paused -> syncStatusOnly, no node update; calculateStatus still runs
def test_a_paused_pool_moves_no_node_and_keeps_its_status():
    items = world(4, paused=True)
    before = F.the_pool(items)["spec"]["configuration"]["name"]
    out, counter = N.settle(change(items, MOTD), base_image=F.BASE)
    pool = F.the_pool(out)
    target = pool["spec"]["configuration"]["name"]
    assert len(counter) == 0 and target != before          # rendered while paused, not rolled out
    assert all(ann(out, f"worker-{i}")[N.DESIRED] == before for i in range(4))
    assert (pool["status"]["machineCount"], pool["status"]["updatedMachineCount"]) == (4, 0)
    assert conditions(pool)["Updating"] == ("False", f"Pool is paused; will not update to MachineConfig {target}")
    assert conditions(pool)["Updated"][0] == "False"
    pool["spec"]["paused"] = False
    out, counter = N.settle(out, base_image=F.BASE)
    assert counter.per_node() == {f"worker-{i}": 1 for i in range(4)}
    assert {u.from_config for u in counter} == {before} and {u.to_config for u in counter} == {target}


# the counter: OS-image changes compare the rendered configs' spec.osImageURL
def test_the_counter_sees_an_image_change():
    image_mc = source_mc("zz-os", "worker", osImageURL=NEW_IMAGE)
    out, counter = N.settle(change(world(3, max_unavailable=3), image_mc), base_image=F.BASE)
    assert len(counter) == 3 and counter.os_changes == 3 and counter.rounds == 1
    assert {(u.from_image, u.to_image) for u in counter} == {(F.BASE, NEW_IMAGE)}
    rendered = one(out, "MachineConfig", counter.updates[0].to_config)
    assert rendered["spec"]["osImageURL"] == NEW_IMAGE


def test_files_then_image_is_two_updates_per_node():
    """Today's behaviour without a gate: the file change rolls out, then our image, two updates each."""
    items, first = N.settle(change(world(2, max_unavailable=2), MOTD), base_image=F.BASE)
    _, second = N.settle(change(items, source_mc("zz-os", "worker", osImageURL=NEW_IMAGE)), base_image=F.BASE)
    assert first.per_node() == second.per_node() == {"worker-0": 1, "worker-1": 1}
    assert (first.os_changes, second.os_changes) == (0, 2)


# SetDesiredStateFromPool deletes desiredImage; pkg/daemon/writer.go SetDone writes currentConfig,
# state Done, reason cleared, and no image annotation for a non-layered config (its on-disk current
# image is empty): currentImage is deleted. Here a node that was on a layered image comes back.
def test_the_daemon_writes_what_set_done_writes():
    items = mcorender.sync(change(world(1), MOTD), base_image=F.BASE)
    node = one(items, "Node", "worker-0")
    node["metadata"]["annotations"].update({N.CURRENT_IMAGE: "layered", N.DESIRED_IMAGE: "layered",
                                            N.REASON: "old trouble"})
    targeted = N.sync(items)
    assert N.DESIRED_IMAGE not in ann(targeted, "worker-0")
    out = N.daemon(targeted)
    got = ann(out, "worker-0")
    assert got[N.CURRENT] == got[N.DESIRED] == F.the_pool(out)["spec"]["configuration"]["name"]
    assert (got[N.STATE], got[N.REASON]) == ("Done", "")
    assert N.CURRENT_IMAGE not in got and N.DESIRED_IMAGE not in got


# IsUnavailableForUpdate: a node the daemon never annotated is neither done nor failing: unavailable
def test_a_node_the_daemon_never_ran_on_holds_the_capacity():
    out, counter = N.settle(change(world(3, booted=False), MOTD), base_image=F.BASE)
    assert len(counter) == 0
    status = F.the_pool(out)["status"]
    assert (status["machineCount"], status["updatedMachineCount"], status["unavailableMachineCount"]) == (3, 0, 3)


# getAllCandidateMachines: a node failing on the target config takes capacity; getDegradedMachines and
# the NodeDegraded / Degraded conditions of calculateStatus
def test_a_degraded_node_counts_and_takes_capacity():
    items = mcorender.sync(change(world(3), MOTD), base_image=F.BASE)
    target = F.the_pool(items)["spec"]["configuration"]["name"]
    one(items, "Node", "worker-2")["metadata"]["annotations"].update(
        {N.DESIRED: target, N.STATE: N.DEGRADED, N.REASON: "unexpected on-disk state"})
    out = N.sync(items)
    assert all(ann(out, f"worker-{i}")[N.DESIRED] != target for i in (0, 1))
    pool = F.the_pool(out)
    assert pool["status"]["degradedMachineCount"] == 1
    node_degraded = next(c for c in pool["status"]["conditions"] if c["type"] == "NodeDegraded")
    assert node_degraded["status"] == "True"
    assert node_degraded["reason"] == "1 nodes are reporting degraded status on sync"
    assert node_degraded["message"] == 'Node worker-2 is reporting: "unexpected on-disk state"'
    assert conditions(pool)["Degraded"] == ("True", node_degraded["message"])


# CheckNodeReady: an unready node is no candidate and is unavailable
def test_an_unready_node_is_skipped_and_unavailable():
    items = world(3, max_unavailable=3)
    one(items, "Node", "worker-1")["status"] = {"conditions": [{"type": "Ready", "status": "False"}]}
    out = N.sync(mcorender.sync(change(items, MOTD), base_image=F.BASE))
    target = F.the_pool(out)["spec"]["configuration"]["name"]
    assert [ann(out, f"worker-{i}")[N.DESIRED] == target for i in range(3)] == [True, False, True]
    assert F.the_pool(out)["status"]["unavailableMachineCount"] == 3    # two working, one unready


# sortNodeList: zone label order, nodes without a zone last, oldest first within
def test_candidates_beyond_capacity_go_in_zone_order():
    nodes = [F.node("a", **{N.ZONE: "zone-b"}), F.node("b"), F.node("c", **{N.ZONE: "zone-a"}),
             F.node("d", **{N.ZONE: "zone-a"})]
    nodes[2]["metadata"]["creationTimestamp"] = "2026-01-02T00:00:00Z"
    nodes[3]["metadata"]["creationTimestamp"] = "2026-01-01T00:00:00Z"
    for node in nodes:                           # done on an older config (F.pool targets rendered-worker-1)
        node["metadata"]["annotations"] = {N.CURRENT: "rendered-worker-0", N.DESIRED: "rendered-worker-0",
                                           N.STATE: N.DONE}
    assert [n["metadata"]["name"] for n in N.sort_nodes(nodes)] == ["d", "c", "a", "b"]
    pool = F.pool("worker")
    pool["spec"]["maxUnavailable"] = 2
    assert N.choose(pool, nodes) == ["c", "d"]


# getNodesForPool: the MCO's node-to-pool rule (reconcile/imagebuild/architecture.py): a node a custom
# pool selects belongs to it, not to worker
def test_a_node_of_a_custom_pool_is_not_the_workers():
    infra = F.pool("infra")
    items = world(2, extra=(infra, F.node("infra-0", "infra", **{"node-role.kubernetes.io/worker": ""}),
                            source_mc("50-infra", "infra", {"/etc/infra": "x"})))
    assert [n["metadata"]["name"] for n in N.nodes_for_pool(F.the_pool(items), items, F.find(items, "Node"))] \
        == ["worker-0", "worker-1"]
    out, counter = N.settle(change(items, MOTD), base_image=F.BASE)
    assert counter.per_node() == {"worker-0": 1, "worker-1": 1, "infra-0": 1}     # infra selects worker's MCs
    assert F.the_pool(out, "infra")["status"]["machineCount"] == 1
    assert F.the_pool(out)["status"]["machineCount"] == 2


# syncMachineConfigPool: no rendered config yet, or a selector of every node: no sync at all
@pytest.mark.parametrize("spec", [{"configuration": {"name": ""}}, {"nodeSelector": {}}])
def test_a_pool_the_controller_does_not_sync(spec):
    pool = F.pool("worker")
    pool["spec"].update(spec)
    items = [pool, F.node("worker-0")]
    assert N.sync(items) == items


def test_settle_is_bounded():
    items = change(world(5), MOTD)
    with pytest.raises(N.Unsettled):
        N.settle(items, base_image=F.BASE, rounds=2)
