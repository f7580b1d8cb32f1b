"""The pure core of a run, as a state machine: what was observed about a pool -> one transition
(`decide`, one match) -> the actions of that transition (one small function each, `ACTIONS`).

Each run looks at the cluster once. The pool's annotations say which build the recorded state is
about (`ocl-reconciler.io/build`), so a run killed anywhere is resumed by the next one: objects
are created before the state that names them is written, and a success (or a retry's new
attempt) is recorded before the older build objects are deleted. `Transition` holds the lifecycle
table of docs/contract.md, row by row; tests/unit/test_lifecycle_unit.py checks the two against each other.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from reconcile.contract import annotations as A
from reconcile.contract import naming, objects
from reconcile.contract.problem import Problem
from reconcile.core import desired, events, images, mcolabel, patches, rollout, rolloutcheck
from reconcile.core.actions import Action, PoolPlan
from reconcile.imagebuild import architecture, builders, clusterfacts, imagecontent
from reconcile.imagebuild.builders.base import Builder, BuildStatus
from reconcile.imagebuild.settings import MCO_NAMESPACE, Settings

#: Passed as a MachineConfig that does not exist.
MISSING: Mapping[str, Any] = {}


class Transition(enum.Enum):
    """(situation, outcome): the lifecycle table of docs/contract.md, one member a row."""
    START = ("no build object for the current inputs (a new pool, or inputs changed: a new "
             "rendered config, settings, custom Dockerfile or rebuild token)",
             "create the ConfigMaps (our auth Secrets where needed) and the Pod or Build; delete the "
             "older builds' objects (a running one is interrupted: the message says which); `Pending`")
    REUSE = ("the same, but the pool's image history says this build id already produced an image "
             "(a rollback) and the registry still has its manifest",
             "build nothing: record that image, `Succeeded`, `reused <image> of build <id>`, Event "
             "`BuildReused`; delete the older builds' objects")
    PROGRESS = ("Pod `Pending` / `Running` (Build `New`, `Pending` / `Running`)", "`Pending` / `Building`")
    SUCCEED = ("Pod `Succeeded` with a digest in its termination message (Build `Complete` with "
               "`imageDigest`)", "record the image; `Succeeded`; delete the build's objects")
    FAIL = ("the same without a digest, or Pod `Failed` (Build `Failed`, `Error`, `Cancelled`)",
            "`Failed` with the reason; objects kept for debugging")
    STAY_FAILED = ("recorded `Failed` for the current inputs",
                   "nothing: no automatic re-creation for the same inputs (older builds' objects go)")
    RETRY = ("the build failed for a transient reason, or its Pod or Build was deleted by someone",
             "another attempt (at most 3): `Pending`, `ocl-reconciler.io/attempt` counts, the message "
             "keeps each attempt's reason")
    GIVE_UP = ("the same at the third attempt", "`Failed`: `failed after 3 attempts: ...`")
    EQUIVALENT = ("built for the current inputs, but recorded for another rendered config with the same "
                  "image content (our own osImageURL MachineConfig or a kernel argument gave the pool a new "
                  "rendered config), or recorded `Succeeded` by an earlier version under its build id",
                  "build nothing: one pool patch records the rendered config and its content digest, "
                  "the image is kept; no Event")
    BUILT = ("already built for the current inputs", "no writes at all (leftovers of a killed run go); "
             "with `rollout: machineconfig`, the pool's MachineConfig is written if it is missing or "
             "points at another image")
    OPT_OUT = ("label removed", "delete the pool's build objects (and its rollout MachineConfig: the MCO "
               "then rolls the pool back to the release's OS image, Event `ImageRollback`), remove every "
               "`ocl-reconciler.io/*` annotation (a rebuild request too) and the image annotation")
    POOL_GONE = ("pool deleted", "its objects are deleted (no garbage collector is needed)")
    BLOCKED = ("invalid or missing inputs",
               "`Blocked`; the message names the ConfigMap, Secret or key; other pools go on")
    MCO_LABEL = ("the pool carries the MCO's label `machineconfiguration.openshift.io/layering-enabled` "
                 "(with ours or without)",
                 "nothing built or deleted, the record and the MachineConfig kept; reported as `Blocked` "
                 "(exit 2): what the label does to the MCO of this release and the two `oc label` commands "
                 "that move the pool to ours; `ocl-reconciler.io/mco-label` records it and Event "
                 "`MCOLayeringLabel` (Warning) says it once")

    @property
    def situation(self) -> str:
        return self.value[0]

    @property
    def outcome(self) -> str:
        return self.value[1]


#: Transitions that make a new build object: they need the MachineConfig and the build material.
NEEDS_BUILD = frozenset({Transition.START, Transition.RETRY})


@dataclass(frozen=True)
class Observation:
    """What `decide` looks at: the recorded state and the live build object of the current inputs."""
    recorded: str | None                  # the pool's state annotation
    at_ref: bool                          # the annotations are about this build (and attempt)
    has_image: bool
    build: BuildStatus | None             # the current attempt's build object, read by its builder
    attempts_left: bool
    #: the registry has the image the history maps this build id to (asked only for a START or
    #: RETRY, see `with_lookup`)
    reusable: bool = False
    #: the pool's recorded rendered config and content digest are the current ones
    content_recorded: bool = True
    #: the annotations are about the build an earlier version named for the current inputs
    legacy_ref: bool = False


def decide(o: Observation) -> Transition:
    match o:
        case Observation(at_ref=True, recorded=A.SUCCEEDED, has_image=True, content_recorded=True):
            return Transition.BUILT
        case Observation(at_ref=True, recorded=A.SUCCEEDED, has_image=True):
            return Transition.EQUIVALENT
        case Observation(legacy_ref=True, recorded=A.SUCCEEDED, has_image=True):
            return Transition.EQUIVALENT
        case Observation(at_ref=True, recorded=A.FAILED | A.INTERRUPTED):
            return Transition.STAY_FAILED
        case Observation(reusable=True):
            return Transition.REUSE
        case Observation(build=BuildStatus(state=A.FAILED, transient=True), attempts_left=False):
            return Transition.GIVE_UP
        case Observation(build=BuildStatus(state=A.FAILED, transient=True)):
            return Transition.RETRY
        case Observation(build=BuildStatus(state=A.SUCCEEDED)):
            return Transition.SUCCEED
        case Observation(build=BuildStatus(state=A.FAILED)):
            return Transition.FAIL
        case Observation(build=BuildStatus()):
            return Transition.PROGRESS
        case Observation(build=None, at_ref=True, recorded=A.PENDING | A.BUILDING, attempts_left=False):
            return Transition.GIVE_UP
        case Observation(build=None, at_ref=True, recorded=A.PENDING | A.BUILDING):
            return Transition.RETRY
        case _:
            return Transition.START


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

    @property
    def needs_build(self) -> bool:
        return self.transition in NEEDS_BUILD

    @property
    def candidate(self) -> str | None:
        """START, RETRY: the image the history maps the build id to; the shell asks the registry
        about it and passes the answer to `with_lookup`."""
        return images.produced(self.pool, self.inputs.build_id) if self.needs_build else None


def with_lookup(d: Decision, lookup: images.Lookup) -> Decision:
    """The decision once the registry said whether it has the candidate image: REUSE if it does."""
    assert d.observed is not None and lookup.image == d.candidate
    observed = replace(d.observed, reusable=bool(lookup.found))
    return replace(d, transition=decide(observed), observed=observed, lookup=lookup)


def rfc3339(now: datetime) -> str:
    return now.strftime("%Y-%m-%dT%H:%M:%SZ")


def opted_in(pool: Mapping[str, Any]) -> bool:
    return A.LAYERING_LABEL in objects.labels(pool)


# --- deciding ----------------------------------------------------------------------------------

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
    why = rollout.problem(view, pool) if view is not None else None
    if why:
        return Decision(Transition.BLOCKED, name, pool, problem=why)
    ann = objects.annotations(pool)
    attempt = _attempt(ann, builder, settings.namespace, inp)
    owned = [o for o in owned if o.get("kind") != rollout.KIND]     # the rollout is not a build object
    current = tuple(o for o in owned if objects.labels(o).get(naming.BUILD_ID_LABEL) == inp.build_id)
    stale = tuple(o for o in owned if o not in current)
    build_obj = next((o for o in current if o.get("kind") == builder.kind
                      and objects.name(o) == desired.build_name(inp, attempt)), None)
    status = builder.read_status(build_obj, now) if build_obj is not None else None
    ref = desired.build_ref(builder, settings.namespace, inp, attempt)
    # an earlier version's record (it wrote no architecture) under an id it gave these inputs, or
    # an earlier install's in the MCO's namespace (docs/namespace.md, "Moving an install")
    attempts = range(1, A.MAX_ATTEMPTS + 1)
    there = {desired.build_ref(builder, MCO_NAMESPACE, inp, n) for n in attempts}
    ids = (inp.build_id, *(desired.legacy_build_ids(inp, settings) if A.ARCH not in ann else ()))
    legacy = ({desired.build_ref(builder, ns, inp, n, old) for ns in (settings.namespace, MCO_NAMESPACE)
               for old in ids for n in attempts}) - {ref}
    # a failure the install in the MCO's namespace recorded for these inputs stays a failure (no
    # automatic retry: a new rebuild token asks for one), as it would have there
    failed_there = ann.get(A.STATE) in (A.FAILED, A.INTERRUPTED) and ann.get(A.BUILD) in there
    observed = Observation(recorded=ann.get(A.STATE), at_ref=ann.get(A.BUILD) == ref or failed_there,
                           has_image=bool(ann.get(A.IMAGE)), build=status,
                           attempts_left=attempt < A.MAX_ATTEMPTS,
                           content_recorded=ann.get(A.CONTENT) == A.content(inp.rendered_config, inp.content),
                           legacy_ref=ann.get(A.BUILD) in legacy
                           and ann.get(A.RENDERED) == inp.rendered_config)
    return Decision(decide(observed), name, pool, settings=settings, builder=builder, inputs=inp,
                    attempt=attempt, current=current, stale=stale, build_obj=build_obj, status=status,
                    observed=observed, rollout=view)


def moved_from(ann: Mapping[str, str], namespace: str) -> str:
    """The namespace of the build the pool's record names, when it is not ours (an install that
    lived in the MCO's namespace): "" otherwise."""
    parts = (ann.get(A.BUILD) or "").split("/")
    return parts[1] if len(parts) == 3 and parts[1] != namespace else ""


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


