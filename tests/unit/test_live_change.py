"""Changes a node takes live stay live (issue 39), end to end on snapshots and the stand-in, with the
MCO's render and node controllers and its daemon imitated (tests/support/mcorender.py, mconode.py)
and the gate on: an SSH key or a `policy.json` change builds nothing, keeps the image and reaches
each node once without an OS change; a change the daemon reboots for builds as before; where the
policy or the config to compare with cannot be had, the pool builds and says why."""

from __future__ import annotations

import copy

import pytest

from reconcile.contract import annotations as A
from reconcile.core.actions.buildrows import LIVE_EVENT
from reconcile.core.rollout import hold
from tests.support import factory as F
from tests.support import mconode, ndp
from tests.unit.test_gate import NODES, cluster, cycle, pool, rendered
from tests.unit.test_rollout import ours, source_mc


def world(release="4.18.3", policy=True, observed=True, **settings):
    items = ndp.with_release(cluster(), release)
    if settings:
        F.find(items, "ConfigMap", "on-cluster-build-config")[0]["data"].update(settings)
    return items + ([ndp.machineconfiguration(observed=observed)] if policy else [])


def ssh_mc(key="ssh-ed25519 AAAA admin"):
    mc = source_mc("99-worker-ssh", "worker")
    mc["spec"]["config"]["passwd"] = {"users": [{"name": "core", "sshAuthorizedKeys": [key]}]}
    return mc


def builds(items):
    return [e for e in F.find(items, "Event") if e["reason"] == "BuildStarted"]


def change(cli, items, *mcs):
    """The converged cluster with these MachineConfigs added, run to convergence again; (items,
    node updates, the BuildStarted Events it added)."""
    before = {e["metadata"]["name"] for e in builds(items)}
    counter = mconode.Counter()
    items = cycle(cli, copy.deepcopy(items) + list(mcs), counter)
    return items, counter, [e for e in builds(items) if e["metadata"]["name"] not in before]


@pytest.mark.parametrize("release, said", [("4.18.3", "none"), ("4.16.12", "none")])
def test_an_ssh_key_builds_nothing_and_reboots_nothing(any_cli, release, said):
    """Under the cluster's policy (4.18) and under the list of releases before policies (4.16)."""
    items = cycle(any_cli, world(release), mconode.Counter())
    image = ours(items)[0]["spec"]["osImageURL"]
    built_from = pool(items)["metadata"]["annotations"][A.BUILT_CONFIG]
    items, counter, started = change(any_cli, items, ssh_mc())
    ann = pool(items)["metadata"]["annotations"]
    assert started == [] and ann[A.IMAGE] == image and ours(items)[0]["spec"]["osImageURL"] == image
    assert ann[A.LIVE] == said and ann[A.BUILT_CONFIG] == built_from
    assert ann[A.RENDERED] == rendered(items)["metadata"]["name"] != built_from
    assert counter.per_node() == dict.fromkeys(NODES, 1) and counter.os_changes == 0
    assert "ssh-ed25519 AAAA admin" in str(rendered(items)["spec"]["config"]["passwd"])
    (event,) = [e for e in F.find(items, "Event") if e["reason"] == LIVE_EVENT]
    assert "live change: no build" in event["message"] and built_from in event["message"]
    assert pool(items)["spec"]["paused"] is True and ann[A.GATE] == hold.HELD     # held again after it
    code, out, _ = any_cli.on(items, "diff")
    assert code == 0, out                                    # converged: a steady run writes nothing


def test_policy_json_reloads_crio_and_a_later_file_builds_with_everything(any_cli):
    items = cycle(any_cli, world(), mconode.Counter())
    image = ours(items)[0]["spec"]["osImageURL"]
    policy = source_mc("99-worker-policy", "worker", {"/etc/containers/policy.json": "{}"})
    items, counter, started = change(any_cli, items, policy)
    assert started == [] and pool(items)["metadata"]["annotations"][A.LIVE] == "reload crio.service"
    assert counter.os_changes == 0 and counter.per_node() == dict.fromkeys(NODES, 1)
    # a file the daemon reboots for: one build of the whole config, one update with the image
    items, counter, started = change(any_cli, items, source_mc("99-worker-motd", "worker", {"/etc/motd": "hi"}))
    ann = pool(items)["metadata"]["annotations"]
    assert len(started) == 1 and "reboots for it" in started[0]["message"]
    assert A.LIVE not in ann and ann[A.IMAGE] != image
    assert counter.per_node() == dict.fromkeys(NODES, 1) and counter.os_changes == len(NODES)
    assert {"/etc/containers/policy.json", "/etc/motd"} <= {
        f["path"] for f in rendered(items)["spec"]["config"]["storage"]["files"]}


