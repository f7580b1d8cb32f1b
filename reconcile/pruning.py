"""The shell of image pruning: after a run's writes, list the nodes (only when some pool's image
history is longer than --keep-images), delete superseded images through the registry API with
the push secret's credentials, and record what is left of each pool's history."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

from reconcile import annotations as A
from reconcile import auth, objects, patches, prune, registry
from reconcile.cluster import Cluster, ClusterError
from reconcile.plan import PoolPlan
from reconcile.settings import Settings

log = logging.getLogger("reconcile")


def pools_after(pools: Iterable[Mapping[str, Any]], plans: Iterable[PoolPlan]) -> list[Mapping[str, Any]]:
    """The pools as this run's patches leave them."""
    latest = {objects.name(p): p for p in pools}
    for plan in plans:
        for action in plan.actions:
            if action.obj.get("kind") == "MachineConfigPool" and action.after is not None:
                latest[objects.name(action.after)] = action.after
    return list(latest.values())


def run(cluster: Cluster, settings: Settings | str, pools: list[Mapping[str, Any]], keep: int,
        dry_run: bool) -> tuple[list[str], list[str]]:
    """(lines saying what was or would be pruned, errors). Touches nothing when nothing is due."""
    if keep < 0 or not isinstance(settings, Settings) or not prune.pending(pools, keep):
        return [], []
    lines: list[str] = []
    errors: list[str] = []
    try:
        nodes = cluster.list("Node", None)
        secret = cluster.get("Secret", settings.namespace, settings.push_secret)
    except ClusterError as err:
        return [], [f"image pruning: cannot read nodes or the push secret: {err}"]
    try:
        auths = auth.auths(secret) if secret else {}
    except auth.AuthError as err:
        return [], [f"image pruning: {err}"]
    for item in prune.plan(pools, nodes, keep):
        name = objects.name(item.pool)
        for image in item.protected:
            lines.append(f"keep image {image} (pool {name}): a pool or node still uses it")
        gone = []
        for image in item.delete:
            if dry_run:
                lines.append(f"would delete image {image} (pool {name}): superseded")
                continue
            try:
                outcome = registry.delete(image, auths)
            except registry.RegistryError as err:
                errors.append(f"pool {name}: image pruning: {err}")
                continue
            gone.append(image)
            lines.append(f"deleted image {image} (pool {name}): {outcome}")
        if dry_run or not gone:
            continue
        change = {A.IMAGES: prune.remaining(item.pool, keep, gone)}
        try:
            cluster.patch("MachineConfigPool", "", name, patches.annotation_ops(item.pool, change))
        except ClusterError as err:
            errors.append(f"pool {name}: cannot record pruned images: {err}")
    for line in lines:
        log.info("%s", line)
    return lines, errors
