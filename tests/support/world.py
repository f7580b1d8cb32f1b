"""What changes an in-memory cluster while a run waits (`MemoryCluster.world`, cluster/follow.py):
each step, a kubelet moves every build of ours on (Running, then the outcome after `build_steps`
steps), and the MCO's render and node controllers and daemon settle (the imitations of
tests/support/mcorender.py and mconode.py: the render controller renders, the node controller
targets nodes of unpaused pools, the daemon moves them). The cluster's objects become what they
made, and the watcher makes its events from that (cluster/memory.py `MemoryWatcher`).

`kill_at(what)` ends the run (as a kill would: `Killed` is no Exception, nothing catches it) the
first time the run is found waiting for that step (core/waits.py), right after the pass that
recorded it."""

from __future__ import annotations

import kubelet  # examples/kubelet.py

from reconcile.contract import naming, objects
from tests.support import factory as F
from tests.support import mconode

RUNNING_PHASES = ("Pending", "Running", "New", None)


class Killed(BaseException):
    """The run is killed here (SIGKILL, OOM, activeDeadlineSeconds)."""


class Stuck(AssertionError):
    """The world took more steps than any scenario needs: the run waits for what never comes."""


class World:
    def __init__(self, counter: mconode.Counter | None = None, build_steps: int = 2, outcome: str = "Succeeded",
                 base: str = F.BASE, limit: int = 40, slower: dict[str, int] | None = None):
        #: `slower`: a pool's builds take this many steps instead of `build_steps`
        self.slower = slower or {}
        self.counter = counter if counter is not None else mconode.Counter()
        self.build_steps, self.outcome, self.base, self.limit = build_steps, outcome, base, limit
        self.steps = 0
        self.ages: dict[str, int] = {}
        #: the world step at which each build of ours ended, by name
        self.ended: dict[str, int] = {}

    def __call__(self, cluster) -> None:
        self.steps += 1
        if self.steps > self.limit:
            raise Stuck(f"{self.steps} steps")
        items = cluster.items()
        for obj in items:
            if obj.get("kind") not in ("Pod", "Build") or naming.MANAGED_BY not in objects.labels(obj):
                continue
            if (obj.get("status") or {}).get("phase") not in RUNNING_PHASES:
                continue
            name = objects.name(obj)
            age = self.ages[name] = self.ages.get(name, 0) + 1
            steps = self.slower.get(objects.labels(obj).get(naming.POOL_LABEL, ""), self.build_steps)
            if age < steps:
                kubelet.set_phase(obj, "Running")
            else:
                kubelet.set_phase(obj, self.outcome, digest=kubelet.digest_for(name)
                                  if self.outcome == "Succeeded" else None)
                self.ended[name] = self.steps
        items, _ = mconode.settle(items, self.base, self.counter)
        cluster.become(items)
