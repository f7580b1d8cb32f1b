"""The rollout gate end to end (issue 30): the reconciler's runs, the MCO's render and node
controllers and its daemon (tests/support/mcorender.py, tests/support/mconode.py, each held to the
upstream rules they cite), the kubelet finishing builds (examples/kubelet.py). Between two runs the
MCO acts first, as it does on a cluster (seconds against the CronJob's minutes). Every node update is
counted, and whether it changed the OS image: with the gate, a change reaches each node once, files and
image together; with `rolloutGate: none`, twice (the figures in docs/rollout.md)."""

from __future__ import annotations

import copy

import kubelet  # examples/kubelet.py
import pytest

from reconcile.contract import annotations as A
from reconcile.core.rollout import hold
from tests.support import factory as F
from tests.support import mconode
from tests.unit.test_rollout import mco_pool, ours, source_mc

pytestmark = pytest.mark.usefixtures("builder")
NODES = ("w1", "w2")


def cluster(gate="hold", paused=None):
    pool = mco_pool("worker", ("worker",))
    pool["spec"]["maxUnavailable"] = 1
    if paused is not None:
        pool["spec"]["paused"] = paused
    items = [F.build_config(rollout="machineconfig", rolloutGate=gate), F.osimageurl(), F.secret("pull-secret"),
             F.secret("push-secret"), pool, *(F.node(n, "worker") for n in NODES),
             source_mc("00-worker", "worker", {"/etc/base": "base"}, generated=True)]
    items, _ = mconode.settle(mconode.first_boot(items), F.BASE)
    return items


def cycle(cli, items, counter, outcome="Succeeded", runs=8, base=F.BASE):
    """Runs of the reconciler with the MCO settling before each; builds end as `outcome`. Returns the
    items once a run writes nothing and the MCO has nothing left to do. `base`: the release's OS
    image the render controller starts from (a new one: a cluster upgrade)."""
    for n in range(runs):
        items, _ = mconode.settle(items, base, counter)
        code, items, err = cli.run(items)
        assert code in (0, 2), err
        for obj in F.owned(items, "worker"):
            if obj["kind"] in ("Pod", "Build") and (obj.get("status") or {}).get("phase") not in ("Succeeded", "Failed",
                                                                                              "Complete"):
                items = copy.deepcopy(items)
                for o in F.owned(items, "worker"):
                    if o["kind"] in ("Pod", "Build") and o["metadata"]["name"] == obj["metadata"]["name"]:
                        kubelet.set_phase(o, outcome, digest=kubelet.digest_for(o["metadata"]["name"])
                                          if outcome == "Succeeded" else None)
        if "0 created, 0 patched, 0 deleted" in err.splitlines()[-1] and n > 0:
            settled, _ = mconode.settle(items, base, counter)
            if settled == items:
                return items
            items = settled
    raise AssertionError(f"not converged after {runs} runs")


def pool(items):
    return F.the_pool(items)


def rendered(items):
    return F.find(items, "MachineConfig", pool(items)["spec"]["configuration"]["name"])[0]


def files(mc):
    return {f["path"] for f in mc["spec"]["config"].get("storage", {}).get("files", [])}


def test_opt_in_then_a_machineconfig_change_reach_each_node_once_with_files_and_image(any_cli):
    counter = mconode.Counter()
    items = cycle(any_cli, cluster(), counter)
    first = ours(items)[0]["spec"]["osImageURL"]
    assert counter.per_node() == dict.fromkeys(NODES, 1) and counter.os_changes == len(NODES)
    assert pool(items)["spec"]["paused"] is True and pool(items)["metadata"]["annotations"][A.GATE] == hold.HELD
    # a MachineConfig change: held, built, handed over, rolled out once, held again
    counter = mconode.Counter()
    items = copy.deepcopy(items) + [source_mc("99-worker-motd", "worker", {"/etc/motd": "hello"})]
    items = cycle(any_cli, items, counter)
    new = ours(items)[0]["spec"]["osImageURL"]
    assert new != first
    assert counter.per_node() == dict.fromkeys(NODES, 1) and counter.os_changes == len(NODES)
    final = rendered(items)
    assert "/etc/motd" in files(final) and final["spec"]["osImageURL"] == new
    assert all(u.to_config == final["metadata"]["name"] for u in counter.updates)   # both at once
    assert pool(items)["spec"]["paused"] is True
    reasons = [e["reason"] for e in F.find(items, "Event")]
    assert hold.HOLD_EVENT in reasons and hold.ROLL_EVENT in reasons


