"""Build storage that outlives the build Pod (`buildStorage: persistent`, core/storage.py): one
PersistentVolumeClaim per pool, made before the Pod that mounts it, kept between builds, mounted
by one build Pod at a time, replaced when it no longer fits, gone with the setting, the pool's
opt-out or the pool; without a StorageClass to use, an emptyDir, said once.

Expected values come from the rules they test: the default StorageClass is the newest of those
annotated default, then the first by name (kubernetes/kubernetes v1.34.2
pkg/volume/util/storageclass.go GetDefaultClass); a volume being deleted carries
metadata.deletionTimestamp until its pvc-protection finalizer is removed
(pkg/controller/volume/pvcprotection)."""

from __future__ import annotations

import copy

import kubelet
import pytest

from reconcile.contract import annotations as A
from reconcile.core import storage
from reconcile.imagebuild import settings
from tests.support import factory as F

PVC = "PersistentVolumeClaim"


def storage_class(name: str, default: bool = False, created: str = "2026-01-01T00:00:00Z",
                  beta: bool = False) -> dict:
    key = storage.DEFAULT_CLASS[1 if beta else 0]
    return {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
            "metadata": {"name": name, "creationTimestamp": created,
                         "annotations": {key: "true"} if default else {}},
            "provisioner": "ebs.csi.aws.com"}


def cluster(*classes: dict, pools=(), **keys: str | None) -> list[dict]:
    """`buildStorage: persistent` set, unless `buildStorage=None` (the default)."""
    keys = {"buildStorage": "persistent", **keys}
    items = F.cluster(*pools, settings=[F.build_config(**keys), F.osimageurl(), F.secret("pull-secret"),
                                        F.secret("push-secret")])
    return items + [copy.deepcopy(c) for c in classes]


GP3 = storage_class("gp3-csi", default=True)


def volumes(items: list[dict], pool: str = "worker") -> list[dict]:
    return [o for o in F.owned(items, pool) if o["kind"] == PVC]


def build_pod(items: list[dict], pool: str = "worker") -> dict:
    (pod,) = [o for o in F.owned(items, pool) if o["kind"] == "Pod"]
    return pod


def set_phase(items: list[dict], phase: str) -> list[dict]:
    items = copy.deepcopy(items)
    for obj in items:
        if obj["kind"] == "Pod":
            kubelet.set_phase(obj, phase)
    return items


def new_config(items: list[dict], n: int = 2) -> list[dict]:
    items = copy.deepcopy(items)
    F.the_pool(items)["spec"]["configuration"]["name"] = f"rendered-worker-{n}"
    return items + [F.machineconfig(f"rendered-worker-{n}")]


def settings_of(items: list[dict], **keys: str | None) -> list[dict]:
    items = copy.deepcopy(items)
    data = next(o for o in items if o["metadata"]["name"] == "on-cluster-build-config")["data"]
    for key, value in keys.items():
        if value is None:
            data.pop(key, None)
        else:
            data[key] = value
    return items


def test_the_default_is_the_pools_volume_and_says_so_when_it_falls_back(run_cli):
    """Unset, `buildStorage` is `persistent` for the buildah Pod (the figures of docs/development.md,
    "Build cost"): with a default StorageClass the build gets the pool's volume; without one an
    emptyDir, said once as the default's fallback."""
    code, items, err = run_cli.run(cluster(GP3, buildStorage=None))
    assert code == 0, err
    (pvc,) = volumes(items)
    assert {"name": "storage", "persistentVolumeClaim": {"claimName": pvc["metadata"]["name"]}} in \
        build_pod(items)["spec"]["volumes"]
    code, items, err = run_cli.run(cluster(buildStorage=None))
    assert code == 0 and not volumes(items)
    why = "the cluster has no default StorageClass; set buildStorageClass"
    assert F.the_pool(items)["metadata"]["annotations"][A.BUILD_STORAGE] == f"emptyDir: {why}"
    (told,) = [e for e in F.find(items, "Event") if e["reason"] == storage.REASON]
    assert told["message"].startswith("buildStorage: persistent (the default), but this pool's builds use an "
                                      "emptyDir: " + why)