# --- acting: one function per transition --------------------------------------------------------

@dataclass
class _Step:
    """What a transition's function builds on: the decision, the plan and the clock."""
    d: Decision
    plan: PoolPlan
    now: datetime
    base: dict[str, str | None] = field(default_factory=dict)

    @property
    def ann(self) -> Mapping[str, str]:
        return objects.annotations(self.d.pool or {})

    def record(self, state: str, message: str = "", reason: str | None = None, **extra: str | None) -> None:
        """Write the state (and `extra` keys) on the pool; `reason` overrides the Event's."""
        self.plan.state_after, self.plan.message = state, message
        _annotate(self.plan, self.d.pool or {}, {A.STATE: state, A.MESSAGE: A.one_line(message), **self.base,
                                                 **extra}, self.now, reason)

    def delete(self, objs: Iterable[Mapping[str, Any]]) -> None:
        for obj in sorted(objs, key=objects.sort_key):
            self.plan.actions.append(Action("delete", dict(obj)))


def _built(s: _Step, mc: Mapping[str, Any] | None, material: desired.Material | None) -> None:
    out = _rollout(s, s.ann[A.IMAGE], s.ann.get(A.BUILT_CONFIG) or s.d.inputs.rendered_config, False)
    current = s.ann.get(A.MESSAGE, "")
    change = _checked(s)
    if out.waiting and current != A.one_line(out.waiting):
        change[A.MESSAGE] = A.one_line(out.waiting)
    elif not out.waiting and current.startswith(rollout.WAITING):
        change[A.MESSAGE] = ""
    _patch_annotations(s.plan, s.d.pool, change)
    _apply_rollout(s, out)
    s.delete(s.d.current + s.d.stale)           # leftovers of a run killed after recording
    s.plan.state_after, s.plan.message = A.SUCCEEDED, out.waiting or current


