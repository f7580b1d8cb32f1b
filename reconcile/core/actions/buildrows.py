"""The actions of the build rows of the lifecycle table (docs/contract.md): START and RETRY make a
build object, PROGRESS and FAIL follow it, SUCCEED, REUSE, BUILT and EQUIVALENT record and roll out
an image, STAY_FAILED and GIVE_UP keep a failure. One function each, on a `Step`
(core/actions/step.py); core/actions/table.py maps each transition to its function.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from reconcile.contract import annotations as A
from reconcile.contract import objects
from reconcile.core import carryforward, desired, events, images, rollout, signgate, storage
from reconcile.core.actions import WarningNote, Write
from reconcile.core.actions.step import (
    Step,
    apply_rollout,
    checked,
    create_missing,
    patch_annotations,
    record_blocked,
    rfc3339,
    rollout_of,
)
from reconcile.core.decision import MISSING
from reconcile.core.transitions import Transition
from reconcile.imagebuild import builders
from reconcile.imagebuild.platform import architecture


def built(s: Step, mc: Mapping[str, Any] | None, material: desired.Material | None) -> None:
    out = rollout_of(s, s.ann[A.IMAGE], s.ann.get(A.BUILT_CONFIG) or s.d.inputs.rendered_config, False)
    current = s.ann.get(A.MESSAGE, "")
    change = checked(s)
    if A.ARCH_NODES in s.ann and s.base.get(A.ARCH_NODES) != s.ann[A.ARCH_NODES]:
        change[A.ARCH_NODES] = s.base[A.ARCH_NODES]     # the nodes were read again: same architecture
    if out.waiting and current != A.one_line(out.waiting):
        change[A.MESSAGE] = A.one_line(out.waiting)
    elif not out.waiting and current.startswith(rollout.WAITING):
        change[A.MESSAGE] = ""
    patch_annotations(s.plan, s.d.pool, change)
    apply_rollout(s, out)
    s.delete(s.d.current + s.d.stale)           # leftovers of a run killed after recording
    s.plan.state_after, s.plan.message = A.SUCCEEDED, out.waiting or current


def equivalent(s: Step, mc: Mapping[str, Any] | None, material: desired.Material | None) -> None:
    """The image recorded is the one these inputs make: the pool's new rendered config holds the
    same image content, or an earlier version recorded the success under its build id."""
    d, ann, image = s.d, s.ann, s.ann[A.IMAGE]
    if d.observed.legacy_ref:
        message = carryforward.why_kept(ann, d.settings.namespace, image, d.inputs.build_id)
    else:
        message = (f"{d.inputs.rendered_config} has the image content of "
                   f"{ann.get(A.BUILT_CONFIG) or ann.get(A.RENDERED)}: nothing to build")
    out = rollout_of(s, image, ann.get(A.BUILT_CONFIG) or d.inputs.rendered_config, False)
    s.plan.notes.append(message)
    s.plan.state_after, s.plan.message = A.SUCCEEDED, out.waiting or message
    patch_annotations(s.plan, d.pool, A.changes(ann, {
        **s.base, A.MESSAGE: A.one_line(s.plan.message),
        A.IMAGES: images.recorded(d.pool, d.inputs.build_id, image), **checked(s)}))
    apply_rollout(s, out)
    s.delete(d.current + d.stale)


#: The Event of a change the nodes take live (Normal, once per rendered config)
LIVE_EVENT = "LiveChange"


def live(s: Step, mc: Mapping[str, Any] | None, material: desired.Material | None) -> None:
    """The pool's new rendered config differs from the one its image was built from only in what its
    nodes take live: no build; the rendered config, its content and what the daemon does are
    recorded, the image and the build it came from are kept (so are our MachineConfig and its image:
    the gate releases the pool once its rendered config is checked)."""
    d, ann, image = s.d, s.ann, s.ann[A.IMAGE]
    said = d.live.said if d.live is not None else "none"
    built = ann.get(A.BUILT_CONFIG, "")
    message = (f"live change: no build: {d.inputs.rendered_config} differs from {built}, which image "
               f"{image} was built from, only in what the nodes take live ({said})")
    s.plan.notes.append(message)
    s.plan.state_after, s.plan.message = A.SUCCEEDED, message
    s.plan.actions.append(Write("create", events.notice(d.pool, LIVE_EVENT, message,
                                                         d.inputs.rendered_config,
                                                         rfc3339(s.now), ann.get(A.TRANSITION, ""))))
    out = rollout_of(s, image, built or d.inputs.rendered_config, False)
    keep = (A.BUILD, A.ATTEMPT, A.BUILD_STORAGE, A.REBUILD_HANDLED)
    patch_annotations(s.plan, d.pool, A.changes(ann, {
        **{k: v for k, v in s.base.items() if k not in keep}, A.LIVE: said, A.BUILT_CONTENT: d.built_content,
        A.MESSAGE: A.one_line(out.waiting or message), **checked(s)}))
    apply_rollout(s, out)
    s.delete(d.current + d.stale)


def stay_failed(s: Step, mc: Mapping[str, Any] | None, material: desired.Material | None) -> None:
    # an equivalent rendered config (a kernel argument): recorded, so later runs need not read it
    patch_annotations(s.plan, s.d.pool, A.changes(s.ann, {k: s.base[k] for k in (A.RENDERED, A.CONTENT)}))
    s.delete(s.d.stale)                         # the failed build's objects stay for debugging
    s.plan.state_after, s.plan.message = s.ann.get(A.STATE), s.ann.get(A.MESSAGE, "")


def succeed(s: Step, mc: Mapping[str, Any] | None, material: desired.Material | None) -> None:
    """The build succeeded: its image (repository and digest) becomes the pool's. One build, one
    architecture, one digest: multi-architecture builds (imagebuild/platform/) assemble the image's
    index here, from each architecture's digest, before it is recorded."""
    image = f"{s.d.settings.repo}@{s.d.status.digest}"                # both parts validated already
    out = rollout_of(s, image, s.d.inputs.rendered_config, True)
    _record_image(s, image, out.waiting)
    apply_rollout(s, out)                                             # after the success is recorded
    s.delete(s.d.current + s.d.stale)


