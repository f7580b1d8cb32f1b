"""The rollout gate (`rolloutGate: hold`, with `rollout: machineconfig`): one disruption per change.

A new or changed MachineConfig makes the render controller render a new config at once (new files,
our old `osImageURL`), and the node controller rolls it out; the image for the new content comes
later and rolls out again. The MCO's own layering waits instead (`canLayeredContinue`,
openshift/machine-config-operator `pkg/controller/node/node_controller.go`). Our lever is the one an
administrator has: a paused pool gets no node update (`syncMachineConfigPool` returns after
`syncStatusOnly` when `spec.paused`), while the render controller keeps rendering (no pause check in
`pkg/controller/render/render_controller.go`) and the daemon keeps writing certificates from the
ControllerConfig (`pkg/daemon/certificate_writer.go`, `syncControllerConfigHandler`:
../shared/reference/mco-rollout.md section 7). So each pool we build stays paused, except while it
rolls out a rendered config whose image content our image carries:

    held -> new content renders -> build -> our MachineConfig -> the pool renders our image
         -> unpaused (`rolling`) -> every machine on that config -> held again

The record on the pool says who paused it, since when and for which rendered config
(`ocl-reconciler.io/gate`, `gate-config`, `gate-since`, `gate-reason`); the pause and its record are
one JSON patch, so a run killed anywhere leaves no pool paused without our record. A pool paused with
no record of ours is the administrator's: never unpaused here. A pool we hold that someone unpauses
was released by them: recorded `admin`, never paused again until that record is removed
(`oc annotate mcp/<pool> ocl-reconciler.io/gate-`). Bounded: a failed build or a hold older than
`holdTimeout` releases the pool (the new files roll out on the last good image, as without the
gate), with a Warning. Pure: (what was observed) -> one `Move` (one `match`) -> patch operations."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from reconcile.contract import annotations as A
from reconcile.contract import objects
from reconcile.core import patches

HELD, ROLLING, RELEASED, ADMIN = "held", "rolling", "released", "admin"
RECORDS = (HELD, ROLLING, RELEASED, ADMIN)
#: Events on the pool (the release a Warning: the pool rolls out files on its last good image)
HOLD_EVENT, ROLL_EVENT, RELEASE_EVENT, ADMIN_EVENT = ("RolloutHeld", "RolloutResumed", "RolloutHoldReleased",
                                                      "RolloutHandedOver")


class Move(enum.Enum):
    """What the gate does to the pool this run, and why."""
    NOTHING = "no gate and no record of ours"
    RELEASE = ("the gate is off for the pool (rolloutGate: none, rollout: annotation, opted out, gone): "
               "unpause what we hold")
    FORGET = "the gate is off: our record goes"
    ADMIN_PAUSED = "paused by an administrator: never unpaused here; builds go on"
    ADMIN = "released by an administrator: not paused again until the record is removed"
    ADMIN_RELEASED = "we held it and someone unpaused it: recorded as released by an administrator"
    HOLD = "pause it: its rendered config does not carry its image yet, or its rollout is done"
    MARK_ROLLING = "not paused, rolling out a config that carries its image: let it finish"
    ROLL = "unpause it: its rendered config carries the image built for its content"
    WAIT = "held: a new rendered config waits for its image (the hold's time starts now)"
    KEEP = "nothing to change"
    RELEASE_FAILED = "release it: the build for its content failed; the files roll out on the last good image"
    RELEASE_TIMEOUT = "release it: held longer than holdTimeout; the files roll out on the last good image"


@dataclass(frozen=True)
class Seen:
    """What the gate looks at for one pool."""
    gate: bool                  # the gate applies (rollout: machineconfig, rolloutGate: hold, our pool)
    paused: bool                # spec.paused
    record: str | None          # ocl-reconciler.io/gate
    same_config: bool           # the record is about the pool's current rendered config
    ready: bool                 # that config carries the image built for its content
    rolled_out: bool            # every machine of the pool is on that config
    failed: bool = False        # the build for its content failed (recorded Failed)
    timed_out: bool = False     # held for a config without its image longer than holdTimeout


def decide(s: Seen) -> Move:
    match s:
        case Seen(gate=False, record="held", paused=True):
            return Move.RELEASE
        case Seen(gate=False, record=str()):
            return Move.FORGET
        case Seen(gate=False):
            return Move.NOTHING
        case Seen(record="admin"):
            return Move.ADMIN
        case Seen(record=None | "rolling" | "released", paused=True):
            return Move.ADMIN_PAUSED
        case Seen(record="held", paused=False):
            return Move.ADMIN_RELEASED
        case Seen(record="held", ready=True, rolled_out=True):
            return Move.KEEP if s.same_config else Move.WAIT
        case Seen(record="held", ready=True):
            return Move.ROLL
        case Seen(record="held", failed=True):
            return Move.RELEASE_FAILED
        case Seen(record="held", same_config=False):
            return Move.WAIT
        case Seen(record="held", timed_out=True):
            return Move.RELEASE_TIMEOUT
        case Seen(record="held"):
            return Move.KEEP
        case Seen(record="rolling", same_config=True, rolled_out=False):
            return Move.KEEP
        case Seen(record="rolling" | "released" | None, ready=True, rolled_out=False):
            return Move.MARK_ROLLING
        case Seen(record="released", same_config=True, ready=False):
            return Move.KEEP            # released for this config: held again once it carries its image
        case _:
            return Move.HOLD


#: what each move writes: (spec.paused, the record: None keeps it, "" removes it, else this value)
_WRITES: dict[Move, tuple[bool | None, str | None]] = {
    Move.RELEASE: (False, ""), Move.FORGET: (None, ""), Move.ADMIN_RELEASED: (None, ADMIN),
    Move.HOLD: (True, HELD), Move.MARK_ROLLING: (None, ROLLING), Move.ROLL: (False, ROLLING),
    Move.WAIT: (None, HELD), Move.RELEASE_FAILED: (False, RELEASED), Move.RELEASE_TIMEOUT: (False, RELEASED),
}
#: the moves an Event tells of: (reason, Warning?)
EVENTS = {Move.HOLD: (HOLD_EVENT, False), Move.ROLL: (ROLL_EVENT, False), Move.RELEASE: (ROLL_EVENT, False),
          Move.RELEASE_FAILED: (RELEASE_EVENT, True), Move.RELEASE_TIMEOUT: (RELEASE_EVENT, True),
          Move.ADMIN_RELEASED: (ADMIN_EVENT, False)}
KEYS = (A.GATE, A.GATE_CONFIG, A.GATE_SINCE, A.GATE_REASON)


@dataclass(frozen=True)
class Gate:
    """The gate's part of a pool's plan: the move and what to say of it."""
    move: Move
    message: str = ""


def paused(pool: Mapping[str, Any]) -> bool:
    return (pool.get("spec") or {}).get("paused") is True


def rendered(pool: Mapping[str, Any]) -> str:
    return str(((pool.get("spec") or {}).get("configuration") or {}).get("name") or "")


def rolled_out(pool: Mapping[str, Any]) -> bool:
    """Every machine is on the pool's rendered config (`calculateStatus`,
    pkg/controller/node/status.go: status.configuration follows spec's only once all are updated)."""
    status = pool.get("status") or {}
    total, updated = status.get("machineCount") or 0, status.get("updatedMachineCount") or 0
    return ((status.get("configuration") or {}).get("name") or "") == rendered(pool) and updated >= total


