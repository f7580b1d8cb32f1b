"""The decision of a pool: which pools a run decides (`in_scope`), and for each what was observed,
the transition `decide` gives it (core/transitions.py) and everything its actions are built from
(`Decision`). Records of earlier versions and installs enter through core/carryforward.py.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from reconcile.contract import annotations as A
from reconcile.contract import naming, objects
from reconcile.contract.problem import Problem
from reconcile.core import carryforward, desired, images, mcolabel, multiarch, rollout, signgate, storage
from reconcile.core.node import disruption, livechange
from reconcile.core.rollout import check as rolloutcheck
from reconcile.core.storage import disk
from reconcile.core.transitions import NEEDS_BUILD, Observation, Transition, decide
from reconcile.imagebuild import builders, imagecontent
from reconcile.imagebuild.builders.base import Builder, BuildStatus
from reconcile.imagebuild.platform import clusterfacts
from reconcile.imagebuild.settings import Settings

#: Passed as a MachineConfig that does not exist.
MISSING: Mapping[str, Any] = {}


@dataclass(frozen=True)
class Decision:
    """A pool's transition and everything its actions are built from."""
    transition: Transition
    pool_name: str
    pool: Mapping[str, Any] | None = None
    problem: str = ""                                   # BLOCKED
    owned: tuple[Mapping[str, Any], ...] = ()           # OPT_OUT, POOL_GONE: all of the pool's objects
    settings: Settings | None = None
    builder: Builder | None = None
    inputs: desired.BuildInputs | None = None
    attempt: int = 1
    current: tuple[Mapping[str, Any], ...] = ()         # objects of the current build id
    stale: tuple[Mapping[str, Any], ...] = ()           # objects of older build ids
    build_obj: Mapping[str, Any] | None = None
    status: BuildStatus | None = None
    observed: Observation | None = None
    lookup: images.Lookup | None = None
    #: with `rollout: machineconfig`: every pool and our MachineConfigs
    rollout: rollout.View | None = None
    #: BUILT, EQUIVALENT: what the pool's rendered config holds, when the shell read it this run
    #: (`rolloutcheck.due`); recorded on the pool
    checked: rolloutcheck.Check | None = None
    #: the pool's build storage volumes (core/storage/): not build objects, so in neither
    #: `current` nor `stale`
    storage: tuple[Mapping[str, Any], ...] = ()
    #: START, RETRY: the base image's size, when the shell asked the registry (core/storage/disk.py)
    base: disk.BaseSize | None = None
    #: LIVE: what the daemon does with the change (core/node/livechange.py); START: why a change
    #: was not taken live, where the shell asked ("" otherwise)
    live: livechange.LiveVerdict | None = None
    live_why: str = ""
    #: LIVE: the image content digest of the config the image was built from
    built_content: str = ""
    #: SIGN: the image to sign and its signing Pod (core/signgate.py)
    signing: signgate.Signing | None = None
    #: core/signgate.RECORDS with signing on: the `ocl-reconciler.io/signed` record of the image
    #: (None: signing is off, the record goes)
    signed: str | None = None
    #: a mixed pool: each architecture's build (core/multiarch.py); `status` is theirs as one
    parts: tuple[multiarch.Part, ...] = ()

    @property
    def needs_build(self) -> bool:
        """A build object is made: the MachineConfig and the build material are read."""
        if self.parts:
            return self.transition in NEEDS_BUILD | {Transition.PROGRESS} and \
                any(p.needs_object for p in self.parts)
        return self.transition in NEEDS_BUILD

    @property
    def candidate(self) -> str | None:
        """START, RETRY: the image the history maps the build id to; the shell asks the registry
        about it and passes the answer to `with_lookup`. A mixed pool's parts have theirs."""
        found = images.produced(self.pool, self.inputs.build_id) \
            if self.needs_build and not self.parts else None
        # an entry another user may have written is never a source of images: ours only
        ours = found and self.settings is not None and images.ours(found, self.settings.repo)
        return found if ours else None