def test_buildstorage_emptydir_keeps_the_earlier_versions_pod_and_writes_no_record(run_cli):
    code, items, _ = run_cli.run(cluster(GP3, buildStorage="emptyDir"))
    assert code == 0 and not volumes(items)
    pod = build_pod(items)
    assert [v for v in pod["spec"]["volumes"] if "persistentVolumeClaim" in v] == []
    # the Pod's spec is the earlier version's: a build it started renders the same (Argo CD)
    assert "BUILD_STORAGE_DIR" not in {e["name"] for e in pod["spec"]["containers"][0]["env"]}
    assert "securityContext" not in pod["spec"]
    assert A.BUILD_STORAGE not in F.the_pool(items)["metadata"]["annotations"]
    assert not [e for e in F.find(items, "Event") if e["reason"] == storage.REASON]


def test_persistent_storage_is_one_volume_made_before_the_pod_and_kept_between_builds(any_cli):
    code, items, err = any_cli.run(cluster(storage_class("slow"), GP3))
    assert code == 0, err
    (pvc,) = volumes(items)
    name = pvc["metadata"]["name"]
    assert name.startswith("ocl-storage-worker-")
    assert pvc["spec"]["accessModes"] == ["ReadWriteOnce"] and pvc["spec"]["storageClassName"] == "gp3-csi"
    assert pvc["metadata"]["labels"] == {"app.kubernetes.io/managed-by": "ocl-reconciler",
                                         "ocl-reconciler.io/pool": "worker"}
    assert pvc["metadata"]["ownerReferences"][0]["kind"] == "MachineConfigPool"
    pod = build_pod(items)
    assert {"name": "storage", "persistentVolumeClaim": {"claimName": name}} in pod["spec"]["volumes"]
    (container,) = pod["spec"]["containers"]
    assert {"name": "storage", "mountPath": "/home/build/.local/share"} in container["volumeMounts"]
    assert {"name": "BUILD_STORAGE_DIR", "value": "/home/build/.local/share"} in container["env"]
    # the kubelet changes the group of the volume's root only, never of the layers inside
    assert pod["spec"]["securityContext"] == {"fsGroup": 1000, "fsGroupChangePolicy": "OnRootMismatch"}
    assert F.the_pool(items)["metadata"]["annotations"][A.BUILD_STORAGE] == f"{PVC}/{name}"
    for phase in ("Running", "Succeeded"):
        code, items, err = any_cli.run(set_phase(items, phase))
        assert code == 0, err
    assert not [o for o in F.owned(items) if o["kind"] == "Pod"] and [v["metadata"]["name"] for v in volumes(items)] == [name]
    code, items, err = any_cli.run(new_config(items))             # a one-file change: the same volume
    assert code == 0, err
    assert [v["metadata"]["name"] for v in volumes(items)] == [name]
    assert {"name": "storage", "persistentVolumeClaim": {"claimName": name}} in build_pod(items)["spec"]["volumes"]


@pytest.mark.parametrize("classes, chosen", [
    # the newest default wins, then the first by name; the beta annotation counts too
    ([storage_class("a", True, "2026-01-01T00:00:00Z"), storage_class("b", True, "2026-02-01T00:00:00Z")], "b"),
    ([storage_class("b", True), storage_class("a", True)], "a"),
    ([storage_class("old", beta=True, default=True), storage_class("plain")], "old"),
])
def test_the_default_storage_class_is_the_one_kubernetes_defaults_to(run_cli, classes, chosen):
    code, items, _ = run_cli.run(cluster(*classes))
    assert code == 0 and volumes(items)[0]["spec"]["storageClassName"] == chosen


