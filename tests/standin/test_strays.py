"""Stray MachineConfigs (issue 31 item 4): one named ocl-osimageurl-* that the reconciler did not
write is reported by run (a warning line, a Warning Event on the pool, ocl_stray_machineconfigs)
and fails preflight; it is seen in the labelled LIST of ours and the pools' rendered sources only,
and nothing that is not ours by both label and name is deleted."""

from __future__ import annotations

import copy
import json

import pytest

from reconcile import preflight as P
from reconcile.contract import annotations as A
from reconcile.contract import naming
from reconcile.core import rollout
from tests.support import factory as F
from tests.unit.test_preflight import good

REPO = F.REPO


def mc(name, image=f"{F.REPO}@sha256:" + "1" * 64, labelled=True, uid="u-1", owner=None):
    role = name[len(rollout.PREFIX):]
    labels = rollout.labels(role) if labelled else {"machineconfiguration.openshift.io/role": role}
    meta = {"name": name, "labels": labels, "uid": uid, "resourceVersion": "30"}
    if owner is not None:
        meta["ownerReferences"] = [naming.owner_reference(owner, controller=False)]
    return {"apiVersion": f"{F.MCO}/v1", "kind": "MachineConfig", "metadata": meta, "spec": {"osImageURL": image}}


def metadata(obj):
    """What the metadata-only LIST of every MachineConfig returns of one (PartialObjectMetadata)."""
    return {"apiVersion": obj["apiVersion"], "kind": obj["kind"], "metadata": copy.deepcopy(obj["metadata"])}


def sourced(pool, *names):
    pool["spec"]["configuration"]["source"] = [{"kind": "MachineConfig", "name": n} for n in names]
    return pool


def test_strays_are_what_the_two_lists_show_and_the_pools_sources_say_who_renders_one():
    worker = sourced(F.pool("worker"), "00-worker", "ocl-osimageurl-worker", "ocl-osimageurl-sneaky")
    master = F.pool("master", opted_in=False)
    built_then_left = F.pool("infra", opted_in=False)
    built_then_left["metadata"].setdefault("annotations", {})[A.STATE] = A.SUCCEEDED
    owned = [mc("ocl-osimageurl-worker"), mc("ocl-osimageurl-master"), mc("ocl-osimageurl-ghost"),
             mc("ocl-osimageurl-infra"), mc("99-worker-ours-by-label-only")]
    listed = [metadata(o) for o in owned] + [metadata(mc("ocl-osimageurl-sneaky", labelled=False))]
    found = {s.name: s.why for s in rollout.strays([worker, master, built_then_left], owned, REPO, listed)}
    assert found == {
        "ocl-osimageurl-sneaky": f"pool worker renders it, and it lacks our label {naming.MANAGED_BY}={naming.MANAGER}",
        "ocl-osimageurl-master": "pool master is not opted in and was never built",
        "ocl-osimageurl-ghost": "no MachineConfigPool ghost exists",
    }
    evil = [mc("ocl-osimageurl-worker", "evil.example.com/pwn/os@sha256:" + "2" * 64)]
    (s,) = rollout.strays([F.pool("worker")], evil, REPO)
    assert s.why == f"its osImageURL 'evil.example.com/pwn/os@sha256:{'2' * 64}' is not in our repository {REPO}"
    assert rollout.strays([F.pool("worker")], [mc("ocl-osimageurl-worker")], REPO) == []


def test_an_unlabelled_one_no_pool_renders_is_seen_in_the_list_of_every_machineconfigs_metadata():
    """Issue 31 item 4: listed "by label and by the ocl-osimageurl- prefix". The metadata-only LIST
    of every MachineConfig (`named`) shows one that lacks our label whether or not a pool renders it;
    others' MachineConfigs (00-worker, rendered-*) are not strays, nor is one of ours the labelled
    LIST missed because it was made between the two LISTs."""
    lacks = f"it lacks our label {naming.MANAGED_BY}={naming.MANAGER}"
    named = [metadata(mc("ocl-osimageurl-unrendered", labelled=False, uid="u-unrendered")),
             metadata(mc("ocl-osimageurl-worker")), metadata(mc("ocl-osimageurl-between", uid="u-between")),
             {"apiVersion": f"{F.MCO}/v1", "kind": "MachineConfig", "metadata": {"name": "00-worker"}}]
    found = rollout.strays([F.pool("worker")], [mc("ocl-osimageurl-worker")], REPO, named)
    assert [(s.name, s.pool, s.why, s.uid) for s in found] == [
        ("ocl-osimageurl-unrendered", "", lacks, "u-unrendered")]
    # the one for an existing pool names it (its Event goes there); rendered by a pool: that one
    found = rollout.strays([F.pool("worker"), F.pool("infra", opted_in=False)], [], REPO,
                           [metadata(mc("ocl-osimageurl-infra", labelled=False, uid="u-infra"))])
    assert [(s.pool, s.why) for s in found] == [("infra", lacks)]
    rendering = sourced(F.pool("worker"), "ocl-osimageurl-infra")
    found = rollout.strays([rendering], [], REPO, [metadata(mc("ocl-osimageurl-infra", labelled=False))])
    assert [(s.pool, s.why) for s in found] == [("worker", f"pool worker renders it, and {lacks}")]