def waiting(pool: Mapping[str, Any]) -> bool:
    """We hold the pool with a change held back (its machines are not on its rendered config), not
    merely paused between rollouts."""
    return objects.annotations(pool).get(A.GATE) == HELD and paused(pool) and not rolled_out(pool)


def since(pool: Mapping[str, Any]) -> datetime | None:
    try:
        return datetime.strptime(objects.annotations(pool).get(A.GATE_SINCE, ""), "%Y-%m-%dT%H:%M:%SZ") \
            .replace(tzinfo=UTC)
    except ValueError:
        return None


def seen(pool: Mapping[str, Any], after: Mapping[str, str], gate: bool, now: datetime,
         timeout: int) -> Seen:
    """`after`: the pool's annotations as this run's plan leaves them (its state, image and rollout
    check of the current rendered config)."""
    ann = objects.annotations(pool)
    record = ann.get(A.GATE)
    config = rendered(pool)
    check = (after.get(A.ROLLOUT) or "").partition("=")
    ready = (after.get(A.STATE) == A.SUCCEEDED and after.get(A.RENDERED) == config
             and bool(after.get(A.IMAGE)) and check[0] == config and check[2] == after.get(A.IMAGE))
    started = since(pool)
    return Seen(gate=gate, paused=paused(pool), record=record if record in RECORDS else None,
                same_config=ann.get(A.GATE_CONFIG) == config, ready=ready, rolled_out=rolled_out(pool),
                failed=after.get(A.STATE) == A.FAILED and after.get(A.RENDERED) == config,
                # a record without a readable time (edited by someone) counts as timed out: a hold never
                # lasts for ever
                timed_out=started is None or (now - started).total_seconds() > timeout)


def plan(pool: Mapping[str, Any], after: Mapping[str, str], gate: bool, now: datetime, timeout: int) -> Gate:
    """The gate's move for the pool (`after`: its annotations as the plan's other writes leave
    them); `ops_on` makes its operations."""
    move = decide(seen(pool, after, gate, now, timeout))
    return Gate(move, message=_message(move, pool, timeout))


