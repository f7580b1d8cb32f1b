"""custom-pod-builder: a bare Pod that runs buildah, the digest returned as the termination message."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from reconcile.contract import annotations as A
from reconcile.contract import objects
from reconcile.imagebuild import imageref, templates
from reconcile.imagebuild.builders import outofdisk
from reconcile.imagebuild.builders.base import BuildContext, BuildStatus, last_line, transient_text

kind = "Pod"
api_version = "v1"
#: env vars may come from Secret and ConfigMap keys (valueFrom): a container's env takes them
ENV_BY_REFERENCE = True
#: buildah in our Pod knows the cluster's mirrors and policy only from us
CONTAINERS_CONF = True
#: the Pod is ours: its own paths are refused when inputs are found (builders.reserved)
RESERVED_MOUNTS: frozenset[str] = frozenset()
RESERVED_UNDER: tuple[str, ...] = ()
CONTAINER = "image-build"


def render(ctx: BuildContext) -> dict[str, Any]:
    return templates.render_object(
        "pod-buildah.yaml.j2", script=templates.source("build-pod.sh"), **vars(ctx))


def _terminated(pod: Mapping[str, Any]) -> Mapping[str, Any]:
    for status in (pod.get("status") or {}).get("containerStatuses") or []:
        if status.get("name") == CONTAINER:
            return (status.get("state") or {}).get("terminated") or {}
    return {}


def read_status(pod: Mapping[str, Any], now: Any = None) -> BuildStatus:
    """The Pod's state (`now` is not needed: the kubelet reports every end itself)."""
    status = pod.get("status") or {}
    phase = status.get("phase") or "Pending"
    where = objects.ref(pod)
    if phase == "Running":
        return BuildStatus(A.BUILDING)
    if phase == "Succeeded":
        digest = (_terminated(pod).get("message") or "").strip()
        if imageref.SHA256_DIGEST.match(digest):
            return BuildStatus(A.SUCCEEDED, digest=digest)
        return BuildStatus(A.FAILED, message=f"build {where} succeeded without a sha256 digest "
                                             "in its termination message")
    if phase == "Failed" and objects.meta(pod).get("deletionTimestamp"):
        # deleted by someone (we delete only builds we no longer read): the kubelet killed its
        # container and reports it before the Pod is gone. It counts until it is gone (it may
        # still mount the build storage volume), then RETRY, as for a Pod deleted at once
        return BuildStatus(A.BUILDING)
    if phase == "Failed":
        term = _terminated(pod)
        lost = status.get("reason") in LOST
        pod_reason = ": ".join(p for p in (status.get("reason"), status.get("message")) if p)
        log = last_line(term.get("message", ""))
        disk = outofdisk.diagnose(status.get("reason") == "Evicted", status.get("message", ""), log,
                                  _claims(pod))
        if disk is not None:
            code = "" if status.get("reason") == "Evicted" else _code(term)
            return BuildStatus(A.FAILED, transient=disk.transient, message=A.one_line(
                f"build {where} failed{code}: {disk.describe(objects.annotations(pod).get(A.DISK, ''))}"))
        # the kubelet kills an evicted (lost) Pod's container: its `Error` says less than the Pod's reason
        reason = (pod_reason if lost else "") or log or term.get("reason") or pod_reason or "no reason given"
        transient = lost or transient_text(term.get("message", ""))
        code = "" if lost else _code(term)
        return BuildStatus(A.FAILED, message=A.one_line(f"build {where} failed{code}: {reason}"),
                           transient=transient)
    waiting = _waiting(pod)
    if waiting.get("reason") in PULL_BACK_OFF:
        return BuildStatus(A.FAILED, transient=True, message=A.one_line(
            f"build {where}: {waiting['reason']} on the builder image: {waiting.get('message', '')}"))
    unscheduled = _unscheduled(pod)
    if unscheduled:             # said while it waits (core/actions/buildrows.py `progress`)
        volume = f"; {VOLUME_HINT}" if _claims(pod) and VOLUME_REASONS.search(unscheduled) else ""
        return BuildStatus(A.PENDING, message=A.one_line(f"build {where} is Pending: not scheduled: "
                                                         f"{unscheduled}{volume}", 1024))
    return BuildStatus(A.PENDING)


#: What the scheduler writes on a Pod it cannot place: the PodScheduled condition, status False,
#: with its reason (Unschedulable) and message (kubernetes/kubernetes v1.34.2
#: pkg/scheduler/schedule_one.go, handleSchedulingFailure); the volume binding plugin's reasons
#: (pkg/scheduler/framework/plugins/volumebinding/volume_binding.go and binder.go).
VOLUME_REASONS = re.compile(r"unbound immediate PersistentVolumeClaims|persistent volumes to bind|"
                            r"PersistentVolume's node affinity|enough free storage|non-existent pv|"
                            r"persistentvolumeclaim", re.IGNORECASE)
VOLUME_HINT = ("the pool's build storage volume cannot be bound or reached from a node of the pool "
               "(docs/admin.md, \"Upgrading the reconciler\", step 7); or set buildStorage: emptyDir")


def _unscheduled(pod: Mapping[str, Any]) -> str:
    for cond in (pod.get("status") or {}).get("conditions") or []:
        if isinstance(cond, Mapping) and cond.get("type") == "PodScheduled" and cond.get("status") == "False":
            return ": ".join(str(p).rstrip(".") for p in (cond.get("reason"), cond.get("message")) if p) or \
                "no reason given"
    return ""


def _code(term: Mapping[str, Any]) -> str:
    return f" (exit code {term['exitCode']})" if term.get("exitCode") is not None else ""


def _claims(pod: Mapping[str, Any]) -> bool:
    """Does the Pod keep its image storage on a PersistentVolumeClaim?"""
    return any("persistentVolumeClaim" in v for v in objects.volumes(pod))


#: Pod status reasons that mean the node or the kubelet lost the Pod, not that the build failed.
LOST = {"Evicted", "NodeLost", "Shutdown", "NodeShutdown", "Terminated", "UnexpectedAdmissionError",
        "Preempting", "DeadlineExceeded"}
PULL_BACK_OFF = {"ImagePullBackOff", "ErrImagePull"}


def _waiting(pod: Mapping[str, Any]) -> Mapping[str, Any]:
    for status in (pod.get("status") or {}).get("containerStatuses") or []:
        if status.get("name") == CONTAINER:
            return (status.get("state") or {}).get("waiting") or {}
    return {}