def _equivalent(s: _Step, mc: Mapping[str, Any] | None, material: desired.Material | None) -> None:
    """The image recorded is the one these inputs make: the pool's new rendered config holds the
    same image content, or an earlier version recorded the success under its build id."""
    d, ann, image = s.d, s.ann, s.ann[A.IMAGE]
    if d.observed.legacy_ref and moved_from(ann, d.settings.namespace):
        message = (f"kept {image}: an install of ocl-reconciler in {moved_from(ann, d.settings.namespace)} "
                   f"built it for these inputs")
    elif d.observed.legacy_ref:
        message = (f"kept {image}: an earlier version of ocl-reconciler built it for these inputs "
                   f"(its build id is {d.inputs.build_id} now)")
    else:
        message = (f"{d.inputs.rendered_config} has the image content of "
                   f"{ann.get(A.BUILT_CONFIG) or ann.get(A.RENDERED)}: nothing to build")
    out = _rollout(s, image, ann.get(A.BUILT_CONFIG) or d.inputs.rendered_config, False)
    s.plan.notes.append(message)
    s.plan.state_after, s.plan.message = A.SUCCEEDED, out.waiting or message
    _patch_annotations(s.plan, d.pool, A.changes(ann, {
        **s.base, A.MESSAGE: A.one_line(s.plan.message),
        A.IMAGES: images.recorded(d.pool, d.inputs.build_id, image), **_checked(s)}))
    _apply_rollout(s, out)
    s.delete(d.current + d.stale)


