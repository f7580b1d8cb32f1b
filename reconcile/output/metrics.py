"""Prometheus metrics of one run: builds by pool and state, build and reconcile durations, API
requests by verb and outcome, errors by reason, and (`rollout: machineconfig`) the nodes running
our image and the pools whose rendered config another MachineConfig overrides. Written as a
node-exporter textfile and/or pushed to a Pushgateway; a run is a short-lived job, so nothing is served."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any, Protocol

from reconcile.contract import annotations as A
from reconcile.contract import objects
from reconcile.core import decision, images, rollout
from reconcile.core.actions import PoolPlan
from reconcile.core.rollout import check as rolloutcheck
from reconcile.core.transitions import Transition

#: `ocl_rollout_nodes`' states: the pool's status counts, while its rendered config holds our image
NODE_STATES = ("updated", "total", "degraded")


def build_durations(outcomes: Iterable[PoolOutcome], owned: Iterable[Mapping[str, Any]],
                    now: datetime) -> dict[str, float]:
    """Seconds from a build object's creation to its end, for builds that ended in this run."""
    created = {}
    for obj in owned:
        if obj.get("kind") in ("Pod", "Build"):
            try:
                created[f"{obj['kind']}/{objects.namespace(obj)}/{objects.name(obj)}"] = datetime.strptime(
                    objects.meta(obj)["creationTimestamp"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=now.tzinfo)
            except (KeyError, ValueError):
                continue
    out = {}
    for outcome in outcomes:
        plan = outcome.plan
        if plan.state_after in (A.SUCCEEDED, A.FAILED) and plan.state_before in (A.PENDING, A.BUILDING):
            for action in plan.actions:
                if action.obj.get("kind") == "MachineConfigPool" and action.after:
                    ref = objects.annotations(action.after).get(A.BUILD, "")
                    if ref in created:
                        out[plan.pool] = max(0.0, (now - created[ref]).total_seconds())
    return out


def rollouts_after(pools: Iterable[Mapping[str, Any]], owned: Iterable[Mapping[str, Any]],
             plans: Iterable[PoolPlan]) -> dict[str, rolloutcheck.State]:
    """The rollout state of every opted-in pool with a MachineConfig of ours, as this run's
    patches leave the pools and our MachineConfigs."""
    plans = list(plans)
    mcs = {objects.name(o): o for o in owned if o.get("kind") == rollout.KIND}
    for plan in plans:
        for action in plan.actions:
            if action.obj.get("kind") == rollout.KIND:
                mcs[objects.name(action.obj)] = (action.after if action.verb == "patch" else action.obj) \
                    if action.verb != "delete" else None
    ours = rollout.view((), [m for m in mcs.values() if m], ()).ours
    return {objects.name(p): rolloutcheck.state(p, ours[objects.name(p)], objects.annotations(p).get(A.IMAGE))
            for p in images.pools_after(pools, plans)
            if decision.opted_in(p) and objects.name(p) in ours}


class PoolOutcome(Protocol):
    """What the metrics read of a pool's outcome (cluster/apply.py `Outcome`)."""
    plan: PoolPlan
    error: str
    error_reason: str
    events_lost: int
    images_deleted: int
    #: images the registry would not let us delete
    registry_failures: int


class RunOutcome(Protocol):
    """What the metrics read of a run (cluster/apply.py `RunResult`): every pool's outcome, and the
    error of a read that ended the run ("" when none did)."""
    @property
    def outcomes(self) -> Sequence[PoolOutcome]: ...

    @property
    def unread(self) -> str: ...


def collect(result: RunOutcome, requests: Mapping[tuple[str, str], int], seconds: float,
            durations: Mapping[str, float], finished: datetime,
            rollout_states: Mapping[str, rolloutcheck.State] | None = None, strays: int = 0) -> Any:
    """Every metric family of one run, in one registry (in the order they are written)."""
    from prometheus_client import CollectorRegistry

    registry = CollectorRegistry()
    _builds(registry, result.outcomes)
    _architectures(registry, result.outcomes)
    _gate(registry, result.outcomes, finished)
    _live(registry, result.outcomes)
    _build_durations(registry, durations)
    _rollout(registry, rollout_states or {})
    _run(registry, seconds, strays, finished)
    _api(registry, requests)
    _errors(registry, result)
    return registry


def _builds(registry: Any, outcomes: Sequence[PoolOutcome]) -> None:
    from prometheus_client import Gauge
    builds = Gauge("ocl_builds", "Pools by the state of their current build (1 = in that state)",
                   ["pool", "state"], registry=registry)
    for outcome in outcomes:
        if outcome.plan.state_after:
            for state in A.STATES:
                builds.labels(outcome.plan.pool, state).set(1 if outcome.plan.state_after == state else 0)


def _architectures(registry: Any, outcomes: Sequence[PoolOutcome]) -> None:
    """A mixed pool's builds, one per architecture (core/multiarch.py), as `ocl_builds` has pools."""
    from prometheus_client import Gauge
    builds = Gauge("ocl_architecture_builds", "A mixed pool's builds by architecture and state (1 = in "
                   "that state)", ["pool", "architecture", "state"], registry=registry)
    for outcome in outcomes:
        for arch, state in sorted(outcome.plan.architectures.items()):
            for each in (A.PENDING, A.BUILDING, A.SUCCEEDED, A.FAILED):
                builds.labels(outcome.plan.pool, arch, each).set(1 if state == each else 0)


def _gate(registry: Any, outcomes: Sequence[PoolOutcome], finished: datetime) -> None:
    """The rollout gate's families: held, for how long, released."""
    from prometheus_client import Gauge
    held = Gauge("ocl_rollout_held", "1 while the rollout gate holds a change back from the pool's machines "
                 "(rolloutGate: hold; 0 while it is paused between rollouts)", ["pool"], registry=registry)
    held_for = Gauge("ocl_rollout_held_seconds", "How long the rollout gate has held a change back from "
                     "the pool's machines", ["pool"], registry=registry)
    released = Gauge("ocl_rollout_hold_released", "1 while a pool the gate held is released (a failed "
                     "build or holdTimeout: its new files roll out on the last good image)", ["pool"],
                     registry=registry)
    for outcome in outcomes:
        plan = outcome.plan
        if not plan.gate and not plan.hold:
            continue
        held.labels(plan.pool).set(1 if plan.gate_since else 0)
        released.labels(plan.pool).set(1 if plan.gate == "released" else 0)
        if plan.gate_since:
            try:
                since = datetime.strptime(plan.gate_since, "%Y-%m-%dT%H:%M:%SZ") \
                    .replace(tzinfo=finished.tzinfo)
                held_for.labels(plan.pool).set(max(0.0, (finished - since).total_seconds()))
            except ValueError:
                pass


def _live(registry: Any, outcomes: Sequence[PoolOutcome]) -> None:
    """Changes taken live (issue 39): no build, the pool's image kept."""
    from prometheus_client import Counter as PCounter
    live = PCounter("ocl_live_changes", "New rendered configs this run took live: no build, the pool's "
                    "image kept (liveChanges: apply)", ["pool"], registry=registry)
    for outcome in outcomes:
        if outcome.plan.transition == Transition.LIVE.name:
            live.labels(outcome.plan.pool).inc()


def _build_durations(registry: Any, durations: Mapping[str, float]) -> None:
    from prometheus_client import Gauge
    duration = Gauge("ocl_build_duration_seconds", "Duration of builds that ended in this run",
                     ["pool"], registry=registry)
    for pool, value in durations.items():
        duration.labels(pool).set(value)


def _rollout(registry: Any, rollout_states: Mapping[str, rolloutcheck.State]) -> None:
    """`rollout: machineconfig`: the nodes running our image, the pools another MachineConfig overrides."""
    from prometheus_client import Gauge
    nodes = Gauge("ocl_rollout_nodes", "Nodes of a pool whose rendered config holds our image: updated "
                  "(run it), total, degraded", ["pool", "state"], registry=registry)
    overridden = Gauge("ocl_rollout_overridden", "1 when another MachineConfig's osImageURL wins over ours "
                       "in the pool's rendered config", ["pool", "machineconfig"], registry=registry)
    for pool, found in sorted(rollout_states.items()):
        if found.kind in (rolloutcheck.ROLLING_OUT, rolloutcheck.ROLLED_OUT):
            for state in NODE_STATES:
                nodes.labels(pool, state).set(getattr(found, state))
        elif found.kind == rolloutcheck.OVERRIDDEN_KIND:
            overridden.labels(pool, found.winner).set(1)


def _run(registry: Any, seconds: float, strays: int, finished: datetime) -> None:
    from prometheus_client import Gauge
    Gauge("ocl_reconcile_duration_seconds", "Duration of the reconcile run",
          registry=registry).set(seconds)
    Gauge("ocl_stray_machineconfigs", "MachineConfigs named ocl-osimageurl-* that the reconciler did not "
          "write (without our label, for a pool we do not build, or not of our repository)",
          registry=registry).set(strays)
    Gauge("ocl_last_run_timestamp_seconds", "When the run ended (Unix time)",
          registry=registry).set(finished.timestamp())


def _api(registry: Any, requests: Mapping[tuple[str, str], int]) -> None:
    from prometheus_client import Counter as PCounter
    api = PCounter("ocl_api_requests", "API requests by verb and outcome", ["verb", "outcome"],
                   registry=registry)
    for (verb, outcome), count in sorted(requests.items()):
        api.labels(verb, outcome).inc(count)


def _errors(registry: Any, result: RunOutcome) -> None:
    """Images deleted, and errors by reason."""
    from prometheus_client import Counter as PCounter
    PCounter("ocl_images_deleted", "Images deleted from the registry by this run",
             registry=registry).inc(sum(o.images_deleted for o in result.outcomes))
    errors = PCounter("ocl_errors", "Errors by reason", ["reason"], registry=registry)
    reasons: Counter[str] = Counter()
    for outcome in result.outcomes:
        if outcome.events_lost:
            reasons["event"] += outcome.events_lost
        if outcome.registry_failures:
            reasons["registry"] += outcome.registry_failures
        if outcome.error:
            reasons[outcome.error_reason or "write"] += 1
        elif outcome.plan.blocked:
            reasons["blocked"] += 1
        elif outcome.plan.state_after == A.FAILED and outcome.plan.state_before != A.FAILED:
            reasons["build-failed"] += 1
    if result.unread:                       # the run ended on a failed read (exit 3)
        reasons["read"] += 1
    for reason, count in sorted(reasons.items()):
        errors.labels(reason).inc(count)


def of_run(result: RunOutcome, requests: Mapping[tuple[str, str], int], seconds: float,
           pools: Iterable[Mapping[str, Any]], owned: Iterable[Mapping[str, Any]], finished: datetime,
           strays: int) -> Any:
    """run's registry: `collect` of the run, with the durations of the builds that ended in it
    and the rollout state of the pools whose plans went through."""
    return collect(result, requests, seconds, build_durations(result.outcomes, owned, finished), finished,
                   rollouts_after(pools, owned, [o.plan for o in result.outcomes if not o.error]), strays)


def export(registry: Any, textfile: str | None, pushgateway: str | None) -> list[str]:
    """Write and/or push; returns problems (a metrics failure never fails the run)."""
    from prometheus_client import push_to_gateway, write_to_textfile

    problems = []
    if textfile:
        try:
            write_to_textfile(textfile, registry)
        except OSError as err:
            problems.append(f"cannot write metrics to {textfile}: {err.strerror}")
    if pushgateway:
        try:
            push_to_gateway(pushgateway, job="ocl-reconciler", registry=registry, timeout=10)
        except Exception as err:  # noqa: BLE001 - urllib raises many kinds; report, do not fail
            problems.append(f"cannot push metrics to {pushgateway}: {err}")
    return problems
