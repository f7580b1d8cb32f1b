"""The pure core: (settings, pool, the pool's live objects) -> a PoolPlan that moves it one step.

Each run looks at the cluster once. The pool's annotations say which build the recorded state is
about (`ocl-reconciler.io/build`), so a run killed anywhere is resumed by the next one:
objects are created before the state that names them is written, and a success is recorded
before the build's objects are deleted.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from reconcile import annotations as A
from reconcile import builders, desired, events, naming, objects, patches
from reconcile.plan import Action, PoolPlan
from reconcile.settings import Settings

#: Passed as `machineconfig` when the rendered MachineConfig does not exist.
MISSING: Mapping[str, Any] = {}


def rfc3339(now: datetime) -> str:
    return now.strftime("%Y-%m-%dT%H:%M:%SZ")


def _annotate(plan: PoolPlan, pool: Mapping[str, Any], wanted: dict[str, str | None],
              now: datetime) -> None:
    current = objects.annotations(pool)
    if wanted.get(A.STATE) and wanted[A.STATE] != current.get(A.STATE):
        wanted[A.TRANSITION] = rfc3339(now)
        subject = wanted.get(A.IMAGE) if wanted[A.STATE] == A.SUCCEEDED else None
        subject = subject or wanted.get(A.BUILD) or current.get(A.BUILD) or wanted.get(A.RENDERED) or ""
        # the Event goes first: a rerun after a kill finds it (same name) and does not repeat it
        plan.actions.append(Action("create", events.event(
            pool, wanted[A.STATE], subject, wanted.get(A.MESSAGE) or "", rfc3339(now))))
    _patch_annotations(plan, pool, A.changes(current, wanted))


def _patch_annotations(plan: PoolPlan, pool: Mapping[str, Any], change: Mapping[str, str | None]) -> None:
    """One patch of the pool that touches only the changed keys of ours."""
    if change:
        ops = patches.annotation_ops(pool, change)
        plan.actions.append(Action("patch", dict(pool), tuple(ops), patches.apply(pool, ops)))


def _record(plan: PoolPlan, pool: Mapping[str, Any], now: datetime, state: str, message: str = "",
            **extra: str | None) -> None:
    plan.state_after, plan.message = state, message
    _annotate(plan, pool, {A.STATE: state, A.MESSAGE: A.one_line(message), **extra}, now)


def _delete(plan: PoolPlan, objs: Iterable[Mapping[str, Any]]) -> None:
    for obj in sorted(objs, key=objects.sort_key):
        plan.actions.append(Action("delete", dict(obj)))


def blocked(pool: Mapping[str, Any], message: str, now: datetime) -> PoolPlan:
    plan = PoolPlan(objects.name(pool), objects.annotations(pool).get(A.STATE))
    rendered = ((pool.get("spec") or {}).get("configuration") or {}).get("name") or None
    _record(plan, pool, now, A.BLOCKED, message, **{A.RENDERED: rendered})
    return plan


def opt_out(pool: Mapping[str, Any], owned: list[Mapping[str, Any]]) -> PoolPlan:
    """Label removed: our objects go, and so does every key of ours on the pool."""
    ann = objects.annotations(pool)
    plan = PoolPlan(objects.name(pool), ann.get(A.STATE))
    _delete(plan, owned)
    _patch_annotations(plan, pool, {k: None for k in ann if A.owned(k)})
    return plan


def _interrupted(ann: Mapping[str, str], ref: str) -> str:
    old = ann.get(A.BUILD)
    if ann.get(A.STATE) in (A.PENDING, A.BUILDING) and old and old != ref:
        return f"interrupted {old}: build inputs changed"
    return ""


def _ensure(plan: PoolPlan, want: list[dict[str, Any]],
            live: Mapping[tuple[str, str], Mapping[str, Any]]) -> None:
    """Create what is missing; patch (guarded by resourceVersion) ConfigMaps that drifted."""
    for obj in want:
        have = live.get((obj["kind"], objects.name(obj)))
        if have is None:
            plan.actions.append(Action("create", obj))
        elif obj["kind"] in ("ConfigMap", "Secret"):
            ops = patches.content_ops(have, obj)
            if ops:
                plan.actions.append(Action("patch", dict(have), tuple(patches.guarded(have, ops)),
                                           patches.apply(have, ops)))


def plan_pool(settings: Settings | str, pool: Mapping[str, Any], owned: list[Mapping[str, Any]],
              now: datetime, machineconfig: Mapping[str, Any] | None = None,
              material: desired.Material | None = None) -> PoolPlan:
    """Plan one opted-in pool. `settings` is a Settings or the one-line reason they are invalid.

    Returns a plan with `needs_machineconfig` set when a new build is due and `machineconfig`
    was not given; call again with it (or MISSING) and the build material (secrets, labelled
    inputs): they matter only to a new build, so only then are they read."""
    if isinstance(settings, str):
        return blocked(pool, settings, now)
    builder = builders.for_type(settings.builder_type)      # settings.read validated the type
    try:
        inp = desired.inputs(settings, pool)
    except desired.Blocked as err:
        return blocked(pool, str(err), now)

    ann = objects.annotations(pool)
    plan = PoolPlan(inp.pool, ann.get(A.STATE))
    bid = inp.build_id
    attempt = _attempt(ann, builder, settings.namespace, inp)
    ref = desired.build_ref(builder, settings.namespace, inp, attempt)
    current = [o for o in owned if objects.labels(o).get(naming.BUILD_ID_LABEL) == bid]
    stale = [o for o in owned if o not in current]
    build_obj = next((o for o in current if o.get("kind") == builder.kind
                      and objects.name(o) == desired.build_name(inp, attempt)), None)
    state, at_ref = ann.get(A.STATE), ann.get(A.BUILD) == ref
    base = {A.RENDERED: inp.rendered_config, A.BUILD: ref, A.ATTEMPT: str(attempt)}
    if ann.get(A.REBUILD):          # the token is in the build id: this build handles the request
        base[A.REBUILD_HANDLED] = ann[A.REBUILD]

    if at_ref and state == A.SUCCEEDED and ann.get(A.IMAGE):
        _delete(plan, current + stale)          # leftovers of a run killed after recording
        plan.state_after = state
        return plan
    if at_ref and state in (A.FAILED, A.INTERRUPTED):
        _delete(plan, stale)                    # the failed build's objects stay for debugging
        plan.state_after, plan.message = state, ann.get(A.MESSAGE, "")
        return plan
    retry_reason = None
    if build_obj is not None:
        status = builder.read_status(build_obj)
        if status.state == A.FAILED and status.transient:
            retry_reason = status.message
        elif status.state == A.SUCCEEDED:
            image = f"{settings.repo}@{status.digest}"     # both parts validated already
            earlier = [i for i in ann.get(A.IMAGES, "").split() if i != image]
            _record(plan, pool, now, A.SUCCEEDED, message="", **base,
                    **{A.IMAGE: image, A.BUILT_CONFIG: inp.rendered_config,
                       A.IMAGES: " ".join(([image] + earlier)[:A.IMAGES_LIMIT])})
            _delete(plan, current + stale)
        else:
            kept = ann.get(A.MESSAGE, "") if at_ref and state in (A.PENDING, A.BUILDING) else ""
            message = status.message or _interrupted(ann, ref) or kept
            _delete(plan, stale)
            _record(plan, pool, now, status.state, message=message, **base)
        if retry_reason is None:
            return plan
    elif at_ref and state in (A.PENDING, A.BUILDING):
        retry_reason = f"{ref} was deleted before it finished"
    if retry_reason is not None:
        history = _history(ann.get(A.MESSAGE, ""), attempt, retry_reason)
        if attempt >= A.MAX_ATTEMPTS:
            _delete(plan, stale)
            _record(plan, pool, now, A.FAILED,
                    message=f"failed after {attempt} attempts: {history}", **base)
            return plan

    # A new build of the current inputs is due.
    if machineconfig is None:
        plan.needs_machineconfig = inp.rendered_config
        return plan
    material = material or desired.Material()
    if material.problem:
        return blocked(pool, material.problem, now)
    if machineconfig is MISSING:
        return blocked(pool, f"MachineConfig {inp.rendered_config} not found", now)
    next_attempt = attempt + 1 if retry_reason is not None else 1
    try:
        want = desired.objects(settings, pool, inp, builder, machineconfig, material, next_attempt)
    except desired.Blocked as err:
        return blocked(pool, str(err), now)
    _ensure(plan, want, {(o.get("kind"), objects.name(o)): o for o in current})
    _delete(plan, stale + ([build_obj] if retry_reason is not None and build_obj is not None else []))
    if retry_reason is not None:
        message = f"attempt {next_attempt} of {A.MAX_ATTEMPTS} after: {history}"
    else:
        message = "; ".join(m for m in (_interrupted(ann, ref), desired.build_inputs(builder, material).note)
                            if m)
    base.update({A.BUILD: desired.build_ref(builder, settings.namespace, inp, next_attempt),
                 A.ATTEMPT: str(next_attempt)})
    _record(plan, pool, now, A.PENDING, message=message, **base)
    return plan


def _attempt(ann: Mapping[str, str], builder: Any, namespace: str, inp: desired.BuildInputs) -> int:
    """The attempt the pool's annotations are about, when they are about this build."""
    try:
        attempt = max(1, min(A.MAX_ATTEMPTS, int(ann.get(A.ATTEMPT) or 1)))
    except ValueError:
        attempt = 1
    return attempt if ann.get(A.BUILD) == desired.build_ref(builder, namespace, inp, attempt) else 1