def test_a_pools_sources_alone_make_no_stray():
    """The run deleted ocl-osimageurl-master; until the MCO renders master again its rendered config
    still names it, but it is no longer listed."""
    master = sourced(F.pool("master", opted_in=False), "00-master", "ocl-osimageurl-master")
    assert rollout.strays([master], [], REPO, [{"kind": "MachineConfig", "metadata": {"name": "00-master"}}]) == []


def test_ours_for_a_pool_since_deleted_is_not_a_stray():
    """We wrote it for a pool that existed (its ownerReference names that pool): the run deletes it
    (the pool-gone row), and the garbage collector would too; one with no such reference we never
    wrote (core/rollout/ `desired` always sets it)."""
    gone = F.pool("gone")
    assert rollout.strays([], [mc("ocl-osimageurl-gone", owner=gone)], REPO) == []
    other = mc("ocl-osimageurl-gone", owner=F.pool("elsewhere"))
    assert [s.why for s in rollout.strays([], [other], REPO)] == ["no MachineConfigPool gone exists"]


def test_preflight_fails_on_a_stray():
    assert [r.result for r in P.checks(good()) if r.check == "stray-machineconfigs"] == [P.OK]
    bad = good(owned=[mc("ocl-osimageurl-ghost")])
    (line,) = [r for r in P.checks(bad) if r.check == "stray-machineconfigs"]
    assert line.result == P.FAIL and "ocl-osimageurl-ghost" in line.message and "did not write it" in line.message
    assert P.exit_code(P.checks(bad)) == 2
    unlisted = good(named=[metadata(mc("ocl-osimageurl-theirs", labelled=False))])
    (line,) = [r for r in P.checks(unlisted) if r.check == "stray-machineconfigs"]
    assert line.result == P.FAIL and line.message.startswith("stray MachineConfig ocl-osimageurl-theirs: it lacks")


def test_preflight_says_it_did_not_look_with_rollout_annotation():
    from tests.unit.test_preflight import read_settings
    facts = good(settings=read_settings(), owned=[mc("ocl-osimageurl-ghost")])
    (line,) = [r for r in P.checks(facts) if r.check == "stray-machineconfigs"]
    assert line.result == P.OK and line.message.startswith("not checked: with rollout: annotation")


def test_a_run_reports_strays_once_and_deletes_only_ours(run_cli, tmp_path):
    items = F.cluster()
    next(o for o in items if o["metadata"]["name"] == "on-cluster-build-config")["data"]["rollout"] = "machineconfig"
    sourced(F.the_pool(items), "rendered-worker-1", "ocl-osimageurl-sneaky")
    items += [mc("ocl-osimageurl-sneaky", labelled=False, uid="u-sneaky"),
              mc("ocl-osimageurl-worker", "evil.example.com/pwn/os@sha256:" + "2" * 64, uid="u-evil"),
              F.pool("master", opted_in=False), mc("ocl-osimageurl-master", uid="u-master")]
    metrics = tmp_path / "m.prom"
    code, after, err = run_cli.run(copy.deepcopy(items), "--metrics-file", str(metrics))
    assert code == 0, err
    for name in ("ocl-osimageurl-sneaky", "ocl-osimageurl-worker", "ocl-osimageurl-master"):
        assert err.count(f"stray MachineConfig {name}: ") == 1, err
    assert "ocl_stray_machineconfigs 3.0" in metrics.read_text()
    told = [e for e in F.find(after, "Event") if e["reason"] == "StrayMachineConfig"]
    assert sorted(e["involvedObject"]["name"] for e in told) == ["master", "worker", "worker"]
    assert {e["type"] for e in told} == {"Warning"}
    # the unlabelled one is not ours: never deleted
    assert F.find(after, "MachineConfig", "ocl-osimageurl-sneaky")
    code, again, err = run_cli.run(after)
    assert code == 0
    assert len([e for e in F.find(again, "Event") if e["reason"] == "StrayMachineConfig"]) == 3    # told once