def with_lookup(d: Decision, lookup: images.Lookup) -> Decision:
    """The decision once the registry said whether it has the candidate image: REUSE if it does
    (with signing on, only if a current key signed it: core/signgate.py `verified`)."""
    assert d.observed is not None and lookup.image == d.candidate
    lookup = signgate.verified(d.settings, lookup)
    observed = replace(d.observed, reusable=bool(lookup.found))
    return signgate.gate(replace(d, transition=decide(observed), observed=observed, lookup=lookup))


def with_parts(d: Decision, parts: tuple[multiarch.Part, ...]) -> Decision:
    """A mixed pool's decision once the shell asked the registry about its parts (the images to
    reuse, each built image's description): decided again on them as one build status."""
    status = multiarch.aggregate(parts, d.settings.repo)
    observed = replace(d.observed, build=status)
    return signgate.gate(replace(d, transition=decide(observed), observed=observed, status=status,
                                 parts=parts))


def built_from(d: Decision) -> str | None:
    """A START that may be a live change (`Settings.applies_live`): the rendered config the pool's
    recorded image was built from (`ocl-reconciler.io/built-config`), which the shell reads with the
    current one and hands to `with_live`. None where the question does not arise."""
    if d.transition is not Transition.START or d.settings is None or not d.settings.applies_live:
        return None
    ann = objects.annotations(d.pool or {})
    built = ann.get(A.BUILT_CONFIG)
    if ann.get(A.STATE) != A.SUCCEEDED or not ann.get(A.IMAGE) or \
            built in (None, "", d.inputs.rendered_config):
        return None
    return built


def with_live(d: Decision, built: Mapping[str, Any], rendered: Mapping[str, Any],
              policy: livechange.Policy, previous: Mapping[str, Any] | None = None) -> Decision:
    """The decision once the shell read the config the image was built from (MISSING: gone), the
    current one and the node disruption policy: LIVE where the nodes take the change live and the
    image was built of the same inputs but for that content; otherwise START, saying why.
    `previous`: the rendered config the pool recorded before (its nodes' config), when another than
    `built`: what the daemon does is said for the nodes' move from it."""
    name = objects.annotations(d.pool or {}).get(A.BUILT_CONFIG, "")
    if not built or not rendered:
        return replace(d, live_why=f"building: {name if not built else d.inputs.rendered_config}, the "
                                   "config to compare with, is gone (pruned rendered configs)")
    content = imagecontent.digest(built)
    if not built_for(objects.annotations(d.pool or {}), d.builder, d.settings.namespace, d.inputs, content):
        return d                         # the settings, a Dockerfile or a rebuild token changed too
    if not policy.usable:
        return replace(d, live_why=f"building: {policy.why}")
    rules = None if policy.legacy else policy.policies
    verdict = livechange.verdict(built, rendered, rules)
    if not verdict.live:
        return replace(d, live=verdict, live_why=f"building: not a live change against {name}: {verdict.why}")
    if previous:                         # what the nodes do: from the config they are on, all of it
        verdict = replace(verdict, actions=disruption.actions(disruption.diff(previous, rendered), rules))
    observed = replace(d.observed, live=True)
    return signgate.gate(replace(d, transition=decide(observed), observed=observed, live=verdict,
                                built_content=content))


def built_for(ann: Mapping[str, str], builder: Builder, namespace: str, inp: desired.BuildInputs,
              content: str | None) -> bool:
    """The pool's recorded build is the one these inputs make with the image content `content` (of
    the config the image was built from): only the rendered config changed since."""
    if not content:
        return False
    old = replace(inp, content=content)
    attempt = _attempt(ann, builder, namespace, old)
    return ann.get(A.BUILD) == desired.build_ref(builder, namespace, old, attempt)


def opted_in(pool: Mapping[str, Any]) -> bool:
    return A.LAYERING_LABEL in objects.labels(pool)


def content_of(pool: Mapping[str, Any], machineconfigs: Mapping[str, Mapping[str, Any]]) -> str | None:
    """The image content digest of the pool's current rendered config: recorded on the pool, else
    from its MachineConfig (None when that is not in `machineconfigs` or missing)."""
    rendered = rendered_config(pool)
    known = A.recorded_content(objects.annotations(pool), rendered)
    if known:
        return known
    mc = machineconfigs.get(rendered)
    return imagecontent.digest(mc) if mc else None