@pytest.mark.parametrize("case, why", [
    ("rebuild", ""),
    ("no-policy", "MachineConfiguration cluster not found"),
    ("not-observed", "has not observed generation 1"),
    ("built-config-gone", "is gone"),
    ("removed-file", "still in the image: /etc/base"),
])
def test_where_it_cannot_be_live_the_pool_builds_and_says_why(any_cli, case, why):
    items = cycle(any_cli, world(policy=case != "no-policy", observed=case != "not-observed",
                                 **({"liveChanges": "rebuild"} if case == "rebuild" else {})), mconode.Counter())
    added = [ssh_mc()]
    if case == "built-config-gone":             # oc adm prune renderedmachineconfigs
        built = pool(items)["metadata"]["annotations"][A.BUILT_CONFIG]
        items = [o for o in items if not (o["kind"] == "MachineConfig" and o["metadata"]["name"] == built)]
    if case == "removed-file":
        items = [o for o in items if not (o["kind"] == "MachineConfig" and o["metadata"]["name"] == "00-worker")]
        added.append(source_mc("00-worker", "worker", {}, generated=True))
    items, counter, started = change(any_cli, items, *added)
    assert len(started) == 1 and why in started[0]["message"], [e["message"] for e in started]
    assert A.LIVE not in pool(items)["metadata"]["annotations"]
    assert counter.per_node() == dict.fromkeys(NODES, 1) and counter.os_changes == len(NODES)


def test_an_unknown_livechanges_value_is_blocked_naming_the_key(any_cli):
    code, items, err = any_cli.run(world(liveChanges="sometimes"))
    assert code == 2 and "key 'liveChanges': unknown value 'sometimes'" in pool(items)["metadata"]["annotations"][A.MESSAGE]


def test_a_steady_run_reads_neither_the_policy_nor_a_machineconfig(any_cli):
    """The policy and the two rendered configs are read only by a run that meets a new rendered
    config; once it is recorded live, the runs after it read nothing more."""
    items = cycle(any_cli, world(), mconode.Counter())
    items, _, _ = change(any_cli, items, ssh_mc())
    code, after, err = any_cli.run(items)
    assert code == 0 and "0 created, 0 patched, 0 deleted" in err.splitlines()[-1], err
    if hasattr(any_cli, "server"):                  # the stand-in API server's request log
        reads = [(r.verb, r.resource, r.name) for r in any_cli.server.log if r.resource == "machineconfigurations"
                 or (r.resource, r.verb) == ("machineconfigs", "get")]   # its two LISTs are every run's
        assert reads == [], reads


def test_the_metric_and_explain_say_it(run_cli, tmp_path):
    items = cycle(run_cli, world(), mconode.Counter())
    items, _ = mconode.settle(copy.deepcopy(items) + [ssh_mc()], F.BASE)
    code, out, _ = run_cli.on(items, "diff", "-o", "json")
    import json
    assert '"transition": "LIVE"' in json.dumps(json.loads(out)), out
    code, items, err = run_cli.run(items, "--metrics-file", str(tmp_path / "m.prom"))
    assert code == 0 and "live change: no build" in err, err
    assert 'ocl_live_changes_total{pool="worker"} 1.0' in (tmp_path / "m.prom").read_text()
    code, out, _ = run_cli.on(items, "explain", "worker", "-o", "json")
    import json
    recorded = json.loads(out)["recorded"]
    assert recorded["live"] == "none" and recorded["builtConfig"] and recorded["builtConfig"] != recorded["renderedConfig"]
    code, out, _ = run_cli.on(items, "status")
    assert "live change: no build" in next(r for r in out.splitlines() if r.startswith("worker "))
    # the rollout check counts the live config as rolling out our image, then rolled out
    items = cycle(run_cli, items, mconode.Counter())
    code, out, _ = run_cli.on(items, "status")
    row = next(r for r in out.splitlines() if r.startswith("worker "))
    assert "rolled out" in row and pool(items)["metadata"]["annotations"][A.LIVE] == "none", row


