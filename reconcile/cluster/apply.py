"""Carry out plans, pool by pool: every effect of a run (API writes and registry deletes) is an
action of a pool's plan, done here, counted once, bounded by the run's deadline.

A conflicting patch (someone wrote the object since we read it) makes us re-read that pool,
re-plan it and try once more, so foreign changes are kept. A create that finds our own object
(same pool and build id: a lost response, or a killed run) adopts it. Any other failed write stops
that pool's plan, is recorded as Blocked on the pool, and the run goes on with the other pools.
A write an admission policy denies (the MCO's policies on pools: contract/admission.py) is that
pool's error too, never retried and never re-planned: the same write would be denied again, and so
would recording Blocked on a pool the policy refuses, which is then not attempted.
An Event is best effort: one that cannot be written is logged and counted, and the plan goes on.
A registry delete that fails is reported, never the pool's error nor Blocked: its build succeeded;
the pool's image history keeps what could not be deleted and the pool says why, for the next run
(a registry that never lets us delete must not fail every run). Without a registry (a snapshot
run) a prune only says what it would delete."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, Protocol

from reconcile.cluster import (
    AlreadyExists,
    Changed,
    Cluster,
    ClusterError,
    Denied,
    Invalid,
    NotFound,
    registry,
)
from reconcile.contract import admission, naming, objects
from reconcile.core import decision, images, mcolabel, storage
from reconcile.core.actions import PoolPlan, WarningNote, Write, carried_out
from reconcile.core.actions import table as actions_table
from reconcile.diff import view
from reconcile.imagebuild.platform import imageindex

log = logging.getLogger("reconcile")


class Replanner(Protocol):
    def replan(self, pool_name: str) -> PoolPlan | None: ...


class Planning(Replanner, Protocol):
    """What run's pass needs of its planner (cluster/planner.py), in one form: the plans made one
    at a time, a pool re-planned after a conflict, the image prunes once all are made, and the
    registry that deletes them (None: a snapshot run, which only says what it would delete)."""
    registry_client: registry.Client | None

    def each(self) -> Iterator[PoolPlan]: ...

    def prune(self, plans: list[PoolPlan]) -> list[PoolPlan]: ...


@dataclass
class Outcome:
    plan: PoolPlan
    error: str = ""
    replanned: bool = False
    error_reason: str = ""
    events_lost: int = 0
    images_deleted: int = 0
    #: images the registry would not let us delete (the pool says why; not its error)
    registry_failures: int = 0
    #: writes the server accepted, by verb (Events aside): what `run done:` counts, a pool that
    #: ended in Error included
    done: dict[str, int] = field(default_factory=dict)

    def count(self, verb: str) -> None:
        self.done[verb] = self.done.get(verb, 0) + 1


@dataclass
class RunResult:
    outcomes: list[Outcome] = field(default_factory=list)
    #: the error of a read that failed after pools were carried out (run plans one pool at a time):
    #: the run ends there, exit 3, after the summary and metrics of what it did
    unread: str = ""

    @property
    def failed(self) -> bool:
        return bool(self.unread) or any(o.error or o.plan.blocked for o in self.outcomes)

    @property
    def wrote(self) -> int:
        """Writes the server accepted in this result (registry deletes included)."""
        return sum(sum(o.done.values()) + o.images_deleted for o in self.outcomes)

    def then(self, later: RunResult) -> RunResult:
        """This pass followed by a later one of the same run (cluster/follow.py): each pool as the
        later pass left it, what both did counted once each."""
        earlier = {o.plan.pool: o for o in self.outcomes}
        merged = []
        for o in later.outcomes:
            before = earlier.pop(o.plan.pool, None)
            if before is not None:
                verbs = {*before.done, *o.done}
                o = replace(o, done={v: before.done.get(v, 0) + o.done.get(v, 0) for v in verbs},
                            events_lost=before.events_lost + o.events_lost,
                            images_deleted=before.images_deleted + o.images_deleted,
                            registry_failures=before.registry_failures + o.registry_failures)
            merged.append(o)
        return RunResult(list(earlier.values()) + merged, later.unread)

    def summary(self, requests: int | None, seconds: float, bytes_read: int | None = None) -> str:
        """One line closing every run: pools by state, writes by verb, requests (and what they
        read from a live API server), duration."""
        states: dict[str, int] = {}
        for o in self.outcomes:
            state = "Error" if o.error else (o.plan.state_after or "Removed")
            states[state] = states.get(state, 0) + 1
        writes = {v: sum(o.done.get(v, 0) for o in self.outcomes) for v in ("create", "patch", "delete")}
        deleted = sum(o.images_deleted for o in self.outcomes)
        pools = ", ".join(f"{n} {s}" for s, n in sorted(states.items())) or "none"
        return (f"run done: pools {pools}; {writes['create']} created, {writes['patch']} patched, "
                f"{writes['delete']} deleted, {deleted} images deleted; "
                f"{requests if requests is not None else '-'} requests"
                f"{f' ({bytes_read / 1024:.0f} KiB read)' if bytes_read is not None else ''}; {seconds:.2f}s"
                f"{view.rollouts(o.plan for o in self.outcomes if not o.error)}")


#: Kinds whose delete also requires the resourceVersion read, not only the uid: a MachineConfig is
#: what nodes boot, and one that stopped being ours since the read (our label taken off, the same
#: uid) must be kept: the server answers 409 and the pool is read again. Not Pods and Builds, whose
#: status changes all the time; our ConfigMaps and Secrets are immutable.
UNCHANGED_DELETES = frozenset({"MachineConfig"})


def _do(cluster: Cluster, action: Write) -> bool:
    """Carry out one write; False when nothing was written (adopted, or already gone)."""
    kind, ns, name = action.obj["kind"], objects.namespace(action.obj), objects.name(action.obj)
    if action.verb == "create":
        try:
            cluster.create(action.obj)
        except AlreadyExists:
            if not _made_by_us_for_this_build(cluster.get(kind, ns, name), action.obj):
                raise AlreadyExists("it already exists and was not made by ocl-reconciler for this "
                                "build; delete or rename it") from None
            log.info("adopted %s", action.ref)
            return False
    elif action.verb == "patch":
        cluster.patch(kind, ns, name, list(action.patch))
    elif action.verb == "delete":
        md = objects.meta(action.obj)
        try:
            cluster.delete(kind, ns, name, md.get("uid"),
                           md.get("resourceVersion") if kind in UNCHANGED_DELETES else None)
        except NotFound:
            return False                           # already gone counts as done
    else:
        raise ValueError(f"unknown verb {action.verb}")
    return True


def _made_by_us_for_this_build(live: dict[str, Any] | None, wanted: dict[str, Any]) -> bool:
    """Labels, and for a build storage volume what core/storage/ asks of one before it is
    mounted (its images become a build's base)."""
    if live is None:
        return False
    keys = (naming.MANAGED_BY, naming.POOL_LABEL, naming.BUILD_ID_LABEL)
    if not all(objects.labels(live).get(k) == objects.labels(wanted).get(k) for k in keys):
        return False
    if wanted.get("kind") == storage.KIND:
        owners = objects.meta(wanted).get("ownerReferences") or [{}]
        return not storage.untrusted(live, {"metadata": {"uid": owners[0].get("uid")}})
    return True


def _prune(cluster: Cluster, action: Write, deleter: registry.Client | None, outcome: Outcome) -> None:
    """Delete the images, then one patch of the history: what was deleted (or forgotten) leaves it,
    and `ocl-reconciler.io/prune-error` says why the rest could not be (removed once none fails).
    A registry that refuses is reported (a warning, `ocl_errors_total{reason="registry"}`), never
    the pool's error: its state is its build's, and the next run tries again."""
    pool = outcome.plan.pool
    if deleter is None:
        for image in action.images:
            log.info("would delete image %s (pool %s): a snapshot run never contacts the registry", image,
                     pool, extra={"pool": pool})
        return
    gone, failed = list(action.forget), []
    for image in action.images:
        try:
            said = deleter.delete(image)
        except registry.RegistryError as err:
            failed.append(str(err))
            continue
        gone.append(image)
        log.info("deleted image %s (pool %s): %s", image, pool, said, extra={"pool": pool})
        if action.signatures:
            _prune_signature(deleter, image, pool, outcome)
    why = (f"could not delete {len(failed)} image(s) from the registry: {'; '.join(failed)}; kept in the "
           "image history, tried again by the next run (docs/admin.md, \"Images that cannot be deleted\")"
           if failed else None)
    ops = images.history_ops(action.obj, gone, why)
    if ops:
        try:
            cluster.patch("MachineConfigPool", "", objects.name(action.obj), ops)
        except Denied as err:
            raise Refused.of(action, err, pool) from None
        except ClusterError as err:
            raise WriteError(f"patch {action.ref} (image history): {err}", err.status) from None
        outcome.count("patch")
    outcome.images_deleted += len(gone) - len(action.forget)
    if failed:
        outcome.registry_failures += len(failed)
        log.warning("pool %s: %s", pool, why, extra={"pool": pool})


def _push(action: Write, client: registry.Client | None, outcome: Outcome) -> None:
    """A mixed pool's image index into the registry (core/actions/indexrows.py), before the record
    that names it: a refusal is the pool's write error (exit 2), and the next run pushes again."""
    pool, image = outcome.plan.pool, action.obj["image"]
    if client is None:
        log.info("would push image index %s (pool %s): a snapshot run never contacts the registry", image,
                 pool, extra={"pool": pool})
        return
    digest = image.partition("@")[2]
    try:
        client.put_index(action.obj["tag"], imageindex.Index(action.body, digest))
    except registry.RegistryError as err:
        raise WriteError(f"push {action.ref}: {err}") from None
    outcome.count("push")
    log.info("pushed image index %s (pool %s)", image, pool, extra={"pool": pool})


def _prune_signature(deleter: registry.Client, image: str, pool: str, outcome: Outcome) -> None:
    """The deleted image's cosign signature tag. One that cannot be deleted is only said: it signs
    an image that is gone, so it can admit nothing (docs/signing.md, "Pruning")."""
    try:
        said = deleter.delete_signature(image)
    except registry.RegistryError as err:
        outcome.registry_failures += 1
        log.warning("pool %s: the signature of deleted image %s stays in the registry: %s", pool, image, err,
                    extra={"pool": pool})
        return
    log.info("signature of image %s (pool %s): %s", image, pool, said, extra={"pool": pool})


class WriteError(ClusterError):
    """A write failed; the message names the write and the object, `status` is the server's."""

    def __init__(self, message: str, status: int = 0):
        super().__init__(message)
        self.status = status


class Refused(WriteError):
    """A write an admission policy denied; `pool_write`: the object was the pool itself, so that
    recording the error on it would be denied too."""

    def __init__(self, message: str, status: int, pool_write: bool):
        super().__init__(message, status)
        self.pool_write = pool_write

    @classmethod
    def of(cls, action: Write, err: Denied, pool: str) -> Refused:
        answer = {403: "403 Forbidden", 422: "422 Invalid"}.get(err.status, str(err.status))
        return cls(f"{action.verb} {action.ref}: ValidatingAdmissionPolicy {err.policy} denied it "
                   f"({answer}): {err.reason}; not retried: {admission.fix(err.policy, pool)}",
                   err.status, action.obj.get("kind") == "MachineConfigPool")


def _tell(cluster: Cluster, action: Write, pool: str) -> bool:
    """Create an Event; True when it is there. Never raises: an Event must not block a pool."""
    try:
        cluster.create(action.obj)
    except AlreadyExists:
        return True                                # this transition was already told
    except ClusterError as err:
        log.warning("pool %s: cannot record Event %s: %s", pool, action.ref, err, extra={"pool": pool})
        return False
    return True


def _run_plan(cluster: Cluster, actions: list[Write], outcome: Outcome, replanner: Replanner | None,
              deleter: registry.Client | None) -> None:
    pool = outcome.plan.pool
    for action in actions:
        if action.verb == "prune":
            _prune(cluster, action, deleter, outcome)
            continue
        if action.verb == "push":
            _push(action, deleter, outcome)
            continue
        if action.verb == "create" and action.obj.get("kind") == "Event":
            outcome.events_lost += not _tell(cluster, action, pool)
            continue
        try:
            wrote = _do(cluster, action)
        except Denied as err:           # never a conflict: the same write is denied again
            raise Refused.of(action, err, pool) from None
        except (Changed, Invalid) as err:
            # a patch's resourceVersion test, or a delete's uid precondition: the object changed
            if action.verb not in ("patch", "delete") or replanner is None or outcome.replanned:
                raise WriteError(f"{action.verb} {action.ref}: {err}", err.status) from None
            log.info("pool %s: %s changed under us (%s); re-reading and re-planning", pool,
                     action.ref, err, extra={"pool": pool})
            outcome.replanned = True
            fresh = replanner.replan(pool)
            if fresh is not None:
                outcome.plan = fresh
                _run_plan(cluster, fresh.actions, outcome, replanner, deleter)
            return
        except ClusterError as err:
            raise WriteError(f"{action.verb} {action.ref}: {err}", err.status) from None
        if wrote:
            outcome.count(action.verb)
        log.info("%s %s", action.verb, action.ref, extra={"pool": pool})


def execute(cluster: Cluster, plans: Iterable[PoolPlan], now: datetime,
            replanner: Replanner | None = None, deleter: registry.Client | None = None,
            pruner: Callable[[list[PoolPlan]], object] | None = None) -> RunResult:
    """Carry out each plan as it comes: `plans` may be made one at a time as they are asked for
    (run: a pool is planned, carried out, and what it needed dropped before the next one is
    planned), and an outcome keeps its plan as carried out (`actions.carried_out`: no created
    body, an encoded MachineConfig is a MiB). `pruner` then adds the image prunes, which need
    every pool's plan (what any pool uses after the run is kept), and they are carried out last,
    for the pools whose plan went through. `deleter` deletes images from the registry; None (a
    snapshot run) only says what it would."""
    result = RunResult()
    made = iter(plans)
    while True:
        try:
            plan = next(made)
        except StopIteration:
            break
        except ClusterError as err:     # a read for the next pool: the pools before it were done
            result.unread = str(err)
            return result               # no prunes: they need every pool's plan
        outcome = Outcome(plan)
        _carry_out(cluster, outcome, plan.actions, now, replanner, deleter)
        result.outcomes.append(outcome)
        del plan                # the plan as made (its bodies) goes before the next one is made
    if pruner is not None:
        try:
            _prune_after(cluster, result.outcomes, pruner, now, deleter)
        except ClusterError as err:     # what pruning reads (the nodes) after the pools' writes
            result.unread = str(err)
    return result


def run_pass(cluster: Cluster, planning: Planning, now: datetime) -> RunResult:
    """run's pass: one pool at a time, planned, carried out, and what it needed dropped before the
    next is planned; the image prunes last."""
    return execute(cluster, planning.each(), now, planning, planning.registry_client, planning.prune)


def _carry_out(cluster: Cluster, outcome: Outcome, actions: list[Write], now: datetime,
               replanner: Replanner | None, deleter: registry.Client | None, notes_from: int | None = None
               ) -> None:
    """Do these actions of the outcome's plan; a failure is the pool's error (recorded on it).
    Then the plan's notes and state change are logged, or with `notes_from` (its prunes, done
    last) the notes from there on."""
    pool = outcome.plan.pool
    try:
        _run_plan(cluster, actions, outcome, replanner, deleter)
    except Refused as err:
        outcome.error, outcome.error_reason = str(err), "admission"
        log.error("pool %s: %s", pool, err, extra={"pool": pool})
        if not err.pool_write:          # the pool itself is admitted: say so on it
            outcome.events_lost += _record_error(cluster, pool, str(err), now, outcome)
    except ClusterError as err:
        outcome.error = str(err)
        outcome.error_reason = str(err.status or type(err).__name__)
        log.error("pool %s: %s", pool, err, extra={"pool": pool})
        outcome.events_lost += _record_error(cluster, pool, str(err), now, outcome)
    done = outcome.plan
    if not outcome.error:
        for note in done.notes[notes_from or 0:]:   # what the plan chose not to do, or what its writes mean
            (log.warning if isinstance(note, WarningNote) else log.info)(
                "pool %s: %s", done.pool, note, extra={"pool": done.pool})
    if notes_from is None and done.state_before != done.state_after and done.state_after \
            and not outcome.error:
        said = done.message and done.message not in done.notes      # a note said it already
        log.info("pool %s: %s -> %s%s", done.pool, done.state_before or "-", done.state_after,
                 f" ({done.message})" if said else "", extra={"pool": done.pool})
    outcome.plan = carried_out(done)


def _prune_after(cluster: Cluster, outcomes: list[Outcome], pruner: Callable[[list[PoolPlan]], object],
                 now: datetime, deleter: registry.Client | None) -> None:
    """The image prunes of plans carried out one at a time, added once all are known and done for
    the pools whose plan went through (a re-planned pool's new plan had its own)."""
    marks = [(len(o.plan.actions), len(o.plan.notes)) for o in outcomes]
    pruner([o.plan for o in outcomes])
    for outcome, (acted, noted) in zip(outcomes, marks, strict=True):
        added = outcome.plan.actions[acted:]
        if outcome.error or outcome.replanned:
            del outcome.plan.actions[acted:], outcome.plan.notes[noted:]
        elif added or len(outcome.plan.notes) > noted:
            _carry_out(cluster, outcome, added, now, None, deleter, notes_from=noted)


def _record_error(cluster: Cluster, pool_name: str, message: str, now: datetime, outcome: Outcome) -> int:
    """Best effort: say on the pool why this run could not finish it. Returns Events lost."""
    lost = 0
    try:
        pool = cluster.get("MachineConfigPool", "", pool_name)
        if pool is None or not decision.opted_in(pool) or mcolabel.carries(pool):    # its record stays
            return 0
        for action in actions_table.blocked(pool, message, now).actions:
            if action.obj.get("kind") == "Event":
                lost += not _tell(cluster, action, pool_name)
            else:
                if _do(cluster, action):
                    outcome.count(action.verb)
    except ClusterError as err:
        log.error("pool %s: cannot record the error: %s", pool_name, err, extra={"pool": pool_name})
    return lost
