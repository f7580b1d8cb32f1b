"""The node controller imitation (tests/support/mconode.py) on the real kube-apiserver: Nodes and pools
made by the admin, the controller's and the daemon's writes as strategic merge PATCHes of the Nodes'
annotations, the pool's status through its status subresource, and the render imitation between. What
it does not prove is in docs/development.md."""

from __future__ import annotations

import pytest

from tests.support import factory as F
from tests.support import mconode as N
from tests.support import mcorender
from tests.unit.test_rollout import source_mc

pytestmark = pytest.mark.realapi


def node_writes(api, mark):
    return sorted({e["verb"] for e in api.audit(mark) if (e.get("objectRef") or {}).get("resource") == "nodes"
                   and e["verb"] not in ("get", "list", "watch")})


def test_the_node_controller_drives_nodes_on_the_real_server(real):
    api = real.api
    pool = F.pool("worker")
    pool["spec"]["maxUnavailable"] = 2
    real.seed([pool, *(F.node(f"worker-{i}") for i in range(3)),
               source_mc("00-worker", "worker", {"/etc/base": "base"}, generated=True)])
    first = mcorender.sync_api(api, "worker", F.BASE)["metadata"]["name"]
    assert sorted(N.first_boot_api(api)) == ["worker-0", "worker-1", "worker-2"]
    assert len(N.settle_api(api, F.BASE)) == 0                  # booted on the pool's config: nothing to do

    api.create(source_mc("99-worker-motd", "worker", {"/etc/motd": "hello"}))
    mark = api.audit_mark()
    counter = N.settle_api(api, F.BASE)
    target = real.pool()["spec"]["configuration"]["name"]
    assert target != first
    assert counter.per_node() == {"worker-0": 1, "worker-1": 1, "worker-2": 1}
    assert [sum(u.round == r for u in counter) for r in sorted({u.round for u in counter})] == [2, 1]
    assert {(u.from_config, u.to_config) for u in counter} == {(first, target)} and counter.os_changes == 0
    assert node_writes(api, mark) == ["patch"]
    for node in api.list("Node"):
        ann = node["metadata"]["annotations"]
        assert (ann[N.CURRENT], ann[N.DESIRED], ann[N.STATE]) == (target, target, "Done")
    status = real.pool()["status"]
    assert (status["machineCount"], status["updatedMachineCount"], status["readyMachineCount"]) == (3, 3, 3)
    assert status["configuration"]["name"] == target

    # paused: rendered, not rolled out; the status says so
    api.request("PATCH", api.path("MachineConfigPool", "", "worker"), {"spec": {"paused": True}},
                content_type="application/merge-patch+json")
    api.create(source_mc("99-worker-issue", "worker", {"/etc/issue": "paused"}))
    assert len(N.settle_api(api, F.BASE)) == 0
    held = real.pool()
    assert held["spec"]["configuration"]["name"] != target
    assert (held["status"]["updatedMachineCount"], held["status"]["configuration"]["name"]) == (0, target)
    updating = next(c for c in held["status"]["conditions"] if c["type"] == "Updating")
    assert (updating["status"], updating["message"]) == (
        "False", f"Pool is paused; will not update to MachineConfig {held['spec']['configuration']['name']}")