def test_a_named_storage_class_wins_over_the_default(run_cli):
    code, items, _ = run_cli.run(cluster(GP3, storage_class("fast"), buildStorageClass="fast"))
    assert code == 0 and volumes(items)[0]["spec"]["storageClassName"] == "fast"


@pytest.mark.parametrize("classes, keys, why", [
    ((storage_class("slow"),), {}, "the cluster has no default StorageClass; set buildStorageClass"),
    ((GP3,), {"buildStorageClass": "fast"}, "StorageClass fast (buildStorageClass) not found"),
])
def test_without_a_storage_class_the_build_uses_an_emptydir_and_says_so_once(run_cli, classes, keys, why):
    code, items, err = run_cli.run(cluster(*classes, **keys))
    assert code == 0 and not volumes(items)
    assert not [v for v in build_pod(items)["spec"]["volumes"] if "persistentVolumeClaim" in v]
    assert F.the_pool(items)["metadata"]["annotations"][A.BUILD_STORAGE] == f"emptyDir: {why}"
    (told,) = [e for e in F.find(items, "Event") if e["reason"] == storage.REASON]
    assert told["type"] == "Warning" and why in told["message"] and why in err
    for step in (lambda i: set_phase(i, "Succeeded"), new_config):       # the next build: not told again
        code, items, err = run_cli.run(step(items))
        assert code == 0
    assert len([e for e in F.find(items, "Event") if e["reason"] == storage.REASON]) == 1 and why not in err


def test_an_openshift_build_has_no_persistent_storage_and_says_so(run_cli, monkeypatch):
    monkeypatch.setattr(F, "BUILDER", "openshift-image-builder")
    code, items, _ = run_cli.run(cluster(GP3))
    assert code == 0 and not volumes(items)
    assert F.the_pool(items)["metadata"]["annotations"][A.BUILD_STORAGE].startswith(
        "emptyDir: Builds have no persistent build storage")
    assert [e["reason"] for e in F.find(items, "Event") if e["type"] == "Warning"] == [storage.REASON]
    # unset, an OpenShift Build's default is the emptyDir it always had: nothing to say
    code, items, _ = run_cli.run(cluster(GP3, buildStorage=None))
    assert code == 0 and not volumes(items)
    assert A.BUILD_STORAGE not in F.the_pool(items)["metadata"]["annotations"]
    assert not [e for e in F.find(items, "Event") if e["reason"] == storage.REASON]


def test_a_new_build_never_mounts_the_volume_a_running_build_still_mounts(run_cli):
    """ReadWriteOnce lets two Pods on one node mount it: the reconciler does not."""
    code, items, _ = run_cli.run(cluster(GP3))
    name = volumes(items)[0]["metadata"]["name"]
    code, items, err = run_cli.run(new_config(set_phase(items, "Running")))     # interrupts the running build
    assert code == 0, err
    pods = [o for o in F.owned(items) if o["kind"] == "Pod"]
    assert len(pods) == 1 and not [v for v in pods[0]["spec"]["volumes"] if "persistentVolumeClaim" in v]
    ann = F.the_pool(items)["metadata"]["annotations"]
    assert f"build storage {PVC}/{name} is still mounted by Pod/" in err
    assert ann[A.BUILD_STORAGE] == f"{PVC}/{name}" and [v["metadata"]["name"] for v in volumes(items)] == [name]
    code, items, _ = run_cli.run(new_config(set_phase(items, "Succeeded"), 3))   # the next: mounted again
    assert {"name": "storage", "persistentVolumeClaim": {"claimName": name}} in build_pod(items)["spec"]["volumes"]


