"""What a waiting run (`run --wait`) still waits for, from what it read: the pure half of
cluster/follow.py. A run that follows its changes goes on while some pool it builds still has a
step the cluster will take on its own, and the run must act after it:

- **build**: a build object of ours (Pod or Build) that has not ended; the run records its end;
- **render**: our MachineConfig `ocl-osimageurl-<pool>` holds the pool's image but the pool's
  rendered config has not merged it yet (or no run checked the one that did); the run checks it;
- **release**: the rollout gate holds the pool while its rendered config carries its image; the
  run lets it go (`core/rollout/hold.py`);
- **write**: our MachineConfig holds an earlier image while no build runs for the pool (the
  write waits for another pool's MachineConfig, `core/rollout`).

Nothing else: not the nodes (a later run holds the pool again once every machine is updated), nor
a render that failed, an override or an administrator's pause (someone must act; the next run says
so). Pure: (pools, our objects as read) -> the list of `Wait`, in pool order."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from reconcile.contract import annotations as A
from reconcile.contract import naming, objects
from reconcile.core import rollout
from reconcile.core.rollout import check, hold
from reconcile.imagebuild.builders import build, pod

BUILD, RENDER, RELEASE, WRITE = "build", "render", "release", "write"
#: How each kind of build object says where it is.
_READERS = {"Pod": pod, "Build": build}
#: Build states that have not ended.
_RUNNING = (A.PENDING, A.BUILDING)


@dataclass(frozen=True)
class Wait:
    """One step a pool waits for: `what` (BUILD, RENDER, RELEASE, WRITE), `subject` (the build
    object, the rendered config or our MachineConfig), `phase` (the build object's phase, or the
    rollout's state) and `since` (RFC 3339: when that step started, "" when not known)."""
    pool: str
    what: str
    subject: str
    phase: str = ""
    since: str = ""

    @property
    def key(self) -> tuple[str, str, str, str]:
        """What a change of state is: the same wait with another phase is a new line in the log."""
        return (self.pool, self.what, self.subject, self.phase)

    def line(self, now: datetime | None = None) -> str:
        """`worker: build Pod ocl-build-worker-1a2b Running, 2m05s`; elapsed time only with `now`."""
        phase = f" {self.phase}" if self.phase else ""
        return f"{self.pool}: {self.what} {self.subject}{phase}{_elapsed(self.since, now)}"


def _elapsed(since: str, now: datetime | None) -> str:
    if now is None or not since:
        return ""
    try:
        started = datetime.fromisoformat(since.replace("Z", "+00:00"))
    except ValueError:
        return ""
    seconds = max(0, int((now - started).total_seconds()))
    return f", {seconds // 60}m{seconds % 60:02d}s"


def _phase(obj: Mapping[str, Any]) -> str:
    return str((obj.get("status") or {}).get("phase") or ("New" if obj.get("kind") == "Build" else "Pending"))


def _builds(pool: str, owned: Iterable[Mapping[str, Any]]) -> list[Wait]:
    label = naming.pool_label(pool)
    out = []
    for obj in owned:
        reader = _READERS.get(str(obj.get("kind")))
        if reader is None or objects.labels(obj).get(naming.POOL_LABEL) != label:
            continue
        if reader.read_status(obj).state in _RUNNING:
            out.append(Wait(pool, BUILD, objects.ref(obj), _phase(obj),
                            str(objects.meta(obj).get("creationTimestamp") or "")))
    return out


def _rollout(pool: Mapping[str, Any], ours: Mapping[str, Any] | None, building: bool) -> list[Wait]:
    name, ann = objects.name(pool), objects.annotations(pool)
    if ours is None:
        return []
    state = check.state(pool, ours, ann.get(A.IMAGE))
    since = ann.get(A.TRANSITION, "")
    if state.kind == check.WAITING:
        return [] if building else [Wait(name, WRITE, rollout.name(name), state.kind, since)]
    if state.kind in (check.RENDERING, check.UNCHECKED):
        rendered = ((pool.get("spec") or {}).get("configuration") or {}).get("name") or "?"
        return [Wait(name, RENDER, f"{rollout.name(name)} into {rendered}", state.kind, since)]
    held = ann.get(A.GATE) == hold.HELD and bool((pool.get("spec") or {}).get("paused"))
    if state.kind == check.ROLLING_OUT and held and state.updated < state.total:
        return [Wait(name, RELEASE, f"MachineConfigPool {name}", hold.HELD, ann.get(A.GATE_SINCE, ""))]
    return []


def waits(pools: Iterable[Mapping[str, Any]], owned: Iterable[Mapping[str, Any]]) -> list[Wait]:
    """What the pools we build wait for (opted in, or with a build of ours still running), in
    pool order: their running builds, then their rollout's next step."""
    owned = list(owned)
    ours = rollout.view((), owned, ()).ours
    out: list[Wait] = []
    for pool in sorted(pools, key=objects.name):
        name = objects.name(pool)
        builds = _builds(name, owned)
        out += builds
        if A.LAYERING_LABEL in objects.labels(pool) and A.MCO_LAYERING_LABEL not in objects.labels(pool):
            out += _rollout(pool, ours.get(name), bool(builds))
    return out
