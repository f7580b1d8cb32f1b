"""A run may be killed between any two writes; the next run converges to the same cluster."""

from __future__ import annotations

import copy

import kubelet

from reconcile import apply, observe
from reconcile.cluster import ClusterError
from reconcile.cluster.memory import MemoryCluster
from tests import factory as F


class Killed(Exception):
    pass


class DyingCluster(MemoryCluster):
    """Dies (the process is gone) before write number `die_at`."""

    def __init__(self, items, die_at):
        super().__init__(items, clock=lambda: F.NOW)
        self.die_at = die_at

    def _maybe_die(self):
        if len(self.writes) == self.die_at:
            raise Killed()

    def create(self, obj):
        self._maybe_die()
        return super().create(obj)

    def patch(self, *a):
        self._maybe_die()
        return super().patch(*a)

    def delete(self, *a, **kw):
        self._maybe_die()
        return super().delete(*a, **kw)


def one_run(cluster):
    seen = observe.observe(cluster, F.NS)
    planner = observe.Planner(cluster, seen, F.NOW)
    return apply.execute(cluster, planner.plan(), F.NOW, planner)


def comparable(items):
    """The cluster without server bookkeeping (uids and resourceVersions differ between runs)."""
    out = []
    for obj in copy.deepcopy(items):
        md = obj["metadata"]
        for key in ("uid", "resourceVersion", "creationTimestamp"):
            md.pop(key, None)
        for ref in md.get("ownerReferences", []):
            ref.pop("uid", None)
        out.append(obj)
    return out


def scenario_steps():
    """Start state, and how to move the cluster between runs (None = just run)."""
    def succeed(cluster):
        for pod in cluster.list("Pod", F.NS):
            cluster.store[("Pod", F.NS, pod["metadata"]["name"])] = kubelet.set_phase(pod, "Succeeded")

    def new_config(cluster):
        pool = cluster.store[("MachineConfigPool", "", "worker")]
        pool["spec"]["configuration"]["name"] = "rendered-worker-2"
        cluster.store[("MachineConfig", "", "rendered-worker-2")] = F.machineconfig("rendered-worker-2")

    return [None, succeed, new_config, None]


def test_killed_at_every_write_converges_to_fault_free_result():
    steps = scenario_steps()
    reference = MemoryCluster(F.cluster(), clock=lambda: F.NOW)
    writes_per_step = []
    for step in steps:
        if step:
            step(reference)
        before = len(reference.writes)
        one_run(reference)
        writes_per_step.append(len(reference.writes) - before)
    expected = comparable(reference.items())
    covered = 0
    for index, step_writes in enumerate(writes_per_step):
        for die_at in range(step_writes):
            cluster = MemoryCluster(F.cluster(), clock=lambda: F.NOW)
            for i, step in enumerate(steps):
                if step:
                    step(cluster)
                if i == index:
                    dying = DyingCluster(cluster.items(), die_at)
                    try:
                        one_run(dying)
                    except Killed:
                        pass
                    cluster = MemoryCluster(dying.items(), clock=lambda: F.NOW)
                one_run(cluster)                 # the next CronJob tick
            assert comparable(cluster.items()) == expected, (index, die_at)
            covered += 1
    assert covered == sum(writes_per_step) >= 10
    print(f"crash matrix: {covered} kill points over {len(steps)} steps")


def test_write_error_records_blocked_and_next_run_recovers():
    class Refusing(MemoryCluster):
        def create(self, obj):
            if obj["kind"] == "Pod":
                raise ClusterError("admission webhook denied the request")
            return super().create(obj)

    cluster = Refusing(F.cluster(), clock=lambda: F.NOW)
    result = one_run(cluster)
    assert result.failed
    ann = cluster.get("MachineConfigPool", "", "worker")["metadata"]["annotations"]
    assert ann["ocl-reconciler.io/state"] == "Blocked"
    assert "create Pod/" in ann["ocl-reconciler.io/message"]
    assert "admission webhook denied the request" in ann["ocl-reconciler.io/message"]
    healthy = MemoryCluster(cluster.items(), clock=lambda: F.NOW)
    assert not one_run(healthy).failed
    assert healthy.get("MachineConfigPool", "", "worker")["metadata"]["annotations"][
        "ocl-reconciler.io/state"] == "Pending"
