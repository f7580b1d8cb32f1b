"""The pool's image history, and the two things it is for.

The history lives on the pool (`ocl-reconciler.io/images`): `<build id>=<image>` entries, newest
(most recently used) first, so that it says which build id produced which digested image.

- Reuse: a pool that needs a build whose id already produced an image (a rollback) reuses that
  image when the registry still has it; the shell asks the registry (`Lookup`), as machine-os-builder
  does before reusing an image (openshift/machine-config-operator #5268).
- Pruning: when a newer image succeeds, images of the pool's superseded builds are deleted from the
  registry, keeping the newest N entries (their build ids stay reusable) and never an image that a
  pool's newestImageEquivalentConfig or a node's current or desired image refers to. Only images of
  the configured repository (`finalImagePullspec`'s) are deleted: another entry (a repository the
  settings named before, or one someone wrote into the annotation) is dropped from the history and
  left in its registry, with a warning, since our push credentials are not for it. An image the
  registry does not let us delete stays in the history, and the pool says why
  (`ocl-reconciler.io/prune-error`) until a later prune goes through. A killed run prunes on the
  next one. Pure: it makes "prune" actions of the pool's plan; the planner lists the
  nodes, the executor talks to the registry."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from reconcile.contract import annotations as A
from reconcile.contract import naming, objects
from reconcile.core import patches
from reconcile.core.actions import PoolPlan, WarningNote, Write

NODE_IMAGES = ("machineconfiguration.openshift.io/currentImage",
               "machineconfiguration.openshift.io/desiredImage")


def entries(pool: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(build id, image), newest first; an entry written before build ids were recorded (an image
    alone) has the id ""."""
    out = []
    for item in objects.annotations(pool).get(A.IMAGES, "").split():
        build_id, sep, image = item.partition("=")
        out.append((build_id, image) if sep else ("", item))
    return out


def history(pool: Mapping[str, Any]) -> list[str]:
    return [image for _, image in entries(pool)]


def _format(items: Iterable[tuple[str, str]]) -> str:
    return " ".join(f"{b}={i}" if b else i for b, i in items)


def produced(pool: Mapping[str, Any], build_id: str) -> str | None:
    """The image the history says `build_id` produced, if any."""
    return next((image for b, image in entries(pool) if build_id and b == build_id), None)


def recorded(pool: Mapping[str, Any], build_id: str, image: str,
             more: Iterable[tuple[str, str]] = ()) -> str:
    """The history once `build_id` produced (or reused) `image`: that entry first, then `more`
    (build id, image) entries (a mixed pool's architectures, core/multiarch.py), bounded. Another
    build id's entry of the same image stays (both ids may reuse it); a bare old entry of it goes."""
    new = [(build_id, image), *more]
    ids, bare = {b for b, _ in new}, {i for _, i in new}
    rest = [(b, i) for b, i in entries(pool) if b not in ids and (b or i not in bare)]
    return _format((new + rest)[:A.IMAGES_LIMIT])


def indexed(pool: Mapping[str, Any]) -> dict[str, tuple[str, ...]]:
    """The instances each of a mixed pool's indexes names, by index digest
    (`ocl-reconciler.io/index-instances`, core/multiarch.py). Only ever a reason to keep an image:
    a value someone else wrote protects more, never deletes."""
    out: dict[str, tuple[str, ...]] = {}
    for item in objects.annotations(pool).get(A.INDEX_INSTANCES, "").split():
        index, sep, listed = item.partition("=")
        if sep:
            out[index] = tuple(d for d in listed.split(",") if d)
    return out


def with_index(pool: Mapping[str, Any], index: str, instances: Iterable[str]) -> str:
    """The record once `index` (a digest) named `instances`: that entry first, bounded as the history."""
    rest = [(i, d) for i, d in indexed(pool).items() if i != index][:A.IMAGES_LIMIT - 1]
    return " ".join(f"{i}={','.join(d)}" for i, d in [(index, tuple(instances))] + rest)


def _digest(image: str | None) -> str:
    return (image or "").partition("@")[2]


@dataclass(frozen=True)
class Lookup:
    """What the registry said of an image that the history maps the wanted build id to."""
    image: str
    found: bool | None          # None: the registry could not be asked; `detail` says why
    detail: str = ""
    simulated: bool = False     # a snapshot run: not asked, taken as there
    #: with signing on, once its label matched: what the registry holds under its cosign signature
    #: tag (None: not read, or no such tag); core/signgate.py `verified` decides
    signatures: tuple[Any, ...] | None = None
    #: the current keys (fingerprints) with a valid signature on it, once `verified`
    signed_by: tuple[str, ...] = ()


def labelled(image: str, labels: Mapping[str, str] | None, build_id: str) -> Lookup:
    """What the registry's answer for `image` (its config's labels; None: no such manifest) means
    for reusing it for `build_id`: only an image our build of that id labelled is reused."""
    if labels is None:
        return Lookup(image, False)
    found = labels.get(naming.BUILD_ID_LABEL)
    if found == build_id:
        return Lookup(image, True)
    if found is None:
        return Lookup(image, False, f"its image config has no {naming.BUILD_ID_LABEL} label")
    return Lookup(image, False, f"its image config's {naming.BUILD_ID_LABEL} label is {found[:80]!r}, "
                                f"not {build_id}")


