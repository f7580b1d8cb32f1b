"""Build storage, one concept in one place: where a build keeps its images and how much disk it
gets. Its parts:

- here: the pool's persistent build volume (`buildStorage: persistent`): which one, when a build
  Pod mounts it, what is deleted (below);
- `disk`: the figures: a build's ephemeral-storage request and limit and its volume's size, from
  the base image's size (manifests/build-disk.yaml);
- a build that ran out of space is told as such by the builders, with those figures:
  imagebuild/builders/outofdisk.py (below the state machine, as the builders read it);
- the settings keys (`buildStorage`, `storageClassName`, the sizes): imagebuild/settings.py; the
  shell's reads: cluster/observe.py (the StorageClasses), cluster/registry.py (the base's size).

The volume. A pool's build storage (`buildStorage: persistent`, the buildah Pod's default): one
PersistentVolumeClaim per pool that outlives the build Pod, mounted where buildah keeps its images,
so that a rebuild reuses the base image an earlier build pulled.

Per pool, not shared between pools: pools build at once (an upgrade re-renders every pool), and one
volume for several would make the others wait or go without it; a pool's volume holds its own
base and layers only, and goes with the pool. A mixed pool (core/multiarch.py) has one per
architecture: its builds run at once on nodes of different architectures, and each stores that
architecture's base. Its name hashes the architecture too, the volume says it
(`ocl-reconciler.io/arch`), and the pool records each one: `<arch>=PersistentVolumeClaim/<name>`
entries separated by spaces (`<arch>=emptyDir` for a build without one).

**One build at a time.** ReadWriteOnce is per node: two Pods on one node can both mount it. So a
new build Pod mounts it only when none of our Pods that mount it may still run (phase neither
Succeeded nor Failed; one being deleted counts until it is gone): runs are serialised by the Lease
and only runs create build Pods, so none appears between this run's LIST and its create. Otherwise
(a build interrupted by new inputs whose Pod is still stopping) the new build gets an emptyDir,
saying so.

**Which volume.** Its name, `ocl-storage-<pool>-<hash>`, hashes what makes a volume fit: its
StorageClass, its size and the builder image (a store another buildah wrote, perhaps under other
subordinate ids, is not reused). A live one of the same class and builder image, at least as
large as wanted (of any size when the base's size is unknown: a failed read never throws the
cache away), is kept; else a new one is made before the build Pod. The pool records the one its
build uses (`ocl-reconciler.io/build-storage`); every other of the pool's volumes no Pod of ours
mounts is deleted after the state is recorded. Deleting one a Pod still mounts is safe: the
pvc-protection finalizer keeps it until that Pod is gone (kubernetes/kubernetes v1.34.2
pkg/controller/volume/pvcprotection/pvc_protection_controller.go). One being deleted is never
mounted (the scheduler refuses it, "persistentvolumeclaim ... is being deleted":
pkg/scheduler/framework/plugins/volumebinding/volume_binding.go) nor deleted again.

**Only volumes we made.** A volume's images are what the next build takes as its base (found by
digest, never pulled again), so a labelled one is mounted, kept or adopted only when it is one
this reconciler made for this pool: an ownerReference to the pool's uid, ReadWriteOnce, a
filesystem, no `dataSource` or `dataSourceRef` (a copy of another volume) nor `selector` (one
that picks a volume that exists), and a `spec.volumeName` only where the PV controller chose it
(it marks the claim `pv.kubernetes.io/bound-by-controller`: kubernetes/kubernetes v1.34.2
pkg/controller/volume/persistentvolume/pv_controller.go, bindClaimToVolume). Another is left
alone, by the opt-out and the pool's deletion too, and said as a warning. Whoever may create
PersistentVolumeClaims in our namespace can still forge all of that: docs/namespace.md keeps that
right to administrators.

**Falling back.** Without a usable StorageClass (none named and no default, the named one absent,
the StorageClasses unreadable) or with an OpenShift Build (it has no such volume:
docs/openshift-build.md) the build gets an emptyDir; the pool records why, and a Warning Event
says it once, when that record changes. The volume the pool records, still live and fit, is used
whatever the StorageClasses say: a failed read never throws the stored images away. With
`buildStorage: emptyDir` the pool's volumes go.

Pure: the StorageClasses are read by the shell (cluster/observe.py) when a build is due."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from reconcile.contract import annotations as A
from reconcile.contract import naming, objects
from reconcile.core.actions import WarningNote
from reconcile.core.storage import disk
from reconcile.imagebuild import settings, templates
from reconcile.imagebuild.builders.base import STORAGE_MOUNT

KIND = "PersistentVolumeClaim"
#: Where the build Pod mounts it (imagebuild/builders/base.py)
MOUNT = STORAGE_MOUNT
#: The Warning Event that says once why a pool's builds use an emptyDir instead.
REASON = "BuildStorageFallback"
#: What a pool's record says of a volume: `PersistentVolumeClaim/<name>`.
RECORDED = KIND + "/"
#: A StorageClass is the default with either annotation set to "true"; of several, the newest
#: (then the first by name), as the DefaultStorageClass admission plugin picks it (kubernetes/
#: kubernetes v1.34.2 pkg/volume/util/storageclass.go, GetDefaultClass, IsDefaultAnnotation).
DEFAULT_CLASS = ("storageclass.kubernetes.io/is-default-class",
                 "storageclass.beta.kubernetes.io/is-default-class")
_RUNNING = ("Succeeded", "Failed")
#: What the PV controller writes on a claim it bound to a volume it chose (above).
BOUND_BY_CONTROLLER = "pv.kubernetes.io/bound-by-controller"


@dataclass(frozen=True)
class Classes:
    """The cluster's StorageClasses (metadata), or why they (or our volumes) could not be read:
    one line, as the pool's record says it."""
    items: tuple[Mapping[str, Any], ...] = ()
    problem: str = ""


