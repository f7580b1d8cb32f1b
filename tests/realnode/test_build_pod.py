"""The build Pod under the real kubelet (issue 53 item 1): the product's own Pod, rendered from
manifests/pod-buildah.yaml.j2 and build-pod.sh and not changed by the test, runs buildah as uid 1000
with file capabilities on a builder image made here (tests/support/builderimage.py), with the pool's
build storage claim bound to a local PersistentVolume by kube-controller-manager. It builds a pool's
rendered config on a small base from the 127.0.0.1 registry (reached at the node's gateway), pushes
there, and `run --wait`, run on the host as the ServiceAccount, records the digest on the pool.

Expected values come from outside the product: the digest the registry serves for the tag
(skopeo), the MachineConfig as the build must carry it (encoding.build_view, the MCD's
currentconfig), the registry's own access log for what was pulled."""

from __future__ import annotations

import json

import pytest

from reconcile.contract import annotations as A
from reconcile.imagebuild import encoding
from tests.support import factory as F
from tests.support import nodebuild as NB
from tests.support import realbuild as R

pytestmark = pytest.mark.realnode


def image_file(w, digest, path, tmp_path):
    return R.image_file(w.host, f"{w.registry.host}/ocl/os-image@{digest}", path, tmp_path / path.replace("/", "_"))


def test_the_build_pod_builds_under_the_kubelet_and_a_one_file_rebuild_reuses_the_kept_storage(d, w, tmp_path):
    volume = tmp_path / "pv"
    NB.provide_storage(d.node, volume, "ocl-build-pod-1")
    first = NB.machineconfig("rendered-worker-1", w.pods_registry)
    d.seed(NB.scenario(w, first))
    kubeconfig = NB.sa_kubeconfig(d.node, tmp_path / "sa.kubeconfig")

    mark = len(w.registry.requests())
    code, err = NB.run(d.node, kubeconfig)
    a = d.ann()
    assert (code, a.get(A.STATE)) == (0, A.SUCCEEDED), (a.get(A.MESSAGE), err[-3000:])
    digest = NB.digest_of(a)
    # the registry serves that digest under the build's tag (the config's name), with its labels
    tagged = w.inspect(f"ocl/os-image:{first['metadata']['name']}")
    assert tagged["Digest"] == digest
    assert tagged["Labels"]["machineconfig"] == first["metadata"]["name"]
    current = image_file(w, digest, "/etc/machine-config-daemon/currentconfig", tmp_path)
    assert json.loads(current) == encoding.build_view(first)
    assert w.base_blob_gets(mark) > 0                              # the base pulled once
    # the claim was bound to our volume; buildah's storage is on it, the build user's by fsGroup
    claim = a[A.BUILD_STORAGE].removeprefix("PersistentVolumeClaim/")
    pvc = d.api.get("PersistentVolumeClaim", F.NS, claim)
    assert pvc["spec"]["volumeName"] == "ocl-build-pod-1" and pvc["status"]["phase"] == "Bound"
    graph = volume / "containers/storage"
    assert graph.is_dir() and graph.stat().st_gid == 1000, sorted(p.name for p in volume.iterdir())
    assert any(graph.glob("*-images")), sorted(p.name for p in graph.iterdir())

    # one file changed: the next build takes the base from the kept volume, not from the registry
    second = NB.machineconfig("rendered-worker-2", w.pods_registry)
    NB.switch_config(d.node, second)
    mark = len(w.registry.requests())
    code, err = NB.run(d.node, kubeconfig)
    a = d.ann()
    assert (code, a.get(A.STATE)) == (0, A.SUCCEEDED), (a.get(A.MESSAGE), err[-3000:])
    assert w.inspect(f"ocl/os-image:{second['metadata']['name']}")["Digest"] == NB.digest_of(a) != digest
    assert w.base_blob_gets(mark) == 0


def test_under_containerds_default_seccomp_filter_the_build_fails_and_the_pool_says_why(d, w, tmp_path):
    """A kubelet with `seccompDefault: true` gives a Pod without a profile the runtime's default
    filter (containerd's: moby's profile), which allows unshare(CLONE_NEWUSER) only with
    CAP_SYS_ADMIN (docs/design.md, "The build Pod's seccomp profile")."""
    d.node.restart_kubelet(seccompDefault=True)
    try:
        NB.provide_storage(d.node, tmp_path / "pv", "ocl-build-pod-seccomp")
        d.seed(NB.scenario(w, NB.machineconfig("rendered-worker-1", w.pods_registry)))
        code, err = NB.run(d.node, NB.sa_kubeconfig(d.node, tmp_path / "sa.kubeconfig"))
    finally:
        d.node.restart_kubelet()
    a = d.ann()
    assert (code, a.get(A.STATE)) == (0, A.FAILED), (a.get(A.MESSAGE), err[-3000:])
    # the pool's reason is buildah's error, not the lines it printed after it (`(Unable to determine
    # exit status)`): build-pod.sh says its error line again as the log's last
    assert "unshare(CLONE_NEWUSER): Operation not permitted" in a[A.MESSAGE], a[A.MESSAGE]
