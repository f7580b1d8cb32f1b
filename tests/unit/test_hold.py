"""The rollout gate's decisions (core/rollout/hold.py), pure: the cycle issue 30 gives (paused; new content
renders; build; our MachineConfig; the pool renders our image; unpause; every machine updated; pause
again), the administrator's pause and release, and the bounds (a failed build, holdTimeout). The pool
is a dict and each move's patch is applied to it, as the server would."""

from __future__ import annotations

import copy
from datetime import timedelta

import pytest

from reconcile.contract import annotations as A
from reconcile.core import patches
from reconcile.core.rollout import hold
from reconcile.core.rollout.hold import Move
from tests.support import factory as F

T0 = F.NOW
IMAGE = f"{F.REPO}@sha256:" + "1" * 64


def pool(paused=None, rendered="rendered-worker-1", current=None, machines=3, updated=3, **ann):
    p = F.pool("worker", rendered=rendered, annotations=ann)
    if paused is not None:
        p["spec"]["paused"] = paused
    p["status"] = {"machineCount": machines, "updatedMachineCount": updated,
                   "configuration": {"name": current if current is not None else rendered}}
    return p


def built(rendered, image=IMAGE, checked=True):
    """The pool's annotations as a run leaves them when `rendered` carries `image` built for it."""
    return {A.STATE: A.SUCCEEDED, A.RENDERED: rendered, A.IMAGE: image,
            **({A.ROLLOUT: f"{rendered}={image}"} if checked else {})}


def step(p, after, gate=True, now=T0, timeout=7200):
    g = hold.plan(p, after, gate, now, timeout)
    ops = hold.ops_on(p, g, now.strftime("%Y-%m-%dT%H:%M:%SZ"))
    return g.move, (patches.apply(p, ops) if ops else p), ops


def test_the_cycle_is_one_disruption_per_change():
    p = pool()                                                     # opted in, running its config
    move, p, ops = step(p, {A.STATE: A.PENDING, A.RENDERED: "rendered-worker-1"})
    assert move is Move.HOLD and p["spec"]["paused"] is True and p["metadata"]["annotations"][A.GATE] == hold.HELD
    # the pause and its record are one patch: a run killed after it leaves the record with the pause
    assert {op["path"] for op in ops} >= {"/spec/paused", f"/metadata/annotations/{A.GATE.replace('/', '~1')}"}
    # built; our MachineConfig written; the pool renders our image (a new rendered config, same content)
    p["spec"]["configuration"]["name"] = "rendered-worker-2"
    move, p, _ = step(p, built("rendered-worker-2"))
    assert move is Move.ROLL and p["spec"]["paused"] is False
    assert p["metadata"]["annotations"][A.GATE] == hold.ROLLING
    assert p["metadata"]["annotations"][A.GATE_CONFIG] == "rendered-worker-2"
    p["status"]["updatedMachineCount"] = 1                           # the MCO rolls it out
    assert step(p, built("rendered-worker-2"))[0] is Move.KEEP
    p["status"].update(updatedMachineCount=3, configuration={"name": "rendered-worker-2"})
    move, p, _ = step(p, built("rendered-worker-2"))
    assert move is Move.HOLD and p["spec"]["paused"] is True        # held again
    assert step(p, built("rendered-worker-2"))[:2][0] is Move.KEEP   # converged: no writes
    assert hold.ops_on(p, hold.plan(p, built("rendered-worker-2"), True, T0, 7200), "t") == []
    # a new MachineConfig renders while held: the nodes do not move; the hold waits for its image
    p["spec"]["configuration"]["name"] = "rendered-worker-3"
    move, p, _ = step(p, {**built("rendered-worker-2"), A.STATE: A.PENDING, A.RENDERED: "rendered-worker-3"},
                      now=T0 + timedelta(minutes=5))
    assert move is Move.WAIT and p["spec"]["paused"] is True
    assert p["metadata"]["annotations"][A.GATE_CONFIG] == "rendered-worker-3"