def default_class(items: Iterable[Mapping[str, Any]]) -> str | None:
    found = [c for c in items if any(objects.annotations(c).get(k) == "true" for k in DEFAULT_CLASS)]
    found.sort(key=objects.name)
    found.sort(key=lambda c: objects.meta(c).get("creationTimestamp") or "", reverse=True)
    return objects.name(found[0]) if found else None


def storage_class(found: settings.Settings, classes: Classes | None) -> tuple[str | None, str]:
    """(the StorageClass a pool's new volume is made of, or None with why not)."""
    if classes is None or classes.problem:
        return None, classes.problem if classes else "cannot list StorageClasses: not read"
    if found.storage_class:
        if found.storage_class in {objects.name(c) for c in classes.items}:
            return found.storage_class, ""
        return None, f"StorageClass {found.storage_class} ({settings.STORAGE_CLASS}) not found"
    name = default_class(classes.items)
    if name is None:
        return None, f"the cluster has no default StorageClass; set {settings.STORAGE_CLASS}"
    return name, ""


def claim_of(obj: Mapping[str, Any] | None) -> str:
    """The PersistentVolumeClaim a build Pod mounts ("": none)."""
    for volume in objects.volumes(obj or {}):
        if isinstance(volume.get("persistentVolumeClaim"), Mapping):
            return str(volume["persistentVolumeClaim"].get("claimName") or "")
    return ""


def recorded_claim(ann: Mapping[str, str], arch: str = "") -> str:
    """The volume the pool's record names ("": none); `arch`: a mixed pool's, for that architecture."""
    return recorded_claims(ann).get(arch, "")


def recorded_claims(ann: Mapping[str, str]) -> dict[str, str]:
    """Every volume the pool's record names, by architecture ("" for a pool of one)."""
    entries = _entries(ann.get(A.BUILD_STORAGE) or "")
    return {arch: record[len(RECORDED):] for arch, record in entries.items() if record.startswith(RECORDED)}