def test_a_volume_that_no_longer_fits_is_replaced_and_the_old_one_goes_after_the_record(run_cli):
    code, items, _ = run_cli.run(cluster(GP3, buildStorageSize="100Gi"))
    old = volumes(items)[0]["metadata"]["name"]
    items = set_phase(items, "Succeeded")
    code, items, _ = run_cli.run(items)
    smaller = new_config(settings_of(items, buildStorageSize="50Gi"))            # smaller: kept
    code, items, _ = run_cli.run(smaller)
    assert [v["metadata"]["name"] for v in volumes(items)] == [old]
    code, items, err = run_cli.run(new_config(settings_of(set_phase(items, "Succeeded"), buildStorageSize="200Gi"), 3))
    assert code == 0, err
    (new,) = volumes(items)
    assert new["metadata"]["name"] != old and new["spec"]["resources"]["requests"]["storage"] == "200Gi"
    assert F.the_pool(items)["metadata"]["annotations"][A.BUILD_STORAGE] == f"{PVC}/{new['metadata']['name']}"


def test_another_builder_image_gets_another_volume(run_cli):
    code, items, _ = run_cli.run(cluster(GP3))
    old = volumes(items)[0]["metadata"]["name"]
    items = settings_of(set_phase(items, "Succeeded"), buildahImage="quay.io/buildah/stable:v1.39")
    code, items, err = run_cli.run(items)
    assert code == 0, err
    (pvc,) = volumes(items)
    assert pvc["metadata"]["name"] != old
    assert pvc["metadata"]["annotations"][A.BUILDER_IMAGE] == "quay.io/buildah/stable:v1.39"


def gone_by(items: list[dict], how: str) -> list[dict]:
    """The cluster once the pool's volumes should go: `buildStorage: emptyDir`, the pool opted out,
    or the pool deleted."""
    if how == "emptyDir":
        return settings_of(items, buildStorage="emptyDir")
    items = copy.deepcopy(items)
    if how == "opt-out":
        del F.the_pool(items)["metadata"]["labels"][A.LAYERING_LABEL]
        return items
    return [o for o in items if o["kind"] != "MachineConfigPool"]


def deleting(items: list[dict]) -> list[dict]:
    """The volumes carry deletionTimestamp: deleted while a Pod still mounts them."""
    items = copy.deepcopy(items)
    for obj in items:
        if obj["kind"] == PVC:
            obj["metadata"].update(deletionTimestamp="2026-11-29T11:00:00Z", finalizers=["kubernetes.io/pvc-protection"])
    return items


def test_a_volume_being_deleted_is_not_mounted_nor_deleted_again(run_cli):
    code, items, _ = run_cli.run(cluster(GP3))
    name = volumes(items)[0]["metadata"]["name"]
    code, items, err = run_cli.run(new_config(deleting(set_phase(items, "Succeeded"))))
    assert code == 0, err
    assert not [v for v in build_pod(items)["spec"]["volumes"] if "persistentVolumeClaim" in v]
    assert f"build storage {PVC}/{name} is being deleted" in err
    code, out, _ = run_cli.on(deleting(items), "diff")
    assert f"{PVC}.ocl-reconciler.{name}" not in out               # no second delete


@pytest.mark.parametrize("how", ["emptyDir", "opt-out", "pool-gone"])
def test_the_volume_goes_with_the_setting_the_opt_out_and_the_pool(run_cli, how):
    code, items, _ = run_cli.run(cluster(GP3))
    items = set_phase(items, "Succeeded")
    code, items, _ = run_cli.run(items)
    assert volumes(items)
    code, items, err = run_cli.run(gone_by(items, how))
    assert code == 0, err
    assert not volumes(items)
    pools = F.find(items, "MachineConfigPool")
    assert all(A.BUILD_STORAGE not in p["metadata"]["annotations"] for p in pools)
    code, out, _ = run_cli.on(items, "diff")
    assert code == 0, out                                           # converged