def unknown_content(pools: Iterable[Mapping[str, Any]], only: Iterable[str] = ()) -> list[str]:
    """The rendered configs whose content no pool annotation records: the only MachineConfigs a
    run reads before deciding (a steady run reads none)."""
    selected = set(only)
    return sorted({rendered_config(p) for p in pools if opted_in(p) and rendered_config(p)
                   and (not selected or objects.name(p) in selected)
                   and not A.recorded_content(objects.annotations(p), rendered_config(p))})


def rendered_config(pool: Mapping[str, Any]) -> str:
    return (((pool.get("spec") or {}).get("configuration") or {}).get("name") or "")


def decide_pool(settings: Settings | Problem, pool: Mapping[str, Any],
                owned: Iterable[Mapping[str, Any]],
                machineconfigs: Mapping[str, Mapping[str, Any]] | None = None,
                view: rollout.View | None = None, facts: clusterfacts.ClusterFacts | None = None,
                now: datetime | None = None) -> Decision:
    """The transition of one opted-in pool. `machineconfigs`: rendered configs by name, at least
    those `unknown_content` names; `view`: with `rollout: machineconfig`; `facts`: the OS streams
    and nodes (default: none)."""
    name = objects.name(pool)
    if isinstance(settings, Problem):
        return Decision(Transition.BLOCKED, name, pool, problem=settings.message)
    builder = builders.for_type(settings.builder_type)      # settings.read validated the type
    try:
        inp = desired.inputs(settings, pool, content_of(pool, machineconfigs or {}), facts)
    except desired.Blocked as err:
        return Decision(Transition.BLOCKED, name, pool, problem=str(err))
    why = rollout.blocker(view, pool) if view is not None else None
    if why:
        return Decision(Transition.BLOCKED, name, pool, problem=why)
    ann = objects.annotations(pool)
    attempt = _attempt(ann, builder, settings.namespace, inp)
    volumes = tuple(o for o in owned if o.get("kind") == storage.KIND)
    # neither the rollout nor the build storage is a build object
    owned = [o for o in owned if o.get("kind") not in (rollout.KIND, storage.KIND)]
    ids = {inp.build_id} | (multiarch.part_ids(inp) if multiarch.is_mixed(inp) else set())
    current = tuple(o for o in owned if objects.labels(o).get(naming.BUILD_ID_LABEL) in ids)
    stale = tuple(o for o in owned if o not in current)
    parts = multiarch.parts(pool, inp, builder, current, settings.repo, now) \
        if multiarch.is_mixed(inp) else ()
    build_obj = next((o for o in current if o.get("kind") == builder.kind
                      and objects.name(o) == desired.build_name(inp, attempt)), None) if not parts else None
    status = builder.read_status(build_obj, now) if build_obj is not None else \
        multiarch.aggregate(parts, settings.repo) if parts else None
    ref = desired.build_ref(builder, settings.namespace, inp, attempt)
    carried = carryforward.carried(ann, builder, settings, inp, ref)       # earlier records counted
    observed = Observation(recorded=ann.get(A.STATE), at_ref=carried.at_ref,
                           has_image=bool(ann.get(A.IMAGE)), build=status,
                           attempts_left=attempt < A.MAX_ATTEMPTS,
                           content_recorded=ann.get(A.CONTENT) == A.content(inp.rendered_config, inp.content),
                           legacy_ref=carried.legacy_ref,
                           live_recorded=bool(ann.get(A.LIVE)) and built_for(
                               ann, builder, settings.namespace, inp, ann.get(A.BUILT_CONTENT)))
    return signgate.gate(Decision(decide(observed), name, pool, settings=settings, builder=builder,
                                  inputs=inp, attempt=attempt, current=current, stale=stale,
                                  build_obj=build_obj, status=status, observed=observed, rollout=view,
                                  storage=volumes, parts=parts))