def _entries(value: str) -> dict[str, str]:
    """The record's entries by architecture: "" -> the record of a pool of one architecture, or a
    mixed pool's `<arch>=<record>` entries."""
    if not value or not re.match(r"^[a-z0-9]+=", value):
        return {"": value} if value else {}
    return {arch: record for arch, _, record in (item.partition("=") for item in value.split())}


def _joined(entries: Mapping[str, str]) -> str | None:
    return " ".join(f"{arch}={record}" for arch, record in sorted(entries.items())) or None


def mixed_record(ann: Mapping[str, str], placed: Mapping[str, str | None]) -> str | None:
    """A mixed pool's record once its architectures' builds in `placed` got their placements'
    records (None: left as it was): `<arch>=PersistentVolumeClaim/<name>` or `<arch>=emptyDir`."""
    entries = {arch: record for arch, record in _entries(ann.get(A.BUILD_STORAGE) or "").items() if arch}
    for arch, record in placed.items():
        if record is not None:
            entries[arch] = record if record.startswith(RECORDED) else settings.STORAGE_EMPTYDIR
    return _joined(entries)


def narrowed(ann: Mapping[str, str], archs: Iterable[str], arch: str) -> str | None:
    """The record once the pool builds for `archs` (a mixed pool's) or for `arch` alone (`archs`
    empty): the entries of architectures it no longer has go (their volumes with them, `settle`);
    a pool back to one architecture keeps that one's volume, as a pool of one records it."""
    value = ann.get(A.BUILD_STORAGE) or ""
    entries, archs = _entries(value), set(archs)
    if archs and set(entries) - archs:
        return _joined({a: r for a, r in entries.items() if a in archs})
    if archs:
        return value or None
    if "" in entries or not entries:
        return value or None
    return entries.get(arch) if (entries.get(arch) or "").startswith(RECORDED) else None


def _owned_by(volume: Mapping[str, Any], key: str, value: Any) -> bool:
    """Does an ownerReference of the volume name a MachineConfigPool with this `uid` or `name`?"""
    owners = objects.meta(volume).get("ownerReferences")
    return bool(value) and isinstance(owners, list) and any(
        isinstance(o, Mapping) and o.get("kind") == "MachineConfigPool" and o.get(key) == value
        for o in owners)


def untrusted(volume: Mapping[str, Any], pool: Mapping[str, Any]) -> str:
    """Why a labelled volume is not one we made for this pool ("": it may be; above)."""
    if not _owned_by(volume, "uid", objects.meta(pool).get("uid")):
        return "no ownerReference to the pool"
    spec = objects.spec(volume)
    if spec.get("dataSource") or spec.get("dataSourceRef"):
        return "it is a copy of a data source"
    if spec.get("selector"):
        return "its selector picks a volume that exists (spec.selector)"
    if spec.get("volumeMode", "Filesystem") != "Filesystem":
        return "it is not a filesystem volume"
    if spec.get("accessModes") != ["ReadWriteOnce"]:
        return "its access modes are not ReadWriteOnce"
    if spec.get("volumeName") and objects.annotations(volume).get(BOUND_BY_CONTROLLER) != "yes":
        return "its creator chose its volume (spec.volumeName)"
    return ""


def deletable(obj: Mapping[str, Any], pool: Mapping[str, Any] | None, pool_name: str) -> bool:
    """May the opt-out (`pool`) or the pool's deletion (None: only its name is left) delete this
    object of the pool's? Any but a volume that is not ours: one `untrusted` for the pool, or with
    the pool gone, one whose ownerReferences do not name it."""
    if obj.get("kind") != KIND:
        return True
    return not untrusted(obj, pool) if pool is not None else _owned_by(obj, "name", pool_name)


def _refused(d: Any) -> list[tuple[Mapping[str, Any], str]]:
    return [(v, why) for v in d.storage if (why := untrusted(v, d.pool))]


def _warn(refused: Iterable[tuple[Mapping[str, Any], str]]) -> str:
    return "; ".join(f"{objects.ref(v)} carries our labels but is not ours ({why}): not used, not deleted"
                     for v, why in refused)