def test_a_volume_still_mounted_when_the_pool_opts_out_finishes_its_deletion_alone(run_cli):
    code, items, _ = run_cli.run(cluster(GP3))
    (pvc,) = volumes(items)
    del F.the_pool(items)["metadata"]["labels"][A.LAYERING_LABEL]
    code, items, _ = run_cli.run(set_phase(items, "Running"))
    assert not volumes(items) and not [o for o in F.owned(items) if o["kind"] == "Pod"]
    # on a live cluster it stays, Terminating, until the Pod that mounted it is gone
    code, out, _ = run_cli.on(items + deleting([pvc]), "diff")
    assert code == 0 and f"{PVC}.ocl-reconciler" not in out, out


def test_settings_keys_are_validated_naming_the_key():
    def read(**keys):
        return settings.read(F.NS, {"on-cluster-build-config": F.build_config(**keys),
                                    "machine-config-osimageurl": F.osimageurl()})
    assert read(buildStorage=None).build_storage == "persistent" and read().build_storage == "emptyDir"
    assert read(imageBuilderType="openshift-image-builder", buildStorage=None).build_storage == "emptyDir"
    assert read(imageBuilderType="openshift-image-builder", buildStorage="persistent").persistent_storage
    for keys, says in (({"buildStorage": "pvc"}, "key 'buildStorage': unknown value 'pvc'"),
                       ({"buildStorageClass": "Fast SSD"}, "key 'buildStorageClass'"),
                       ({"buildStorageSize": "lots"}, "key 'buildStorageSize': 'lots' is not a size")):
        with pytest.raises(settings.SettingsError, match=says):
            read(**keys)


@pytest.mark.parametrize("kind", ["Pod", PVC])
@pytest.mark.parametrize("spec", [True, None, "x", {"volumes": [True, {"persistentVolumeClaim": "x"}]}])
def test_a_mangled_spec_of_ours_is_no_traceback(run_cli, kind, spec):
    """Found by tests/unit/test_fuzz.py: a build Pod whose spec was set to `true`."""
    code, items, _ = run_cli.run(cluster(GP3))
    for obj in items:
        if obj["kind"] == kind:
            obj["spec"] = spec
    code, out, err = run_cli.on(items, "diff")
    assert code in (0, 1, 2) and "Traceback" not in err, err
    code, items, err = run_cli.run(items)
    assert code in (0, 2) and "Traceback" not in err, err


def forged(items: list[dict], how: str) -> dict:
    """A volume that carries our labels and builder-image annotation (copied from one we made) and
    is larger than any we would make, but made by someone else, as `how` says."""
    (ours,) = volumes(items)
    v = copy.deepcopy(ours)
    v["metadata"]["name"] = "prefilled"
    v["spec"]["resources"]["requests"]["storage"] = "999Gi"
    if how == "no-owner":
        del v["metadata"]["ownerReferences"]
    elif how == "other-uid":
        v["metadata"]["ownerReferences"][0]["uid"] = "uid-of-another-pool"
    elif how in ("dataSource", "dataSourceRef"):
        v["spec"][how] = {"kind": "PersistentVolumeClaim", "name": "someone-elses"}
    elif how == "ReadWriteMany":
        v["spec"]["accessModes"] = ["ReadWriteMany"]
    elif how == "pre-bound":
        v["spec"]["volumeName"] = "pv-prepared-by-its-creator"
    elif how == "selector":                # the PV controller binds it to a prepared volume itself
        v["spec"]["selector"] = {"matchLabels": {"prepared": "yes"}}
    elif how == "Block":
        v["spec"]["volumeMode"] = "Block"
    elif how == "bound-by-controller":     # one of ours after the PV controller bound it: trusted
        v["spec"]["volumeName"] = "pvc-1234"
        v["metadata"]["annotations"].update({storage.BOUND_BY_CONTROLLER: "yes", "pv.kubernetes.io/bind-completed": "yes"})
    return v


@pytest.mark.parametrize("how", ["no-owner", "other-uid", "dataSource", "dataSourceRef", "ReadWriteMany", "pre-bound",
                                 "selector", "Block", "bound-by-controller"])