def reuse(s: Step, mc: Mapping[str, Any] | None, material: desired.Material | None) -> None:
    """The registry still has the image this build id produced: record it, build nothing."""
    d, image = s.d, s.d.lookup.image
    message = "; ".join(m for m in (f"reused {image} of build {d.inputs.build_id}",
                                     _interrupted(s.ann, s.base[A.BUILD])) if m)
    if d.lookup.simulated:
        s.plan.notes.append(f"reuse {image}: a snapshot run does not ask the registry; a live run "
                            "reuses it only if the registry still has it")
    out = rollout_of(s, image, d.inputs.rendered_config, True)
    _record_image(s, image, "; ".join(m for m in (message, out.waiting) if m), reason=events.REUSED)
    apply_rollout(s, out)
    s.delete(d.current + d.stale)


def _record_image(s: Step, image: str, message: str = "", reason: str | None = None) -> None:
    inp = s.d.inputs
    s.record(A.SUCCEEDED, message, reason, **{A.IMAGE: image, A.BUILT_CONFIG: inp.rendered_config,
                                              A.IMAGES: images.recorded(s.d.pool, inp.build_id, image)})


def progress(s: Step, mc: Mapping[str, Any] | None, material: desired.Material | None) -> None:
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


def give_up(s: Step, mc: Mapping[str, Any] | None, material: desired.Material | None) -> None:
    abandoned = s.d.status is not None and s.d.status.abandon and s.d.build_obj is not None
    s.delete(s.d.stale + ((s.d.build_obj,) if abandoned else ()))
    s.record(A.FAILED, f"failed after {s.d.attempt} attempts: {_history(s)}")


def start(s: Step, mc: Mapping[str, Any] | None, material: desired.Material | None) -> None:
    """A new build object of the current inputs: the first attempt, or the next (RETRY)."""
    d = s.d
    retry = d.transition is Transition.RETRY
    material = material or desired.Material()
    if material.problem:
        return record_blocked(s, material.problem)
    if mc is None or mc is MISSING:
        return record_blocked(s, f"MachineConfig {d.inputs.rendered_config} not found")
    attempt = d.attempt + 1 if retry else 1
    placed = storage.place(d, material.classes, d.base, builders.storage_driver(d.builder))
    try:
        want = desired.objects(d.settings, d.pool, d.inputs, d.builder, mc, material, attempt, placed)
    except desired.Blocked as err:
        return record_blocked(s, str(err))
    if placed.told:             # before the record: a rerun after a kill names it the same, and tells it once
        s.plan.notes.append(placed.told)
        s.plan.actions.append(Write("create", events.notice(d.pool, storage.REASON, placed.told, placed.told,
                                                             rfc3339(s.now), s.ann.get(A.TRANSITION, ""),
                                                             kind="Warning")))
    if placed.create:           # the volume before the Pod that mounts it
        s.plan.actions.append(Write("create", placed.create))
    s.plan.notes += [n for n in (placed.note, f"disk: {placed.disk.figures}") if n]
    create_missing(s.plan, want, {(o.get("kind"), objects.name(o)): o for o in d.current})
    why_not = not_reused(d.lookup)
    foreign = images.produced(d.pool, d.inputs.build_id)
    if foreign and not images.ours(foreign, d.settings.repo):
        s.plan.notes.append(WarningNote(f"not reused: {foreign} is not in the configured repository "
                                        f"{d.settings.repo}"))
    if retry:
        message = f"attempt {attempt} of {A.MAX_ATTEMPTS} after: {_history(s)}"
        s.plan.notes += [why_not] if why_not else []     # the message keeps attempts only
    else:
        message = "; ".join(m for m in (_interrupted(s.ann, s.base[A.BUILD]), why_not, d.live_why,
                                         desired.build_inputs(d.builder, material).note,
                                         architecture.note(d.inputs.arch)) if m)
    s.base.update({A.BUILD: desired.build_ref(d.builder, d.settings.namespace, d.inputs, attempt),
                   A.ATTEMPT: str(attempt)})
    s.base.pop(A.BUILD_STORAGE, None)       # the earlier attempt's: this build's is its placement's
    if placed.record:
        s.base[A.BUILD_STORAGE] = placed.record
    s.record(A.PENDING, message)
    # after the record, so that a run killed in between tells the same story on the next run
    s.delete(d.stale + ((d.build_obj,) if retry and d.build_obj is not None else ()))


