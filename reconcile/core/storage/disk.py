"""A build's disk: its container's ephemeral-storage request and limit, and the size of its
persistent build storage, from the peak that bench/build_cost.py measured
(manifests/build-disk.yaml: per filesystem, storage driver and mode, as a multiple of the base's
unpacked size) for the base image in use. A key that on-cluster-build-config sets wins; without
the base's size (the registry could not be asked, or a snapshot run) the settings' defaults
apply. Either way the build object records where its figures came from (ocl-reconciler.io/disk),
so that a build that runs out of space says so with them (imagebuild/builders/outofdisk.py).

Which rows of the table:
- the driver the Pod names (STORAGE_DRIVER); `auto` (overlay where buildah can mount it, else
  vfs: manifests/build-pod.sh) sizes the request and the volume for overlay and the limit for the
  larger of the two, so that a build that falls back is not evicted by its own limit;
- an emptyDir is on the node's disk: on RHCOS an xfs with reflink (coreos-assembler
  src/create_disk.sh: `mkfs.xfs -m reflink=1`), so the `xfs` rows; a volume's filesystem is its
  StorageClass's, not known here, so the largest over the filesystems;
- the mode: `today` for an emptyDir, `kept` for persistent storage; a build on persistent storage
  keeps its images on the volume, so its ephemeral-storage (context, logs, blobs staged in
  TMPDIR) is not what the table measures: the settings' defaults.

Pure: the base's size is read by the shell (cluster/registry.py, one GET of its manifest)."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from reconcile.imagebuild import settings, templates
from reconcile.imagebuild.settings import Settings

TABLE = "build-disk.yaml"
_GIB = 1 << 30
#: The table's factors are of the unpacked size; a registry gives the compressed one. Fedora
#: CoreOS: 695.5 MB in 51 layers (coreos/rpm-ostree#4012, `oc image info`) for about 1.34 GB of
#: package content (coreos/rpm-ostree#3478, `rpm size: 1342680460`), about 1.9x. An estimate
#: from upstream figures, not measured here.
UNPACKED_PER_COMPRESSED = 2.0
#: The limit over the peak the request covers; the volume over its peak (the next base is pulled
#: before the build prunes the last one: two bases for a while).
LIMIT_MARGIN = 2
VOLUME_MARGIN = 2
#: An emptyDir's filesystem (above), and the driver `auto` prefers.
NODE_FILESYSTEM, AUTO = "xfs", "overlay"
MODES = {settings.STORAGE_EMPTYDIR: "today", settings.STORAGE_PERSISTENT: "kept"}


@dataclass(frozen=True)
class BaseSize:
    """The base image's compressed size in bytes (the sum of its manifest's layers), or why it
    is not known."""
    image: str
    compressed: int | None = None
    why: str = ""


@dataclass(frozen=True)
class Disk:
    """Quantities (`20Gi`); `volume` "" without persistent storage. `known`: the volume's size
    follows the base in use or a setting (not a default a failed read fell back to), so that it
    may replace a smaller volume. `figures`: one line saying where each came from."""
    request: str
    limit: str
    volume: str = ""
    known: bool = False
    figures: str = ""


def _gib(size: float) -> int:
    return max(1, math.ceil(size / _GIB - 1e-9))


def factor(filesystems: Iterable[str] | None, drivers: Iterable[str], mode: str) -> float:
    """The largest `peak` of these rows (`filesystems` None: all of them)."""
    table = templates.table(TABLE)["filesystems"]
    names = [f for f in (filesystems or table) if f in table] or list(table)
    return max(table[f]["factors"][d][mode]["peak"] for f in names for d in drivers
               if d in table[f]["factors"])


def _drivers(driver: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(the drivers the request is sized for, those the limit covers)."""
    known = {d for entry in templates.table(TABLE)["filesystems"].values() for d in entry["factors"]}
    if driver in known:
        return (driver,), (driver,)
    return (AUTO,), tuple(sorted(known))


