"""Out of disk space, as a build's end says it, told as such with the build's disk figures and the
setting to raise, not as a generic failure:

- the kubelet evicted the build past an ephemeral-storage limit (the container's, the Pod's, or an
  emptyDir's `sizeLimit`): the same build on the same limit is evicted again, so it is never
  retried;
- the kubelet evicted it because the node ran low on disk: another attempt may land on a node
  with room, so it is retried;
- the build's own message says ENOSPC (`no space left on device`; build-pod.sh writes `build
  storage full (...)`): its persistent volume, or the node's disk under its emptyDir, was too small
  for it, and another attempt would fill it again (never retried).

The kubelet's words are its format strings, kubernetes/kubernetes v1.34.2
pkg/kubelet/eviction/helpers.go (containerEphemeralStorageMessageFmt, podEphemeralStorageMessageFmt,
emptyDirMessageFmt, nodeLowMessageFmt), written with status.reason `Evicted` by eviction_manager.go
(containerEphemeralStorageLimitEviction, podEphemeralStorageLimitEviction, emptyDirLimitEviction,
evictionMessage). OpenShift's build controller copies the Pod's message into a Build's, reason
`BuildPodEvicted` (openshift/openshift-controller-manager
pkg/build/controller/build/build_controller.go, handleActiveBuild).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from reconcile.imagebuild import settings

LIMIT = re.compile(r'Container \S+ exceeded its local ephemeral storage limit "[^"]*"\.'
                   r"|Pod ephemeral local storage usage exceeds the total limit of containers \S+\."
                   r'|Usage of EmptyDir volume "[^"]*" exceeds the limit "[^"]*"\.')
NODE_LOW = re.compile(r"The node was low on resource: ephemeral-storage\.")
ENOSPC = re.compile(r"no space left on device", re.IGNORECASE)
_AFTER = f"in ConfigMap {settings.BUILD_CONFIG}, then set a new ocl-reconciler.io/rebuild token on the pool"


@dataclass(frozen=True)
class OutOfDisk:
    """What the failure says first, whether another attempt may pass, and what to change."""
    said: str
    transient: bool
    hint: str

    def describe(self, figures: str = "") -> str:
        return "; ".join(p for p in (self.said, f"disk: {figures}" if figures else "", self.hint) if p)


def diagnose(evicted: bool, message: str, log: str = "", volume: bool = False) -> OutOfDisk | None:
    """`evicted`: the kubelet evicted the build (a Pod's reason Evicted, a Build's BuildPodEvicted)
    with `message`; `log`: the build's own last words; `volume`: its image storage is a
    PersistentVolumeClaim. None when the failure is not about disk space."""
    said = " ".join((message or "").split())
    if evicted and LIMIT.search(said):
        return OutOfDisk(f"out of disk space: evicted by the kubelet: {said}", False,
                         f"raise {settings.EPHEMERAL_LIMIT} {_AFTER}")
    if evicted and NODE_LOW.search(said):
        return OutOfDisk(f"the node ran out of disk space: evicted by the kubelet: {said}", True,
                         f"if it recurs, raise {settings.EPHEMERAL_REQUEST} (the build is placed on a node "
                         "with that much free) or free the nodes' disks")
    if ENOSPC.search(log or ""):
        if volume:
            return OutOfDisk(f"out of disk space: {log}", False,
                             f"raise {settings.STORAGE_SIZE} (a larger volume replaces it) {_AFTER}")
        return OutOfDisk(f"out of disk space: {log}", False,
                         f"the node's disk was full: free it, or raise {settings.EPHEMERAL_REQUEST} (the "
                         f"build is placed on a node with that much free) {_AFTER}")
    return None
