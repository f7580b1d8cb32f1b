"""Carry out plans against a cluster, pool by pool. A failed write stops that pool's plan (the
next run resumes from the cluster) and is recorded as Blocked on the pool; other pools go on."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from reconcile import lifecycle, objects
from reconcile.cluster import Cluster, ClusterError, NotFound
from reconcile.plan import Action, PoolPlan

log = logging.getLogger("reconcile")


@dataclass
class Outcome:
    plan: PoolPlan
    error: str = ""
    writes: int = 0


@dataclass
class RunResult:
    outcomes: list[Outcome] = field(default_factory=list)

    @property
    def failed(self) -> bool:
        return any(o.error or o.plan.blocked for o in self.outcomes)


def _do(cluster: Cluster, action: Action) -> None:
    kind, ns, name = action.obj["kind"], objects.namespace(action.obj), objects.name(action.obj)
    if action.verb == "create":
        cluster.create(action.obj)
    elif action.verb == "patch":
        cluster.patch(kind, ns, name, list(action.patch))
    elif action.verb == "delete":
        try:
            cluster.delete(kind, ns, name, objects.meta(action.obj).get("uid"))
        except NotFound:
            pass                                   # already gone counts as done
    else:
        raise ValueError(f"unknown verb {action.verb}")


def execute(cluster: Cluster, plans: list[PoolPlan], pools: dict[str, Any],
            now: datetime) -> RunResult:
    result = RunResult()
    for plan in plans:
        outcome = Outcome(plan)
        for action in plan.actions:
            try:
                _do(cluster, action)
                outcome.writes += 1
                log.info("%s %s", action.verb, action.ref, extra={"pool": plan.pool})
            except ClusterError as err:
                outcome.error = f"{action.verb} {action.ref}: {err}"
                log.error("pool %s: %s", plan.pool, outcome.error, extra={"pool": plan.pool})
                _record_error(cluster, pools.get(plan.pool), outcome.error, now)
                break
        if plan.state_before != plan.state_after and plan.state_after and not outcome.error:
            log.info("pool %s: %s -> %s%s", plan.pool, plan.state_before or "-", plan.state_after,
                     f" ({plan.message})" if plan.message else "", extra={"pool": plan.pool})
        result.outcomes.append(outcome)
    return result


def _record_error(cluster: Cluster, pool: Any, message: str, now: datetime) -> None:
    """Best effort: say on the pool why this run could not finish it."""
    if pool is None or not lifecycle.opted_in(pool):
        return
    fresh = cluster.get("MachineConfigPool", "", objects.name(pool)) or pool
    for action in lifecycle.blocked(fresh, message, now).actions:
        try:
            _do(cluster, action)
        except ClusterError as err:
            log.error("pool %s: cannot record the error: %s", objects.name(pool), err)
