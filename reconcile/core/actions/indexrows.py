"""The actions of a mixed pool's build rows (core/multiarch.py): START, RETRY, PROGRESS and FAIL
make each architecture's missing build object and follow them all (`follow`); SUCCEED pushes the
image index and records it (`succeed`); before a SIGN of a new index, the index is pushed (`push`),
since the signing Pod signs what the registry holds. Everything else (REUSE of a whole index is a
reuse of each part; BUILT, EQUIVALENT, LIVE, SIGN, STAY_FAILED) is the one-architecture row's.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from reconcile.contract import annotations as A
from reconcile.contract import objects
from reconcile.core import desired, images, multiarch, storage
from reconcile.core.actions import Write
from reconcile.core.actions.step import Step, apply_rollout, create_missing, record_blocked, rollout_of
from reconcile.core.decision import MISSING
from reconcile.core.transitions import Transition
from reconcile.imagebuild import builders
from reconcile.imagebuild.platform import imageindex


def tag(d: Any, part: multiarch.Part) -> str:
    """Where one architecture's image is pushed: the pool's tag with `-<arch>`; the index takes the
    pool's tag itself."""
    return f"{d.settings.repo}:{d.inputs.rendered_config}-{part.arch}"


def follow(s: Step, mc: Mapping[str, Any] | None, material: desired.Material | None) -> None:
    """Make the build objects of the architectures that need one (none yet, nothing to reuse, or a
    transient failure's next attempt), and record the parts' state as one."""
    d = s.d
    make = [p for p in d.parts if p.needs_object] if d.transition is not Transition.FAIL else []
    records: dict[str, str | None] = {}
    if make:
        material = material or desired.Material()
        if material.problem:
            return record_blocked(s, material.problem)
        if mc is None or mc is MISSING:
            return record_blocked(s, f"MachineConfig {d.inputs.rendered_config} not found")
        have = {(o.get("kind"), objects.name(o)): o for o in d.current}
        for part in make:
            placed = storage.place(d, material.classes, part.size, builders.storage_driver(d.builder),
                                   arch=part.arch)
            try:
                want = desired.objects(d.settings, d.pool, part.inputs, d.builder, mc, material,
                                       part.next_attempt, placed, tag=tag(d, part),
                                       runs_on=multiarch.runs_on(part, d.parts, d.settings.emulated),
                                       base=part.base)
            except desired.Blocked as err:
                return record_blocked(s, str(err))
            if placed.create:           # the volume before the Pod that mounts it
                s.plan.actions.append(Write("create", placed.create))
            s.plan.notes += [f"{part.arch}: {n}" for n in (placed.note or placed.told,
                                                          f"disk: {placed.disk.figures}") if n]
            records[part.arch] = placed.record
            create_missing(s.plan, want, have)
        s.plan.notes += [f"{p.arch}: FROM {p.base or p.inputs.base_image}"
                         + (f" ({p.base_why})" if p.base_why else "") for p in make]
        s.plan.notes += [f"{p.arch}: built under emulation (emulatedArchitectures) on a node of "
                         f"{multiarch.runs_on(p, d.parts, d.settings.emulated)}"
                         for p in make if p.arch in d.settings.emulated]
    if d.settings.persistent_storage:
        # with the volumes of the builds that run on (a killed run's, one of the pool before it was
        # mixed), each architecture's as its build object mounts it
        records.update({p.arch: storage.RECORDED + claim for p in d.parts if p.arch not in records
                        and (claim := storage.claim_of(p.build_obj))})
        if records:
            s.base[A.BUILD_STORAGE] = storage.mixed_record(s.ann, records)
    s.plan.architectures = {p.arch: multiarch.state(p) for p in d.parts}
    if d.status is None or s.ann.get(A.BUILD) != s.base[A.BUILD]:
        # the record's first write of this build says the same whatever a killed run made of it
        building = [p.arch for p in d.parts if not p.reused]
        s.record(A.PENDING, "; ".join(
            [f"building for {', '.join(building)}: one build each, on a node of its architecture, then one "
             "image index"] + [f"{p.arch}: reusing {p.candidate}" for p in d.parts if p.reused]))
    else:
        s.record(d.status.state, d.status.message)
    # after the record: a retried architecture's failed attempt, and older builds
    s.delete(d.stale + tuple(p.build_obj for p in make if p.build_obj is not None))


def push(s: Step) -> imageindex.Index:
    """The index goes into the registry, under the pool's tag, before anything names it."""
    d = s.d
    index = multiarch.index_of(d.parts)
    assert index is not None                        # SUCCEED: every part is described
    image = f"{d.settings.repo}@{index.digest}"
    doc = {"apiVersion": "ocl-reconciler.io/v1", "kind": desired.INDEX_KIND,
           "metadata": {"name": desired.build_name(d.inputs), "namespace": d.settings.namespace},
           "image": image, "tag": f"{d.settings.repo}:{d.inputs.rendered_config}",
           "manifests": [{"architecture": p.arch, "image": p.image(d.settings.repo)} for p in d.parts]}
    s.plan.actions.append(Write("push", doc, body=index.body))
    return index


def succeed(s: Step, mc: Mapping[str, Any] | None, material: desired.Material | None) -> None:
    """Every architecture has its image: the index is pushed and becomes the pool's image; the
    history records it and each architecture's image, and which instances it names."""
    d = s.d
    index = push(s)
    s.plan.architectures = {p.arch: A.SUCCEEDED for p in d.parts}
    image, repo = f"{d.settings.repo}@{index.digest}", d.settings.repo
    message = "image index of " + "; ".join(
        f"{p.arch}: {'reused' if p.reused else 'built'} {p.image(repo)}" for p in d.parts)
    out = rollout_of(s, image, d.inputs.rendered_config, True)
    s.record(A.SUCCEEDED, "; ".join(m for m in (message, out.waiting) if m), None, **{
        A.IMAGE: image, A.BUILT_CONFIG: d.inputs.rendered_config,
        A.IMAGES: multiarch.history(d.pool, d.inputs.build_id, image, d.parts, repo),
        A.INDEX_INSTANCES: images.with_index(d.pool, index.digest,
                                             (p.instance.digest for p in d.parts if p.instance))})
    apply_rollout(s, out)
    s.delete(d.current + d.stale)
