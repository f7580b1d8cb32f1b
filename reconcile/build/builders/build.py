"""openshift-image-builder: a build.openshift.io/v1 Build with the Docker strategy."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from reconcile.build import imageref, templates
from reconcile.build.builders.base import BuildContext, BuildStatus, last_line, transient_text
from reconcile.contract import annotations as A
from reconcile.contract import objects

kind = "Build"
api_version = "build.openshift.io/v1"
#: dockerStrategy.buildArgs use `name` and `value` only; `valueFrom` is ignored
#: (openshift/openshift-docs modules/builds-strategy-docker-build-arguments.adoc)
ENV_BY_REFERENCE = False
#: OpenShift's build controller mounts the cluster's registries.conf and policy.json itself
#: (openshift/openshift-controller-manager pkg/build/controller/strategy/util.go, setupContainersConfigs)
CONTAINERS_CONF = False
_STATES = {"New": A.PENDING, "Pending": A.PENDING, "Running": A.BUILDING}
_FAILED = ("Failed", "Error", "Cancelled")
#: openshift/api BuildStatusReason values that say the infrastructure failed, not the build.
TRANSIENT_REASONS = {"BuildPodEvicted", "BuildPodDeleted", "PushImageToRegistryFailed",
                     "PullBuilderImageFailed", "CannotCreateBuildPod", "BuildPodExists",
                     "NoBuildContainerStatus", "FailedContainer", "ExceededRetryTimeout"}


def render(ctx: BuildContext) -> dict[str, Any]:
    return templates.render_object("build-openshift.yaml.j2", **vars(ctx))


def read_status(build: Mapping[str, Any]) -> BuildStatus:
    status = build.get("status") or {}
    phase = status.get("phase") or "New"
    where = objects.ref(build)
    if phase in _STATES:
        return BuildStatus(_STATES[phase])
    if phase == "Complete":
        digest = ((status.get("output") or {}).get("to") or {}).get("imageDigest") or ""
        if imageref.SHA256_DIGEST.match(digest):
            return BuildStatus(A.SUCCEEDED, digest=digest)
        return BuildStatus(A.FAILED, message=f"build {where} completed without a sha256 digest "
                                             "in status.output.to.imageDigest")
    if phase in _FAILED:
        parts = [p.rstrip(".") for p in (status.get("reason"), status.get("message"),
                                         last_line(status.get("logSnippet", ""))) if p]
        detail = ": ".join(parts) or "no reason given"
        transient = phase != "Cancelled" and (status.get("reason") in TRANSIENT_REASONS
                                              or transient_text(status.get("logSnippet", "")))
        return BuildStatus(A.FAILED, message=A.one_line(f"build {where} {phase.lower()}: {detail}"),
                           transient=transient)
    return BuildStatus(A.PENDING)
