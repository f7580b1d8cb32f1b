"""`render`, the Argo CD Config Management Plugin's generate command: exactly the build objects
the current plan keeps or creates, in their desired form, nothing applied.

Printing every pool's build objects whatever its state made an auto-syncing Application re-create
what the reconciler deleted after a success, and the image was built again, forever. So render
follows the plan: a pool that is built for its current inputs (BUILT, SUCCEED, REUSE) or Blocked
prints nothing; a START or RETRY prints what it creates; a build that is running or failed prints
its live objects that the plan keeps, rendered from the inputs as they were created (a Pod with
the command it runs: its spec cannot change). Secrets we
would create (registry auth, the proxy's credentials) are named on stderr, never printed, and so
is any other object holding a URL's credentials (`http://user:password@...`, say in a custom
Dockerfile): masked, it would be applied broken; the reconciler creates it, and so is the rollout
MachineConfig (an Application that applied it would fight the reconciler's next patch of it)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from reconcile.contract import objects
from reconcile.core import decision, desired, rollout, storage
from reconcile.core.actions import PoolPlan
from reconcile.imagebuild import proxy, templates


def _key(obj: Mapping[str, Any]) -> tuple[str, str]:
    return obj.get("kind", ""), objects.name(obj)


def kept_objects(d: decision.Decision, plan: PoolPlan
                 ) -> tuple[list[dict[str, Any]], list[Mapping[str, Any]]]:
    """(objects the plan creates, live objects of the current build id that it keeps)."""
    created = [a.obj for a in plan.actions if a.verb == "create" and a.obj.get("kind") != "Event"]
    gone = {_key(a.obj) for a in plan.actions if a.verb == "delete"} | {_key(o) for o in created}
    return created, [o for o in d.current if _key(o) not in gone]


def _containers(spec: Mapping[str, Any]) -> list[Any]:
    found = spec.get("containers")
    return list(found) if isinstance(found, list) else []


def _without_command(spec: Mapping[str, Any]) -> dict[str, Any]:
    return {**spec, "containers": [{k: v for k, v in c.items() if k != "command"} if isinstance(c, Mapping)
                                   else c for c in _containers(spec)]}


def _values(obj: Mapping[str, Any], script: str) -> Mapping[str, Any]:
    """What of an object may hold a value a user gave: all but the build Pod's command where it is
    our script (`script`, manifests/build-pod.sh), whose text is no credential whatever it says."""
    if obj.get("kind") != "Pod":
        return obj
    spec = objects.spec(obj)
    ours = all(isinstance(c, Mapping) and isinstance(c.get("command"), list) and c["command"][-1:] == [script]
               for c in _containers(spec))
    return {**obj, "spec": _without_command(spec)} if ours else obj


def _within(made: Any, live: Any) -> bool:
    """Is every field of `made` in `live`, with the same value (the server adds its defaults)?"""
    if isinstance(made, Mapping):
        return isinstance(live, Mapping) and all(k in live and _within(v, live[k]) for k, v in made.items())
    if isinstance(made, list):
        return isinstance(live, list) and len(made) == len(live) and all(map(_within, made, live))
    return made == live


def _as_created(made: dict[str, Any], live: Mapping[str, Any]) -> dict[str, Any]:
    """A live build Pod is printed with the command it runs: a Pod's spec cannot change (kubernetes/
    kubernetes v1.34.2 pkg/apis/core/validation/validation.go, ValidatePodUpdate), so a script
    from a newer template (build-pod.sh after an upgrade) could only fail Argo CD's sync until the
    build ends. Only the command: the rest is printed as rendered, and a live Pod whose spec is
    not the rendered one but for its command (someone else's under our name) is printed as
    rendered."""
    spec = live.get("spec")
    if made.get("kind") != "Pod" or not isinstance(spec, Mapping) or \
            not _within(_without_command(made["spec"]), _without_command(spec)):    # the same containers
        return made
    containers = [{**c, "command": json.loads(json.dumps(lc.get("command")))} if "command" in lc else c
                  for c, lc in zip(_containers(made["spec"]), _containers(spec), strict=True)]
    return {**made, "spec": {**made["spec"], "containers": containers}}


def wanted_objects(pairs: Iterable[tuple[decision.Decision, PoolPlan]],
                   machineconfig: Callable[[str], Mapping[str, Any] | None],
                   material: desired.Material | None) -> tuple[list[dict[str, Any]], list[str], list[str]]:
    """(objects, problems, notes): a problem is a Blocked pool; a note is said on stderr without
    failing (an object left out because it holds credentials, or is no longer one we would make)."""
    out: list[dict[str, Any]] = []
    problems: list[str] = []
    notes: list[str] = []
    script = templates.source("build-pod.sh")
    for d, plan in pairs:
        if plan.blocked:
            problems.append(f"pool {plan.pool}: {plan.message}")
            continue
        created, live = kept_objects(d, plan)
        wanted: list[dict[str, Any]] = []
        if live:
            try:
                mc = machineconfig(d.inputs.rendered_config)
                if not mc:
                    raise desired.Blocked(f"MachineConfig {d.inputs.rendered_config} not found")
                made = desired.objects(d.settings, d.pool, d.inputs, d.builder, mc, material, d.attempt,
                                       storage.placement_of(d.build_obj) if d.build_obj else None)
            except desired.Blocked as err:
                problems.append(f"pool {plan.pool}: {err}")
                continue
            by_key = {_key(o): o for o in live}
            wanted = [_as_created(o, by_key[_key(o)]) for o in made if _key(o) in by_key]  # creation order
            notes += [f"pool {plan.pool}: {objects.ref(o)} not shown: not an object of the current attempt"
                      for o in live if _key(o) not in {_key(w) for w in wanted}]
        for obj in wanted + created:
            if obj.get("kind") == "Secret" or proxy.credentialed(json.dumps(_values(obj, script))):
                notes.append(f"pool {plan.pool}: {objects.ref(obj)} not shown: it holds credentials")
            elif obj.get("kind") == rollout.KIND:
                notes.append(f"pool {plan.pool}: {objects.ref(obj)} not shown: the rollout MachineConfig is "
                             "not a build object; run writes and patches it")
            else:
                out.append(obj)
    return out, problems, notes
