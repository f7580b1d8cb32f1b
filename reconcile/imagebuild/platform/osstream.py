"""The OS stream a pool builds on: the base and extensions images of the stream it names.

A pool names a stream with `spec.osImageStream.name`; the cluster-scoped singleton
`OSImageStream` `cluster` (openshift/api `machineconfiguration/v1/types_osimagestream.go`, CRD
`osimagestreams.machineconfiguration.openshift.io`, feature gate `OSStreams`) lists each stream's
`osImage` and `osExtensionsImage` in `status.availableStreams`. A pool that names none builds on
`status.defaultStream` (openshift/machine-config-operator `pkg/osimagestream/helpers.go`,
`GetOSImageStreamSetByName`: an empty name is the status's default stream), as the render controller
takes it for the pool's rendered config (`pkg/controller/render/render_controller.go`,
`getOSImageStreamForPool`). A custom pool that names none takes worker's first, as the render controller
does (`GetEffectiveOSImageStreamName`, `pkg/controller/common/helpers.go`, and its table test
`TestGetEffectiveOSImageStreamName`: a pool's own name; a pool other than worker and master that
names none inherits the `worker` pool's; "" is the default stream): building it from the default
would make an image of another stream than the one its rendered config is of. Where the cluster
has no such singleton (the API is not served, or the MCO has not filled its status yet), the
images of the ConfigMap `machine-config-osimageurl` stand.

The base never comes from the rendered MachineConfig's `osImageURL`: with `rollout: machineconfig`
that is our own image (the rendered config then carries the annotation
`machineconfiguration.openshift.io/os-image-url-overridden: "true"`), and building on it would
stack each build on the last.

Pure: (the pool, the singleton or None) -> the stream's images, or why there are none."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from reconcile.contract.naming import MASTER, WORKER

KIND = "OSImageStream"
NAME = "cluster"


class Unlisted(ValueError):
    """The pool names a stream this cluster does not offer."""


@dataclass(frozen=True)
class OSStream:
    name: str
    os_image: str
    extensions_image: str


def named_by(pool: Mapping[str, Any]) -> str:
    """The OS stream the pool names (`spec.osImageStream.name`), or ""."""
    chosen = (pool.get("spec") or {}).get("osImageStream")
    return str(chosen.get("name") or "") if isinstance(chosen, Mapping) else ""


def available(singleton: Mapping[str, Any] | None) -> dict[str, Mapping[str, Any]]:
    status = (singleton or {}).get("status")
    items = status.get("availableStreams") if isinstance(status, Mapping) else None
    return {str(s["name"]): s for s in items or [] if isinstance(s, Mapping) and s.get("name")}


def default(singleton: Mapping[str, Any] | None) -> str:
    status = (singleton or {}).get("status")
    return str(status.get("defaultStream") or "") if isinstance(status, Mapping) else ""


#: `GetEffectiveOSImageStreamName`: the pools that never inherit worker's stream
STANDARD_POOLS = (WORKER, MASTER)


def effective(pool: Mapping[str, Any], pools: Iterable[Mapping[str, Any]] = ()) -> tuple[str, str]:
    """(the stream name the render controller takes for the pool, whose it is): the pool's own, else
    for a custom pool worker's ("worker"), else "" (the default stream)."""
    own = named_by(pool)
    name = str((pool.get("metadata") or {}).get("name", ""))
    if own or name in STANDARD_POOLS:
        return own, name if own else ""
    worker = next((p for p in pools if (p.get("metadata") or {}).get("name") == WORKER), None)
    inherited = named_by(worker) if worker is not None else ""
    return inherited, WORKER if inherited else ""


def of_pool(pool: Mapping[str, Any], singleton: Mapping[str, Any] | None,
            pools: Iterable[Mapping[str, Any]] = ()) -> OSStream | None:
    """The images of the stream the pool names, else (a custom pool) of worker's, else of the
    default stream; None when none is named and the cluster lists none (the ConfigMap's images
    stand). `pools`: every pool (worker's stream). Raises Unlisted."""
    chosen, whose = effective(pool, pools)
    wanted = chosen or default(singleton)
    if not wanted:
        return None
    own = whose == (pool.get("metadata") or {}).get("name")
    how = ("names OS stream" if own else f"has no spec.osImageStream and inherits {whose}'s OS stream"
           if whose else "has no spec.osImageStream; the default OS stream is")
    where = f"MachineConfigPool {(pool.get('metadata') or {}).get('name', '')} {how} {wanted!r}" + \
        (" (spec.osImageStream.name)" if own else
         f" (MachineConfigPool {whose} spec.osImageStream.name)" if whose else " (status.defaultStream)")
    if singleton is None:
        raise Unlisted(f"{where}, but this cluster has no {KIND} {NAME!r} "
                       "(machineconfiguration.openshift.io/v1) listing OS streams")
    streams = available(singleton)
    if wanted not in streams:
        offered = ", ".join(sorted(streams)) or "none"
        raise Unlisted(f"{where}, which {KIND} {NAME} does not list (status.availableStreams: {offered})")
    found = streams[wanted]
    if not found.get("osImage"):
        raise Unlisted(f"{where}: {KIND} {NAME} lists it without an osImage")
    return OSStream(wanted, str(found["osImage"]), str(found.get("osExtensionsImage") or ""))