LACKS = f"it lacks our label {naming.MANAGED_BY}={naming.MANAGER}"
#: the lines docs/contract.md ("Stray MachineConfigs") gives, for what stray_world() holds
STRAY_LINES = [
    "stray MachineConfig ocl-osimageurl-ghost: no MachineConfigPool ghost exists; the reconciler did not write it",
    "stray MachineConfig ocl-osimageurl-infra: " + LACKS + "; the reconciler did not write it",
    "stray MachineConfig ocl-osimageurl-master: pool master is not opted in and was never built; "
    "the reconciler did not write it",
    "stray MachineConfig ocl-osimageurl-unrendered: " + LACKS + "; the reconciler did not write it",
]


def stray_world():
    """rollout: machineconfig, worker opted in; infra opted out (a record of ours left, so the run
    opts it out); labelled and named like ours for master (never built) and ghost (no pool), named
    like ours without our label for infra and for no pool, labelled ours but named otherwise for
    infra and for a pool that is gone."""
    items = F.cluster(F.pool("worker"), F.pool("infra", opted_in=False, annotations={A.STATE: A.SUCCEEDED}),
                      F.pool("master", opted_in=False))
    next(o for o in items if o["metadata"]["name"] == "on-cluster-build-config")["data"]["rollout"] = "machineconfig"
    misnamed = mc("ocl-osimageurl-x", uid="u-misnamed")
    misnamed["metadata"]["name"] = "99-infra-ours-by-label-only"
    gone = mc("ocl-osimageurl-x", uid="u-gone-misnamed")
    gone["metadata"].update(name="99-gone-ours-by-label-only", labels=rollout.labels("gone"))
    return items + [mc("ocl-osimageurl-master", uid="u-master"), mc("ocl-osimageurl-ghost", uid="u-ghost"),
                    mc("ocl-osimageurl-infra", labelled=False, uid="u-infra"),
                    mc("ocl-osimageurl-unrendered", labelled=False, uid="u-unrendered"), misnamed, gone]


def warnings(err, mark="WARNING "):
    return [line[len(mark):] for line in err.splitlines() if line.startswith(mark + "stray ")]


def test_diff_says_each_stray_on_stderr_and_its_exit_code_is_the_plans(any_cli):
    """A stray is not a change of the plan: `WARNING <line>` on stderr, `strays` in -o json, and
    the exit code kubectl diff's (0: no differences) when the plan has none."""
    items = stray_world()
    code, out, err = any_cli.on(items, "diff")
    assert code == 1 and warnings(err) == STRAY_LINES, err           # the plan builds worker
    assert "stray" not in out
    code, out, err = any_cli.on(items, "diff", "-o", "json")
    assert code == 1 and warnings(err) == STRAY_LINES
    assert [(s["name"], s["pool"]) for s in json.loads(out)["strays"]] == [
        ("ocl-osimageurl-ghost", None), ("ocl-osimageurl-infra", "infra"), ("ocl-osimageurl-master", "master"),
        ("ocl-osimageurl-unrendered", None)]
    # only the unlabelled stray, and a plan with nothing to do (worker not opted in): exit 0
    quiet = [o for o in items if o["kind"] != "MachineConfigPool" or o["metadata"]["name"] == "master"]
    quiet = [o for o in quiet if o["kind"] != "MachineConfig" or o["metadata"]["name"] == "ocl-osimageurl-unrendered"]
    code, out, err = any_cli.on(quiet, "diff")
    assert (code, out) == (0, "") and warnings(err) == [STRAY_LINES[3]], err
    code, out, _ = any_cli.on(quiet, "diff", "-o", "json")
    assert code == 0 and [s["name"] for s in json.loads(out)["strays"]] == ["ocl-osimageurl-unrendered"]


