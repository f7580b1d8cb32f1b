"""A decided transition -> its actions: `ACTIONS` maps each row of the lifecycle table to one function
(core/actions/buildrows.py, core/actions/poolrows.py), `act` runs it on a `Step` and returns the pool's plan.

Each run looks at the cluster once. The pool's annotations say which build the recorded state is
about (`ocl-reconciler.io/build`), so a run killed anywhere is resumed by the next one: objects
are created before the state that names them is written, and a success (or a retry's new
attempt) is recorded before the older build objects are deleted.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from typing import Any

from reconcile.contract import annotations as A
from reconcile.contract import objects
from reconcile.contract.problem import Problem
from reconcile.core import desired, patches, signgate, storage
from reconcile.core.actions import PoolPlan, indexrows
from reconcile.core.actions.buildrows import (
    built,
    equivalent,
    give_up,
    live,
    progress,
    reuse,
    sign,
    start,
    stay_failed,
    succeed,
)
from reconcile.core.actions.poolrows import mco_label, opt_out, pool_gone
from reconcile.core.actions.step import Step, extend_pool_patch, forget, pool_patch, record_blocked
from reconcile.core.decision import MISSING, Decision, decide_cluster
from reconcile.core.rollout.gate import gate
from reconcile.core.transitions import Transition
from reconcile.imagebuild.platform import clusterfacts
from reconcile.imagebuild.settings import Settings

ACTIONS: dict[Transition, Callable[[Step, Mapping[str, Any] | None, desired.Material | None], None]] = {
    Transition.START: start, Transition.RETRY: start, Transition.REUSE: reuse,
    Transition.PROGRESS: progress,
    Transition.SUCCEED: succeed, Transition.FAIL: progress, Transition.STAY_FAILED: stay_failed,
    Transition.GIVE_UP: give_up, Transition.BUILT: built, Transition.EQUIVALENT: equivalent,
    Transition.LIVE: live, Transition.SIGN: sign,
    Transition.OPT_OUT: opt_out,
    Transition.POOL_GONE: pool_gone,
    Transition.BLOCKED: lambda s, mc, material: record_blocked(s, s.d.problem),
    Transition.MCO_LABEL: mco_label,
}
#: A mixed pool's rows that differ (core/actions/indexrows.py): its builds are one per architecture.
MIXED = {Transition.START: indexrows.follow, Transition.RETRY: indexrows.follow,
         Transition.PROGRESS: indexrows.follow, Transition.FAIL: indexrows.follow,
         Transition.SUCCEED: indexrows.succeed}


def act(d: Decision, now: datetime, machineconfig: Mapping[str, Any] | None = None,
         material: desired.Material | None = None) -> PoolPlan:
    """The actions of a decided transition. `machineconfig` (or MISSING) and `material` matter
    only to transitions in NEEDS_BUILD, so only then does the shell read them."""
    step = Step(d, PoolPlan(d.pool_name, objects.annotations(d.pool or {}).get(A.STATE),
                            transition=d.transition.name), now)
    if d.inputs is not None and d.settings is not None:
        step.base = {A.RENDERED: d.inputs.rendered_config,
                     A.CONTENT: A.content(d.inputs.rendered_config, d.inputs.content),
                     A.ARCH: d.inputs.arch, A.OS_STREAM: d.inputs.os_stream or None,
                     A.BUILDER_IMAGE: d.inputs.builder_image or None,
                     A.BUILD: desired.build_ref(d.builder, d.settings.namespace, d.inputs, d.attempt),
                     A.ATTEMPT: str(d.attempt),
                     # a record of a live change goes with any write of the pool's state: LIVE
                     # writes its own, BUILT writes none
                     A.LIVE: None, A.BUILT_CONTENT: None}
        # recorded with each new build's record (an earlier version's gets it at its next build)
        if A.ARCH_NODES in step.ann or step.ann.get(A.BUILD) != step.base[A.BUILD]:
            step.base[A.ARCH_NODES] = clusterfacts.machine_count(d.pool or {})
        if step.ann.get(A.REBUILD):     # the token is in the build id: this build handles the request
            step.base[A.REBUILD_HANDLED] = step.ann[A.REBUILD]
        told = objects.annotations(d.build_obj or {}).get(A.BUILD_STORAGE)
        if told and d.settings.persistent_storage:    # what its build got, if a kill lost the record
            step.base[A.BUILD_STORAGE] = told
    if d.parts and d.transition is Transition.SIGN and d.signing.then is Transition.SUCCEED \
            and d.signing.pod is None:
        indexrows.push(step)            # the signing Pod signs what the registry holds
    (MIXED if d.parts else {}).get(d.transition, ACTIONS[d.transition])(step, machineconfig, material)
    if d.transition in signgate.RECORDS and d.settings is not None:
        _record_signed(step)
    if A.MCO_LABEL in step.ann and d.transition not in (Transition.MCO_LABEL, Transition.OPT_OUT):
        forget(step.plan, d.pool, A.MCO_LABEL)        # the pool moved to our label: said no more
    if d.settings is not None and d.inputs is not None and d.pool is not None:
        _settle_storage(step)
    gate(step)                          # after every other write of the pool: core/rollout/hold.py
    return step.plan


def _record_signed(step: Step) -> None:
    """The image's signature record, in the pool's one patch with the image it is about (crash safe:
    both or neither); without signing, an earlier record goes."""
    after = pool_patch(step.plan, step.d.pool)[1]
    change = A.changes(objects.annotations(after), {A.SIGNED: step.d.signed})
    if change:
        extend_pool_patch(step.plan, step.d.pool, patches.annotation_ops(after, change))


def _settle_storage(step: Step) -> None:
    """After the pool's record: its build storage volumes that nothing records or mounts go, and
    without persistent storage the record goes too (core/storage/)."""
    d = step.d
    pool_after = pool_patch(step.plan, d.pool)[1]
    after = objects.annotations(pool_after)
    if d.settings.persistent_storage and A.BUILD_STORAGE in after:
        # a mixed pool's architectures changed: the record keeps those it builds for
        record = storage.narrowed(after, (p.arch for p in d.parts), d.inputs.arch)
        if record != after[A.BUILD_STORAGE]:
            ops = patches.annotation_ops(pool_after, {A.BUILD_STORAGE: record})
            extend_pool_patch(step.plan, d.pool, ops)
            after = objects.annotations(pool_patch(step.plan, d.pool)[1])
    deleted = [objects.name(a.obj) for a in step.plan.actions
               if a.verb == "delete" and a.obj.get("kind") == "Pod"]
    step.delete(storage.settle(d, storage.recorded_claims(after).values(), deleted))
    if A.BUILD_STORAGE in after and not d.settings.persistent_storage:
        forget(step.plan, d.pool, A.BUILD_STORAGE)


def blocked(pool: Mapping[str, Any], message: str, now: datetime) -> PoolPlan:
    return act(Decision(Transition.BLOCKED, objects.name(pool), pool, problem=message), now)


def plan_cluster(settings: Settings | Problem, pools: list[Mapping[str, Any]], owned: list[Mapping[str, Any]],
                 now: datetime, machineconfigs: Mapping[str, Mapping[str, Any]] | None = None,
                 only: Iterable[str] = (), material: desired.Material | None = None,
                 facts: clusterfacts.ClusterFacts | None = None) -> list[PoolPlan]:
    """decide_cluster then plan, for callers that already hold every MachineConfig (one not in
    `machineconfigs` is taken as missing)."""
    mcs = machineconfigs or {}
    return [act(d, now, mcs.get(d.inputs.rendered_config, MISSING) if d.needs_build else None, material)
            for d in decide_cluster(settings, pools, owned, only, mcs, facts=facts, now=now)]

