"""What a command says once about what it read, besides its plan: images recorded that reach no
node (`annotation_notice`), builds of an install in another namespace (`moved_notice`), and
MachineConfigs named like ours that we did not write (`found_strays`; run tells each stray's pool
with a Warning Event, `tell_strays`)."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from datetime import datetime
from typing import TYPE_CHECKING, Any

from reconcile.cluster import AlreadyExists, Cluster, ClusterError, observe
from reconcile.contract import annotations as A
from reconcile.contract import objects
from reconcile.core import carryforward, decision, events, rollout
from reconcile.core.actions import PoolPlan

if TYPE_CHECKING:                   # run's result: only its type is named here
    from reconcile.cluster.apply import RunResult

#: The API of the MCO's own on-cluster layering (4.16 on): where it is served, nothing reads the
#: pool annotation `newestImageEquivalentConfig` any more (docs/rollout.md).
MACHINEOSCONFIGS = ("machineconfiguration.openshift.io/v1", "machineosconfigs")
ANNOTATION_ONLY = ("rollout: annotation: this cluster serves the MachineOSConfig API "
                   "(OpenShift 4.16 or later), "
                   "where nothing reads machineconfiguration.openshift.io/newestImageEquivalentConfig, so no "
                   "node gets the image{s} recorded for pool(s) {pools}; to hand images to the MCO set "
                   "'rollout: machineconfig' in ConfigMap on-cluster-build-config and deploy "
                   "kustomize/components/rollout (docs/contract.md, \"Rolling the image out\")")


def annotation_notice(cluster: Cluster, stranded: Iterable[str]) -> str | None:
    """Said once by run, diff and status when images recorded for these pools reach no node (no
    rollout MachineConfig) on a cluster that serves MachineOSConfig: one discovery GET, made only
    when there is such a pool."""
    stranded = sorted(set(stranded))
    if not stranded or not cluster.serves(*MACHINEOSCONFIGS):
        return None
    return ANNOTATION_ONLY.format(s="s" if len(stranded) > 1 else "", pools=", ".join(stranded))


MOVED = ("pool(s) {pools} record builds of an install of ocl-reconciler in namespace {old}: its build "
         "objects there are not deleted from here ({namespace} has no rights there); once no pool needs "
         "them, delete them: oc delete pods,builds,configmaps,secrets -n {old} -l "
         "app.kubernetes.io/managed-by=ocl-reconciler (docs/namespace.md, \"Moving an install\")")


def moved_notice(pools: Iterable[dict[str, Any]], namespace: str) -> str | None:
    """Said once a run when pools record builds in another namespace (the MCO's, where earlier
    versions lived): read from the pools alone, as we may not list there."""
    found: dict[str, list[str]] = {}
    for pool in pools:
        old = carryforward.moved_from(objects.annotations(pool), namespace)
        if old and decision.opted_in(pool):
            found.setdefault(old, []).append(objects.name(pool))
    return "; ".join(MOVED.format(pools=", ".join(sorted(names)), old=old, namespace=namespace)
                     for old, names in sorted(found.items())) or None


def stranded(pools: Iterable[dict[str, Any]], plans: Iterable[PoolPlan] = (),
             machineconfigs: Iterable[dict[str, Any]] = ()) -> list[str]:
    """The opted-in pools that have (or get in these plans) an image that none of our rollout
    MachineConfigs hands to the MCO."""
    handed = set(rollout.view((), machineconfigs, ()).ours)
    imaged = {objects.name(p) for p in pools if decision.opted_in(p) and objects.annotations(p).get(A.IMAGE)}
    return sorted((imaged | {p.pool for p in plans if p.state_after == A.SUCCEEDED}) - handed)



def say(cluster: Cluster, seen: observe.Observed, plans: Iterable[PoolPlan]) -> None:
    """Log the notices of what was read and planned (each once a command). A failed read (the
    discovery GET) is the caller's to report."""
    stranded_pools = stranded(seen.pools, plans) if observe.annotation_only(seen.settings) else []
    said = (annotation_notice(cluster, stranded_pools), moved_notice(seen.pools, seen.namespace))
    for notice in said:
        if notice:
            logging.getLogger("reconcile").warning("%s", notice)


def found_strays(seen: observe.Observed) -> list[rollout.Stray]:
    """With `rollout: machineconfig`: MachineConfigs named like ours that we did not write, from what
    the command read (core/rollout/ `strays`); said by run, diff, explain and preflight."""
    if not observe.machineconfig_rollout(seen.settings):
        return []
    return rollout.strays(seen.pools, seen.owned, seen.settings.repo, seen.named)


def tell_strays(cluster: Cluster, seen: observe.Observed, now: datetime) -> int:
    """run: a warning line for each stray, and a Warning Event on the pool it names (once: the
    Event's name is keyed on the MachineConfig's uid). Returns how many."""
    found = found_strays(seen)
    pools = {objects.name(p): p for p in seen.pools}
    log = logging.getLogger("reconcile")
    for stray in found:
        log.warning("%s", stray.line())
        pool = pools.get(stray.pool)
        if pool is None:
            continue
        try:
            cluster.create(events.notice(pool, "StrayMachineConfig", stray.line(),
                                         f"{stray.name}={stray.uid}", now.strftime("%Y-%m-%dT%H:%M:%SZ"),
                                         kind="Warning"))
        except AlreadyExists:
            pass                                # told already
        except ClusterError as err:
            log.warning("could not tell pool %s of stray MachineConfig %s: %s", objects.name(pool),
                        stray.name, err)
    return len(found)


def after_run(cluster: Cluster, seen: observe.Observed, result: RunResult, now: datetime) -> int:
    """run, after its pass: the notices (a failed read ends the run as one while planning does,
    after its summary and metrics: `result.unread`), then the strays. Returns how many strays."""
    if not result.unread:       # a notice reads too: after a failed read, the summary comes first
        try:
            say(cluster, seen, [o.plan for o in result.outcomes])
        except ClusterError as err:
            result.unread = str(err)
    return tell_strays(cluster, seen, now)
