"""What every image builder shares: the values a build object is rendered from, and the reading
of its status as (state, digest, message). A builder is only these two functions."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from reconcile.imagebuild.buildinputs import Mount

#: Where a build Pod mounts its pool's build storage (core/storage/), given to build-pod.sh as
#: BUILD_STORAGE_DIR: buildah's rootless data directory ($XDG_DATA_HOME, its image store under
#: containers/storage), where the MCO's build Pod mounts its storage too
#: (openshift/machine-config-operator pkg/controller/build/buildrequest/buildrequest.go:
#: /home/build/.local/share/containers)
STORAGE_MOUNT = "/home/build/.local/share"


@dataclass(frozen=True)
class BuildContext:
    namespace: str
    pool: str
    rendered_config: str
    name: str
    tag: str
    labels: Mapping[str, str]
    annotations: Mapping[str, str]
    owner: Mapping[str, Any]
    dockerfile_configmap: str
    machineconfig_configmaps: tuple[str, ...]
    pull_secret: str
    push_secret: str
    buildah_image: str
    input_env: tuple[Mapping[str, Any], ...] = ()
    input_mounts: tuple[Mount, ...] = field(default_factory=tuple)
    #: our ConfigMap with the cluster's registries.conf / policy.json (containersconf), and its keys
    containers_configmap: str | None = None
    containers_files: tuple[str, ...] = ()
    #: where the build may run: the pool's architecture (imagebuild/platform/architecture.py); {} = anywhere
    node_selector: Mapping[str, str] = field(default_factory=dict)
    #: a build under emulation (settings emulatedArchitectures): the platform buildah builds for,
    #: `linux/<arch>`, on a node of another architecture; "" for a native build
    platform: str = ""
    #: requests and limits, and the deadline in seconds (settings: the same for both builders)
    resources: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    deadline_seconds: int = 0
    #: the pool's build storage, a PersistentVolumeClaim ("": an emptyDir), and where it is mounted
    storage_claim: str = ""
    storage_mount: str = ""


#: Failures of the infrastructure rather than of the build: worth another attempt.
TRANSIENT_PATTERNS = re.compile(
    r"received unexpected HTTP status: 5\d\d|\b(500|502|503|504) (Internal Server Error|Bad Gateway|"
    r"Service Unavailable|Gateway Timeout)|i/o timeout|TLS handshake timeout|connection reset by peer|"
    r"context deadline exceeded|connection refused|no route to host|unexpected EOF|"
    # containers/image's texts for a registry it cannot reach or that throttles (docs/openshift-build.md)
    r"pinging container registry|dial tcp|no such host|too ?many ?requests", re.IGNORECASE)
#: A step of the Containerfile that failed, or a registry that refused us (credentials, a
#: certificate we do not trust, an image that is not there): deterministic, never retried, even
#: when wrapped in a transient-looking text ("pinging container registry ...: x509: ...").
STEP_FAILED = re.compile(r"building at STEP|error building at step|x509:|certificate signed by unknown "
                         r"authority|unauthorized|authentication required|invalid username/password|denied|"
                         r"manifest unknown", re.IGNORECASE)


def transient_text(text: str) -> bool:
    return bool(TRANSIENT_PATTERNS.search(text or "")) and not STEP_FAILED.search(text or "")


def last_line(text: str) -> str:
    """The last non-empty line of a log or message: what a one-line failure reason keeps."""
    lines = [line.strip() for line in (text or "").splitlines() if line.strip()]
    return lines[-1] if lines else ""


@dataclass(frozen=True)
class BuildStatus:
    state: str            # one of annotations.PENDING, BUILDING, SUCCEEDED, FAILED
    digest: str | None = None
    message: str = ""
    transient: bool = False   # a failure worth another attempt (eviction, lost node, registry 5xx)
    #: the build object is given up on while it may still run (a Build left New past its bound):
    #: it is deleted, so that it never pushes later under a pool that says Failed
    abandon: bool = False


class Builder(Protocol):
    kind: str
    api_version: str
    ENV_BY_REFERENCE: bool       # can the build take env vars from Secret/ConfigMap keys?
    #: does the build need the cluster's registries.conf / policy.json from us (containersconf)?
    CONTAINERS_CONF: bool
    #: mount paths a build input may not take: the paths themselves, and directories under which
    RESERVED_MOUNTS: frozenset[str]
    RESERVED_UNDER: tuple[str, ...]

    def render(self, ctx: BuildContext) -> dict[str, Any]: ...

    def read_status(self, obj: Mapping[str, Any], now: Any = None) -> BuildStatus: ...
