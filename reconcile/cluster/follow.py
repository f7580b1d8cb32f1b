"""A run that follows its changes (`run --wait SECONDS`): after the pass every run makes, it waits,
within a deadline, for what core/waits.py says the pools it builds still wait for (a build to end,
the render of our MachineConfig, the gate's release), and plans again on every change.

It works from watch events, not a LIST loop. The first pass reads as any run does, through a
`Cache` (cluster/cache.py) that keeps what that read LISTed; the watched LISTs (our build Pods and
Builds, the MachineConfigPools) are then watched from the resourceVersion each LIST answered, and
kept current by the events, the rest by our own writes. Each change is planned again with the same
pure core from what was read (the same pass: observe, planner, apply), so a pool whose build ends
is recorded, its MachineConfig written and, once the MCO rendered it, its gate released, while
another pool's build still runs: no pool waits behind another. A pass that wrote something is
followed by another at once (a custom pool's write that waited for ours goes on in the same run).
The nodes are not waited for: a later run holds the pool again once every machine is updated.

It ends when nothing is waited for, at the deadline, on Ctrl-C, when a write failed (the pool's
error is recorded, and the same write would most likely fail again: planning again on the next
event would build again, or repeat the write, until the deadline), or when the Lease cannot be
renewed (then it stops writing at once: another run may hold it). Whatever it ends on, every pass
recorded what it did as it went, as a run killed between two writes does: the next run resumes.
A steady run (nothing to wait for) makes no request more than one without `--wait`."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from reconcile.cluster import ClusterError, observe
from reconcile.cluster.apply import RunResult
from reconcile.cluster.cache import Cache
from reconcile.cluster.lease import Keeper
from reconcile.cluster.observe import Observed
from reconcile.core import waits as W
from reconcile.imagebuild.settings import Settings
from reconcile.output.waiting import Shower

log = logging.getLogger("reconcile")

#: How often a waiting run pushes its metrics when nothing changes (the alert
#: OclReconcilerNotRunning fires after 900 s without a push).
REPORT_EVERY = 60.0
#: A pass that wrote something is followed at once by another, at most this many times in a row.
SETTLE_PASSES = 8
#: How long the loop waits for events at a time (the terminal's line is redrawn as often).
TICK = 1.0


@dataclass
class Pass:
    """What a pass (or the run so far) did: what it read, its result, its stray MachineConfigs."""
    seen: Observed
    result: RunResult
    strays: int = 0


@dataclass
class Ended:
    """How the waiting ended: `why` is one of DONE, DEADLINE, INTERRUPTED, LEASE_LOST, UNCHANGING,
    UNREAD, WRITE_FAILED; `waits` what it still waited for."""
    why: str
    waits: tuple[W.Wait, ...] = ()


DONE, DEADLINE, INTERRUPTED, LEASE_LOST, UNCHANGING, UNREAD, WRITE_FAILED = (
    "nothing more to wait for", "the wait deadline passed", "interrupted", "the Lease could not be renewed",
    "nothing else changes this cluster (a snapshot)", "a read failed", "a write failed")


def deadline(flag: float, found: Settings | Any) -> float:
    """The seconds a run waits: `--wait`'s, shortened by the settings key `waitDeadline` (never
    lengthened: the flag is what the Job's activeDeadlineSeconds was sized for)."""
    key = found.wait_deadline if isinstance(found, Settings) else None
    return flag if key is None else min(flag, float(key))


def _utcnow() -> datetime:
    return datetime.now(UTC)


def waiting_for(cache: Cache, namespace: str) -> list[W.Wait]:
    """What the pools wait for, from what is kept (observe's read again, all of it from the cache)."""
    seen = observe.observe(cache, namespace)
    return W.waits(seen.pools, seen.owned)


def follow(cluster: Any, one_pass: Callable[[Any, datetime], Pass], wait: float, *, namespace: str,
           keeper: Keeper | None = None, shower: Shower | None = None,
           report: Callable[[Pass], None] | None = None, clock: Callable[[], float] = time.monotonic,
           now: Callable[[], datetime] = _utcnow) -> tuple[Pass, Ended]:
    """The first pass, then the waiting (see the module's docstring). `one_pass(cluster, now)` is
    run's pass on the cluster given (here the cache); `wait` the flag's seconds; `report` pushes the
    metrics of the run so far (after each pass that wrote, and every REPORT_EVERY seconds)."""
    started = clock()
    shower = shower or Shower(None)
    cache = Cache(cluster)
    done = one_pass(cache, now())
    if done.result.unread:
        return done, Ended(UNREAD)
    waiting = _Waiting(cluster, cache, one_pass, namespace, keeper, shower, report, clock, now, done)
    try:
        return waiting.until(started + deadline(wait, done.seen.settings))
    except KeyboardInterrupt:
        return waiting.done, Ended(INTERRUPTED, tuple(waiting.current))
    except ClusterError as err:             # a read of a pass: what was done is recorded
        return (replace(waiting.done, result=RunResult(waiting.done.result.outcomes, str(err))),
                Ended(UNREAD, tuple(waiting.current)))
    finally:
        if waiting.watcher is not None:
            waiting.watcher.close()
        shower.close()