def sign(s: Step, mc: Mapping[str, Any] | None, material: desired.Material | None) -> None:
    """The image is not signed with every current key yet: the signing Pod is made, or followed.
    A new image (a build's, a reuse's) is not recorded until it is signed: the pool says Building,
    or Failed with the signer's reason; an image in use keeps its record and our MachineConfig."""
    d, g = s.d, s.d.signing
    keys = ", ".join(f"{k.secret} ({k.fingerprint[:19]})" for k in d.settings.signing_keys)
    if g.pod is None:
        s.plan.actions.append(Write("create", dict(g.want or {})))
    # older signing Pods (another key set), one of this name that runs something else, and older
    # builds go; this build's objects stay (the build's digest is read from it again)
    s.delete(d.stale + tuple(o for o in d.current if o.get("kind") == "Pod" and objects.name(o).startswith(
        "ocl-sign-") and (objects.name(o) != g.pod_name or g.impostor)))
    failed = g.status is not None and g.status.state == A.FAILED
    said = g.status.message if g.status is not None and g.status.message else ""
    if g.impostor:
        said = (f"Pod {g.pod_name} is not the signing Pod this run makes (another image, command, "
                "volumes or ServiceAccount): deleted, its status ignored; the next run makes ours")
    if g.then in signgate.FRESH:
        what = "built" if g.then is Transition.SUCCEED else f"reusing ({d.inputs.build_id})"
        if failed:
            # cosign's cause ends its line (a Go error chain): a message too long loses its middle
            return s.record(A.FAILED, A.one_line(f"{what} {g.image}, not recorded: {said} "
                                                 "(docs/signing.md, \"Troubleshooting\")", keep_end=True))
        return s.record(A.BUILDING, "; ".join(m for m in (f"{what} {g.image}; signing it with {keys}: Pod "
                                                           f"{g.pod_name}", said) if m))
    if failed:
        s.record(A.FAILED, A.one_line(f"image {g.image} in use is not signed with {keys}: {said} "
                                      "(docs/signing.md, \"Troubleshooting\")", keep_end=True),
                 **{A.IMAGE: s.ann.get(A.IMAGE)})
        return
    message = "; ".join(m for m in (f"signing {g.image}, in use, with {keys}: Pod {g.pod_name}", said) if m)
    patch_annotations(s.plan, d.pool, A.changes(s.ann, {A.MESSAGE: A.one_line(message)}))
    s.plan.state_after, s.plan.message = s.ann.get(A.STATE), message


def not_reused(lookup: images.Lookup | None) -> str:
    """Why a build id that produced an image before builds again (nothing if it never did)."""
    if lookup is None or lookup.found:
        return ""
    if lookup.found is False and lookup.detail:
        return f"building again: {lookup.image} is not reused: {lookup.detail}"
    if lookup.found is False:
        return f"building again: {lookup.image} is gone from the registry"
    return f"building again: could not ask the registry for {lookup.image}: {lookup.detail}"


def _interrupted(ann: Mapping[str, str], ref: str | None) -> str:
    old = ann.get(A.BUILD)
    if ann.get(A.STATE) in (A.PENDING, A.BUILDING) and old and old != ref:
        return carryforward.not_followed(ann, ref) or f"interrupted {old}: build inputs changed"
    return ""


def _history(s: Step) -> str:
    """Each attempt's reason, kept in the one-line message: `attempt 1: ...; attempt 2: ...`."""
    d = s.d
    reason = d.status.message if d.status is not None else f"{s.base[A.BUILD]} was deleted before it finished"
    message = _without_waiting(s.ann.get(A.MESSAGE, ""), s.base[A.BUILD])
    _, sep, earlier = message.partition(" after: ")
    earlier = earlier if sep and message.startswith("attempt ") else ""
    return "; ".join(p for p in (earlier, f"attempt {d.attempt}: {reason}") if p)
