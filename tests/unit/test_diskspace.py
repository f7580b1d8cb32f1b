"""A build that runs out of disk space says so: the kubelet's evictions past an ephemeral-storage
limit, of a node low on disk, and ENOSPC in the build's message, for both builders.

The kubelet's messages are its format strings (kubernetes/kubernetes v1.34.2
pkg/kubelet/eviction/helpers.go) filled as its eviction manager fills them (eviction_manager.go:
emptyDirLimitEviction, podEphemeralStorageLimitEviction, containerEphemeralStorageLimitEviction
with a Quantity's String(), evictionMessage for a node low on a resource); the Pod then reads
phase Failed, reason Evicted, and its container `terminated` with exit code 137 and reason Error
(as a real kind cluster reported one). OpenShift's build controller copies the Pod's message into
a Build's, reason BuildPodEvicted (openshift/openshift-controller-manager
pkg/build/controller/build/build_controller.go, handleActiveBuild)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from reconcile.contract import annotations as A
from reconcile.imagebuild.builders import build, pod

#: helpers.go's constants, quoted (v1.34.2, lines 46-58)
FORMATS = {"nodeLowMessageFmt": "The node was low on resource: %v. ",
           "containerMessageFmt": "Container %s was using %s, request is %s, has larger consumption of %v. ",
           "containerEphemeralStorageMessageFmt": "Container %s exceeded its local ephemeral storage limit %q. ",
           "podEphemeralStorageMessageFmt": "Pod ephemeral local storage usage exceeds the total limit of containers %s. ",
           "emptyDirMessageFmt": "Usage of EmptyDir volume %q exceeds the limit %q. ",
           "thresholdMetMessageFmt": "Threshold quantity: %v, available: %v. "}


def go(fmt: str, *args: str) -> str:
    """Go's fmt for %s, %v and %q of plain strings."""
    values = iter(args)
    return re.sub(r"%[svq]", lambda m: f'"{next(values)}"' if m.group() == "%q" else next(values), fmt)


POD_LIMIT = go(FORMATS["podEphemeralStorageMessageFmt"], "80Gi")
CONTAINER_LIMIT = go(FORMATS["containerEphemeralStorageMessageFmt"], "image-build", "80Gi")
EMPTYDIR_LIMIT = go(FORMATS["emptyDirMessageFmt"], "home", "80Gi")
NODE_LOW = (go(FORMATS["nodeLowMessageFmt"], "ephemeral-storage")
            + go(FORMATS["thresholdMetMessageFmt"], "10%", "4Gi")
            + go(FORMATS["containerMessageFmt"], "image-build", "31Gi", "20Gi", "ephemeral-storage"))
MEMORY_LOW = go(FORMATS["nodeLowMessageFmt"], "memory")
ENOSPC = ("Error: committing container for step {...}: copying layers and metadata for container "
          '"3f1c": writing blob: storing blob to file "/var/tmp/storage123/1": write /var/tmp/storage123/1: '
          "no space left on device")


def upstream_helpers() -> Path | None:
    root = os.environ.get("GOMODCACHE") or str(Path.home() / "go" / "pkg" / "mod")
    path = Path(root) / "k8s.io" / "kubernetes@v1.34.2" / "pkg" / "kubelet" / "eviction" / "helpers.go"
    return path if path.is_file() else None


def test_the_quoted_formats_are_the_kubelets():
    path = upstream_helpers()
    if path is None:
        pytest.skip("k8s.io/kubernetes@v1.34.2 is not in the Go module cache (make realapi fetches it)")
    source = path.read_text()
    for name, text in FORMATS.items():
        assert f'\t{name} = "{text}"' in source, name