def test_a_change_during_the_rollout_stops_it_at_the_next_run():
    p = pool(paused=False, rendered="rendered-worker-2", current="rendered-worker-1", updated=1,
             **{A.GATE: hold.ROLLING, A.GATE_CONFIG: "rendered-worker-2", A.GATE_SINCE: "2026-11-29T11:00:00Z"})
    p["spec"]["configuration"]["name"] = "rendered-worker-3"         # new content, not built yet
    move, p, _ = step(p, {A.STATE: A.PENDING, A.RENDERED: "rendered-worker-3"})
    assert move is Move.HOLD and p["spec"]["paused"] is True


def test_a_kernel_argument_change_rolls_out_at_once_with_no_build():
    p = pool(paused=True, **{A.GATE: hold.HELD, A.GATE_CONFIG: "rendered-worker-1",
                             A.GATE_SINCE: "2026-11-29T11:00:00Z"})
    p["spec"]["configuration"]["name"] = "rendered-worker-4"         # same content, our image (EQUIVALENT)
    assert step(p, built("rendered-worker-4"))[0] is Move.ROLL


def test_an_administrators_pause_is_never_lifted():
    p = pool(paused=True)                                            # no record of ours
    for after in ({A.STATE: A.PENDING, A.RENDERED: "rendered-worker-1"}, built("rendered-worker-1")):
        move, _, ops = step(p, after)
        assert move is Move.ADMIN_PAUSED and ops == []
    rolling = pool(paused=True, **{A.GATE: hold.ROLLING, A.GATE_CONFIG: "rendered-worker-1"})
    assert step(rolling, built("rendered-worker-1"))[0] is Move.ADMIN_PAUSED     # paused during our rollout


def test_an_administrator_who_unpauses_a_held_pool_releases_it_until_handed_back():
    p = pool(paused=False, **{A.GATE: hold.HELD, A.GATE_CONFIG: "rendered-worker-1"})
    move, p, _ = step(p, {A.STATE: A.PENDING, A.RENDERED: "rendered-worker-1"})
    assert move is Move.ADMIN_RELEASED and p["metadata"]["annotations"][A.GATE] == hold.ADMIN
    assert "paused" not in p["spec"] or p["spec"]["paused"] is False
    assert f"oc annotate mcp/worker {A.GATE}-" in p["metadata"]["annotations"][A.GATE_REASON]
    for after in ({A.STATE: A.PENDING, A.RENDERED: "rendered-worker-1"}, built("rendered-worker-1")):
        assert step(p, after)[0] is Move.ADMIN                        # never paused again on our own
    handed = copy.deepcopy(p)
    del handed["metadata"]["annotations"][A.GATE]                    # the documented hand-back
    assert step(handed, built("rendered-worker-1"))[0] is Move.HOLD


@pytest.mark.parametrize("after, now, move", [
    ({A.STATE: A.FAILED, A.RENDERED: "rendered-worker-2"}, T0, Move.RELEASE_FAILED),
    ({A.STATE: A.BUILDING, A.RENDERED: "rendered-worker-2"}, T0 + timedelta(hours=2, seconds=1), Move.RELEASE_TIMEOUT),
    ({A.STATE: A.BUILDING, A.RENDERED: "rendered-worker-2"}, T0 + timedelta(hours=2), Move.KEEP),
])
def test_a_hold_is_bounded(after, now, move):
    p = pool(paused=True, rendered="rendered-worker-2", current="rendered-worker-1", updated=0,
             **{A.GATE: hold.HELD, A.GATE_CONFIG: "rendered-worker-2", A.GATE_SINCE: "2026-11-29T12:00:00Z"})
    got, p, _ = step(p, after, now=now)
    assert got is move
    if move is not Move.KEEP:
        assert p["spec"]["paused"] is False and p["metadata"]["annotations"][A.GATE] == hold.RELEASED
        # released: it stays so (no hold and release in turn) while the config has no image
        assert step(p, after, now=now + timedelta(minutes=5))[0] is Move.KEEP
        # the next success rolls the image out as usual, then the gate holds again
        p["spec"]["configuration"]["name"] = "rendered-worker-3"
        assert step(p, built("rendered-worker-3"))[0] is Move.MARK_ROLLING


