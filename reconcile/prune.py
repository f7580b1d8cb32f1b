"""Image pruning: when a newer image succeeds, images of the pool's superseded builds are deleted
from the registry, keeping the newest N and never one that a pool's newestImageEquivalentConfig or
a node's current or desired image refers to. The history lives on the pool
(`ocl-reconciler.io/images`, newest first), so a killed run prunes on the next one. Pure: the
shell lists the nodes and talks to the registry."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from reconcile import annotations as A
from reconcile import objects

NODE_IMAGES = ("machineconfiguration.openshift.io/currentImage",
               "machineconfiguration.openshift.io/desiredImage")
DEFAULT_KEEP = 2


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


def remaining(pool: Mapping[str, Any], keep: int, gone: Iterable[str]) -> str:
    """The history after pruning: what was kept, and what could not be deleted yet."""
    gone = set(gone)
    return " ".join(i for i in history(pool) if i not in gone or i in history(pool)[:keep])
