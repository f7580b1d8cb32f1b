"""`ocl-reconcile explain POOL`: what a run saw for one pool, the lifecycle row `decide` chose and
why, what the run would do, and what would change the outcome.

Pure: it reads the Decision and the PoolPlan the planner made from what `diff --pool POOL` reads,
so the explanation cannot drift from what a run does. The words per row are data
(manifests/explain.yaml); this module gathers the facts they are filled from.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from reconcile.contract import annotations as A
from reconcile.contract import objects
from reconcile.core import decision, desired, images, mcolabel, rollout, transitions
from reconcile.core.actions import PoolPlan
from reconcile.core.actions import buildrows as actions_build
from reconcile.core.rollout import check as rolloutcheck
from reconcile.core.rollout import hold
from reconcile.diff import view
from reconcile.imagebuild import templates
from reconcile.imagebuild.platform import osstream

#: the placeholders manifests/explain.yaml may use (every one is filled, "" when it does not apply)
FIELDS = ("pool", "namespace", "label", "rebuild_key", "ref", "rendered", "build_id", "build_name", "kind",
          "kind_lower", "phase", "build_message", "attempt", "next_attempt", "max_attempts",
          "recorded_state", "recorded_ref", "recorded_for", "recorded_for_config", "candidate", "found",
          "not_reused", "retry_cause", "problem", "move_label", "built_config", "live",
          "sign_image", "sign_pod", "sign_then")
NOT_OPTED_IN = "NOT_OPTED_IN"


def _recorded(pool: Mapping[str, Any] | None) -> dict[str, Any]:
    ann = objects.annotations(pool or {})
    return {"state": ann.get(A.STATE), "since": ann.get(A.TRANSITION), "build": ann.get(A.BUILD),
            "attempt": ann.get(A.ATTEMPT), "message": ann.get(A.MESSAGE), "image": ann.get(A.IMAGE),
            "renderedConfig": ann.get(A.RENDERED), "content": ann.get(A.CONTENT),
            "rebuildToken": ann.get(A.REBUILD), "rebuildHandled": ann.get(A.REBUILD_HANDLED),
            "arch": ann.get(A.ARCH), "builderImage": ann.get(A.BUILDER_IMAGE),
            "builtConfig": ann.get(A.BUILT_CONFIG), "live": ann.get(A.LIVE)}


def _phase(obj: Mapping[str, Any] | None) -> str:
    return str(((obj or {}).get("status") or {}).get("phase") or "") if obj else ""


def _live_build(d: decision.Decision | None) -> dict[str, Any] | None:
    if d is None or d.build_obj is None:
        return None
    status = d.status
    return {"kind": d.build_obj.get("kind"), "namespace": objects.namespace(d.build_obj),
            "name": objects.name(d.build_obj), "phase": _phase(d.build_obj) or None,
            "state": status.state if status else None, "message": status.message if status else "",
            "transient": bool(status and status.transient)}


def _parts(d: decision.Decision | None) -> list[dict[str, Any]]:
    """A mixed pool's builds, one per architecture (core/multiarch.py); [] for a pool of one."""
    if d is None or not d.parts or d.settings is None:
        return []
    return [{"architecture": p.arch, "buildId": p.build_id, "attempt": p.attempt,
             "object": objects.ref(p.build_obj) if p.build_obj is not None else None,
             "phase": _phase(p.build_obj) or None, "state": p.status.state if p.status else None,
             "message": p.status.message if p.status else "",
             "reusing": p.candidate if p.reused else None, "image": p.image(d.settings.repo),
             "toBuild": p.needs_object} for p in d.parts]


def _what_changed(d: decision.Decision, ref: str) -> str:
    """Why the recorded build is not the current one, as far as the pool's record can tell (the
    build id is a hash: what it hashed is not kept, only the rendered config and rebuild token)."""
    ann = objects.annotations(d.pool or {})
    old = ann.get(A.BUILD)
    if not old:
        return "; the pool records no build yet"
    if old == ref:
        return ""
    inp = d.inputs
    assert inp is not None
    if ann.get(A.RENDERED) and ann[A.RENDERED] != inp.rendered_config:
        why = f"the rendered config changed from {ann[A.RENDERED]} to {inp.rendered_config}"
    elif ann.get(A.REBUILD) and ann.get(A.REBUILD) != ann.get(A.REBUILD_HANDLED):
        why = f"a new rebuild token {ann[A.REBUILD]!r} was set"
    else:
        why = ("another build input changed: the settings, the OS images, the custom Dockerfile, "
               "the architecture or the builder image")
    return f"; the pool's record is about {old}: {why}"