def evicted_pod(message: str, volume: str = "emptyDir", disk: str = "") -> dict:
    volumes = [{"name": "home", "emptyDir": {"sizeLimit": "80Gi"}}]
    if volume == "pvc":
        volumes.append({"name": "storage", "persistentVolumeClaim": {"claimName": "ocl-storage-worker-1"}})
    return {"kind": "Pod", "metadata": {"name": "b", "namespace": "ns",
                                        "annotations": {A.DISK: disk} if disk else {}},
            "spec": {"volumes": volumes},
            "status": {"phase": "Failed", "reason": "Evicted", "message": message, "containerStatuses": [
                {"name": "image-build", "state": {"terminated": {"exitCode": 137, "reason": "Error"}}}]}}


def failed_pod(log: str, volume: str = "emptyDir") -> dict:
    obj = evicted_pod("", volume)
    obj["status"] = {"phase": "Failed", "containerStatuses": [{"name": "image-build", "state": {
        "terminated": {"exitCode": 1, "reason": "Error", "message": log}}}]}
    return obj


@pytest.mark.parametrize("message", [POD_LIMIT, CONTAINER_LIMIT, EMPTYDIR_LIMIT])
def test_an_eviction_past_the_limit_is_out_of_disk_space_and_not_retried(message):
    disk = "request 20Gi, limit 80Gi: the defaults"
    got = pod.read_status(evicted_pod(message, disk=disk))
    assert got.state == A.FAILED and got.transient is False
    assert got.message.startswith("build Pod/ns/b failed: out of disk space: evicted by the kubelet: ")
    assert message.strip() in got.message and "80Gi" in got.message
    assert f"disk: {disk}" in got.message
    assert "raise buildEphemeralStorageLimit in ConfigMap on-cluster-build-config" in got.message
    assert "Error" not in got.message.split(": ", 1)[1].split(";")[0]     # not the container's generic reason


def test_a_node_low_on_disk_is_said_and_retried():
    got = pod.read_status(evicted_pod(NODE_LOW))
    assert got.state == A.FAILED and got.transient is True
    assert got.message.startswith("build Pod/ns/b failed: the node ran out of disk space: evicted by the kubelet: "
                                  "The node was low on resource: ephemeral-storage.")
    assert "buildEphemeralStorageRequest" in got.message


def test_an_eviction_for_memory_is_still_a_transient_eviction_with_the_kubelets_words():
    got = pod.read_status(evicted_pod(MEMORY_LOW))
    assert got.transient is True and "disk" not in got.message
    assert got.message == f"build Pod/ns/b failed: Evicted: {MEMORY_LOW.strip()}"


def test_enospc_on_the_build_volume_names_its_size_setting_and_is_not_retried():
    got = pod.read_status(failed_pod(ENOSPC, volume="pvc"))
    assert got.state == A.FAILED and got.transient is False
    assert got.message.startswith("build Pod/ns/b failed (exit code 1): out of disk space: ")
    assert "no space left on device" in got.message and "raise buildStorageSize" in got.message


def test_enospc_on_the_nodes_disk_is_not_retried_either():
    """A disk too small for the build fills again (tests/realbuild/test_buildstorage.py: a tmpfs
    under $HOME)."""
    got = pod.read_status(failed_pod(ENOSPC))
    assert got.transient is False and "out of disk space" in got.message
    assert "raise buildEphemeralStorageRequest" in got.message


@pytest.mark.parametrize("message", [POD_LIMIT, EMPTYDIR_LIMIT])
def test_a_builds_pod_evicted_past_its_limit_is_out_of_disk_space_too(message):
    obj = {"kind": "Build", "metadata": {"name": "b", "namespace": "ns"},
           "status": {"phase": "Failed", "reason": "BuildPodEvicted", "message": message}}
    got = build.read_status(obj)
    assert got.state == A.FAILED and got.transient is False
    assert got.message.startswith("build Build/ns/b failed: out of disk space: evicted by the kubelet: ")
    assert "raise buildEphemeralStorageLimit" in got.message


def test_a_builds_pod_evicted_for_memory_is_still_retried():
    obj = {"kind": "Build", "metadata": {"name": "b", "namespace": "ns"},
           "status": {"phase": "Failed", "reason": "BuildPodEvicted", "message": MEMORY_LOW}}
    assert build.read_status(obj).transient is True