def test_only_a_volume_we_made_for_the_pool_is_mounted_and_another_is_left_alone(run_cli, how):
    """A volume's images become the build's base: one labelled ours that we did not make for this
    pool (core/storage.py, "Only volumes we made") is not mounted, not deleted, and said."""
    code, made, _ = run_cli.run(cluster(GP3))
    fake = forged(made, how)
    code, items, err = run_cli.run(cluster(GP3) + [fake])
    assert code == 0, err
    mounted = [v["persistentVolumeClaim"]["claimName"] for v in build_pod(items)["spec"]["volumes"]
               if "persistentVolumeClaim" in v]
    if how == "bound-by-controller":
        assert mounted == ["prefilled"]
        return
    assert mounted == [volumes(made)[0]["metadata"]["name"]]          # a volume of its own
    assert "prefilled" in [v["metadata"]["name"] for v in volumes(items)]
    assert f"PersistentVolumeClaim/{F.NS}/prefilled carries our labels but is not ours" in err
    code, items, err = run_cli.run(new_config(set_phase(items, "Succeeded")))
    assert code == 0 and "prefilled" in [v["metadata"]["name"] for v in volumes(items)]   # settle leaves it


def test_a_foreign_volume_under_our_name_is_not_adopted_the_build_uses_an_emptydir(run_cli):
    code, made, _ = run_cli.run(cluster(GP3))
    (ours,) = volumes(made)
    fake = copy.deepcopy(ours)
    del fake["metadata"]["ownerReferences"]
    code, items, err = run_cli.run(cluster(GP3) + [fake])
    assert code == 0, err
    assert not [v for v in build_pod(items)["spec"]["volumes"] if "persistentVolumeClaim" in v]
    assert "carries our labels but is not ours (no ownerReference to the pool)" in err
    assert volumes(items) == [fake]


def test_the_recorded_volume_is_used_when_the_storage_classes_cannot_be_read(run_cli, monkeypatch):
    """A 403 on the StorageClasses (an install whose ClusterRole predates build storage) never
    throws the pool's stored images away."""
    from reconcile.cluster import observe
    code, items, _ = run_cli.run(cluster(GP3))
    (pvc,) = volumes(items)
    items = set_phase(items, "Succeeded")
    code, items, _ = run_cli.run(items)
    monkeypatch.setattr(observe, "storage_classes", lambda cluster: storage.Classes(problem="cannot list StorageClasses: forbidden"))
    code, items, err = run_cli.run(new_config(items))
    assert code == 0, err
    assert [v["metadata"]["name"] for v in volumes(items)] == [pvc["metadata"]["name"]]
    assert {"name": "storage", "persistentVolumeClaim": {"claimName": pvc["metadata"]["name"]}} in \
        build_pod(items)["spec"]["volumes"]
    assert F.the_pool(items)["metadata"]["annotations"][A.BUILD_STORAGE] == f"{PVC}/{pvc['metadata']['name']}"


def test_the_fallback_is_said_as_a_warning(run_cli):
    code, items, err = run_cli.run(cluster(storage_class("slow")))
    assert code == 0
    assert any(line.startswith("WARNING") and "but this pool's builds use an emptyDir" in line
               for line in err.splitlines()), err


@pytest.mark.parametrize("how", ["opt-out", "pool-gone"])
def test_the_opt_out_and_the_pools_deletion_leave_a_foreign_labelled_volume_alone(run_cli, how):
    """"Neither used nor deleted" holds when the pool goes too: ours go, a labelled volume with no
    ownerReference to the pool stays."""
    code, made, _ = run_cli.run(cluster(GP3))
    code, items, err = run_cli.run(set_phase(made, "Succeeded") + [forged(made, "no-owner")])
    ours = volumes(made)[0]["metadata"]["name"]
    code, items, err = run_cli.run(gone_by(items, how))
    assert code == 0, err
    assert [v["metadata"]["name"] for v in volumes(items)] == ["prefilled"]        # ours went
    assert f"delete PersistentVolumeClaim/{F.NS}/{ours}" in err