def _fields(name: str, d: decision.Decision | None, namespace: str) -> dict[str, str]:
    values = dict.fromkeys(FIELDS, "")
    values.update(pool=name, namespace=namespace, label=A.LAYERING_LABEL, rebuild_key=A.REBUILD,
                  move_label=" && ".join(mcolabel.commands(name)),
                  max_attempts=str(A.MAX_ATTEMPTS))
    if d is None:
        return values
    ann = objects.annotations(d.pool or {})
    values.update(problem=d.problem, recorded_state=ann.get(A.STATE) or "",
                  recorded_ref=ann.get(A.BUILD) or "", recorded_for_config=ann.get(A.RENDERED) or "",
                  built_config=ann.get(A.BUILT_CONFIG) or "",
                  live=d.live.said if d.live is not None else ann.get(A.LIVE) or "")
    if d.signing is not None:
        values.update(sign_image=d.signing.image, sign_pod=d.signing.pod_name, sign_then=d.signing.then.name)
    if d.inputs is None or d.builder is None or d.settings is None:
        return values
    ref = desired.build_ref(d.builder, d.settings.namespace, d.inputs, d.attempt)
    build_name = desired.build_name(d.inputs, d.attempt)
    status = d.status
    message = f": {status.message}" if status and status.message else ""
    gone = f"the {d.builder.kind} {build_name} the pool records was deleted"
    values.update(ref=ref, rendered=d.inputs.rendered_config, build_id=d.inputs.build_id,
                  build_name=build_name,
                  kind=d.builder.kind, kind_lower=d.builder.kind.lower(), namespace=d.settings.namespace,
                  phase=_phase(d.build_obj) or (status.state if status else ""), build_message=message,
                  attempt=str(d.attempt), next_attempt=str(d.attempt + 1),
                  recorded_for=_what_changed(d, ref), candidate=d.candidate or "",
                  found=("a snapshot is a simulation: the registry is taken to have it"
                         if d.lookup and d.lookup.simulated else "the registry still has its manifest"),
                  not_reused="".join(f"; {why}" for why in [actions_build.not_reused(d.lookup)] if why),
                  retry_cause=(f"{d.builder.kind} {build_name} failed for a transient reason{message}"
                               if status else gone))
    return values


_ANNOTATIONS = "/metadata/annotations/"


def _annotation_changes(ops: Iterable[Mapping[str, Any]]) -> str:
    """`key=value, -key`: what a patch of annotations sets and removes (ours hold no secrets), or
    "" when the patch touches more than annotations."""
    out = []
    for op in ops:
        if op.get("op") == "test":
            continue
        path = str(op.get("path", ""))
        if not path.startswith(_ANNOTATIONS):
            return ""
        key = path[len(_ANNOTATIONS):].replace("~1", "/").replace("~0", "~")
        out.append(f"-{key}" if op.get("op") == "remove" else f"{key}={A.one_line(op.get('value', ''), 120)}")
    return ", ".join(out)


def _action_line(action: Any) -> str:
    what = f"{action.obj.get('kind')} {objects.ref(action.obj).split('/', 1)[-1]}"
    if action.obj.get("kind") == "Event":
        return f"record Event {action.obj.get('reason')}: {action.obj.get('message', '')}"
    if action.verb == "prune":
        return f"delete {len(action.images)} image(s) from the registry: {' '.join(action.images)}"
    if action.verb == "push":
        return f"push image index {action.obj.get('image')} to the registry as {action.obj.get('tag')}"
    if action.verb == "patch":
        changes = _annotation_changes(action.patch) or view.change_summary(*view.sides(action))
        return f"patch {what}: {changes}"
    return f"{action.verb} {what}"


def _rollout(name: str, pool: Mapping[str, Any] | None, d: decision.Decision | None,
             plan: PoolPlan | None) -> dict[str, Any] | None:
    """With our rollout MachineConfig for the pool: what status's ROLLOUT says, on the pool as this
    run leaves it (a check it makes is counted), and what it means; None without one."""
    ours = d.rollout.ours.get(name) if d is not None and d.rollout is not None else None
    if pool is None or ours is None:
        return None
    after = images.pools_after([pool], [plan] if plan else [])[0]
    found = rolloutcheck.state(after, ours, objects.annotations(after).get(A.IMAGE))
    return {"machineConfig": objects.name(ours), "image": rollout.image_of(ours), "state": found.kind,
            "shown": found.text, "renderedImage": found.image or None, "overriddenBy": found.winner or None,
            "renderMessage": found.message or None, "updated": found.updated, "total": found.total,
            "degraded": found.degraded, "because": found.describe(name, objects.name(ours))}


