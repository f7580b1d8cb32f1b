"""Handing a built image to the MCO (`rollout: machineconfig`): one MachineConfig per pool, named
for it, holding only `spec.osImageURL` and the pool's role label, as the MCO's own
`CreatePreBuiltImageMachineConfig` does (openshift/machine-config-operator
`pkg/controller/common/helpers.go`). The render controller merges it into the pool's rendered
config and the MCO rolls that out like any MachineConfig change.

Other pools can select it. `MergeMachineConfigs` (same file) puts worker-role MachineConfigs
before the others and lets the last `osImageURL` win, and every custom pool must select worker's
MachineConfigs, so a custom pool with no image of its own inherits worker's. So before writing,
every pool's `machineConfigSelector` is evaluated against our MachineConfig's labels:

- a pool we do not build that selects it inherits the image: said before it happens;
- such a pool with `spec.osImageStream.name` would fail to render (the render controller refuses
  an `osImageURL` override with an OS stream): the writing pool is Blocked, naming it;
- a pool we build that selects it, while that pool's own MachineConfig does not exist yet: the
  write waits (its nodes would first reboot into the other pool's image);
- our own pool with an OS stream: Blocked.

Its ownerReference names the pool but is not a controller reference: the render controller's
MachineConfig handlers (`addMachineConfig`, `updateMachineConfig`, `deleteMachineConfig` in
`pkg/controller/render/render_controller.go`) enqueue only the controller owner of a MachineConfig
that has one, so every other pool selecting it (those that inherit the image) would wait for the
informer resync, 20-40 minutes. The reference stays for the garbage collector (a pool deleted while
no run follows takes its MachineConfig along); our runs delete it on opt-out and pool deletion.
One written by an earlier version, a controller reference, is patched once.

Pure: (the view of every pool and of our MachineConfigs) -> actions of the pool's plan. Beside it:
`check` (what the pool's rendered config holds), `hold` (the rollout gate's table) and `gate`
(the gate's share of a pool's plan)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from reconcile.contract import annotations as A
from reconcile.contract import naming, objects, selector
from reconcile.core import events, patches
from reconcile.core.actions import Write
from reconcile.imagebuild import templates
from reconcile.imagebuild.platform.osstream import named_by as stream

PREFIX = "ocl-osimageurl-"
ROLE_LABEL = "machineconfiguration.openshift.io/role"
KIND = "MachineConfig"
#: A label value holds at most 63 characters; the role label holds the pool's name.
ROLE_MAX = 63
#: The start of the pool's message while the write waits for another pool (cleared after).
WAITING = "waiting to roll out "
#: Events on the writing pool: the write (naming every pool that will roll the image out) and
#: the delete (its pools go back to the release's OS image).
ROLLOUT, ROLLBACK = "ImageRollout", "ImageRollback"


def name(pool: str) -> str:
    return PREFIX + pool


def labels(pool: str) -> dict[str, str]:
    return {ROLE_LABEL: pool, naming.MANAGED_BY: naming.MANAGER, naming.POOL_LABEL: naming.pool_label(pool)}


def image_of(mc: Mapping[str, Any] | None) -> str | None:
    return ((mc or {}).get("spec") or {}).get("osImageURL") if mc else None


@dataclass(frozen=True)
class View:
    """What a rollout is decided on: every pool (their selectors and OS streams), the names of
    those we build, and our MachineConfigs by pool name."""
    pools: tuple[Mapping[str, Any], ...] = ()
    built: frozenset[str] = frozenset()
    ours: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    def selecting(self, pool: str) -> list[Mapping[str, Any]]:
        """The other pools whose machineConfigSelector selects pool's MachineConfig. A pool with an
        empty selector is never rendered ("This machineconfigpool is selecting all
        machineconfigs", openshift/machine-config-operator pkg/controller/render/render_controller.go),
        so it selects nothing here. Raises selector.InvalidSelector naming the pool."""
        out = []
        for other in sorted(self.pools, key=objects.name):
            chosen = (other.get("spec") or {}).get("machineConfigSelector")
            if objects.name(other) == pool or (isinstance(chosen, Mapping) and not chosen.get("matchLabels")
                                               and not chosen.get("matchExpressions")):
                continue
            try:
                if selector.selects(chosen, labels(pool)):
                    out.append(other)
            except selector.InvalidSelector as err:
                raise selector.InvalidSelector(
                    f"MachineConfigPool {objects.name(other)}: spec.machineConfigSelector: {err}") from None
        return out


def view(pools: Iterable[Mapping[str, Any]], owned: Iterable[Mapping[str, Any]],
         built: Iterable[str]) -> View:
    """`owned`: objects of ours, of any kind; our MachineConfigs among them are keyed by pool."""
    ours = {}
    for obj in owned:
        if obj.get("kind") == KIND and objects.name(obj).startswith(PREFIX):
            ours[objects.name(obj)[len(PREFIX):]] = obj
    return View(tuple(pools), frozenset(built), ours)


def blocker(v: View, pool: Mapping[str, Any]) -> str | None:
    """Why this pool's image cannot be rolled out through a MachineConfig (it is then Blocked
    before anything is built), or None."""
    pool_name = objects.name(pool)
    if len(pool_name) > ROLE_MAX:
        return (f"MachineConfigPool {pool_name}: rollout: machineconfig labels a MachineConfig "
                f"{ROLE_LABEL}={pool_name}, and a label value holds at most {ROLE_MAX} characters")
    if stream(pool):
        if pool_name not in v.ours:
            return (f"MachineConfigPool {pool_name} sets spec.osImageStream.name {stream(pool)!r}: the MCO "
                    "refuses an osImageURL override on a pool with an OS stream, so rollout: machineconfig "
                    "cannot roll an image out to it")
        remove = '[{"op": "remove", "path": "/spec/osImageStream"}]'
        return (f"MachineConfigPool {pool_name} sets spec.osImageStream.name {stream(pool)!r} and "
                f"MachineConfig {name(pool_name)} exists: the MCO will not render the pool while both do (it "
                "refuses an osImageURL override with an OS stream) and its nodes get no change; remove the "
                f"stream (oc patch mcp/{pool_name} --type=json -p '{remove}') or our image "
                f"(oc delete machineconfig {name(pool_name)}: back to the release's image)")
    try:
        selecting = v.selecting(pool_name)
    except selector.InvalidSelector as err:
        return str(err)
    for other in selecting:
        if objects.name(other) not in v.built and stream(other):
            return (f"MachineConfigPool {objects.name(other)} selects MachineConfig {name(pool_name)} "
                    f"and sets spec.osImageStream.name {stream(other)!r}: the MCO would refuse to render "
                    "it (an osImageURL override with an OS stream); change its machineConfigSelector "
                    "or its stream first")
    return None


@dataclass
class Rollout:
    """What a pool's plan does about its MachineConfig: the actions, why it waits (the pool's
    message) and which pools will roll the image out."""
    actions: list[Write] = field(default_factory=list)
    waiting: str = ""
    pools: tuple[str, ...] = ()
    notes: list[str] = field(default_factory=list)


def desired(pool: Mapping[str, Any], image: str, built_config: str) -> dict[str, Any]:
    pool_name = objects.name(pool)
    return templates.render_object("machineconfig-osimageurl.yaml.j2", name=name(pool_name),
                                   labels=labels(pool_name), annotations={A.BUILT_CONFIG: built_config},
                                   owner=naming.owner_reference(pool, controller=False), image=image)


def _controlled(live: Mapping[str, Any]) -> bool:
    """Written by an earlier version with a controller reference to its pool."""
    return any(isinstance(ref, Mapping) and ref.get("controller")
               for ref in objects.meta(live).get("ownerReferences") or [])


def ensure(v: View, pool: Mapping[str, Any], image: str, built_config: str, time: str,
           since: str) -> Rollout:
    """The pool's MachineConfig points at `image`: nothing when it does; else, unless a pool we
    build would inherit it first, an Event naming the pools that will roll it out, then one write.
    `since`: the pool's transition time once this plan is done (names the Event)."""
    pool_name = objects.name(pool)
    live = v.ours.get(pool_name)
    if live is not None and image_of(live) == image:
        if not _controlled(live):
            return Rollout()
        ops = patches.guarded(live, [{"op": "replace", "path": "/metadata/ownerReferences",
                                      "value": [naming.owner_reference(pool, controller=False)]}])
        return Rollout(actions=[Write("patch", dict(live), tuple(ops), patches.apply(live, ops))],
                       notes=[f"MachineConfig {name(pool_name)}: its ownerReference is no longer a "
                              "controller "
                              "reference, so the render controller enqueues every pool that selects it"])
    selecting = v.selecting(pool_name)        # blocker() has run: the selectors are valid
    early = [objects.name(p) for p in selecting
             if objects.name(p) in v.built and objects.name(p) not in v.ours]
    if early:
        return Rollout(waiting=(f"{WAITING}{image}: pool(s) {', '.join(early)}, built here, select "
                                f"MachineConfig {name(pool_name)} and have no MachineConfig of their own "
                                "yet (their nodes would first reboot into this pool's image)"))
    inheriting = [objects.name(p) for p in selecting if objects.name(p) not in v.built]
    pools = (pool_name, *inheriting)
    heirs = (f" ({', '.join(inheriting)} inherit it: they select this pool's MachineConfigs and set "
             "no osImageURL of their own)") if inheriting else ""
    told = (f"MachineConfig {name(pool_name)} -> {image}: the MCO rolls it out to pool(s) "
            f"{', '.join(pools)}{heirs}")
    out = Rollout(pools=pools, notes=[told])
    out.actions.append(Write("create", events.notice(pool, ROLLOUT, told, f"{name(pool_name)}={image}",
                                                      time, since)))
    want = desired(pool, image, built_config)
    if live is None:
        out.actions.append(Write("create", want))
    else:
        ops = patches.guarded(live, [
            {"op": "replace" if "osImageURL" in (live.get("spec") or {}) else "add",
             "path": "/spec/osImageURL", "value": image},
            *patches.annotation_ops(live, {A.BUILT_CONFIG: built_config}),
            *([{"op": "replace", "path": "/metadata/ownerReferences",
                "value": [naming.owner_reference(pool, controller=False)]}] if _controlled(live) else [])])
        out.actions.append(Write("patch", dict(live), tuple(ops), patches.apply(live, ops)))
    return out


