"""Is the pool's rendered config ours? (`rollout: machineconfig`) Once our MachineConfig is written,
the render controller merges it into the pool's rendered config; this module says what that
rendered config holds and how far the MCO rolled it out. Pure: (the pool, the rendered
MachineConfig, the pool's selected MachineConfigs) -> a `Check`, recorded on the pool
(`ocl-reconciler.io/rollout`), and (the pool, our MachineConfig) -> a `State` for status, explain,
metrics and Argo CD.

The merge, as `MergeMachineConfigs` does it (openshift/machine-config-operator
`pkg/controller/common/helpers.go`): the pool's selected MachineConfigs in order, every
`machineconfiguration.openshift.io/role: worker` one first, then the others, each group by name;
`osImageURL` starts as the pool's base image and the **last** MachineConfig that sets it wins,
except those carrying `machineconfiguration.openshift.io/generated-by-controller-version`, which
are skipped for it. So any MachineConfig of the pool that comes after `ocl-osimageurl-<pool>` in
that order and sets `osImageURL` silently wins over ours: the rendered config is then
**overridden**. A render the controller refuses sets the pool's condition `RenderDegraded` True
(`syncFailingStatus`, `pkg/controller/render/render_controller.go`), and the pool keeps its last
rendered config: the rollout stops there.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from reconcile.contract import annotations as A
from reconcile.contract import objects, selector
from reconcile.contract.naming import WORKER
from reconcile.core import images, rollout

#: MachineConfigs of the MCO's own controllers: skipped when the merge picks osImageURL.
GENERATED_BY = "machineconfiguration.openshift.io/generated-by-controller-version"
RENDER_DEGRADED = "RenderDegraded"
#: The Event (Warning, once per rendered config) when another MachineConfig wins over ours.
OVERRIDDEN = "ImageOverridden"

#: What `State.kind` can be (status shows `text`).
WAITING, RENDERING, UNCHECKED, RENDER_FAILED, OVERRIDDEN_KIND, ROLLING_OUT, ROLLED_OUT = (
    "waiting", "rendering", "unchecked", "render failed", "overridden", "rolling out", "rolled out")


@dataclass(frozen=True)
class Check:
    """What a run found in the pool's rendered config: its name, the osImageURL it holds and, when
    that is not an image of ours, the MachineConfig whose osImageURL won ("" otherwise)."""
    rendered: str
    image: str
    winner: str = ""

    def annotations(self) -> dict[str, str | None]:
        """`ocl-reconciler.io/rollout: <rendered config>=<image>`, and
        `ocl-reconciler.io/rollout-overridden-by: <winner>` when overridden (removed otherwise)."""
        return {A.ROLLOUT: f"{self.rendered}={self.image}", A.OVERRIDDEN_BY: self.winner or None}


def parse(value: str | None, winner: str | None = None) -> Check | None:
    rendered, sep, image = (value or "").partition("=")
    return Check(rendered, image, (winner or "").strip()) if sep and rendered and image else None


def recorded_check(pool: Mapping[str, Any]) -> Check | None:
    ann = objects.annotations(pool)
    return parse(ann.get(A.ROLLOUT), ann.get(A.OVERRIDDEN_BY))


def _spec_configuration(pool: Mapping[str, Any]) -> Mapping[str, Any]:
    return ((pool.get("spec") or {}).get("configuration") or {})


def sources(pool: Mapping[str, Any]) -> list[str]:
    """The MachineConfigs the pool's rendered config was merged from (`spec.configuration.source`,
    which the render controller writes with the rendered config's name)."""
    return [str(s.get("name")) for s in _spec_configuration(pool).get("source") or []
            if isinstance(s, Mapping) and s.get("name")]


def due(pool: Mapping[str, Any], ours: Mapping[str, Any] | None) -> bool:
    """Should a run read the rendered config? Only when our MachineConfig is among its sources and
    the pool records no check of that rendered config yet: a steady run reads nothing."""
    rendered = _spec_configuration(pool).get("name") or ""
    check = recorded_check(pool)
    return bool(ours is not None and rendered and objects.name(ours) in sources(pool)
                and (check is None or check.rendered != rendered))