def explain(name: str, pool: Mapping[str, Any] | None, d: decision.Decision | None,
            plan: PoolPlan | None, namespace: str, pools: Iterable[Mapping[str, Any]] = (),
            strays: Iterable[rollout.Stray] = ()) -> dict[str, Any]:
    """The report on one pool. `pool`: as read (None: there is none); `d`, `plan`: what the planner
    decided and planned for it (None: nothing, i.e. not opted in and nothing of ours); `pools`:
    every pool (a custom pool's OS stream is worker's); `strays`: the stray MachineConfigs that
    name the pool or that it renders."""
    row = d.transition.name if d is not None else NOT_OPTED_IN
    values = _fields(name, d, namespace)
    if plan is not None and plan.blocked and row not in ("BLOCKED", "MCO_LABEL"):
        # decided to build, blocked by what the build needs (a Secret, the material): as the run records it
        row, values["problem"] = "BLOCKED", plan.message
    words = templates.table("explain.yaml")["transitions"][row]
    inp = d.inputs if d is not None else None
    content = A.recorded_content(objects.annotations(pool or {}), inp.rendered_config) if inp else None
    transition = getattr(transitions.Transition, row, None)
    return {
        "pool": name,
        "exists": pool is not None,
        "optedIn": bool(pool is not None and decision.opted_in(pool) and not mcolabel.carries(pool)),
        "mcoLabel": bool(pool is not None and mcolabel.carries(pool)),
        "renderedConfig": {"name": inp.rendered_config if inp else
                           ((pool or {}).get("spec") or {}).get("configuration", {}).get("name"),
                           "contentDigest": inp.content if inp else None,
                           "contentRecorded": content is not None},
        "recorded": _recorded(pool),
        "imageHistory": [{"buildId": b or None, "image": i} for b, i in images.entries(pool or {})],
        "build": None if inp is None or d is None or d.builder is None or d.settings is None else {
            "buildId": inp.build_id, "kind": d.builder.kind, "name": values["build_name"],
            "ref": values["ref"],
            "attempt": d.attempt, "maxAttempts": A.MAX_ATTEMPTS,
            "osStream": _stream(d.pool or {}, pools, inp), "baseImage": inp.base_image,
            "extensionsImage": inp.extensions_image or None},
        "liveBuild": _live_build(d),
        "architectures": _parts(d),
        "rollout": _rollout(name, pool, d, plan),
        "strays": [{"name": s.name, "why": s.why} for s in strays],
        "gate": _gate(pool, plan),
        "transition": {"row": row,
                       "situation": transition.situation if transition else "",
                       "outcome": transition.outcome if transition else "",
                       "because": words["because"].format_map(values)},
        "thisRun": {"stateBefore": plan.state_before if plan else None,
                    "stateAfter": plan.state_after if plan else None,
                    "message": plan.message if plan else "",
                    "actions": [_action_line(a) for a in (plan.actions if plan else [])],
                    "notes": list(plan.notes) if plan else []},
        "wouldChange": [line.format_map(values) for line in words["changes"]],
    }


def _stream(pool: Mapping[str, Any], pools: Iterable[Mapping[str, Any]],
            inp: desired.BuildInputs) -> dict[str, str] | None:
    """The OS stream the build is of and why that one (imagebuild/platform/osstream.py), None: none listed."""
    if not inp.os_stream:
        return None
    _, whose = osstream.effective(pool, pools)
    why = ("the pool's spec.osImageStream.name" if whose == objects.name(pool) else
           f"inherited from {whose}'s spec.osImageStream.name, as the render controller does" if whose else
           "the default stream (status.defaultStream)")
    return {"name": inp.os_stream, "from": why}


def _gate(pool: Mapping[str, Any] | None, plan: PoolPlan | None) -> dict[str, Any] | None:
    """What the rollout gate holds of the pool and does this run (core/rollout/hold.py), None without one."""
    if pool is None or plan is None or not plan.hold or plan.hold == hold.Move.NOTHING.name:
        return None
    ann = objects.annotations(pool)
    return {"paused": hold.paused(pool), "record": ann.get(A.GATE), "config": ann.get(A.GATE_CONFIG),
            "since": ann.get(A.GATE_SINCE), "reason": ann.get(A.GATE_REASON), "says": hold.shown(pool),
            "move": plan.hold, "why": hold.Move[plan.hold].value}


def as_json(report: Mapping[str, Any]) -> str:
    return json.dumps(report, indent=2) + "\n"


def _row(key: str, value: Any) -> str:
    return f"  {key:<16}{value}\n"


