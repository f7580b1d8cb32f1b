"""The signing Pod (manifests/pod-sign.yaml.j2): cosign signs a pushed digest with each key, in a
Pod of its own, for both builders (an OpenShift Build has no step after its push: postCommit runs
before it, openshift/api build/v1 types.go `BuildPostCommitSpec`). Rendered and read here, pure.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from reconcile.contract import annotations as A
from reconcile.contract import objects
from reconcile.imagebuild import templates
from reconcile.imagebuild.builders.base import BuildStatus, last_line

#: the signing Pod's deadline: cosign signs and pushes one small manifest per key
DEADLINE_SECONDS = 600


def render(*, name: str, namespace: str, labels: Mapping[str, str], annotations: Mapping[str, str],
           owner: Mapping[str, Any], image: str, keys: tuple[str, ...], signer_image: str,
           push_secret: str, recursive: bool = False) -> dict[str, Any]:
    """The Pod that signs `image` (`<repository>@sha256:...`) with the key Secrets `keys`;
    `recursive`: an image index, whose every image is signed too (cosign's `--recursive`)."""
    return templates.render_object("pod-sign.yaml.j2", name=name, namespace=namespace, labels=labels,
                                   annotations=annotations, owner=owner, image=image, keys=list(keys),
                                   signer_image=signer_image, push_secret=push_secret,
                                   recursive=recursive, deadline_seconds=DEADLINE_SECONDS)


def _list(obj: Any, key: str) -> list[Any]:
    value = obj.get(key) if isinstance(obj, Mapping) else None
    return value if isinstance(value, list) else []


def _canon(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def _volume(v: Any) -> dict[str, Any]:
    """A volume's source, without the mode the API server defaults."""
    v = v if isinstance(v, Mapping) else {}
    out: dict[str, Any] = {"name": v.get("name"), "emptyDir": "emptyDir" in v}
    for kind in ("secret", "configMap"):
        if isinstance(v.get(kind), Mapping):
            out[kind] = {k: x for k, x in v[kind].items() if k != "defaultMode"}
    return out


def _shape(pod: Mapping[str, Any]) -> str:
    """What the Pod runs, with what, as whom: each container's image, command, args, env and mounts,
    the volumes' sources and the ServiceAccount (what the API server and admission leave as the
    template made them)."""
    spec = pod.get("spec")
    account = spec.get("serviceAccountName") if isinstance(spec, Mapping) else None
    return _canon({part: [{"name": c.get("name"), "image": c.get("image"), "command": c.get("command"),
                           "args": c.get("args"), "env": c.get("env"),
                           "mounts": sorted(_canon(m) for m in _list(c, "volumeMounts"))}
                          for c in _list(spec, part) if isinstance(c, Mapping)]
                   for part in ("initContainers", "containers")}
                  | {"volumes": sorted(_canon(_volume(v)) for v in _list(spec, "volumes")),
                     "serviceAccountName": account})


def made_as(pod: Mapping[str, Any], want: Mapping[str, Any]) -> bool:
    """Does `pod` (found under the signing Pod's name and our labels) run what `want` (this run's
    render) runs? Anyone who may create Pods here can make one of that name first, or in its place,
    that exits 0 without signing: its success says nothing."""
    return _shape(pod) == _shape(want)


def _statuses(pod: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    status = pod.get("status") or {}
    return [*(status.get("initContainerStatuses") or []), *(status.get("containerStatuses") or [])]


def read_status(pod: Mapping[str, Any]) -> BuildStatus:
    """Succeeded: every key signed. Failed: the first container that failed, with cosign's last
    line (its termination message) or the Pod's reason. Otherwise Pending or Building, with the
    reason a container waits for its image."""
    status = pod.get("status") or {}
    phase = status.get("phase") or "Pending"
    where = objects.ref(pod)
    if phase == "Succeeded":
        return BuildStatus(A.SUCCEEDED)
    if phase == "Failed":
        for c in _statuses(pod):
            term = (c.get("state") or {}).get("terminated") or {}
            if term and term.get("exitCode") != 0:
                reason = last_line(term.get("message", "")) or term.get("reason") or "no reason given"
                return BuildStatus(A.FAILED, message=A.one_line(     # cosign's cause ends its line
                    f"signing failed: {where} container {c.get('name')} (exit code {term.get('exitCode')}): "
                    f"{reason}", keep_end=True))
        reason = ": ".join(p for p in (status.get("reason"), status.get("message")) if p) or "no reason given"
        return BuildStatus(A.FAILED, message=A.one_line(f"signing failed: {where}: {reason}"))
    for c in _statuses(pod):
        waiting = (c.get("state") or {}).get("waiting") or {}
        if waiting.get("reason") in ("ImagePullBackOff", "ErrImagePull", "CreateContainerConfigError"):
            return BuildStatus(A.PENDING, message=A.one_line(
                f"signing {where} waits: {waiting['reason']}: {waiting.get('message', '')} (settings "
                "imageSignerImage, imageSigningKeySecretName)"))
    return BuildStatus(A.BUILDING if phase == "Running" else A.PENDING)