@dataclass
class _Waiting:
    """The waiting after the first pass: what was done so far and what is still waited for, the
    watcher of the cache's streams, and when the metrics were last reported."""
    cluster: Any
    cache: Cache
    one_pass: Callable[[Any, datetime], Pass]
    namespace: str
    keeper: Keeper | None
    shower: Shower
    report: Callable[[Pass], None] | None
    clock: Callable[[], float]
    now: Callable[[], datetime]
    done: Pass
    current: list[W.Wait] = field(default_factory=list)
    watcher: Any = None
    reported: float = 0.0

    def until(self, until: float) -> tuple[Pass, Ended]:
        """Settle the first pass, then take events until the waiting ends."""
        ended = self._settled()
        if ended:
            return self.done, ended
        if self.report is not None:
            self.report(self.done)
        self.reported = self.clock()
        while True:
            ended = self._step(until)
            if ended:
                return self.done, ended

    def _settled(self) -> Ended | None:
        """Passes again while the last wrote; then what is still waited for, and the end if this is it."""
        done = _settle(self.cache, self.one_pass, self.done, self.now, self.keeper, self.clock)
        current = waiting_for(self.cache, self.namespace)
        self.shower.update(current)
        self.done, self.current = done, current
        if _write_failed(done):
            return Ended(WRITE_FAILED, tuple(current))
        return None if current else Ended(DONE)

    def _step(self, until: float) -> Ended | None:
        """One wait for events (at most TICK), a pass again if they changed what is kept, and the
        metrics reported when due."""
        left = until - self.clock()
        if left <= 0:
            return Ended(DEADLINE, tuple(self.current))
        if self.keeper is not None and not self.keeper.keep(self.clock(), self.now()):
            return Ended(LEASE_LOST, tuple(self.current))
        self.watcher = self.watcher or self.cluster.watcher(self.cache.streams())
        self.shower.tick(self.now(), left)
        events = self.watcher.next(min(left, TICK))
        if events is None:
            return Ended(UNCHANGING, tuple(self.current))
        ended = self._take(events)
        if ended:
            return ended
        if self.cache.changed():
            self.shower.clear()
            later = self.one_pass(self.cache, self.now())
            self.done = _then(self.done, later)
            if later.result.unread:
                return Ended(UNREAD, tuple(self.current))
            ended = self._settled()
            if ended:
                return ended
            report_due = bool(later.result.wrote) or self.clock() - self.reported >= REPORT_EVERY
        else:
            report_due = self.clock() - self.reported >= REPORT_EVERY
        if self.report is not None and report_due:
            self.report(self.done)
            self.reported = self.clock()
        return None

    def _take(self, events: Any) -> Ended | None:
        """Events into the cache; a watch refused ends the waiting as a failed read."""
        for event in events:
            if event.type == "ERROR":       # a watch refused (no `watch` in the Role): as a failed read
                refused = RunResult(self.done.result.outcomes, str(event.obj.get("message")))
                self.done = replace(self.done, result=refused)
                return Ended(UNREAD, tuple(self.current))
            if event.type == "RELIST":      # each stream that expired: its LIST again, all watched anew
                self.cache.relist(event.stream)
                if self.watcher is not None:     # closed by an earlier RELIST of the same events
                    self.watcher.close()
                self.watcher = None
            else:
                self.cache.apply(event)
        return None


def _write_failed(done: Pass) -> bool:
    return any(o.error for o in done.result.outcomes)


def _then(done: Pass, later: Pass) -> Pass:
    return Pass(later.seen, done.result.then(later.result), later.strays)


def _settle(cache: Cache, one_pass: Callable[[Any, datetime], Pass], done: Pass, now: Callable[[], datetime],
            keeper: Keeper | None, clock: Callable[[], float]) -> Pass:
    """Passes again at once while the last one wrote something (what one pool's write lets
    another do: a custom pool's MachineConfig before worker's), at most SETTLE_PASSES times."""
    last = done.result
    for _ in range(SETTLE_PASSES):
        if not last.wrote or last.unread or any(o.error for o in last.outcomes) or (
                keeper is not None and not keeper.keep(clock(), now())):
            break
        later = one_pass(cache, now())
        done, last = _then(done, later), later.result
    return done


def said(ended: Ended) -> str:
    """The line that ends the waiting in the log."""
    if ended.why == DONE:
        return "wait done: nothing more to wait for"
    left = "; ".join(w.line() for w in ended.waits)
    more = f"; still waiting for {left}; the next run resumes" if left else ""
    return f"wait ended: {ended.why}{more}"
