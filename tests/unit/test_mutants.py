"""Tests for four one-line bugs that a mutation round (issue 23, item 7) found no suite catching:
each test here fails on its mutant (said in the test), and the guarded-patch re-plan on the stand-in
API and the in-memory cluster."""

from __future__ import annotations

import copy
from datetime import UTC, datetime, timedelta

from reconcile.cluster import AlreadyExists, lease
from reconcile.cluster import Changed as Conflict
from reconcile.contract import annotations as A
from tests.standin.test_rbac import phase
from tests.support import factory as F
from tests.unit.test_metrics import samples

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


def test_a_built_pool_whose_image_annotation_was_removed_gets_its_image_back(run_cli):
    """Mutant: BUILT no longer requires the image (lifecycle.decide). The pool would count as built
    with no `newestImageEquivalentConfig`; it must get the image back (a reuse of its history)."""
    code, items, err = run_cli.run(F.cluster())
    code, items, err = run_cli.run(phase(items, "Succeeded"))
    image = F.the_pool(items)["metadata"]["annotations"][A.IMAGE]
    del F.the_pool(items)["metadata"]["annotations"][A.IMAGE]
    code, after, err = run_cli.run(items)
    assert code == 0, err
    a = F.the_pool(after)["metadata"]["annotations"]
    assert a[A.STATE] == A.SUCCEEDED and a[A.IMAGE] == image


class RacingCluster:
    """A Lease that expired, taken over by another run between our read and our replace."""

    def __init__(self, winner):
        self.winner = winner
        self.expired = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                        "metadata": {"name": lease.NAME, "namespace": F.NS, "resourceVersion": "5"},
                        "spec": {"holderIdentity": "old", "leaseDurationSeconds": 60,
                                 "renewTime": "2026-11-29T10:00:00.000000Z"}}
        self.reads = 0

    def create(self, obj):
        raise AlreadyExists("exists")

    def get(self, kind, namespace, name):
        self.reads += 1
        if self.reads == 1:
            return copy.deepcopy(self.expired)
        return dict(self.expired, spec=dict(self.expired["spec"], holderIdentity=self.winner))

    def replace(self, obj):
        raise Conflict("the object has been modified")


def test_losing_the_lease_take_over_race_skips_the_run():
    """Mutant: after a 409 on the compare-and-swap, the re-read Lease is returned whoever holds it.
    The winner's Lease must never be taken for ours."""
    assert lease.acquire(RacingCluster("the-other-run"), F.NS, "us", 180, NOW) is None
    won = lease.acquire(RacingCluster("us"), F.NS, "us", 180, NOW)       # our replace went through after all
    assert won is not None and won["spec"]["holderIdentity"] == "us"


def test_the_build_duration_of_a_build_that_was_running(run_cli, tmp_path, monkeypatch):
    """Mutant: only builds that were Pending count. Pending -> Building -> Succeeded must give the
    duration from the build object's creation to the run that saw it end."""
    metrics = tmp_path / "m.prom"
    code, items, _ = run_cli.run(F.cluster())
    code, items, _ = run_cli.run(phase(items, "Running"))
    assert F.the_pool(items)["metadata"]["annotations"][A.STATE] == A.BUILDING
    (pod,) = F.find(items, "Pod")
    created = datetime.strptime(pod["metadata"]["creationTimestamp"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    monkeypatch.setenv("OCL_RECONCILE_NOW", (created + timedelta(minutes=7)).strftime("%Y-%m-%dT%H:%M:%SZ"))
    code, items, _ = run_cli.run(phase(items, "Succeeded"), "--metrics-file", str(metrics))
    assert samples(metrics.read_text())[("ocl_build_duration_seconds", (("pool", "worker"),))] == 420


def test_a_failure_is_counted_once_not_on_every_run_over_the_failed_pool(run_cli, tmp_path):
    """Mutant: `build-failed` counted whenever a pool is Failed after the run."""
    metrics = tmp_path / "m.prom"
    code, items, _ = run_cli.run(F.cluster())
    code, items, _ = run_cli.run(phase(items, "Failed"), "--metrics-file", str(metrics))
    assert samples(metrics.read_text())[("ocl_errors_total", (("reason", "build-failed"),))] == 1
    code, items, _ = run_cli.run(items, "--metrics-file", str(metrics))
    assert F.the_pool(items)["metadata"]["annotations"][A.STATE] == A.FAILED
    assert ("ocl_errors_total", (("reason", "build-failed"),)) not in samples(metrics.read_text())


def test_a_422_on_the_guarded_pool_patch_is_replanned_on_the_stand_in(tmp_path, run_cli):
    """A patch whose `test` of resourceVersion fails answers 422: that pool is read again, re-planned
    and patched once more (docs/design.md, "Talking to the API server")."""
    from reconcile import cli
    from tests.support.apiserver import APIServer, Fault
    with APIServer(F.cluster(), clock=lambda: F.NOW) as server:
        server.faults.append(Fault("status", code=422, times=1,
                                   match=lambda verb, res, ns, name: verb == "patch" and res == "machineconfigpools"))
        run_cli.capsys.readouterr()
        assert cli.main(["run", "--kubeconfig", server.kubeconfig(tmp_path / "kc")]) == 0
        patches = [r for r in server.log if r.verb == "patch" and r.resource == "machineconfigpools"]
        pool_gets = [r for r in server.log if r.verb == "get" and r.resource == "machineconfigpools"]
        a = server.store.get("MachineConfigPool", "", "worker")["metadata"]["annotations"]
    assert len(patches) == 2 and len(pool_gets) == 1 and a[A.STATE] == A.PENDING


def test_a_422_on_the_guarded_pool_patch_is_replanned_in_memory(monkeypatch):
    from reconcile.cluster import Invalid, apply, observe
    from reconcile.cluster.memory import MemoryCluster
    from reconcile.cluster.planner import Planner
    cluster = MemoryCluster(F.cluster(), clock=lambda: F.NOW)
    real_patch, failed = cluster.patch, []

    def patch(kind, namespace, name, ops, *args, **kwargs):
        if kind == "MachineConfigPool" and not failed:
            failed.append(name)
            raise Invalid("the test operation failed")
        return real_patch(kind, namespace, name, ops, *args, **kwargs)
    monkeypatch.setattr(cluster, "patch", patch)
    seen = observe.observe(cluster, F.NS)
    planner = Planner(cluster, seen, F.NOW)
    apply.execute(cluster, planner.plan(), F.NOW, planner)
    assert failed == ["worker"]
    assert cluster.get("MachineConfigPool", "", "worker")["metadata"]["annotations"][A.STATE] == A.PENDING