def rollout_view(settings: Settings | Problem, pools: Iterable[Mapping[str, Any]],
                 owned: Iterable[Mapping[str, Any]]) -> rollout.View | None:
    """The view a machineconfig rollout is decided on (every pool, not only those planned)."""
    if isinstance(settings, Problem) or not settings.machineconfig_rollout:
        return None
    pools = list(pools)
    return rollout.view(pools, owned, [objects.name(p) for p in pools if opted_in(p)])


def decide_cluster(settings: Settings | Problem, pools: Iterable[Mapping[str, Any]],
                   owned: Iterable[Mapping[str, Any]], only: Iterable[str] = (),
                   machineconfigs: Mapping[str, Mapping[str, Any]] | None = None,
                   view: rollout.View | None = None,
                   facts: clusterfacts.ClusterFacts | None = None,
                   now: datetime | None = None) -> list[Decision]:
    """Decisions for every pool (or those in `only`), opted-out pools and orphaned objects
    included; objects without our labels are never acted on. `view` defaults to one of these
    pools and objects."""
    pools, owned = list(pools), list(owned)
    view = view if view is not None else rollout_view(settings, pools, owned)
    return [decide_one(settings, entry, machineconfigs, view, facts, now)
            for entry in in_scope(pools, owned, only)]


@dataclass(frozen=True)
class Scoped:
    """A pool to decide, with our objects labelled for it; `pool` None: the pool is gone and
    `name` is the label its objects carry."""
    name: str
    pool: Mapping[str, Any] | None
    mine: tuple[Mapping[str, Any], ...] = ()


def in_scope(pools: Iterable[Mapping[str, Any]], owned: Iterable[Mapping[str, Any]],
             only: Iterable[str] = ()) -> list[Scoped]:
    """What decide_cluster decides, in its order: the pools by name (opted in, or opted out with
    something of ours left), then the labels of pools that are gone; the shell decides them one at
    a time (a run carries out each pool's plan before it reads the next one's MachineConfig)."""
    ours = [o for o in owned if objects.matches(naming.SELECTOR, objects.labels(o))
            and objects.labels(o).get(naming.POOL_LABEL)]
    by_pool = objects.by_label(ours, naming.POOL_LABEL)      # keyed by naming.pool_label()
    selected = set(only)
    out = []
    for pool in sorted(pools, key=objects.name):
        name = objects.name(pool)
        if selected and name not in selected:
            continue
        mine = tuple(by_pool.pop(naming.pool_label(name), []))
        if opted_in(pool) or mcolabel.carries(pool) or mine or \
                any(A.owned(k) for k in objects.annotations(pool)):
            out.append(Scoped(name, pool, mine))
    for label, orphans in sorted(by_pool.items()):
        if not selected or label in {naming.pool_label(s) for s in selected}:
            out.append(Scoped(label, None, tuple(orphans)))
    return out


def decide_one(settings: Settings | Problem, entry: Scoped,
               machineconfigs: Mapping[str, Mapping[str, Any]] | None = None,
               view: rollout.View | None = None, facts: clusterfacts.ClusterFacts | None = None,
               now: datetime | None = None) -> Decision:
    """The decision of one entry of `in_scope`; `view` as decide_cluster makes it."""
    if entry.pool is None:
        return Decision(Transition.POOL_GONE, entry.name, owned=entry.mine, rollout=view)
    if mcolabel.carries(entry.pool):
        release = settings.release_version if isinstance(settings, Settings) else ""
        return Decision(Transition.MCO_LABEL, entry.name, entry.pool, owned=entry.mine, rollout=view,
                        problem=mcolabel.problem(entry.name, release))
    if opted_in(entry.pool):
        return decide_pool(settings, entry.pool, entry.mine, machineconfigs, view, facts, now)
    return Decision(Transition.OPT_OUT, entry.name, entry.pool, owned=entry.mine, rollout=view)


def _attempt(ann: Mapping[str, str], builder: Builder, namespace: str, inp: desired.BuildInputs) -> int:
    """The attempt the pool's annotations are about, when they are about this build."""
    try:
        attempt = max(1, min(A.MAX_ATTEMPTS, int(ann.get(A.ATTEMPT) or 1)))
    except ValueError:
        attempt = 1
    return attempt if ann.get(A.BUILD) == desired.build_ref(builder, namespace, inp, attempt) else 1