def ops_on(base: Mapping[str, Any], gate: Gate, time: str) -> list[dict[str, Any]]:
    """The JSON patch of `base` (the pool as the plan's other writes leave it) that `gate.move`
    makes: spec.paused (guarded by a `test` of its value, or of resourceVersion where it is unset)
    and the record, touching only our keys."""
    if gate.move not in _WRITES:
        return []
    pause, record = _WRITES[gate.move]
    ann = objects.annotations(base)
    out: list[dict[str, Any]] = []
    if pause is not None and paused(base) != pause:
        spec = base.get("spec") or {}
        out += ([{"op": "test", "path": "/spec/paused", "value": spec["paused"]},
                 {"op": "replace", "path": "/spec/paused", "value": pause}] if "paused" in spec
                else patches.guarded(base, [{"op": "add", "path": "/spec/paused", "value": pause}]))
    if record == "":
        wanted: dict[str, str | None] = dict.fromkeys(KEYS)
    elif record is not None:
        # the time a hold waits is one span: kept while the record is about the same config, or while
        # the config it was about never reached the machines (several configs render during one
        # upgrade: holdTimeout bounds the whole wait, not each)
        current = ((base.get("status") or {}).get("configuration") or {}).get("name")
        waiting = record == HELD == ann.get(A.GATE) and ann.get(A.GATE_CONFIG) != current
        keep_since = record == ann.get(A.GATE) and (ann.get(A.GATE_CONFIG) == rendered(base) or waiting)
        wanted = {A.GATE: record, A.GATE_CONFIG: rendered(base),
                  A.GATE_SINCE: ann.get(A.GATE_SINCE) if keep_since else time,
                  A.GATE_REASON: A.one_line(gate.message) if record in (RELEASED, ADMIN) else None}
    else:
        wanted = {}
    change = A.changes(ann, wanted)
    return out + (patches.annotation_ops(base, change) if change else [])


#: what `gate-reason` starts with for each release (status reads it back)
FAILED_REASON, TIMEOUT_REASON = "build failed", "holdTimeout"
#: the MCO's upgrade waits for the pools labelled so (`syncRequiredMachineConfigPools`, pkg/operator/sync.go)
REQUIRED_FOR_UPGRADE = "operator.machineconfiguration.openshift.io/required-for-upgrade"


def shown(pool: Mapping[str, Any]) -> str:
    """What status and explain say of the gate on this pool ("" when nothing)."""
    ann = objects.annotations(pool)
    record = ann.get(A.GATE)
    if record == HELD:
        upgrade = " (the MCO's upgrade waits for it: 'is paused and cannot sync until it is unpaused')" \
            if REQUIRED_FOR_UPGRADE in objects.labels(pool) else ""
        return f"held{upgrade}"
    if paused(pool) and record != HELD:
        return "paused by an administrator"
    if record == RELEASED:
        why = ann.get(A.GATE_REASON, "")
        return f"released ({'build failed' if why.startswith(FAILED_REASON) else 'holdTimeout'})"
    if record == ADMIN:
        return "released by an administrator"
    return ""


def _message(move: Move, pool: Mapping[str, Any], timeout: int) -> str:
    name = objects.name(pool)
    return {
        Move.HOLD: (f"paused pool {name}: the rollout gate holds it until its next rendered config "
                    "carries the image built for it" if rolled_out(pool) else
                    f"paused pool {name}: its nodes get {rendered(pool)} once it carries the image built "
                    "for it"),
        Move.ROLL: f"unpaused pool {name}: {rendered(pool)} carries the image built for its content",
        Move.RELEASE: f"unpaused pool {name}: the rollout gate no longer holds it",
        Move.RELEASE_FAILED: (f"{FAILED_REASON}: released pool {name}: the build for {rendered(pool)} "
                              "failed; its new files roll out on the last good image"),
        Move.RELEASE_TIMEOUT: (f"{TIMEOUT_REASON}: released pool {name}: held longer than holdTimeout "
                               f"({timeout}s) for {rendered(pool)}; its new files roll out on the last good "
                               "image"),
        Move.ADMIN_RELEASED: (f"pool {name} was unpaused by someone else while the gate held it: it is not "
                              f"paused again until they hand it back: oc annotate mcp/{name} {A.GATE}-"),
        Move.ADMIN_PAUSED: f"pool {name} is paused by an administrator: not unpaused here; builds go on",
        Move.ADMIN: (f"pool {name} was released by an administrator: the gate does not pause it; hand it "
                     f"back: oc annotate mcp/{name} {A.GATE}-"),
    }.get(move, "")
