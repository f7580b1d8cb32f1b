"""Image pruning: when a newer image succeeds, images of the pool's superseded builds are deleted
from the registry, keeping the newest N and never one that a pool's newestImageEquivalentConfig or
a node's current or desired image refers to. The history lives on the pool
(`ocl-reconciler.io/images`, newest first), so a killed run prunes on the next one. Pure: it
makes "prune" actions of the pool's plan; the planner lists the nodes, the executor talks to the
registry."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from reconcile.contract import annotations as A
from reconcile.contract import objects
from reconcile.core import patches
from reconcile.core.actions import Action, PoolPlan

NODE_IMAGES = ("machineconfiguration.openshift.io/currentImage",
               "machineconfiguration.openshift.io/desiredImage")


def history(pool: Mapping[str, Any]) -> list[str]:
    return objects.annotations(pool).get(A.IMAGES, "").split()


def pending(pools: Iterable[Mapping[str, Any]], keep: int) -> bool:
    """Is there anything to prune (so that the nodes need listing)?"""
    return any(len(history(p)) > keep for p in pools)


@dataclass(frozen=True)
class Prune:
    pool: Mapping[str, Any]
    delete: tuple[str, ...]          # images to delete from the registry
    protected: tuple[str, ...]       # candidates still in use: kept in the history for later


def plan(pools: Iterable[Mapping[str, Any]], nodes: Iterable[Mapping[str, Any]], keep: int) -> list[Prune]:
    pools = list(pools)
    in_use = {objects.annotations(p).get(A.IMAGE) for p in pools}
    in_use |= {objects.annotations(n).get(key) for n in nodes for key in NODE_IMAGES}
    out = []
    for pool in sorted(pools, key=objects.name):
        candidates = history(pool)[keep:]
        if candidates:
            out.append(Prune(pool, tuple(i for i in candidates if i not in in_use),
                             tuple(i for i in candidates if i in in_use)))
    return out


def remaining(pool: Mapping[str, Any], gone: Iterable[str]) -> str:
    """The history after pruning: all but the images deleted (candidates are never among the
    newest N, so what is kept stays)."""
    gone = set(gone)
    return " ".join(i for i in history(pool) if i not in gone)


def history_ops(pool: Mapping[str, Any], gone: Iterable[str]) -> list[dict[str, Any]]:
    """The patch of the pool's image history once `gone` left the registry."""
    return patches.annotation_ops(pool, {A.IMAGES: remaining(pool, gone)})


def pools_after(pools: Iterable[Mapping[str, Any]], plans: Iterable[PoolPlan]) -> list[Mapping[str, Any]]:
    """The pools as this run's patches leave them."""
    latest = {objects.name(p): p for p in pools}
    for plan_ in plans:
        for action in plan_.actions:
            if action.obj.get("kind") == "MachineConfigPool" and action.after is not None:
                latest[objects.name(action.after)] = action.after
    return list(latest.values())


def add_to(plans: list[PoolPlan], pools: Iterable[Mapping[str, Any]], nodes: Iterable[Mapping[str, Any]],
           keep: int) -> None:
    """Append a "prune" action (and notes on images kept) to each planned pool with images due."""
    by_pool = {p.pool: p for p in plans}
    for item in plan(pools_after(pools, plans), nodes, keep):
        target = by_pool.get(objects.name(item.pool))
        if target is None:
            continue
        target.notes += [f"keep image {i}: a pool or node still uses it" for i in item.protected]
        if item.delete:
            ops = history_ops(item.pool, item.delete)
            target.actions.append(Action("prune", dict(item.pool), tuple(ops), patches.apply(item.pool, ops),
                                         images=item.delete))
