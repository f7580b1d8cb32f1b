"""The upgrade from the version before build storage: a cluster it left (tests/golden/
snapshot-before-build-storage.yaml, written by that version's own code) plans nothing new for
build storage, and its running build finishes as it would have. The default is `buildStorage:
persistent` now: that build is left alone, the pool's next build gets the volume (or, with no
default StorageClass, an emptyDir, said once); `buildStorage: emptyDir` keeps the earlier
behaviour."""

from __future__ import annotations

import copy

import kubelet
import pytest

from reconcile.cluster import snapshot
from reconcile.contract import annotations as A
from reconcile.contract import naming
from reconcile.core import storage
from tests.support import factory as F
from tests.unit.test_storage import GP3, PVC, new_config, set_phase, settings_of, volumes

BEFORE = F.ROOT / "tests/golden/snapshot-before-build-storage.yaml"


def before() -> list[dict]:
    return snapshot.load(str(BEFORE))


def test_the_earlier_versions_cluster_plans_nothing_new(run_cli):
    items = before()
    assert {F.the_pool(items, p)["metadata"]["annotations"][A.STATE] for p in ("worker", "infra", "edge")} == {
        A.SUCCEEDED, A.BUILDING, A.FAILED}
    code, out, err = run_cli.on(items, "diff")
    assert code == 0, out + err                                  # converged as that version left it
    assert PVC not in out and A.BUILD_STORAGE not in out
    for obj in items:
        if obj["kind"] == "Pod" and obj["metadata"]["labels"][naming.POOL_LABEL] == "infra":
            kubelet.set_phase(obj, "Succeeded")
    code, after, err = run_cli.run(items)
    assert code == 0, err
    assert F.the_pool(after, "infra")["metadata"]["annotations"][A.STATE] == A.SUCCEEDED
    assert not volumes(after, "infra") and not [o for o in after if o["kind"] == PVC]
    assert all(A.BUILD_STORAGE not in p["metadata"]["annotations"] for p in F.find(after, "MachineConfigPool"))


@pytest.mark.parametrize("keys, kept", [({}, True), ({"buildStorage": "persistent"}, True),
                                        ({"buildStorage": "emptyDir"}, False)])
def test_the_upgrade_leaves_the_running_build_and_the_next_gets_the_volume_unless_emptydir(run_cli, keys, kept):
    """The default is `persistent` now: the earlier version's running build is left as it is, the
    pool's next build gets a volume; `buildStorage: emptyDir` keeps the earlier behaviour."""
    items = settings_of(before(), **keys) + [copy.deepcopy(GP3)]
    code, out, err = run_cli.on(items, "diff")
    assert code == 0 and PVC not in out, out                     # no build starts: no volume yet
    code, items, err = run_cli.run(new_config(items))            # worker's next build
    assert code == 0, err
    running = [o for o in F.owned(items, "infra") if o["kind"] == "Pod"]
    assert running and not [v for v in running[0]["spec"]["volumes"] if "persistentVolumeClaim" in v]
    if not kept:
        assert not volumes(items, "worker") and A.BUILD_STORAGE not in F.the_pool(items, "worker")["metadata"]["annotations"]
        return
    (pvc,) = volumes(items, "worker")
    assert F.the_pool(items, "worker")["metadata"]["annotations"][A.BUILD_STORAGE] == \
        f"{PVC}/{pvc['metadata']['name']}"


def test_the_upgrade_without_a_default_storage_class_says_once_that_builds_use_an_emptydir(run_cli):
    code, items, err = run_cli.run(new_config(before()))
    assert code == 0, err
    assert not volumes(items, "worker")
    assert F.the_pool(items, "worker")["metadata"]["annotations"][A.BUILD_STORAGE].startswith(
        "emptyDir: the cluster has no default StorageClass")
    assert "buildStorage: persistent (the default), but this pool's builds use an emptyDir" in err
    code, items, err = run_cli.run(new_config(set_phase(items, "Succeeded"), 3))   # the pool's next build
    assert code == 0 and "(the default)" not in err, err
    assert len([o for o in F.owned(items, "worker") if o["kind"] == "Pod"]) == 1
    assert len([e for e in F.find(items, "Event") if e["reason"] == storage.REASON]) == 1


def test_the_earlier_versions_running_build_renders_as_it_was_made(run_cli):
    """render (Argo CD's generate) prints the live build as created: a Pod's spec cannot change."""
    import yaml
    items = before()
    (live,) = [o for o in F.owned(items, "infra") if o["kind"] == "Pod"]
    code, out, err = run_cli.on(items, "render")
    assert code == 0, err
    (printed,) = [o for o in yaml.safe_load_all(out) if o and o["kind"] == "Pod"
                  and o["metadata"]["name"] == live["metadata"]["name"]]
    assert printed["spec"] == live["spec"]
    assert printed["metadata"]["annotations"] == live["metadata"]["annotations"]
