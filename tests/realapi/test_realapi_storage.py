"""Build storage on the real kube-apiserver (`buildStorage: persistent`, core/storage.py), as our
ServiceAccount: the StorageClass listed, the PersistentVolumeClaim and the Pod that mounts it
accepted as we write them (validation, defaulting, Pod Security `baseline` with fsGroup, the
StorageObjectInUseProtection admission's finalizer), kept between builds, the steady run's one
extra LIST, and a deleted volume left Terminating by its finalizer (what a Pod that still mounts
it does on a cluster) deleted once. There is no kubelet, so nothing is mounted and no volume is
provisioned."""

from __future__ import annotations

import pytest

from reconcile.contract import annotations as A
from reconcile.core import storage
from tests.support import factory as F
from tests.support import realserver
from tests.unit.test_storage import GP3

pytestmark = pytest.mark.realapi
PVC = "PersistentVolumeClaim"


def cluster(**keys: str | None) -> list[dict]:
    """`buildStorage: persistent`, or with `buildStorage=None` unset (the default, persistent)."""
    keys = {"buildStorage": "persistent", **keys}
    return F.cluster(extra=[GP3], settings=[F.build_config(**keys), F.osimageurl(),
                                            F.secret("pull-secret"), F.secret("push-secret")])


def volumes(real) -> list[dict]:
    return [o for o in real.owned() if o["kind"] == PVC]


@pytest.mark.parametrize("setting", ["persistent", None], ids=["persistent", "default"])
def test_the_volume_and_its_pod_are_accepted_and_kept_between_builds(real, setting):
    real.seed(cluster(buildStorage=setting))
    code, err = real.run()
    assert code == 0, err
    (pvc,) = volumes(real)
    name = pvc["metadata"]["name"]
    assert pvc["spec"]["accessModes"] == ["ReadWriteOnce"] and pvc["spec"]["storageClassName"] == "gp3-csi"
    assert pvc["spec"]["volumeMode"] == "Filesystem"                     # defaulted by the server
    assert pvc["metadata"]["finalizers"] == ["kubernetes.io/pvc-protection"]
    pod = real.build_object()
    assert {"name": "storage", "persistentVolumeClaim": {"claimName": name}} in pod["spec"]["volumes"]
    assert pod["spec"]["securityContext"]["fsGroup"] == 1000
    assert real.ann()[A.BUILD_STORAGE] == f"{PVC}/{name}"
    code, out, _ = real.cli("diff")
    assert code == 0, out
    for phase in ("Running", "Succeeded"):
        real.finish(phase)
        assert real.run()[0] == 0
    assert real.ann()[A.STATE] == A.SUCCEEDED and [v["metadata"]["name"] for v in volumes(real)] == [name]
    mark = real.api.audit_mark()                    # converged: one more LIST than emptyDir's six
    assert real.run()[0] == 0
    audit = real.api.audit(mark, realserver.RECONCILER)
    lists = [e["objectRef"]["resource"] for e in audit if e["verb"] == "list"]
    assert len(lists) == 7 and lists.count("persistentvolumeclaims") == 1, lists
    assert [e["verb"] for e in audit if e["verb"] not in ("get", "list")] == ["create", "delete"]   # the Lease


def test_a_deleted_volume_stays_terminating_and_is_deleted_once(real):
    real.seed(cluster())
    assert real.run()[0] == 0
    (pvc,) = volumes(real)
    pool = real.pool()
    del pool["metadata"]["labels"][A.LAYERING_LABEL]                     # opt out
    real.api.request("PUT", real.api.path("MachineConfigPool", "", "worker"), pool)
    mark = real.api.audit_mark()
    code, err = real.run()
    assert code == 0, err
    (left,) = volumes(real)                         # its finalizer keeps it, as a Pod that mounts it would
    assert left["metadata"]["deletionTimestamp"] and left["metadata"]["uid"] == pvc["metadata"]["uid"]
    assert not any(A.owned(k) for k in real.ann())
    deleted = [e for e in real.api.audit(mark, realserver.RECONCILER) if e["verb"] == "delete"
               and e["objectRef"]["resource"] == "persistentvolumeclaims"]
    assert len(deleted) == 1
    mark = real.api.audit_mark()
    code, out, _ = real.cli("diff")
    assert code == 0, out
    assert real.run()[0] == 0
    assert not [e for e in real.api.audit(mark, realserver.RECONCILER) if e["verb"] == "delete"
                and e["objectRef"]["resource"] == "persistentvolumeclaims"]
    real.api.release(PVC, F.NS, pvc["metadata"]["name"])       # the pvc-protection controller lets go
    assert not volumes(real)


def test_without_a_default_storage_class_the_build_uses_an_emptydir_saying_so(real):
    real.seed([o for o in cluster() if o["kind"] != "StorageClass"])
    code, err = real.run()
    assert code == 0, err
    assert not volumes(real) and real.ann()[A.BUILD_STORAGE].startswith("emptyDir: the cluster has no default")
    assert [e["reason"] for e in real.events() if e["type"] == "Warning"] == [storage.REASON]


def test_the_build_is_sized_from_the_base_manifest_the_real_registry_serves(real, tmp_path, base_registry):
    """The base image is in the real docker-registry: an index of two architectures whose amd64
    image (that of the pool's node) has layers of known sizes; the Pod's disk follows their sum
    (what the registry stores, independent of our reading) times the table's factors."""
    import math

    from reconcile.imagebuild import templates
    from tests.support import realbuild as R
    R.require_registry()
    reg = R.Registry(tmp_path)
    try:
        index = R.push_index(reg, "ocp/base", "multi", layers={
            "amd64": (b"x" * 3_000_000, b"y" * 1_500_000), "arm64": (b"z" * 9_000_000,)})
        amd = R.platforms(reg, "ocp/base", index)["amd64"]
        size = sum(len(b) for b in stored_layers(reg, "ocp/base", amd))
        real.seed(F.cluster(settings=[
            F.build_config(), F.osimageurl(baseOSContainerImage=f"{reg.host}/ocp/base@{index}"),
            F.secret("pull-secret", payload={"auths": {reg.host: {"auth": "dTpw"}}}), F.secret("push-secret")]))
        code, err = real.run()
        assert code == 0, err
        pod = real.build_object()
        assert f"the base's {size} bytes" in pod["metadata"]["annotations"][A.DISK]
        # the node's xfs row for the driver `auto` prefers (the Pod's STORAGE_DRIVER), of the
        # unpacked size (twice the compressed)
        factor = templates.table("build-disk.yaml")["filesystems"]["xfs"]["factors"]["overlay"]["today"]["peak"]
        request = max(1, math.ceil(factor * 2 * size / (1 << 30)))
        assert pod["spec"]["containers"][0]["resources"]["requests"]["ephemeral-storage"] == f"{request}Gi"
    finally:
        reg.stop()


def stored_layers(reg, repo: str, digest: str) -> list[bytes]:
    """The layer blobs of a manifest, fetched: their bytes as the registry stores them."""
    import json
    import urllib.request

    from tests.support import realbuild as R
    _, raw = R.get_manifest(reg, repo, digest)
    out = []
    for layer in json.loads(raw)["layers"]:
        with urllib.request.urlopen(f"{reg.url}/v2/{repo}/blobs/{layer['digest']}", context=reg.context) as resp:
            out.append(resp.read())
    return out