def test_without_the_gate_the_same_change_reaches_each_node_twice(any_cli):
    counter = mconode.Counter()
    items = cycle(any_cli, cluster(gate="none"), counter)
    counter = mconode.Counter()
    items = cycle(any_cli, copy.deepcopy(items) + [source_mc("99-worker-motd", "worker", {"/etc/motd": "hello"})],
                  counter)
    assert counter.per_node() == dict.fromkeys(NODES, 2)     # the files on the old image, then the image
    assert counter.os_changes == len(NODES)
    assert not pool(items)["spec"].get("paused")


def test_a_kernel_argument_change_is_one_update_and_no_build(any_cli):
    items = cycle(any_cli, cluster(), mconode.Counter())
    builds = [e for e in F.find(items, "Event") if e["reason"] == "BuildStarted"]
    counter = mconode.Counter()
    items = copy.deepcopy(items) + [source_mc("98-worker-karg", "worker", kernelArguments=["nosmt"])]
    items = cycle(any_cli, items, counter)
    assert counter.per_node() == dict.fromkeys(NODES, 1) and counter.os_changes == 0
    assert [e for e in F.find(items, "Event") if e["reason"] == "BuildStarted"] == builds
    assert "nosmt" in rendered(items)["spec"]["kernelArguments"]


def test_a_failed_build_releases_the_hold_to_the_files_on_the_last_good_image(any_cli):
    items = cycle(any_cli, cluster(), mconode.Counter())
    image = ours(items)[0]["spec"]["osImageURL"]
    counter = mconode.Counter()
    items = copy.deepcopy(items) + [source_mc("99-worker-motd", "worker", {"/etc/motd": "hello"})]
    items = cycle(any_cli, items, counter, outcome="Failed")
    assert counter.per_node() == dict.fromkeys(NODES, 1) and counter.os_changes == 0
    assert rendered(items)["spec"]["osImageURL"] == image and "/etc/motd" in files(rendered(items))
    assert pool(items)["metadata"]["annotations"][A.GATE] == hold.RELEASED
    (warning,) = [e for e in F.find(items, "Event") if e["reason"] == hold.RELEASE_EVENT]
    assert warning["type"] == "Warning" and "failed" in warning["message"]


def test_an_administrators_pause_is_never_lifted(any_cli):
    counter = mconode.Counter()
    items = cycle(any_cli, cluster(paused=True), counter)
    assert pool(items)["spec"]["paused"] is True and A.GATE not in pool(items)["metadata"]["annotations"]
    assert len(counter) == 0                                 # the image is ready for when it is unpaused
    assert ours(items) and pool(items)["metadata"]["annotations"][A.STATE] == A.SUCCEEDED
    code, out, _ = any_cli.on(items, "status")
    assert "paused by an administrator" in out


def test_opt_out_releases_the_hold_and_rolls_back_to_the_release_image_once(any_cli):
    items = cycle(any_cli, cluster(), mconode.Counter())
    items = copy.deepcopy(items)
    del pool(items)["metadata"]["labels"][A.LAYERING_LABEL]
    counter = mconode.Counter()
    items = cycle(any_cli, items, counter)
    assert not ours(items) and not pool(items)["spec"].get("paused")
    assert not any(k in pool(items)["metadata"]["annotations"] for k in hold.KEYS)
    assert counter.per_node() == dict.fromkeys(NODES, 1) and counter.os_changes == len(NODES)
    assert rendered(items)["spec"]["osImageURL"] == F.BASE