def test_a_policy_it_may_not_read_builds_and_says_why(run_cli, tmp_path, monkeypatch):
    """A 403 on the MachineConfiguration (an install whose ClusterRole predates live changes): the
    pool builds as before, its start message says why; one GET, once."""
    from reconcile import cli
    from tests.support.apiserver import APIServer, Fault
    items = cycle(run_cli, world(), mconode.Counter())
    items, _ = mconode.settle(copy.deepcopy(items) + [ssh_mc()], F.BASE)
    with APIServer(items, clock=lambda: F.NOW) as server:
        server.faults.append(Fault("status", code=403, times=0,
                                   match=lambda verb, res, ns, name: res == "machineconfigurations"))
        code = cli.main(["run", "--kubeconfig", server.kubeconfig(tmp_path / "kc"), "--timeout", "20"])
        after = server.items()
        asked = [r.verb for r in server.log if r.resource == "machineconfigurations"]
    assert code == 0 and asked == ["get"]
    message = pool(after)["metadata"]["annotations"][A.MESSAGE]
    assert "building: cannot read MachineConfiguration cluster" in message, message
    assert [o for o in F.owned(after, "worker") if o["kind"] == "Pod"]


# --- after a live change, what is in the build id still builds (review of issue 39) -------------

def live_pool(cli):
    items = cycle(cli, world(), mconode.Counter())
    items, _, started = change(cli, items, ssh_mc())
    assert started == [] and pool(items)["metadata"]["annotations"][A.LIVE] == "none"
    return items


def test_a_rebuild_token_after_a_live_change_builds(run_cli):
    items = live_pool(run_cli)
    image = ours(items)[0]["spec"]["osImageURL"]
    before = len(builds(items))
    items = copy.deepcopy(items)
    pool(items)["metadata"]["annotations"][A.REBUILD] = "please"
    items = cycle(run_cli, items, mconode.Counter())
    ann = pool(items)["metadata"]["annotations"]
    assert len(builds(items)) == before + 1, ann.get(A.MESSAGE)
    assert ann.get(A.REBUILD_HANDLED) == "please" and ours(items)[0]["spec"]["osImageURL"] != image


def test_a_custom_dockerfile_after_a_live_change_builds(run_cli):
    items = live_pool(run_cli)
    image = ours(items)[0]["spec"]["osImageURL"]
    before = len(builds(items))
    items = copy.deepcopy(items) + [F.configmap("on-cluster-build-custom-dockerfile", {"worker": "RUN true"})]
    items = cycle(run_cli, items, mconode.Counter())
    ann = pool(items)["metadata"]["annotations"]
    assert len(builds(items)) == before + 1, ann.get(A.MESSAGE)
    assert ours(items)[0]["spec"]["osImageURL"] != image


def test_a_hand_written_live_annotation_does_not_swallow_a_rebuild_token(run_cli):
    """Trust nothing another user can write: `ocl-reconciler.io/live` added by hand to a pool that
    never had a live change makes every later token and settings change a no-op (decide(): BUILT)."""
    items = cycle(run_cli, world(), mconode.Counter())
    before = len(builds(items))
    items = copy.deepcopy(items)
    pool(items)["metadata"]["annotations"][A.LIVE] = "none"
    pool(items)["metadata"]["annotations"][A.REBUILD] = "please"
    items = cycle(run_cli, items, mconode.Counter())
    assert len(builds(items)) == before + 1, pool(items)["metadata"]["annotations"].get(A.MESSAGE)


def test_what_the_nodes_do_is_said_for_their_move_from_the_config_they_are_on(any_cli):
    """A chain: registries.conf (live, Special), then an SSH key: the nodes' move is the SSH key's
    alone ("none"); then a kernel argument with another key: no build, but the daemon reboots for
    the kernel argument, and `live` says so (review of issue 39)."""
    items = cycle(any_cli, world(), mconode.Counter())
    conf = source_mc("99-worker-registries", "worker", {"/etc/containers/registries.conf": "[aliases]\n"})
    items, _, started = change(any_cli, items, conf)
    assert started == [] and "drain only" in pool(items)["metadata"]["annotations"][A.LIVE]
    items, _, started = change(any_cli, items, ssh_mc())
    assert started == [] and pool(items)["metadata"]["annotations"][A.LIVE] == "none"
    karg = ssh_mc("ssh-ed25519 AAAA other")
    karg["metadata"]["name"] = "99-worker-ssh"
    karg["spec"]["kernelArguments"] = ["nosmt"]
    items = [o for o in items if not (o["kind"] == "MachineConfig" and o["metadata"]["name"] == "99-worker-ssh")]
    items, counter, started = change(any_cli, items, karg)
    assert started == [] and pool(items)["metadata"]["annotations"][A.LIVE] == "reboot"
    assert counter.per_node() == dict.fromkeys(NODES, 1) and counter.os_changes == 0
