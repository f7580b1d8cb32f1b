"""The upgrade from the version before live changes (issue 39 item 4): a cluster it left
(tests/golden/snapshot-before-live-changes.yaml, written by that version's own code: worker
Succeeded and held, infra Building and held, edge Failed and released) rebuilds nothing and
reboots nothing when this version arrives, with the cluster's node disruption policy in place;
its running build finishes as it would have, and the next change the nodes take live builds
nothing."""

from __future__ import annotations

import copy

import kubelet
import pytest

from reconcile.cluster import snapshot
from reconcile.contract import annotations as A
from reconcile.contract import naming
from tests.support import factory as F
from tests.support import mconode, ndp
from tests.unit.test_gate import cycle
from tests.unit.test_live_change import ssh_mc

BEFORE = F.ROOT / "tests/golden/snapshot-before-live-changes.yaml"
POOLS = ("worker", "infra", "edge")


def before(policy: bool = True) -> list[dict]:
    return snapshot.load(str(BEFORE)) + ([ndp.machineconfiguration()] if policy else [])


def records(items):
    return {p: {k: v for k, v in F.the_pool(items, p)["metadata"]["annotations"].items()
                if k.startswith(A.KEY_PREFIX) or k == A.IMAGE} for p in POOLS}


@pytest.mark.parametrize("policy", [True, False], ids=["policy", "no-policy"])
def test_the_earlier_versions_cluster_plans_nothing_new(any_cli, policy):
    items = before(policy)
    states = {p: F.the_pool(items, p)["metadata"]["annotations"] for p in POOLS}
    assert [states[p][A.STATE] for p in POOLS] == [A.SUCCEEDED, A.BUILDING, A.FAILED]
    assert [states[p].get(A.GATE) for p in POOLS] == ["held", "held", "released"]
    code, out, err = any_cli.on(items, "diff")
    assert code == 0, out + err                                  # converged as that version left it
    code, after, err = any_cli.run(items)
    assert code == 0 and "0 created, 0 patched, 0 deleted" in err.splitlines()[-1], err
    counter = mconode.Counter()
    mconode.settle(after, F.BASE, counter)
    assert len(counter) == 0                                     # no node moves


def test_its_running_build_finishes_and_the_next_live_change_builds_nothing(any_cli):
    items = before()
    images = {p: F.the_pool(items, p)["metadata"]["annotations"].get(A.IMAGE) for p in POOLS}
    for obj in items:
        if obj["kind"] == "Pod" and obj["metadata"]["labels"][naming.POOL_LABEL] == "infra":
            kubelet.set_phase(obj, "Succeeded", digest=kubelet.digest_for(obj["metadata"]["name"]))
    code, items, err = any_cli.run(items)
    assert code == 0, err
    assert F.the_pool(items, "infra")["metadata"]["annotations"][A.STATE] == A.SUCCEEDED
    items = cycle(any_cli, items, mconode.Counter())
    built = {p: F.the_pool(items, p)["metadata"]["annotations"].get(A.IMAGE) for p in POOLS}
    assert built["worker"] == images["worker"] and built["infra"] != images["infra"]
    # an SSH key for every worker-role pool: no pool builds, each node updates once, no OS change
    starts = {e["metadata"]["name"] for e in F.find(items, "Event") if e["reason"] == "BuildStarted"}
    counter = mconode.Counter()
    items = cycle(any_cli, copy.deepcopy(items) + [ssh_mc()], counter)
    new = [e for e in F.find(items, "Event") if e["reason"] == "BuildStarted" and e["metadata"]["name"] not in starts]
    assert new == [] or all("edge" in e["involvedObject"]["name"] for e in new), [e["message"] for e in new]
    for p in ("worker", "infra"):
        assert F.the_pool(items, p)["metadata"]["annotations"][A.LIVE] == "none"
    assert counter.os_changes == 0 or all(u.node.startswith("edge") for u in counter if u.os_changed)