def _stay_failed(s: _Step, mc: Mapping[str, Any] | None, material: desired.Material | None) -> None:
    # an equivalent rendered config (a kernel argument): recorded, so later runs need not read it
    _patch_annotations(s.plan, s.d.pool, A.changes(s.ann, {k: s.base[k] for k in (A.RENDERED, A.CONTENT)}))
    s.delete(s.d.stale)                         # the failed build's objects stay for debugging
    s.plan.state_after, s.plan.message = s.ann.get(A.STATE), s.ann.get(A.MESSAGE, "")


def _succeed(s: _Step, mc: Mapping[str, Any] | None, material: desired.Material | None) -> None:
    image = f"{s.d.settings.repo}@{s.d.status.digest}"                # both parts validated already
    out = _rollout(s, image, s.d.inputs.rendered_config, True)
    _record_image(s, image, out.waiting)
    _apply_rollout(s, out)                                             # after the success is recorded
    s.delete(s.d.current + s.d.stale)


def _reuse(s: _Step, mc: Mapping[str, Any] | None, material: desired.Material | None) -> None:
    """The registry still has the image this build id produced: record it, build nothing."""
    d, image = s.d, s.d.lookup.image
    message = "; ".join(m for m in (f"reused {image} of build {d.inputs.build_id}",
                                     _interrupted(s.ann, s.base[A.BUILD])) if m)
    if d.lookup.simulated:
        s.plan.notes.append(f"reuse {image}: a snapshot run does not ask the registry; a live run "
                            "reuses it only if the registry still has it")
    out = _rollout(s, image, d.inputs.rendered_config, True)
    _record_image(s, image, "; ".join(m for m in (message, out.waiting) if m), reason=events.REUSED)
    _apply_rollout(s, out)
    s.delete(d.current + d.stale)