def _deleting(obj: Mapping[str, Any]) -> bool:
    return bool(objects.meta(obj).get("deletionTimestamp"))


def _size(obj: Mapping[str, Any]) -> float:
    resources = objects.spec(obj).get("resources")
    requests = resources.get("requests") if isinstance(resources, Mapping) else None
    wanted = str(requests.get("storage") or "") if isinstance(requests, Mapping) else ""
    return settings.amount(wanted) if settings.QUANTITY.match(wanted) else 0.0     # none: fits no known size


def claim_name(pool: str, storage_class: str, size: str, builder_image: str, arch: str = "") -> str:
    return naming.object_name("storage", pool, naming.build_id(
        {"class": storage_class, "size": size, "builder": builder_image,
         **({"arch": arch} if arch else {})})[:10])


@dataclass(frozen=True)
class Placement:
    """Where a new build keeps its images: `claim` ("": an emptyDir), the volume to create first
    (`create`), the pool's record once the build starts (`record`: None leaves it as it is), what
    is said once (`told`: a fallback's Warning Event) and what the run says of it (`note`: why
    this build goes without the pool's volume)."""
    disk: disk.Disk
    claim: str = ""
    create: dict[str, Any] | None = None
    record: str | None = None
    told: str = ""
    note: str = ""


def placement_of(obj: Mapping[str, Any]) -> Placement:
    """The placement a live build object was made with (its volume, its disk as its spec and its
    record say), so that it renders again as it was created."""
    spec = objects.spec(obj)
    containers = spec.get("containers") if isinstance(spec.get("containers"), list) else []
    first = containers[0] if containers and isinstance(containers[0], Mapping) else {}
    res = first.get("resources") if obj.get("kind") == "Pod" else spec.get("resources")
    res = res if isinstance(res, Mapping) else {}

    def quantity(kind: str) -> str:
        values = res.get(kind)
        return str(values.get("ephemeral-storage") or "") if isinstance(values, Mapping) else ""
    ann = objects.annotations(obj)
    return Placement(disk.Disk(quantity("requests"), quantity("limits"), figures=ann.get(A.DISK, "")),
                     claim_of(obj), record=ann.get(A.BUILD_STORAGE))