def pending(pools: Iterable[Mapping[str, Any]], keep: int) -> bool:
    """Is there anything to prune (so that the nodes need listing)?"""
    return any(len(history(p)) > keep for p in pools)


@dataclass(frozen=True)
class Prune:
    pool: Mapping[str, Any]
    delete: tuple[str, ...]          # images to delete from the registry
    protected: tuple[str, ...]       # candidates still in use: kept in the history for later
    forget: tuple[str, ...] = ()     # candidates outside our repository: dropped from the history
    #: candidates an image index in use or kept names (a mixed pool's): kept too
    shielded: tuple[str, ...] = ()


def ours(image: str, repo: str | None) -> bool:
    """Is `image` `<repo>@sha256:...` (any image, when no repository is known)?"""
    return repo is None or image.partition("@")[0] == repo


def plan(pools: Iterable[Mapping[str, Any]], nodes: Iterable[Mapping[str, Any]], keep: int,
         repo: str | None = None) -> list[Prune]:
    """`repo`: the configured repository; only its images are deleted. An instance that an index
    in use or kept names is in use too (`indexed`)."""
    pools = list(pools)
    in_use = {objects.annotations(p).get(A.IMAGE) for p in pools}
    in_use |= {objects.annotations(n).get(key) for n in nodes for key in NODE_IMAGES}
    named = {index: listed for p in pools for index, listed in indexed(p).items()}
    shielded = {d for image in in_use | {i for p in pools for i in history(p)[:keep]}
                for d in named.get(_digest(image), ())}
    out = []
    for pool in sorted(pools, key=objects.name):
        kept = history(pool)[:keep]                 # their build ids stay reusable
        candidates = [i for i in dict.fromkeys(history(pool)[keep:]) if i not in kept]
        free = [i for i in candidates if i not in in_use and _digest(i) not in shielded]
        if candidates:
            out.append(Prune(pool, tuple(i for i in free if ours(i, repo)),
                             tuple(i for i in candidates if i in in_use),
                             tuple(i for i in free if not ours(i, repo)),
                             tuple(i for i in candidates if i not in free and i not in in_use)))
    return out


def remaining(pool: Mapping[str, Any], gone: Iterable[str]) -> str:
    """The history after pruning: all but the entries of the images deleted (candidates are never
    among the newest N, so what is kept stays)."""
    gone = set(gone)
    return _format((b, i) for b, i in entries(pool) if i not in gone)


def history_ops(pool: Mapping[str, Any], gone: Iterable[str],
                failed: str | None = None) -> list[dict[str, Any]]:
    """The patch of the pool's image history once `gone` left it (deleted from the registry, or
    forgotten), with why the others could not be deleted (`failed`; None: all went)."""
    return patches.annotation_ops(pool, A.changes(objects.annotations(pool), {
        A.IMAGES: remaining(pool, gone), A.PRUNE_ERROR: A.one_line(failed) if failed else None}))


def pools_after(pools: Iterable[Mapping[str, Any]], plans: Iterable[PoolPlan]) -> list[Mapping[str, Any]]:
    """The pools as this run's patches leave them."""
    latest = {objects.name(p): p for p in pools}
    for plan_ in plans:
        for action in plan_.actions:
            if action.obj.get("kind") == "MachineConfigPool" and action.after is not None:
                latest[objects.name(action.after)] = action.after
    return list(latest.values())


def add_to(plans: list[PoolPlan], pools: Iterable[Mapping[str, Any]], nodes: Iterable[Mapping[str, Any]],
           keep: int, repo: str | None = None, signatures: bool = False) -> None:
    """Append a "prune" action (and notes on images kept or forgotten) to each planned pool with
    images due; `repo`: the configured repository; `signatures`: signing is on, so each image's
    cosign signature tag (`<repo>:sha256-<hex>.sig`) is deleted with it."""
    by_pool = {p.pool: p for p in plans}
    for item in plan(pools_after(pools, plans), nodes, keep, repo):
        target = by_pool.get(objects.name(item.pool))
        if target is None:
            continue
        target.notes += [f"keep image {i}: a pool or node still uses it" for i in item.protected]
        target.notes += [f"keep image {i}: an image index in use or kept names it" for i in item.shielded]
        target.notes += [WarningNote(f"image {i} is not in the configured repository {repo}: dropped from "
                                     "the image history, not deleted (delete it yourself once no node uses "
                                     "it)") for i in item.forget]
        if item.delete or item.forget:
            ops = history_ops(item.pool, item.delete + item.forget)
            target.actions.append(Write("prune", dict(item.pool), tuple(ops), patches.apply(item.pool, ops),
                                         images=item.delete, forget=item.forget,
                                         signatures=signatures and bool(item.delete)))