@pytest.mark.parametrize("record, paused, move", [
    (hold.HELD, True, Move.RELEASE), (hold.ROLLING, False, Move.FORGET), (hold.ADMIN, False, Move.FORGET),
    (None, True, Move.NOTHING),                                      # an administrator's pause stays
])
def test_the_gate_off_releases_what_we_hold_and_nothing_else(record, paused, move):
    p = pool(paused=paused, **({A.GATE: record, A.GATE_CONFIG: "rendered-worker-1"} if record else {}))
    got, p, _ = step(p, built("rendered-worker-1"), gate=False)
    assert got is move
    assert p["spec"].get("paused", False) is (paused and move is not Move.RELEASE)
    assert not any(k in p["metadata"]["annotations"] for k in hold.KEYS)


def test_pausing_is_guarded_by_its_own_value():
    """Safe under concurrency: the patch tests spec.paused as read (or resourceVersion where the
    field is unset), so a pause or unpause by someone else since our read fails it."""
    unset = pool()
    ops = hold.ops_on(unset, hold.Gate(Move.HOLD), "t")
    assert ops[0] == {"op": "test", "path": "/metadata/resourceVersion", "value": "20"}
    set_ = pool(paused=False)
    ops = hold.ops_on(set_, hold.Gate(Move.HOLD), "t")
    assert ops[:2] == [{"op": "test", "path": "/spec/paused", "value": False},
                       {"op": "replace", "path": "/spec/paused", "value": True}]


def test_a_record_without_a_readable_time_is_not_held_for_ever():
    """A `gate-since` someone removed or garbled counts as timed out (issue 30: a hold never blocks
    the cluster for ever)."""
    for since in (None, "yesterday"):
        ann = {A.GATE: hold.HELD, A.GATE_CONFIG: "rendered-worker-2", **({A.GATE_SINCE: since} if since else {})}
        p = pool(paused=True, rendered="rendered-worker-2", current="rendered-worker-1", updated=0, **ann)
        assert step(p, {A.STATE: A.BUILDING, A.RENDERED: "rendered-worker-2"})[0] is Move.RELEASE_TIMEOUT


def test_one_wait_across_several_rendered_configs_is_one_span():
    """An upgrade renders several configs in turn: holdTimeout bounds the whole wait, not each."""
    p = pool(paused=True, rendered="rendered-worker-3", current="rendered-worker-1", updated=0,
             **{A.GATE: hold.HELD, A.GATE_CONFIG: "rendered-worker-2", A.GATE_SINCE: "2026-11-29T11:00:00Z"})
    move, after, _ = step(p, {A.STATE: A.PENDING, A.RENDERED: "rendered-worker-3"})
    assert move is Move.WAIT and after["metadata"]["annotations"][A.GATE_SINCE] == "2026-11-29T11:00:00Z"
    rested = pool(paused=True, rendered="rendered-worker-3", current="rendered-worker-2",
                  **{A.GATE: hold.HELD, A.GATE_CONFIG: "rendered-worker-2", A.GATE_SINCE: "2026-11-29T11:00:00Z"})
    move, after, _ = step(rested, {A.STATE: A.PENDING, A.RENDERED: "rendered-worker-3"})
    assert move is Move.WAIT and after["metadata"]["annotations"][A.GATE_SINCE] == "2026-11-29T12:00:00Z"


def test_an_administrators_pause_over_a_release_is_theirs():
    p = pool(paused=True, **{A.GATE: hold.RELEASED, A.GATE_REASON: "holdTimeout: released pool failed-pool"})
    assert hold.shown(p) == "paused by an administrator"
    p["spec"]["paused"] = False
    assert hold.shown(p) == "released (holdTimeout)"              # the reason's code, not a word in a name