def test_without_the_storage_classes_a_recorded_volume_too_small_is_not_replaced_by_one_of_its_class(
        run_cli, monkeypatch):
    """The recorded volume stands in for a class the settings no longer give (unreadable, named but
    absent, no default) only as it is: a larger one is never made of its class against the
    settings; the build uses an emptyDir, saying why, and the volume is kept for a later build."""
    from reconcile.cluster import observe
    code, items, _ = run_cli.run(cluster(GP3, buildStorageSize="50Gi"))
    code, items, _ = run_cli.run(set_phase(items, "Succeeded"))
    (pvc,) = volumes(items)
    monkeypatch.setattr(observe, "storage_classes", lambda cluster: storage.Classes(problem="cannot list StorageClasses: forbidden"))
    code, items, err = run_cli.run(new_config(settings_of(items, buildStorageSize="200Gi")))
    assert code == 0, err
    assert [v["metadata"]["name"] for v in volumes(items)] == [pvc["metadata"]["name"]]
    assert not [v for v in build_pod(items)["spec"]["volumes"] if "persistentVolumeClaim" in v]
    assert F.the_pool(items)["metadata"]["annotations"][A.BUILD_STORAGE] == f"{PVC}/{pvc['metadata']['name']}"
    assert "no longer fits and no other can be made (cannot list StorageClasses: forbidden" in err


def test_a_create_that_finds_our_name_taken_adopts_only_a_volume_we_made(run_cli):
    """The race where a volume appears under our name between the LIST and the create (AlreadyExists):
    cluster/apply.py adopts it only as core/storage.py would mount it."""
    from reconcile.cluster import apply
    code, made, _ = run_cli.run(cluster(GP3))
    (wanted,) = volumes(made)
    assert apply._made_by_us_for_this_build(copy.deepcopy(wanted), wanted)
    for how in ("no-owner", "other-uid", "dataSource", "selector", "pre-bound"):
        squatter = forged(made, how)
        squatter["metadata"]["name"] = wanted["metadata"]["name"]
        assert not apply._made_by_us_for_this_build(squatter, wanted), how


@pytest.mark.parametrize("message, volume", [
    # the volume binding plugin's reasons (kubernetes v1.34.2 pkg/scheduler/framework/plugins/
    # volumebinding/volume_binding.go, binder.go), as the scheduler joins them
    ("0/3 nodes are available: pod has unbound immediate PersistentVolumeClaims. preemption: 0/3 nodes are "
     "available: 3 Preemption is not helpful for scheduling.", True),
    ("0/3 nodes are available: 3 node(s) didn't match PersistentVolume's node affinity. preemption: ...", True),
    ("0/3 nodes are available: 3 Insufficient cpu. preemption: ...", False),
])
def test_a_build_pod_the_scheduler_cannot_place_says_why_on_the_pool(run_cli, message, volume):
    """The scheduler's PodScheduled condition (status False, reason Unschedulable: pkg/scheduler/
    schedule_one.go, handleSchedulingFailure) is the pool's message while the Pod waits; where it is
    the volume, the message says what to do."""
    code, items, _ = run_cli.run(cluster(GP3))
    pod = build_pod(items)
    pod["status"] = {"phase": "Pending", "conditions": [
        {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": message}]}
    code, items, err = run_cli.run(items)
    assert code == 0, err
    ann = F.the_pool(items)["metadata"]["annotations"]
    assert ann[A.STATE] == A.PENDING
    assert f"is Pending: not scheduled: Unschedulable: {message.rstrip('. ')}"[:200] in ann[A.MESSAGE]
    assert ("set buildStorage: emptyDir" in ann[A.MESSAGE]) is volume
    code, again, _ = run_cli.run(items)                           # waiting still: no write
    assert again == items