def our_images(pool: Mapping[str, Any], ours: Mapping[str, Any] | None) -> frozenset[str]:
    """Every image of ours the rendered config could hold: our MachineConfig's, the pool's, its
    history's."""
    found = {rollout.image_of(ours), objects.annotations(pool).get(A.IMAGE),
             *(image for _, image in images.entries(pool))}
    return frozenset(i for i in found if i)


def needs_selected(pool: Mapping[str, Any], rendered: Mapping[str, Any],
                   ours: Mapping[str, Any] | None) -> bool:
    """The selected MachineConfigs are read only when the rendered image is not ours (to name the
    MachineConfig that won)."""
    return rollout.image_of(rendered) not in our_images(pool, ours)


def list_selector(pool: Mapping[str, Any]) -> dict[str, Any]:
    """An equality-based selector for one LIST that returns at least every MachineConfig the pool's
    `machineConfigSelector` selects (matchLabels as they are, `In`/`Exists` as "the key exists",
    `DoesNotExist` as absent); `selected` then applies the selector itself. Rendered configs carry
    no labels, so they are not listed."""
    chosen = (pool.get("spec") or {}).get("machineConfigSelector") or {}
    out: dict[str, Any] = dict(chosen.get("matchLabels") or {})
    for expr in chosen.get("matchExpressions") or []:
        key, op = expr.get("key"), expr.get("operator")
        if key and key not in out and op in ("In", "Exists"):
            out[key] = None
        elif key and key not in out and op == "DoesNotExist":
            out[key] = objects.ABSENT
    return out or {rollout.ROLE_LABEL: None}


