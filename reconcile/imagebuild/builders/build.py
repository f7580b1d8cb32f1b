"""openshift-image-builder: a build.openshift.io/v1 Build with the Docker strategy."""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from reconcile.contract import annotations as A
from reconcile.contract import objects
from reconcile.imagebuild import imageref, templates
from reconcile.imagebuild.builders import outofdisk
from reconcile.imagebuild.builders.base import BuildContext, BuildStatus, last_line, transient_text

kind = "Build"
api_version = "build.openshift.io/v1"
#: dockerStrategy.buildArgs use `name` and `value` only; `valueFrom` is ignored
#: (openshift/openshift-docs modules/builds-strategy-docker-build-arguments.adoc)
ENV_BY_REFERENCE = False
#: OpenShift's build controller mounts the cluster's registries.conf and policy.json itself
#: (openshift/openshift-controller-manager pkg/build/controller/strategy/util.go, setupContainersConfigs)
CONTAINERS_CONF = False
#: Mount paths OpenShift's build controller gives its build Pod itself; a build volume at one of them
#: leaves the Build New with CannotCreateBuildPodSpec ("collides with VolumeMount path created by the
#: build controller", openshift/openshift-controller-manager pkg/build/controller/strategy/util.go,
#: setupBuildVolumes, and strategy/docker.go). Under RESERVED_UNDER each Secret and ConfigMap of the
#: build gets a directory of its own; the builder's transient mounts are refused in RUN steps
#: ("duplicate transient mount destination", openshift/builder transient_mounts.go).
RESERVED_MOUNTS = frozenset({
    "/var/lib/kubelet/config.json", "/tmp/build", "/var/lib/containers", "/var/lib/containers/cache",
    "/var/run/containers", "/var/cache/blobs", "/run/secrets/rhsm", "/run/secrets/etc-pki-entitlement",
    "/run/secrets/redhat.repo", "/etc/pki/ca-trust"})
RESERVED_UNDER = ("/var/run/secrets/openshift.io/", "/var/run/configs/openshift.io/")
_STATES = {"New": A.PENDING, "Pending": A.PENDING, "Running": A.BUILDING}
_FAILED = ("Failed", "Error", "Cancelled")
#: How long a Build may stay New (or Pending) with a reason before the pool stops waiting for it:
#: the controller leaves it so and looks again only on its informer's resync, every 10 minutes
#: (openshift/openshift-controller-manager pkg/cmd/controller/interfaces.go,
#: defaultInformerResyncPeriod), so three resyncs.
NEW_BOUND_SECONDS = 1800


@functools.cache
def reasons() -> dict[str, dict[str, str]]:
    """status.reason -> {retry: always|never|log, hint} (manifests/build-reasons.yaml)."""
    return templates.table("build-reasons.yaml")["reasons"]


@functools.cache
def _messages() -> tuple[tuple[re.Pattern[str], dict[str, str]], ...]:
    return tuple((re.compile(m["pattern"], re.IGNORECASE), m)
                 for m in templates.table("build-reasons.yaml").get("messages") or [])


def policy(status: Mapping[str, Any]) -> dict[str, str]:
    """The table's row for this status: a message that says more than its reason first."""
    message = str(status.get("message") or "")
    for pattern, row in _messages():
        if pattern.search(message):
            return row
    return reasons().get(status.get("reason") or "") or {}


def transient(status: Mapping[str, Any], log: str) -> bool:
    """Is a failure with this status (and log snippet) worth another attempt?"""
    retry = policy(status).get("retry", "log")
    return retry == "always" or (retry == "log" and transient_text(log))


def render(ctx: BuildContext) -> dict[str, Any]:
    return templates.render_object("build-openshift.yaml.j2", **vars(ctx))


def _detail(status: Mapping[str, Any]) -> str:
    """`reason: message: last log line`, and the table's hint for the reason."""
    reason = status.get("reason")
    parts = [p.rstrip(".") for p in (reason, status.get("message"), last_line(status.get("logSnippet", "")))
             if p]
    hint = policy(status).get("hint")
    return "; ".join(x for x in (": ".join(parts) or "no reason given", hint) if x)


def _age(build: Mapping[str, Any], now: datetime | None) -> float | None:
    created = objects.meta(build).get("creationTimestamp")
    if now is None or not created:
        return None
    try:
        then = datetime.strptime(created, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    except ValueError:
        return None
    return (now - then).total_seconds()


def read_status(build: Mapping[str, Any], now: datetime | None = None) -> BuildStatus:
    """The Build's state. New or Pending with a reason is shown with it (there is no Pod yet to
    describe); past NEW_BOUND_SECONDS such a Build is Failed (transient where the reason is one
    another attempt can cure). `now`: the run's clock (None: no bound)."""
    status = build.get("status") or {}
    phase = status.get("phase") or "New"
    where = objects.ref(build)
    if phase in _STATES:
        if phase == "Running" or not (status.get("reason") or status.get("message")):
            return BuildStatus(_STATES[phase])
        age = _age(build, now)
        if age is not None and age > NEW_BOUND_SECONDS:
            return BuildStatus(A.FAILED, transient=transient(status, ""), abandon=True, message=A.one_line(
                f"build {where} stayed {phase} for more than {NEW_BOUND_SECONDS // 60} minutes after it "
                f"was created: {_detail(status)}"))
        return BuildStatus(A.PENDING, message=A.one_line(f"build {where} is {phase}: {_detail(status)}"))
    if phase == "Complete":
        digest = ((status.get("output") or {}).get("to") or {}).get("imageDigest") or ""
        if imageref.SHA256_DIGEST.match(digest):
            return BuildStatus(A.SUCCEEDED, digest=digest)
        return BuildStatus(A.FAILED, message=f"build {where} completed without a sha256 digest "
                                             "in status.output.to.imageDigest")
    disk = outofdisk.diagnose(status.get("reason") == "BuildPodEvicted", status.get("message", ""),
                              last_line(status.get("logSnippet", ""))) if phase in _FAILED else None
    if disk is not None:
        return BuildStatus(A.FAILED, transient=disk.transient and phase != "Cancelled", message=A.one_line(
            f"build {where} {phase.lower()}: {disk.describe(objects.annotations(build).get(A.DISK, ''))}"))
    if phase in _FAILED:
        return BuildStatus(A.FAILED, message=A.one_line(f"build {where} {phase.lower()}: {_detail(status)}"),
                           transient=phase != "Cancelled" and transient(status, status.get("logSnippet", "")))
    return BuildStatus(A.PENDING)