def place(d: Any, classes: Classes | None, base: disk.BaseSize | None, driver: str,
          arch: str = "") -> Placement:
    """The storage of the build a START or RETRY of decision `d` makes (core/decision.py); `arch`:
    one architecture's build of a mixed pool, which gets a volume of its own."""
    found, inp = d.settings, d.inputs
    empty = disk.plan(found, base, settings.STORAGE_EMPTYDIR, driver)
    if not found.persistent_storage:
        return Placement(empty)
    if d.builder.kind != "Pod":
        return _fallback(d, empty, f"{d.builder.kind}s have no persistent build storage (an OpenShift Build "
                                   "mounts only Secrets, ConfigMaps and CSI ephemeral volumes, read-only)")
    refused = _refused(d)
    # a pool of one architecture may take the volume it kept for that architecture while it was mixed
    archs = {arch} if arch else {"", inp.arch}
    trusted = [v for v in d.storage if not any(v is r for r, _ in refused)
               and objects.annotations(v).get(A.ARCH, "") in archs]
    recorded = recorded_claim(objects.annotations(d.pool), arch) or \
        ("" if arch else recorded_claim(objects.annotations(d.pool), inp.arch))
    use, why = storage_class(found, classes)
    from_record = use is None
    if from_record:         # the recorded volume, if it still fits; never a new one of its class
        kept = [v for v in trusted if objects.name(v) == recorded
                and not _deleting(v) and objects.annotations(v).get(A.BUILDER_IMAGE) == inp.builder_image]
        if not kept:
            return _fallback(d, empty, why)
        use = str(objects.spec(kept[0]).get("storageClassName") or "")
        trusted = kept
    want = disk.plan(found, base, settings.STORAGE_PERSISTENT, driver)
    fits = [v for v in trusted if not _deleting(v)
            and objects.spec(v).get("storageClassName") == use
            and objects.annotations(v).get(A.BUILDER_IMAGE) == inp.builder_image
            and (not want.known or _size(v) >= settings.amount(want.volume))]
    wanted = claim_name(inp.pool, use, want.volume, inp.builder_image, arch)
    chosen = max(fits, key=lambda v: (objects.name(v) == recorded,
                                      objects.name(v) == wanted, _size(v)), default=None)
    if chosen is None and from_record:      # kept for a later build, the record as it is
        return Placement(empty, note=WarningNote(
            f"build storage {KIND}/{objects.name(trusted[0])} no longer fits and no other can be made "
            f"({why}): this build uses an emptyDir; the volume is kept"))
    claim = objects.name(chosen) if chosen else wanted
    warning = WarningNote(_warn(refused)) if refused else ""
    if chosen is None and any(objects.name(v) == claim for v, _ in refused):
        return Placement(empty, note=WarningNote(f"{warning}; this build uses an emptyDir"))
    busy = [o for o in (*d.current, *d.stale) if o.get("kind") == "Pod" and claim_of(o) == claim
            and ((o.get("status") or {}).get("phase") not in _RUNNING or _deleting(o))]
    if busy:
        return Placement(empty, note=f"build storage {KIND}/{claim} is still mounted by "
                                     f"{objects.ref(busy[0])}: this build uses an emptyDir")
    if chosen is None and any(objects.name(v) == claim and _deleting(v) for v in trusted):
        return Placement(empty, note=f"build storage {KIND}/{claim} is being deleted: this build uses an "
                                     "emptyDir")
    create = None if chosen else templates.render_object(
        "pvc-storage.yaml.j2", name=claim, namespace=found.namespace,
        labels={naming.MANAGED_BY: naming.MANAGER, naming.POOL_LABEL: naming.pool_label(inp.pool)},
        annotations={A.BUILDER_IMAGE: inp.builder_image, **({A.ARCH: arch} if arch else {}), **_argocd()},
        owner=naming.owner_reference(d.pool),
        storage_class=use, size=want.volume)
    return Placement(want, claim, create, RECORDED + claim, note=warning)


def _argocd() -> dict[str, str]:
    """Argo CD's annotations of our objects (contract/naming.py), without the rendered config: the
    volume outlives builds."""
    return {k: v for k, v in naming.our_annotations("", 0).items() if k.startswith("argocd.argoproj.io/")}


def _fallback(d: Any, empty: disk.Disk, why: str) -> Placement:
    record = A.one_line(f"emptyDir: {why}")
    default = "" if settings.STORAGE_KEY in d.settings.explicit else " (the default)"
    told = "" if objects.annotations(d.pool).get(A.BUILD_STORAGE) == record else WarningNote(
        f"{settings.STORAGE_KEY}: persistent{default}, but this pool's builds use an emptyDir: {why}")
    return Placement(empty, record=record, told=told)


def settle(d: Any, recorded_after: Iterable[str], deleted: Iterable[str] = ()) -> list[Mapping[str, Any]]:
    """The pool's volumes to delete once its plan recorded `recorded_after` (its record's volumes)
    and deleted the Pods named in `deleted`: with persistent storage for Pods, those neither
    recorded nor mounted by a Pod of ours that stays; else all. Volumes being deleted are left to
    finish."""
    keep, gone = set(), set(deleted)
    if d.settings is not None and d.settings.persistent_storage and getattr(d.builder, "kind", "") == "Pod":
        keep = set(recorded_after) | {claim_of(o) for o in (*d.current, *d.stale)
                                   if o.get("kind") == "Pod" and objects.name(o) not in gone}
    return [v for v in d.storage
            if objects.name(v) not in keep and not _deleting(v) and not untrusted(v, d.pool)]