def _record_image(s: _Step, image: str, message: str = "", reason: str | None = None) -> None:
    inp = s.d.inputs
    s.record(A.SUCCEEDED, message, reason, **{A.IMAGE: image, A.BUILT_CONFIG: inp.rendered_config,
                                              A.IMAGES: images.recorded(s.d.pool, inp.build_id, image)})


def _progress(s: _Step, mc: Mapping[str, Any] | None, material: desired.Material | None) -> None:
    """Follow the build object: its state, and a message that is the build's, else the one kept."""
    ann, ref = s.ann, s.base[A.BUILD]
    kept = ann.get(A.MESSAGE, "") if ann.get(A.BUILD) == ref and ann.get(A.STATE) in (A.PENDING, A.BUILDING) \
        else ""
    kept = _without_waiting(kept, ref)        # what the build object said while it waited: said anew
    status = s.d.status
    s.delete(s.d.stale + ((s.d.build_obj,) if status.abandon and s.d.build_obj is not None else ()))
    if status.state in (A.PENDING, A.BUILDING) and status.message:     # waiting with a reason
        s.record(status.state, "; ".join(m for m in (kept or _interrupted(ann, ref), status.message) if m))
    else:
        s.record(status.state, status.message or _interrupted(ann, ref) or kept)


def _without_waiting(message: str, ref: str) -> str:
    """The message without what the build object said while it waited (`build <ref> is New: ...`)
    after the start notes or an attempt's history, which stay."""
    mark = f"build {ref} is "
    return "" if message.startswith(mark) else message.split("; " + mark, 1)[0]


def _give_up(s: _Step, mc: Mapping[str, Any] | None, material: desired.Material | None) -> None:
    abandoned = s.d.status is not None and s.d.status.abandon and s.d.build_obj is not None
    s.delete(s.d.stale + ((s.d.build_obj,) if abandoned else ()))
    s.record(A.FAILED, f"failed after {s.d.attempt} attempts: {_history(s)}")


def _start(s: _Step, mc: Mapping[str, Any] | None, material: desired.Material | None) -> None:
    """A new build object of the current inputs: the first attempt, or the next (RETRY)."""
    d = s.d
    retry = d.transition is Transition.RETRY
    material = material or desired.Material()
    if material.problem:
        return _blocked(s, material.problem)
    if mc is None or mc is MISSING:
        return _blocked(s, f"MachineConfig {d.inputs.rendered_config} not found")
    attempt = d.attempt + 1 if retry else 1
    try:
        want = desired.objects(d.settings, d.pool, d.inputs, d.builder, mc, material, attempt)
    except desired.Blocked as err:
        return _blocked(s, str(err))
    _ensure(s.plan, want, {(o.get("kind"), objects.name(o)): o for o in d.current})
    why_not = not_reused(d.lookup)
    if retry:
        message = f"attempt {attempt} of {A.MAX_ATTEMPTS} after: {_history(s)}"
        s.plan.notes += [why_not] if why_not else []     # the message keeps attempts only
    else:
        message = "; ".join(m for m in (_interrupted(s.ann, s.base[A.BUILD]), why_not,
                                         desired.build_inputs(d.builder, material).note,
                                         architecture.note(d.inputs.arch)) if m)
    s.base.update({A.BUILD: desired.build_ref(d.builder, d.settings.namespace, d.inputs, attempt),
                   A.ATTEMPT: str(attempt)})
    s.record(A.PENDING, message)
    # after the record, so that a run killed in between tells the same story on the next run
    s.delete(d.stale + ((d.build_obj,) if retry and d.build_obj is not None else ()))


