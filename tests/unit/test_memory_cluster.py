"""The in-memory cluster behaves like an API server where our writes depend on it."""

from __future__ import annotations

import pytest

from reconcile.cluster import AlreadyExists, Invalid, NotFound, snapshot
from reconcile.cluster import Changed as Conflict
from reconcile.cluster.memory import MemoryCluster
from tests.support import factory as F


def test_create_assigns_server_fields_and_refuses_duplicates():
    c = MemoryCluster(F.cluster(), clock=lambda: F.NOW)
    made = c.create(F.configmap("x", {"a": "1"}) | {"metadata": {"name": "x", "namespace": F.NS}})
    md = made["metadata"]
    assert md["uid"] and md["creationTimestamp"] == "2026-11-29T12:00:00Z"
    assert int(md["resourceVersion"]) > 30                      # above every resourceVersion loaded
    with pytest.raises(AlreadyExists):
        c.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x", "namespace": F.NS}})


def test_patch_test_op_conflicts_and_bumps_resource_version():
    c = MemoryCluster(F.cluster())
    cm = c.get("ConfigMap", F.NS, "on-cluster-build-config")
    rv = cm["metadata"]["resourceVersion"]
    new = c.patch("ConfigMap", F.NS, cm["metadata"]["name"],
                  [{"op": "test", "path": "/metadata/resourceVersion", "value": rv},
                   {"op": "add", "path": "/data/x", "value": "y"}])
    assert new["data"]["x"] == "y" and new["metadata"]["resourceVersion"] != rv
    with pytest.raises(Conflict):
        c.patch("ConfigMap", F.NS, cm["metadata"]["name"],
                [{"op": "test", "path": "/metadata/resourceVersion", "value": rv}])
    with pytest.raises(Invalid):
        c.patch("ConfigMap", F.NS, cm["metadata"]["name"],
                [{"op": "remove", "path": "/data/absent"}])
    with pytest.raises(NotFound):
        c.patch("ConfigMap", F.NS, "nope", [])


def test_delete_checks_uid_and_collects_dependents():
    c = MemoryCluster(F.cluster())
    pool = c.get("MachineConfigPool", "", "worker")
    owner = {"apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfigPool",
             "name": "worker", "uid": pool["metadata"]["uid"]}
    c.create({"apiVersion": "v1", "kind": "ConfigMap",
              "metadata": {"name": "dep", "namespace": F.NS, "ownerReferences": [owner]}})
    with pytest.raises(Conflict):
        c.delete("MachineConfigPool", "", "worker", uid="someone-else")
    with pytest.raises(Conflict):           # kube-apiserver's preconditions.resourceVersion: changed since
        c.delete("MachineConfigPool", "", "worker", uid=pool["metadata"]["uid"], resource_version="0")
    c.delete("MachineConfigPool", "", "worker", uid=pool["metadata"]["uid"],
             resource_version=pool["metadata"]["resourceVersion"])
    assert c.get("ConfigMap", F.NS, "dep") is None
    with pytest.raises(NotFound):
        c.delete("MachineConfigPool", "", "worker")


def test_list_filters_by_namespace_and_selector():
    c = MemoryCluster(F.cluster(F.pool("worker"), F.pool("infra", opted_in=False)))
    assert [p["metadata"]["name"] for p in c.list("MachineConfigPool", None,
            {"ocl-reconciler.io/layering-enabled": None})] == ["worker"]
    assert len(c.list("ConfigMap", F.NS)) == 1 and len(c.list("ConfigMap", F.MCO_NS)) == 1
    assert c.list("ConfigMap", "other-namespace") == []


def test_snapshot_round_trip(tmp_path):
    items = F.cluster()
    path = tmp_path / "s.yaml"
    snapshot.write(str(path), items)
    assert snapshot.load(str(path)) == items


def test_a_snapshot_naming_one_object_twice(tmp_path, run_cli):
    """Outputs concatenated (`oc get cm ... ; oc get cm ...`) hold the same object twice: it is
    one object. Two different bodies under one name: no cluster serves that, and dropping either
    would lose what the other says, so the snapshot is refused naming it (exit 3, one line)."""
    pool = F.pool()
    same = tmp_path / "same.yaml"
    snapshot.write(str(same), F.cluster(pool) + [F.pool()])
    assert [o["metadata"]["name"] for o in snapshot.load(str(same))
            if o["kind"] == "MachineConfigPool"] == ["worker"]
    other = F.pool()
    other["spec"]["configuration"]["name"] = "rendered-worker-2"
    differ = tmp_path / "differ.yaml"
    snapshot.write(str(differ), F.cluster(pool) + [other])
    code, out, err = run_cli("diff", "--snapshot", str(differ))
    assert (code, out) == (3, "")
    assert err == (f"error: snapshot {differ}: MachineConfigPool worker appears twice with different "
                   "content\n")
