"""What every action of a transition builds on (core/actions/table.py): the `Step` (the decision,
the pool's plan, the clock) and the writes it puts in the plan: the pool's annotations and their
Event (`annotate`), one patch of our keys, the build objects to create, and the rollout's share
(with `rollout: machineconfig`, the pool's MachineConfig and what its rendered config holds).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from reconcile.contract import annotations as A
from reconcile.contract import naming, objects
from reconcile.core import events, patches, rollout
from reconcile.core.actions import PoolPlan, Write
from reconcile.core.decision import Decision
from reconcile.core.rollout import check as rolloutcheck


@dataclass
class Step:
    """What a transition's function builds on: the decision, the plan and the clock."""
    d: Decision
    plan: PoolPlan
    now: datetime
    base: dict[str, str | None] = field(default_factory=dict)

    @property
    def ann(self) -> Mapping[str, str]:
        return objects.annotations(self.d.pool or {})

    def record(self, state: str, message: str = "", reason: str | None = None, **extra: str | None) -> None:
        """Write the state (and `extra` keys) on the pool; `reason` overrides the Event's."""
        self.plan.state_after, self.plan.message = state, message
        annotate(self.plan, self.d.pool or {}, {A.STATE: state, A.MESSAGE: A.one_line(message), **self.base,
                                                 **extra}, self.now, reason)

    def delete(self, objs: Iterable[Mapping[str, Any]]) -> None:
        """Delete these objects, but not one already being deleted (a volume a Pod still mounts,
        kept by its finalizer): deleting it again changes nothing."""
        for obj in sorted(objs, key=objects.sort_key):
            if not objects.meta(obj).get("deletionTimestamp"):
                self.plan.actions.append(Write("delete", dict(obj)))


def rfc3339(now: datetime) -> str:
    return now.strftime("%Y-%m-%dT%H:%M:%SZ")


def annotate(plan_: PoolPlan, pool: Mapping[str, Any], wanted: dict[str, str | None], now: datetime,
              reason: str | None = None) -> None:
    current = objects.annotations(pool)
    # a transition: a new state, or the same state about another build (a reuse after a success,
    # a new build interrupting a pending one)
    if wanted.get(A.STATE) and (wanted[A.STATE] != current.get(A.STATE)
                                or (A.BUILD in wanted and wanted[A.BUILD] != current.get(A.BUILD))):
        wanted[A.TRANSITION] = rfc3339(now)
        subject = wanted.get(A.IMAGE) if wanted[A.STATE] == A.SUCCEEDED else None
        subject = subject or wanted.get(A.BUILD) or current.get(A.BUILD) or wanted.get(A.RENDERED) or ""
        # the Event goes first: a rerun after a kill finds it (same name) and does not repeat it
        plan_.actions.append(Write("create", events.event(
            pool, wanted[A.STATE], subject, wanted.get(A.MESSAGE) or "", rfc3339(now), reason,
            since=current.get(A.TRANSITION, ""))))
    patch_annotations(plan_, pool, A.changes(current, wanted))


def pool_patch(plan_: PoolPlan, pool: Mapping[str, Any]) -> tuple[int | None, Mapping[str, Any]]:
    """The index of the plan's first patch of the pool (None: none yet) and the pool as the plan's
    patches leave it."""
    found, after = None, pool
    for i, action in enumerate(plan_.actions):
        if action.verb == "patch" and action.obj.get("kind") == "MachineConfigPool":
            found = i if found is None else found
            after = patches.apply(after, list(action.patch))
    return found, after


def extend_pool_patch(plan_: PoolPlan, pool: Mapping[str, Any], ops: list[dict[str, Any]]) -> None:
    """Add `ops` to the plan's patch of the pool, so that the pool gets one patch (or make one)."""
    index, _ = pool_patch(plan_, pool)
    if index is None:
        plan_.actions.append(Write("patch", dict(pool), tuple(ops), patches.apply(pool, ops)))
        return
    old = plan_.actions[index]
    both = (*old.patch, *ops)
    plan_.actions[index] = Write("patch", old.obj, both, patches.apply(pool, list(both)))


def forget(plan_: PoolPlan, pool: Mapping[str, Any], key: str) -> None:
    """Remove one annotation key of ours, in the plan's patch of the pool if it has one (the key is
    there, so the annotations map is: the ops need no resourceVersion test)."""
    extend_pool_patch(plan_, pool, patches.annotation_ops(pool, {key: None}))


def patch_annotations(plan_: PoolPlan, pool: Mapping[str, Any], change: Mapping[str, str | None]) -> None:
    """One patch of the pool that touches only the changed keys of ours."""
    if change:
        ops = patches.annotation_ops(pool, change)
        plan_.actions.append(Write("patch", dict(pool), tuple(ops), patches.apply(pool, ops)))


def create_missing(plan_: PoolPlan, want: list[dict[str, Any]],
            live: Mapping[tuple[str, str], Mapping[str, Any]]) -> None:
    """Create what is missing. Our ConfigMaps and Secrets are immutable and carry a hash of their
    content: one whose hash is not the wanted one (edited, or made by an older version) is
    replaced, deleted (with its uid as precondition) then created; its content is never read."""
    for obj in want:
        have = live.get((obj["kind"], objects.name(obj)))
        if have is None:
            plan_.actions.append(Write("create", obj))
        elif obj["kind"] in ("ConfigMap", "Secret") and _content_hash(have) != _content_hash(obj):
            plan_.actions += [Write("delete", dict(have)), Write("create", obj)]


def _content_hash(obj: Mapping[str, Any]) -> str | None:
    return objects.annotations(obj).get(naming.CONTENT_HASH)


def record_blocked(s: Step, message: str) -> None:
    rendered = (((s.d.pool or {}).get("spec") or {}).get("configuration") or {}).get("name") or None
    s.base = {}
    s.record(A.BLOCKED, message, **{A.RENDERED: rendered})


def rollout_of(s: Step, image: str, built_config: str, transition: bool) -> rollout.Rollout:
    """With `rollout: machineconfig`, what it takes for the pool's MachineConfig to hold `image`.
    `transition`: the plan records a transition (the Event is named with its time)."""
    if s.d.rollout is None:
        return rollout.Rollout()
    since = rfc3339(s.now) if transition else s.ann.get(A.TRANSITION, "")
    return rollout.ensure(s.d.rollout, s.d.pool, image, built_config, rfc3339(s.now), since)


def checked(s: Step) -> dict[str, str | None]:
    """The check of the pool's rendered config, when the shell made one: its annotation, and an
    Event (Warning, named for the rendered config, so told once) when another MachineConfig wins."""
    found = s.d.checked
    if found is None:
        return {}
    if found.winner:
        told = rolloutcheck.State(rolloutcheck.OVERRIDDEN_KIND, found.image, found.winner).describe(
            s.d.pool_name, rollout.name(s.d.pool_name))
        s.plan.notes.append(told)
        s.plan.actions.append(Write("create", events.notice(
            s.d.pool, rolloutcheck.OVERRIDDEN, told, found.rendered, rfc3339(s.now), kind="Warning")))
    return A.changes(s.ann, found.annotations())


def apply_rollout(s: Step, out: rollout.Rollout) -> None:
    s.plan.actions += out.actions
    s.plan.notes += out.notes
    s.plan.rollout = out.pools