def _opt_out(s: _Step, mc: Mapping[str, Any] | None, material: desired.Material | None) -> None:
    """Our objects go, and so does every key of ours on the pool."""
    s.delete(o for o in s.d.owned if o.get("kind") != rollout.KIND)
    # before the annotations go: the Event is named with the pool's transition time, so a rerun
    # after a kill finds it instead of telling it twice
    _apply_rollout(s, rollout.remove(s.d.rollout or rollout.View(), s.d.pool, s.d.pool_name, rfc3339(s.now)))
    _patch_annotations(s.plan, s.d.pool, {k: None for k in s.ann if A.owned(k)})


def _pool_gone(s: _Step, mc: Mapping[str, Any] | None, material: desired.Material | None) -> None:
    s.delete(o for o in s.d.owned if o.get("kind") != rollout.KIND)
    _apply_rollout(s, rollout.remove(s.d.rollout or rollout.View(), None, s.d.pool_name, rfc3339(s.now)))


def _mco_label(s: _Step, mc: Mapping[str, Any] | None, material: desired.Material | None) -> None:
    """Reported, and nothing else: no state written, nothing deleted (core/mcolabel.py)."""
    told = A.one_line(s.d.problem, 1024)
    if s.ann.get(A.MCO_LABEL) != told:
        s.plan.actions.append(Action("create", events.notice(
            s.d.pool, mcolabel.REASON, told, told, rfc3339(s.now), s.ann.get(A.TRANSITION, ""),
            kind="Warning")))
        _patch_annotations(s.plan, s.d.pool, {A.MCO_LABEL: told})
    s.plan.notes.append(told)               # said by every command, the record unchanged or not
    s.plan.state_after, s.plan.message = A.BLOCKED, told


def _rollout(s: _Step, image: str, built_config: str, transition: bool) -> rollout.Rollout:
    """With `rollout: machineconfig`, what it takes for the pool's MachineConfig to hold `image`.
    `transition`: the plan records a transition (the Event is named with its time)."""
    if s.d.rollout is None:
        return rollout.Rollout()
    since = rfc3339(s.now) if transition else s.ann.get(A.TRANSITION, "")
    return rollout.ensure(s.d.rollout, s.d.pool, image, built_config, rfc3339(s.now), since)


def _checked(s: _Step) -> dict[str, str | None]:
    """The check of the pool's rendered config, when the shell made one: its annotation, and an
    Event (Warning, named for the rendered config, so told once) when another MachineConfig wins."""
    found = s.d.checked
    if found is None:
        return {}
    if found.winner:
        told = rolloutcheck.State(rolloutcheck.OVERRIDDEN_KIND, found.image, found.winner).describe(
            s.d.pool_name, rollout.name(s.d.pool_name))
        s.plan.notes.append(told)
        s.plan.actions.append(Action("create", events.notice(
            s.d.pool, rolloutcheck.OVERRIDDEN, told, found.rendered, rfc3339(s.now), kind="Warning")))
    return A.changes(s.ann, found.annotations())


def _apply_rollout(s: _Step, out: rollout.Rollout) -> None:
    s.plan.actions += out.actions
    s.plan.notes += out.notes
    s.plan.rollout = out.pools


def _blocked(s: _Step, message: str) -> None:
    rendered = (((s.d.pool or {}).get("spec") or {}).get("configuration") or {}).get("name") or None
    s.base = {}
    s.record(A.BLOCKED, message, **{A.RENDERED: rendered})


ACTIONS: dict[Transition, Callable[[_Step, Mapping[str, Any] | None, desired.Material | None], None]] = {
    Transition.START: _start, Transition.RETRY: _start, Transition.REUSE: _reuse,
    Transition.PROGRESS: _progress,
    Transition.SUCCEED: _succeed, Transition.FAIL: _progress, Transition.STAY_FAILED: _stay_failed,
    Transition.GIVE_UP: _give_up, Transition.BUILT: _built, Transition.EQUIVALENT: _equivalent,
    Transition.OPT_OUT: _opt_out,
    Transition.POOL_GONE: _pool_gone,
    Transition.BLOCKED: lambda s, mc, material: _blocked(s, s.d.problem),
    Transition.MCO_LABEL: _mco_label,
}