def _derived(found: Settings, base: BaseSize | None, storage: str, driver: str) -> tuple[dict[str, str], str]:
    """The request, limit and volume the figures give for this base (the defaults without its
    size), and how they were found."""
    res = found.build_resources
    defaults = {"request": res["requests"]["ephemeral-storage"], "limit": res["limits"]["ephemeral-storage"],
                "volume": res["limits"]["ephemeral-storage"]}
    size = base.compressed if base is not None else None
    if not size:
        why = f" (the base image's size is unknown: {base.why})" if base is not None and base.why else ""
        return defaults, f"the defaults{why}"
    unpacked = size * UNPACKED_PER_COMPRESSED
    sized, covered = _drivers(driver)
    seen = (f"the base's {size} bytes compressed, about {unpacked / _GIB:.2f} GiB unpacked "
            f"(x {UNPACKED_PER_COMPRESSED:g})")
    if storage == settings.STORAGE_PERSISTENT:
        peak = factor(None, sized, MODES[storage])
        return (dict(defaults, volume=f"{_gib(peak * unpacked * VOLUME_MARGIN)}Gi"),
                f"volume: {seen} x {peak:g} ({'/'.join(sized)}, the largest filesystem) x {VOLUME_MARGIN}; "
                "request and limit: the defaults (the images are on the volume)")
    peak = factor([NODE_FILESYSTEM], sized, MODES[storage])
    worst = factor([NODE_FILESYSTEM], covered, MODES[storage])
    request = _gib(peak * unpacked)
    return ({"request": f"{request}Gi", "limit": f"{max(request, _gib(worst * unpacked)) * LIMIT_MARGIN}Gi",
             "volume": ""},
            f"{seen} x {peak:g} ({'/'.join(sized)} on the node's {NODE_FILESYSTEM}), limit x {worst:g} "
            f"({'/'.join(covered)}) x {LIMIT_MARGIN}")


def plan(found: Settings, base: BaseSize | None, storage: str, driver: str) -> Disk:
    """The disk of a build whose image storage is `storage` (a `buildStorage` value), kept with
    this storage driver (the Pod's STORAGE_DRIVER; "" for an OpenShift Build's, which its builder
    chooses). A key set in the settings wins; a derived limit is never below a request that is
    set (nor a derived request above a limit that is set)."""
    values, how = _derived(found, base, storage, driver)
    res, chosen = found.build_resources, []
    for part, key in (("request", settings.EPHEMERAL_REQUEST), ("limit", settings.EPHEMERAL_LIMIT)):
        if key in found.explicit:
            values[part] = res["requests" if part == "request" else "limits"]["ephemeral-storage"]
            chosen.append(key)
    if settings.amount(values["request"]) > settings.amount(values["limit"]):    # one set, one derived
        values["limit" if settings.EPHEMERAL_REQUEST in chosen else "request"] = \
            values["request" if settings.EPHEMERAL_REQUEST in chosen else "limit"]
    persistent = storage == settings.STORAGE_PERSISTENT
    if persistent and found.storage_size:
        values["volume"] = found.storage_size
        chosen.append(settings.STORAGE_SIZE)
    volume = values["volume"] if persistent else ""
    figures = (f"request {values['request']}, limit {values['limit']}"
               + (f", volume {volume}" if volume else "")
               + ": " + "; ".join([f"{', '.join(chosen)} set"] * bool(chosen) + [how]))
    known = bool(found.storage_size) or bool(base is not None and base.compressed)
    return Disk(values["request"], values["limit"], volume, known, figures)


def resources(found: Settings, disk: Disk) -> dict[str, dict[str, str]]:
    """The build's requests and limits: CPU and memory from the settings, disk from `disk`."""
    out = {kind: dict(values) for kind, values in found.build_resources.items()}
    for kind, value in (("requests", disk.request), ("limits", disk.limit)):
        if value:                   # "": a build object made without one keeps the settings'
            out[kind]["ephemeral-storage"] = value
    return out
