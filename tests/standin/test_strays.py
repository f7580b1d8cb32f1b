"""Stray MachineConfigs (issue 31 item 4): one named ocl-osimageurl-* that the reconciler did not
write is reported by run (a warning line, a Warning Event on the pool, ocl_stray_machineconfigs)
and fails preflight; it is seen in the labelled LIST of ours and the pools' rendered sources only,
and nothing that is not ours by both label and name is deleted."""

from __future__ import annotations

import copy

from reconcile.contract import annotations as A
from reconcile.contract import naming
from reconcile.core import rollout
from reconcile.output import preflight as P
from tests.support import factory as F
from tests.unit.test_preflight import good

REPO = F.REPO


def mc(name, image=f"{F.REPO}@sha256:" + "1" * 64, labelled=True, uid="u-1"):
    role = name[len(rollout.PREFIX):]
    labels = rollout.labels(role) if labelled else {"machineconfiguration.openshift.io/role": role}
    return {"apiVersion": f"{F.MCO}/v1", "kind": "MachineConfig",
            "metadata": {"name": name, "labels": labels, "uid": uid}, "spec": {"osImageURL": image}}


def sourced(pool, *names):
    pool["spec"]["configuration"]["source"] = [{"kind": "MachineConfig", "name": n} for n in names]
    return pool


def test_strays_are_what_the_labelled_list_and_the_pools_sources_show():
    worker = sourced(F.pool("worker"), "00-worker", "ocl-osimageurl-worker", "ocl-osimageurl-sneaky")
    master = F.pool("master", opted_in=False)
    built_then_left = F.pool("infra", opted_in=False)
    built_then_left["metadata"].setdefault("annotations", {})[A.STATE] = A.SUCCEEDED
    owned = [mc("ocl-osimageurl-worker"), mc("ocl-osimageurl-master"), mc("ocl-osimageurl-ghost"),
             mc("ocl-osimageurl-infra"), mc("99-worker-ours-by-label-only")]
    found = {s.name: s.why for s in rollout.strays([worker, master, built_then_left], owned, REPO)}
    assert found == {
        "ocl-osimageurl-sneaky": f"pool worker renders it, and it lacks our label {naming.MANAGED_BY}={naming.MANAGER}",
        "ocl-osimageurl-master": "pool master is not opted in and was never built",
        "ocl-osimageurl-ghost": "no MachineConfigPool ghost exists",
    }
    evil = [mc("ocl-osimageurl-worker", "evil.example.com/pwn/os@sha256:" + "2" * 64)]
    (s,) = rollout.strays([F.pool("worker")], evil, REPO)
    assert s.why == f"its osImageURL 'evil.example.com/pwn/os@sha256:{'2' * 64}' is not in our repository {REPO}"
    assert rollout.strays([F.pool("worker")], [mc("ocl-osimageurl-worker")], REPO) == []


def test_preflight_fails_on_a_stray():
    assert [r.result for r in P.checks(good()) if r.check == "stray-machineconfigs"] == [P.OK]
    bad = good(owned=[mc("ocl-osimageurl-ghost")])
    (line,) = [r for r in P.checks(bad) if r.check == "stray-machineconfigs"]
    assert line.result == P.FAIL and "ocl-osimageurl-ghost" in line.message and "did not write it" in line.message
    assert P.exit_code(P.checks(bad)) == 2


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