def text(report: Mapping[str, Any]) -> str:
    """The report for people: facts, then the row and why, then the plan and what would change it."""
    rec, rendered, out = report["recorded"], report["renderedConfig"], []
    out.append(f"pool {report['pool']}\n")
    out.append(_row("exists", "yes" if report["exists"] else "no"))
    out.append(_row("opted in", "yes" if report["optedIn"] else
                    f"no: it carries the MCO's label {A.MCO_LAYERING_LABEL}, not ours ({A.LAYERING_LABEL})"
                    if report["mcoLabel"] else f"no (label {A.LAYERING_LABEL})"))
    digest = rendered["contentDigest"]
    out.append(_row("rendered config", f"{rendered['name'] or '-'}"
                    + (f" (content {digest}{'' if rendered['contentRecorded'] else ', not yet recorded'})"
                       if digest else "")))
    out.append("recorded on the pool\n")
    since = f" since {rec['since']}" if rec["since"] else ""
    out.append(_row("state", f"{rec['state'] or '-'}{since}"))
    attempt = f" (attempt {rec['attempt']} of {A.MAX_ATTEMPTS})" if rec["attempt"] else ""
    out.append(_row("build", f"{rec['build'] or '-'}{attempt}"))
    out += [_row("message", rec["message"])] if rec["message"] else []
    out.append(_row("image", rec["image"] or "-"))
    history = report["imageHistory"]
    out.append(_row("image history", f"{len(history)} image(s)" if history else "-"))
    out += [_row("", f"{h['buildId'] or '(no id)'} -> {h['image']}") for h in history]
    out += [_row("rebuild token", rec["rebuildToken"])] if rec["rebuildToken"] else []
    out += _build_rollout_gate(report)
    row = report["transition"]
    out.append(f"decision: {row['row']}\n")
    out += [_row("situation", row["situation"])] if row["situation"] else []
    out.append(_row("because", row["because"]))
    out += [_row("outcome", row["outcome"])] if row["outcome"] else []
    run = report["thisRun"]
    move = (f"{run['stateBefore'] or '-'} -> {run['stateAfter']}" if run["stateAfter"] else "no state change")
    out.append(f"this run would: {move}" + (f" ({run['message']})" if run["message"] else "") + "\n")
    out += [f"  - {line}\n" for line in run["actions"]] or ["  - no writes\n"]
    out += [f"  note: {line}\n" for line in run["notes"]]
    out.append("what would change the outcome\n")
    out += [f"  - {line}\n" for line in report["wouldChange"]]
    return "".join(out)


def _build_rollout_gate(report: Mapping[str, Any]) -> list[str]:
    """The text's middle: the build for the current inputs, the rollout, stray MachineConfigs, the gate."""
    out: list[str] = []
    build, live = report["build"], report["liveBuild"]
    if build:
        out.append("the build for the current inputs\n")
        out.append(_row("build id", build["buildId"]))
        out.append(_row("build", f"{build['ref']} (attempt {build['attempt']} of {build['maxAttempts']})"))
        stream = build["osStream"]
        out.append(_row("OS stream", "none listed: the release's images" if stream is None else
                        f"{stream['name']} ({stream['from']})"))
        out.append(_row("base image", build["baseImage"]))
        out.append(_row("live object", "none" if live is None else
                        f"{live['kind']} {live['name']}: phase {live['phase'] or '-'}, state {live['state']}"
                        + (f": {live['message']}" if live["message"] else "")))
        for part in report["architectures"]:
            said = (f"reusing {part['reusing']}" if part["reusing"] else
                    f"{part['object']}: phase {part['phase'] or '-'}, state {part['state']}"
                    + (f": {part['message']}" if part["message"] else "") if part["object"] else
                    "to build" if part["toBuild"] else "-")
            out.append(_row(f"  {part['architecture']}", f"build id {part['buildId']}: {said}"))
    roll = report.get("rollout")
    if roll:
        out.append(f"the rollout (MachineConfig {roll['machineConfig']})\n")
        out.append(_row("image", roll["image"] or "-"))
        out.append(_row("rollout", roll["shown"]))
        out.append(_row("because", roll["because"]))
    strays = report.get("strays") or []
    out += ['stray MachineConfigs (docs/rollout-permissions.md, "Stray MachineConfigs")\n'] if strays else []
    out += [f"  - {s['name']}: {s['why']}; the reconciler did not write it\n" for s in strays]
    gate = report.get("gate")
    if gate:
        out.append("the rollout gate (docs/rollout.md, section 3)\n")
        out.append(_row("paused", "yes" if gate["paused"] else "no"))
        out.append(_row("record", f"{gate['record'] or '-'}" + (f" for {gate['config']} since {gate['since']}"
                                                                 if gate["record"] else "")))
        out += [_row("says", gate["says"])] if gate["says"] else []
        out.append(_row("this run", f"{gate['move']}: {gate['why']}"))
    return out