def merge_order(machineconfigs: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """`MergeMachineConfigs`' order: role-worker MachineConfigs by name, then all others by name."""
    mcs = sorted(machineconfigs, key=objects.name)
    return ([m for m in mcs if objects.labels(m).get(rollout.ROLE_LABEL) == WORKER]
            + [m for m in mcs if objects.labels(m).get(rollout.ROLE_LABEL) != WORKER])


def generated(mc: Mapping[str, Any]) -> bool:
    return GENERATED_BY in objects.annotations(mc)


def winner(machineconfigs: Iterable[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """The MachineConfig whose osImageURL the merge keeps: the last in merge order that sets one,
    generated ones skipped; None when none does (the pool's base image stays)."""
    setting = [m for m in merge_order(machineconfigs) if not generated(m) and rollout.image_of(m)]
    return setting[-1] if setting else None


def selected(pool: Mapping[str, Any], listed: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """Of the MachineConfigs listed, those the rendered config was merged from (its sources; all
    that the pool's selector selects when the pool names none)."""
    chosen = (pool.get("spec") or {}).get("machineConfigSelector")
    try:
        picked = [m for m in listed if selector.selects(chosen, objects.labels(m))]
    except selector.InvalidSelector:
        picked = list(listed)
    names = set(sources(pool))
    return [m for m in picked if objects.name(m) in names] if names else picked


def check(pool: Mapping[str, Any], rendered: Mapping[str, Any], ours: Mapping[str, Any] | None,
          listed: Iterable[Mapping[str, Any]] = ()) -> Check:
    """The verdict on the pool's rendered config. `listed`: the pool's MachineConfigs (read only
    when `needs_selected`)."""
    image = rollout.image_of(rendered) or ""
    name = objects.name(rendered)
    if not needs_selected(pool, rendered, ours):
        return Check(name, image)
    won = winner(selected(pool, listed))
    if won is not None and objects.name(won) != objects.name(ours or {}):
        return Check(name, image, objects.name(won))
    return Check(name, image)       # ours won since: the pool renders again (or someone removed the winner)


def render_failed(pool: Mapping[str, Any]) -> str | None:
    """The message of the pool's `RenderDegraded` condition when it is True, else None."""
    for cond in ((pool.get("status") or {}).get("conditions") or []):
        if isinstance(cond, Mapping) and cond.get("type") == RENDER_DEGRADED and cond.get("status") == "True":
            return str(cond.get("message") or cond.get("reason") or RENDER_DEGRADED)
    return None


@dataclass(frozen=True)
class State:
    """How far the pool renders and runs the image its rendered config holds."""
    kind: str
    image: str = ""                 # the image the rendered config holds, when checked
    winner: str = ""                # overridden: the MachineConfig that wins
    message: str = ""               # render failed: the condition's message
    updated: int = 0
    total: int = 0
    degraded: int = 0

    @property
    def text(self) -> str:
        """What status shows: `rolled out`, `3/5 nodes`, `overridden by zz-os`, `render failed`, ..."""
        if self.kind == OVERRIDDEN_KIND:
            return f"overridden by {self.winner}"
        if self.kind == ROLLING_OUT:
            degraded = f", {self.degraded} degraded" if self.degraded else ""
            return f"{self.updated}/{self.total} nodes{degraded}"
        return self.kind

    def describe(self, pool: str, ours: str) -> str:
        """One sentence for explain and preflight: what it means and what to do."""
        if self.kind == OVERRIDDEN_KIND:
            return (f"MachineConfig {self.winner} sets osImageURL and comes after {ours} in the MCO's merge "
                    f"order (role worker first, then the others, each by name; the last osImageURL wins), so "
                    f"pool {pool}'s rendered config holds {self.image}, not our image: rename {self.winner} "
                    f"to sort before {ours}, or remove its osImageURL")
        if self.kind == RENDER_FAILED:
            return f"the MCO cannot render pool {pool} (RenderDegraded): {self.message}"
        if self.kind == RENDERING:
            return f"the MCO has not rendered {ours}'s image into pool {pool}'s rendered config yet"
        if self.kind == UNCHECKED:
            return f"the next run checks pool {pool}'s rendered config"
        if self.kind == WAITING:
            return f"{ours} still holds an earlier image: the write of this one waits"
        return (f"pool {pool}'s rendered config holds our image {self.image}: {self.updated} of {self.total} "
                f"node(s) run it" + (f", {self.degraded} degraded" if self.degraded else ""))


def state(pool: Mapping[str, Any], ours: Mapping[str, Any], wanted: str | None = None) -> State:
    """The rollout of our MachineConfig `ours` to `pool`, from the pool alone (its status and our
    annotation). `wanted`: the image the pool records (None: a pool that inherits ours)."""
    if wanted is not None and rollout.image_of(ours) != wanted:
        return State(WAITING)
    failed = render_failed(pool)
    if failed:
        return State(RENDER_FAILED, message=failed)
    if objects.name(ours) not in sources(pool):
        return State(RENDERING)
    rendered = _spec_configuration(pool).get("name") or ""
    found = recorded_check(pool)
    if found is None or found.rendered != rendered:
        return State(UNCHECKED)
    if found.winner:
        return State(OVERRIDDEN_KIND, found.image, found.winner)
    if found.image != rollout.image_of(ours):
        return State(RENDERING, found.image)        # it holds an earlier image of ours
    status = pool.get("status") or {}
    total, updated = _count(status, "machineCount"), _count(status, "updatedMachineCount")
    degraded = _count(status, "degradedMachineCount")
    current = (status.get("configuration") or {}).get("name")
    kind = ROLLED_OUT if current == rendered and updated >= total else ROLLING_OUT
    return State(kind, found.image, updated=updated, total=total, degraded=degraded)


def _count(status: Mapping[str, Any], key: str) -> int:
    try:
        return max(0, int(status.get(key) or 0))
    except (TypeError, ValueError):
        return 0


def problems(pools: Iterable[Mapping[str, Any]], owned: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    """The opted-in pools whose rollout needs someone (overridden, render failed), with what to do:
    preflight's warnings. `owned`: our objects (our MachineConfigs among them)."""
    ours = rollout.view((), owned, ()).ours
    out = {}
    for pool in pools:
        name = objects.name(pool)
        if A.LAYERING_LABEL in objects.labels(pool) and name in ours:
            found = state(pool, ours[name], objects.annotations(pool).get(A.IMAGE))
            if found.kind in (OVERRIDDEN_KIND, RENDER_FAILED):
                out[name] = found.describe(name, rollout.name(name))
    return out