def act(d: Decision, now: datetime, machineconfig: Mapping[str, Any] | None = None,
         material: desired.Material | None = None) -> PoolPlan:
    """The actions of a decided transition. `machineconfig` (or MISSING) and `material` matter
    only to transitions in NEEDS_BUILD, so only then does the shell read them."""
    step = _Step(d, PoolPlan(d.pool_name, objects.annotations(d.pool or {}).get(A.STATE),
                             transition=d.transition.name), now)
    if d.inputs is not None and d.settings is not None:
        step.base = {A.RENDERED: d.inputs.rendered_config,
                     A.CONTENT: A.content(d.inputs.rendered_config, d.inputs.content),
                     A.ARCH: d.inputs.arch, A.OS_STREAM: d.inputs.os_stream or None,
                     A.BUILDER_IMAGE: d.inputs.builder_image or None,
                     A.BUILD: desired.build_ref(d.builder, d.settings.namespace, d.inputs, d.attempt),
                     A.ATTEMPT: str(d.attempt)}
        if step.ann.get(A.REBUILD):     # the token is in the build id: this build handles the request
            step.base[A.REBUILD_HANDLED] = step.ann[A.REBUILD]
    ACTIONS[d.transition](step, machineconfig, material)
    if A.MCO_LABEL in step.ann and d.transition not in (Transition.MCO_LABEL, Transition.OPT_OUT):
        _forget(step.plan, d.pool, A.MCO_LABEL)        # the pool moved to our label: said no more
    return step.plan


def blocked(pool: Mapping[str, Any], message: str, now: datetime) -> PoolPlan:
    return act(Decision(Transition.BLOCKED, objects.name(pool), pool, problem=message), now)


def plan_cluster(settings: Settings | Problem, pools: list[Mapping[str, Any]], owned: list[Mapping[str, Any]],
                 now: datetime, machineconfigs: Mapping[str, Mapping[str, Any]] | None = None,
                 only: Iterable[str] = (), material: desired.Material | None = None,
                 facts: clusterfacts.ClusterFacts | None = None) -> list[PoolPlan]:
    """decide_cluster then plan, for callers that already hold every MachineConfig (one not in
    `machineconfigs` is taken as missing)."""
    mcs = machineconfigs or {}
    return [act(d, now, mcs.get(d.inputs.rendered_config, MISSING) if d.needs_build else None, material)
            for d in decide_cluster(settings, pools, owned, only, mcs, facts=facts, now=now)]


# --- helpers -----------------------------------------------------------------------------------

def _annotate(plan_: PoolPlan, pool: Mapping[str, Any], wanted: dict[str, str | None], now: datetime,
              reason: str | None = None) -> None:
    current = objects.annotations(pool)
    # a transition: a new state, or the same state about another build (a reuse after a success,
    # a new build interrupting a pending one)
    if wanted.get(A.STATE) and (wanted[A.STATE] != current.get(A.STATE)
                                or (A.BUILD in wanted and wanted[A.BUILD] != current.get(A.BUILD))):
        wanted[A.TRANSITION] = rfc3339(now)
        subject = wanted.get(A.IMAGE) if wanted[A.STATE] == A.SUCCEEDED else None
        subject = subject or wanted.get(A.BUILD) or current.get(A.BUILD) or wanted.get(A.RENDERED) or ""
        # the Event goes first: a rerun after a kill finds it (same name) and does not repeat it
        plan_.actions.append(Action("create", events.event(
            pool, wanted[A.STATE], subject, wanted.get(A.MESSAGE) or "", rfc3339(now), reason,
            since=current.get(A.TRANSITION, ""))))
    _patch_annotations(plan_, pool, A.changes(current, wanted))