def remove(v: View, pool: Mapping[str, Any] | None, pool_name: str, time: str) -> Rollout:
    """Opt-out (or a deleted pool): our MachineConfig goes, and the MCO rolls the pools that
    rendered it back to the release's OS image, one reboot per node: said in an Event and a note."""
    live = v.ours.get(pool_name)
    if live is None:
        return Rollout()
    told = (f"deleted MachineConfig {name(pool_name)} ({image_of(live)}): the MCO rolls pool {pool_name} "
            "(and any pool that inherited it) back to the release's OS image, a reboot per node")
    out = Rollout(notes=[told])
    if pool is not None:
        since = objects.annotations(pool).get(A.TRANSITION, "")
        out.actions.append(Write("create", events.notice(pool, ROLLBACK, told, name(pool_name), time, since,
                                                          kind="Warning")))
    out.actions.append(Write("delete", dict(live)))
    return out


@dataclass(frozen=True)
class Stray:
    """A MachineConfig named `ocl-osimageurl-*` that we did not write (docs/contract.md)."""
    name: str
    pool: str           # the pool that renders it, or that its name points at ("": none exists)
    why: str
    uid: str = ""

    def line(self) -> str:
        return f"stray MachineConfig {self.name}: {self.why}; the reconciler did not write it"


def named(machineconfigs: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """Those named like ours, whatever their labels (of the metadata-only LIST of every MachineConfig)."""
    return [mc for mc in machineconfigs if objects.name(mc).startswith(PREFIX)]


def _written_for(obj: Mapping[str, Any], pool: str) -> bool:
    """Ours for a pool since deleted: `desired` always names the pool in an ownerReference."""
    return any(isinstance(ref, Mapping) and ref.get("kind") == "MachineConfigPool" and ref.get("name") == pool
               for ref in objects.meta(obj).get("ownerReferences") or [])


def strays(pools: Iterable[Mapping[str, Any]], owned: Iterable[Mapping[str, Any]],
           repo: str | None, listed: Iterable[Mapping[str, Any]] = ()) -> list[Stray]:
    """MachineConfigs named like ours that we did not write, from the labelled LIST of ours
    (`owned`, whole objects) and the metadata-only LIST of every MachineConfig (`listed`: names and
    labels), with the pools' rendered sources (`spec.configuration.source`) saying who renders one:

    - one named like ours without our label;
    - one labelled and named like ours for a pool that does not exist (and that it names in no
      ownerReference: ours for a pool since deleted, which the run deletes), or that is not opted
      in and was never built (no state of ours on it; an opted-out pool's own is deleted by the run);
    - one of ours whose image is not `<repo>@sha256:...` (`repo` None: not checked).

    A pool's sources alone never make a stray: they still name one the run deleted until the MCO
    renders the pool again."""
    by_name = {objects.name(p): p for p in pools}
    labelled = {objects.name(o): o for o in owned
                if o.get("kind") == KIND and objects.name(o).startswith(PREFIX)}
    renders: dict[str, str] = {}
    for pool in sorted(by_name.values(), key=objects.name):
        sources = ((pool.get("spec") or {}).get("configuration") or {}).get("source") or []
        for src in sources if isinstance(sources, list) else []:
            if isinstance(src, Mapping) and isinstance(src.get("name"), str):
                renders.setdefault(src["name"], objects.name(pool))
    lacks = f"it lacks our label {naming.MANAGED_BY}={naming.MANAGER}"
    out: dict[str, Stray] = {}
    for obj in named(listed):
        mc, uid = objects.name(obj), str(objects.meta(obj).get("uid") or "")
        if objects.labels(obj).get(naming.MANAGED_BY) == naming.MANAGER or mc in labelled:
            continue        # ours by label (made between the two LISTs: the next run sees it whole)
        if mc in renders:
            out[mc] = Stray(mc, renders[mc], f"pool {renders[mc]} renders it, and {lacks}", uid)
        else:
            out[mc] = Stray(mc, mc[len(PREFIX):] if mc[len(PREFIX):] in by_name else "", lacks, uid)
    for mc, obj in labelled.items():
        pool_name, uid = mc[len(PREFIX):], str(objects.meta(obj).get("uid") or "")
        pool = by_name.get(pool_name)
        image = image_of(obj) or ""
        if pool is None:
            if not _written_for(obj, pool_name):
                out[mc] = Stray(mc, "", f"no MachineConfigPool {pool_name} exists", uid)
        elif A.LAYERING_LABEL not in objects.labels(pool) and A.STATE not in objects.annotations(pool):
            out[mc] = Stray(mc, pool_name, f"pool {pool_name} is not opted in and was never built", uid)
        elif repo is not None and image.partition("@")[0] != repo:
            out[mc] = Stray(mc, pool_name, f"its osImageURL {image[:200]!r} is not in our repository {repo}",
                            uid)
    return [out[k] for k in sorted(out)]