def test_status_says_each_stray_after_the_table_and_explain_the_pools_own(any_cli):
    items = stray_world()
    code, out, err = any_cli.on(items, "status")
    assert code == 0 and out.startswith("POOL ") and "stray" not in out
    assert warnings(err, "warning: ") == STRAY_LINES, err
    code, _, err = any_cli.on(items, "status", "--pool", "master")
    assert warnings(err, "warning: ") == [STRAY_LINES[2]]
    code, out, _ = any_cli.on(items, "explain", "master")
    assert code == 0
    assert ('stray MachineConfigs (docs/rollout-permissions.md, "Stray MachineConfigs")\n'
            "  - ocl-osimageurl-master: pool master is not opted in and was never built; the reconciler did "
            "not write it\n") in out
    code, out, _ = any_cli.on(items, "explain", "infra", "-o", "json")
    assert json.loads(out)["strays"] == [{"name": "ocl-osimageurl-infra", "why": LACKS}]
    code, out, _ = any_cli.on(items, "explain", "worker", "-o", "json")
    assert json.loads(out)["strays"] == []


def test_a_run_deletes_only_what_is_ours_by_both_label_and_name(any_cli):
    """Issue 31 item 4: the labelled ones named like ours for pools we do not build go (the opt-out
    and pool-gone rows); one named like ours without our label, or labelled ours but named
    otherwise, stays, on opt-out (infra) and pool deletion (gone) too."""
    code, after, err = any_cli.run(stray_world())
    assert code == 0, err
    assert warnings(err) == STRAY_LINES
    left = {o["metadata"]["name"] for o in F.find(after, "MachineConfig")} - {"rendered-worker-1", "rendered-infra-1",
                                                                               "rendered-master-1"}
    assert left == {"ocl-osimageurl-infra", "ocl-osimageurl-unrendered", "99-infra-ours-by-label-only",
                    "99-gone-ours-by-label-only"}
    assert A.STATE not in F.the_pool(after, "infra")["metadata"]["annotations"]     # infra was opted out


def _replaced(server, name):
    """Someone replaced ours with their own (a new uid, no label of ours)."""
    live = server.store.store[("MachineConfig", "", name)]
    live["metadata"].update(uid="theirs", labels={rollout.ROLE_LABEL: "infra"})


def _relabelled(server, name):
    """Someone took our label off the same object (its uid unchanged)."""
    server.store.patch("MachineConfig", "", name, [
        {"op": "replace", "path": "/metadata/labels", "value": {rollout.ROLE_LABEL: "infra"}}])


@pytest.mark.parametrize("change, uid", [(_replaced, "theirs"), (_relabelled, "u-ours")], ids=["replaced", "relabelled"])
def test_a_machineconfig_no_longer_ours_under_our_delete_is_kept(tmp_path, monkeypatch, change, uid):
    """Opt-out deletes ocl-osimageurl-infra with its uid and the resourceVersion read as the
    preconditions. Between the read and the DELETE it stops being ours: replaced (a new uid) or our
    label taken off (the same uid, a new resourceVersion). The server refuses the DELETE (409), the
    re-plan reads the pool's objects again, finds none of ours, and the run keeps theirs (it must
    not delete again from what the first read held)."""
    from reconcile import cli
    from tests.support.apiserver import APIServer, Fault
    monkeypatch.setenv("OCL_RECONCILE_NOW", "2026-11-29T12:00:00Z")
    items = [o for o in stray_world() if o["kind"] != "MachineConfig" or not o["metadata"]["name"].startswith(
        (rollout.PREFIX, "99-"))] + [mc("ocl-osimageurl-infra", uid="u-ours")]
    with APIServer(items, clock=lambda: F.NOW) as server:
        done = []

        def race(verb, resource, ns, name):
            if verb == "delete" and resource == "machineconfigs" and not done:
                done.append(change(server, name))
            return False
        server.faults.append(Fault("status", match=race, times=0))
        code = cli.main(["run", "--kubeconfig", server.kubeconfig(tmp_path / "kc"), "--timeout", "20"])
        assert code == 0
        deletes = [r.status for r in server.log if r.verb == "delete" and r.resource == "machineconfigs"]
        assert deletes == [409]
        kept = server.store.get("MachineConfig", "", "ocl-osimageurl-infra")
        assert kept["metadata"]["uid"] == uid and naming.MANAGED_BY not in kept["metadata"]["labels"]