def _forget(plan_: PoolPlan, pool: Mapping[str, Any], key: str) -> None:
    """Remove one annotation key of ours, in the plan's patch of the pool if it has one (the key is
    there, so the annotations map is: the ops need no resourceVersion test)."""
    for i, action in enumerate(plan_.actions):
        if action.verb == "patch" and action.obj.get("kind") == "MachineConfigPool":
            ops = (*action.patch, *patches.annotation_ops(pool, {key: None}))
            plan_.actions[i] = Action("patch", action.obj, ops, patches.apply(pool, list(ops)))
            return
    _patch_annotations(plan_, pool, {key: None})


def _patch_annotations(plan_: PoolPlan, pool: Mapping[str, Any], change: Mapping[str, str | None]) -> None:
    """One patch of the pool that touches only the changed keys of ours."""
    if change:
        ops = patches.annotation_ops(pool, change)
        plan_.actions.append(Action("patch", dict(pool), tuple(ops), patches.apply(pool, ops)))


def not_reused(lookup: images.Lookup | None) -> str:
    """Why a build id that produced an image before builds again (nothing if it never did)."""
    if lookup is None or lookup.found:
        return ""
    if lookup.found is False:
        return f"building again: {lookup.image} is gone from the registry"
    return f"building again: could not ask the registry for {lookup.image}: {lookup.detail}"


def _interrupted(ann: Mapping[str, str], ref: str | None) -> str:
    old = ann.get(A.BUILD)
    if ann.get(A.STATE) in (A.PENDING, A.BUILDING) and old and old != ref:
        namespace = (ref or "").split("/")[1] if (ref or "").count("/") == 2 else ""
        moved = moved_from(ann, namespace) if namespace else ""
        if moved and old.split("/")[2] == ref.split("/")[2]:
            return (f"{old}, of the install in {moved}, is not followed from here: built again in "
                    f"{namespace}")
        return f"interrupted {old}: build inputs changed"
    return ""


def _ensure(plan_: PoolPlan, want: list[dict[str, Any]],
            live: Mapping[tuple[str, str], Mapping[str, Any]]) -> None:
    """Create what is missing. Our ConfigMaps and Secrets are immutable and carry a hash of their
    content: one whose hash is not the wanted one (edited, or made by an older version) is
    replaced, deleted (with its uid as precondition) then created; its content is never read."""
    for obj in want:
        have = live.get((obj["kind"], objects.name(obj)))
        if have is None:
            plan_.actions.append(Action("create", obj))
        elif obj["kind"] in ("ConfigMap", "Secret") and _content_hash(have) != _content_hash(obj):
            plan_.actions += [Action("delete", dict(have)), Action("create", obj)]


def _content_hash(obj: Mapping[str, Any]) -> str | None:
    return objects.annotations(obj).get(naming.CONTENT_HASH)


def _attempt(ann: Mapping[str, str], builder: Builder, namespace: str, inp: desired.BuildInputs) -> int:
    """The attempt the pool's annotations are about, when they are about this build."""
    try:
        attempt = max(1, min(A.MAX_ATTEMPTS, int(ann.get(A.ATTEMPT) or 1)))
    except ValueError:
        attempt = 1
    return attempt if ann.get(A.BUILD) == desired.build_ref(builder, namespace, inp, attempt) else 1


def _history(s: _Step) -> str:
    """Each attempt's reason, kept in the one-line message: `attempt 1: ...; attempt 2: ...`."""
    d = s.d
    reason = d.status.message if d.status is not None else f"{s.base[A.BUILD]} was deleted before it finished"
    message = _without_waiting(s.ann.get(A.MESSAGE, ""), s.base[A.BUILD])
    _, sep, earlier = message.partition(" after: ")
    earlier = earlier if sep and message.startswith("attempt ") else ""
    return "; ".join(p for p in (earlier, f"attempt {d.attempt}: {reason}") if p)
