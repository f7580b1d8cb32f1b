"""A run may be killed between any two requests; the next run converges to the same cluster.
Process death is simulated by aborting the run before its k-th write, for every k of every
lifecycle scenario (those of the fault matrix) and both builders."""

from __future__ import annotations

import copy

import pytest

from reconcile.cluster import ClusterError, apply, observe
from reconcile.cluster.memory import MemoryCluster
from reconcile.cluster.planner import Planner
from tests.standin.test_fault_matrix import (
    SCENARIOS,
    comparable,
    history,
    new_config,
    opt_out,
    phase,
    rebuild,
)
from tests.support import factory as F


class Killed(BaseException):
    """The process is gone: nothing after this runs (not even error handling)."""


class DyingCluster(MemoryCluster):
    """Dies before write number `die_at` (0-based)."""

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
    planner = Planner(cluster, seen, F.NOW)
    return apply.execute(cluster, planner.plan(), F.NOW, planner)


def persistent(items):
    """buildStorage: persistent, with a default StorageClass (core/storage.py)."""
    next(o for o in items if o["metadata"]["name"] == "on-cluster-build-config")["data"]["buildStorage"] = "persistent"
    items.append({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {
        "name": "gp3-csi", "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}}})


def bigger(items):
    """A larger volume wanted for the next build: the pool's volume is replaced."""
    next(o for o in items if o["metadata"]["name"] == "on-cluster-build-config")["data"]["buildStorageSize"] = "500Gi"
    F.the_pool(items)["spec"]["configuration"]["name"] = "rendered-worker-3"
    items.append(F.machineconfig("rendered-worker-3"))


def back_to_emptydir(items):
    next(o for o in items if o["metadata"]["name"] == "on-cluster-build-config")["data"]["buildStorage"] = "emptyDir"


def arm64_node(items):
    """An arm64 node joins worker (with worker-0, amd64): a mixed pool (core/multiarch.py)."""
    items.append(F.node("worker-1", "worker", "arm64"))
    F.the_pool(items)["status"]["machineCount"] = 2


def arm64_leaves(items):
    items[:] = [o for o in items if not (o["kind"] == "Node" and o["metadata"]["name"] == "worker-1")]
    F.the_pool(items)["status"]["machineCount"] = 1


#: a mixed pool: a build per architecture, one index; an architecture retried; one that leaves
MIXED = {"mixed-build-succeeds": [arm64_node, phase("Running"), phase("Succeeded"), None],
         "mixed-evicted-then-retried": [arm64_node, phase("Evicted"), phase("Succeeded")],
         "mixed-fails-then-rebuilt": [arm64_node, phase("Failed"), rebuild, phase("Succeeded")],
         "mixed-storage-then-an-architecture-leaves": [persistent, arm64_node, phase("Succeeded"), arm64_leaves]}

#: the build storage's lifecycle: made, kept, not mounted while the interrupted build's Pod runs,
#: replaced, removed with the setting, and again with the opt-out
STORAGE = {"storage-kept-replaced-removed": [persistent, phase("Running"), new_config, phase("Succeeded"),
                                              bigger, phase("Succeeded"), back_to_emptydir],
           "storage-opt-out": [persistent, phase("Succeeded"), new_config, phase("Running"), opt_out]}


@pytest.mark.parametrize("builder", sorted(F.BUILD_KINDS))
@pytest.mark.parametrize("scenario", sorted(SCENARIOS) + sorted(STORAGE) + sorted(MIXED))
def test_killed_before_every_write_converges_to_fault_free_result(monkeypatch, builder, scenario):
    monkeypatch.setattr(F, "BUILDER", builder)
    steps = SCENARIOS.get(scenario) or STORAGE.get(scenario) or MIXED[scenario]
    def fault_free(items):
        cluster = MemoryCluster(items, clock=lambda: F.NOW)
        one_run(cluster)
        return cluster.items(), len(cluster.writes)

    before_step, writes, _, final = history(steps, fault_free)
    expected = comparable(final)
    covered = 0
    for index, start in enumerate(before_step):
        for die_at in range(writes[index]):
            dying = DyingCluster(copy.deepcopy(start), die_at)
            with pytest.raises(Killed):
                one_run(dying)
            state = dying.items()
            for step in [None] + steps[index + 1:]:             # the next tick, then the rest
                state = copy.deepcopy(state)
                if step:
                    step(state)
                cluster = MemoryCluster(state, clock=lambda: F.NOW)
                one_run(cluster)
                state = cluster.items()
            assert comparable(state) == expected, (scenario, builder, index, die_at)
            covered += 1
    assert covered == sum(writes) >= 8


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