def _history(message: str, attempt: int, reason: str) -> str:
    """Each attempt's reason, kept in the one-line message: `attempt 1: ...; attempt 2: ...`."""
    _, sep, earlier = message.partition(" after: ")
    earlier = earlier if sep and message.startswith("attempt ") else ""
    return "; ".join(p for p in (earlier, f"attempt {attempt}: {reason}") if p)


def opted_in(pool: Mapping[str, Any]) -> bool:
    return A.LAYERING_LABEL in objects.labels(pool)


def plan_cluster(settings: Settings | str, pools: list[Mapping[str, Any]],
                 owned: list[Mapping[str, Any]], now: datetime,
                 machineconfigs: Mapping[str, Mapping[str, Any]] | None = None,
                 only: Iterable[str] = (), material: desired.Material | None = None) -> list[PoolPlan]:
    """Plans for every pool (or those in `only`), opted-out pools and orphaned objects included.

    `machineconfigs` maps rendered config names to the MachineConfig (or MISSING) for pools that
    asked for one in an earlier call."""
    ours = [o for o in owned if objects.matches(naming.SELECTOR, objects.labels(o))
            and objects.labels(o).get(naming.POOL_LABEL)]       # never act on anything else
    by_pool = objects.by_label(ours, naming.POOL_LABEL)      # keyed by naming.pool_label()
    selected = set(only)
    plans = []
    for pool in sorted(pools, key=objects.name):
        name = objects.name(pool)
        if selected and name not in selected:
            continue
        mine = by_pool.pop(naming.pool_label(name), [])
        if opted_in(pool):
            rendered = ((pool.get("spec") or {}).get("configuration") or {}).get("name")
            mc = (machineconfigs or {}).get(rendered) if rendered else None
            plans.append(plan_pool(settings, pool, mine, now, mc, material))
        elif mine or any(A.owned(k) for k in objects.annotations(pool)):
            plans.append(opt_out(pool, mine))
    for name, orphans in sorted(by_pool.items()):
        if not selected or name in {naming.pool_label(s) for s in selected}:
            plan = PoolPlan(name)       # the pool is gone: what it owned goes too
            _delete(plan, orphans)
            plans.append(plan)
    return plans