def test_explain_and_json_say_what_the_gate_holds_and_does(any_cli):
    items = cycle(any_cli, cluster(), mconode.Counter())
    items = copy.deepcopy(items) + [source_mc("99-worker-motd", "worker", {"/etc/motd": "hello"})]
    items, _ = mconode.settle(items, F.BASE)                 # rendered while held: no node moves
    code, out, _ = any_cli.on(items, "explain", "worker", "-o", "json")
    import json
    gate = json.loads(out)["gate"]
    assert gate["paused"] is True and gate["record"] == hold.HELD and gate["move"] == hold.Move.WAIT.name
    code, text, _ = any_cli.on(items, "explain", "worker")
    assert "the rollout gate" in text and "WAIT:" in text
    code, out, _ = any_cli.on(items, "status")
    assert "held" in next(r for r in out.splitlines() if r.startswith("worker "))


def test_metrics_count_the_pools_held_and_released(run_cli, tmp_path):
    """ocl_rollout_held says a change is held back from the machines (not the pause between rollouts)."""
    items = cycle(run_cli, cluster(), mconode.Counter())
    run_cli.run(items, "--metrics-file", str(tmp_path / "m0.prom"))
    text = (tmp_path / "m0.prom").read_text()
    assert 'ocl_rollout_held{pool="worker"} 0.0' in text and 'ocl_rollout_held_seconds{pool="worker"}' not in text
    items = copy.deepcopy(items) + [source_mc("99-worker-motd", "worker", {"/etc/motd": "hello"})]
    items, _ = mconode.settle(items, F.BASE)                 # rendered while held
    run_cli.run(items, "--metrics-file", str(tmp_path / "m.prom"))
    text = (tmp_path / "m.prom").read_text()
    assert 'ocl_rollout_held{pool="worker"} 1.0' in text and 'ocl_rollout_hold_released{pool="worker"} 0.0' in text
    assert 'ocl_rollout_held_seconds{pool="worker"} 0.0' in text          # the wait starts now
    items = cycle(run_cli, items, mconode.Counter(), outcome="Failed")
    run_cli.run(items, "--metrics-file", str(tmp_path / "m2.prom"))
    text = (tmp_path / "m2.prom").read_text()
    assert 'ocl_rollout_held{pool="worker"} 0.0' in text and 'ocl_rollout_hold_released{pool="worker"} 1.0' in text


@pytest.mark.parametrize("record", [hold.ADMIN, hold.RELEASED, hold.ROLLING, hold.HELD])
def test_without_valid_settings_or_on_a_failed_write_every_record_is_kept(any_cli, record):
    """The gate cannot know what the settings want (a typo in the ConfigMap), nor should recording a
    failed write (apply._record_error, lifecycle.blocked) decide it: nothing of the record changes."""
    from reconcile.core import lifecycle
    items = cluster(paused=record == hold.HELD)
    pool(items)["metadata"]["annotations"].update({A.GATE: record, A.GATE_CONFIG: pool(items)["spec"]["configuration"]["name"],
                                                   A.GATE_SINCE: "2026-11-29T11:59:00Z"})
    plan = lifecycle.blocked(pool(items), "create Pod/x: 500", F.NOW)
    assert not any(hold.KEYS[0].replace("/", "~1") in op.get("path", "") or op.get("path") == "/spec/paused"
                   for a in plan.actions if a.verb == "patch" for op in a.patch)
    items = copy.deepcopy(items)
    F.find(items, "ConfigMap", "on-cluster-build-config")[0]["data"]["rolloutGate"] = "typo"
    code, after, _ = any_cli.run(items)
    assert code == 2 and pool(after)["metadata"]["annotations"][A.GATE] == record
    assert bool(pool(after)["spec"].get("paused")) is (record == hold.HELD)
