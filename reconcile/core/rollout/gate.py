"""The rollout gate's share of a pool's plan (core/rollout/hold.py decides it): made after the transition's
own actions, from the pool as they leave it, and merged into the plan's one patch of the pool so
that the pause and its record, and the state they follow from, are written together."""

from __future__ import annotations

from reconcile.contract import annotations as A
from reconcile.contract import objects
from reconcile.core import events, patches
from reconcile.core.actions import Write
from reconcile.core.actions.step import Step, extend_pool_patch, pool_patch, rfc3339
from reconcile.core.rollout import hold
from reconcile.core.transitions import Transition
from reconcile.imagebuild.settings import DEFAULT_HOLD_TIMEOUT

#: the rows whose pool we no longer build: the gate lets go of it
NOT_OURS = (Transition.OPT_OUT, Transition.POOL_GONE)


def unknown(s: Step) -> bool:
    """What the gate should do is not known: no valid settings (a typo in the ConfigMap, or the
    record of a failed write, apply._record_error), or the pool carries the MCO's label (reported,
    its record kept). Then nothing is changed but a hold that passed the default holdTimeout."""
    return s.d.transition is Transition.MCO_LABEL or (s.d.settings is None and s.d.transition not in NOT_OURS)


def applies(s: Step) -> bool:
    """The gate is on for this pool: a pool we build, `rollout: machineconfig`, `rolloutGate: hold`."""
    if s.d.transition in NOT_OURS:
        return False
    if unknown(s):
        return s.ann.get(A.GATE) == hold.HELD
    return s.d.settings.holds


def gate(s: Step) -> None:
    pool = s.d.pool
    if pool is None:
        return
    index, base = pool_patch(s.plan, pool)
    timeout = s.d.settings.hold_timeout if s.d.settings is not None else DEFAULT_HOLD_TIMEOUT
    g = hold.plan(pool, objects.annotations(base), applies(s), s.now, timeout)
    if unknown(s) and g.move is not hold.Move.RELEASE_TIMEOUT:
        return                                      # keep every record as it is
    s.plan.hold = g.move.name
    said = hold.shown(pool) if g.move in (hold.Move.ADMIN_PAUSED, hold.Move.ADMIN) else ""
    ops = hold.ops_on(base, g, rfc3339(s.now))
    left = patches.apply(base, ops) if ops else base
    s.plan.gate = objects.annotations(left).get(A.GATE, "")
    s.plan.gate_since = objects.annotations(left).get(A.GATE_SINCE, "") if hold.waiting(left) else ""
    if said:
        s.plan.notes.append(g.message)
    if not ops:
        return
    if g.move in hold.EVENTS:               # the Event goes before the patch it tells of
        reason, warning = hold.EVENTS[g.move]
        s.plan.notes.append(g.message)
        told = Write("create", events.notice(
            pool, reason, g.message, f"{g.move.name}={hold.rendered(pool)}", rfc3339(s.now),
            objects.annotations(pool).get(A.GATE_SINCE, ""), kind="Warning" if warning else "Normal"))
        s.plan.actions.insert(index if index is not None else len(s.plan.actions), told)
    extend_pool_patch(s.plan, pool, ops)
