"""`render`: the desired build objects of every opted-in pool's current inputs, nothing applied.
Secrets we would create (registry auth) are named on stderr, never printed."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from reconcile.build import builders
from reconcile.build.settings import Settings
from reconcile.contract import objects
from reconcile.contract.problem import Problem
from reconcile.core import desired, lifecycle


def desired_objects(settings: Settings | Problem, pools: Iterable[Mapping[str, Any]],
           get_machineconfig: Callable[[str], Mapping[str, Any] | None],
           material: desired.Material | None = None,
           only: Iterable[str] = ()) -> tuple[list[dict[str, Any]], list[str], list[str]]:
    """(objects, problems, notes): a problem is a pool that cannot be rendered; a note is said
    on stderr without failing (an object left out because it holds credentials)."""
    selected = set(only)
    out: list[dict[str, Any]] = []
    problems: list[str] = []
    notes: list[str] = []
    for pool in sorted(pools, key=objects.name):
        name = objects.name(pool)
        if not lifecycle.opted_in(pool) or (selected and name not in selected):
            continue
        if isinstance(settings, Problem):
            problems.append(f"pool {name}: {settings}")
            continue
        if material is not None and material.problem:
            problems.append(f"pool {name}: {material.problem}")
            continue
        builder = builders.for_type(settings.builder_type)
        try:
            inp = desired.inputs(settings, pool)
            mc = get_machineconfig(inp.rendered_config)
            if mc is None:
                raise desired.Blocked(f"MachineConfig {inp.rendered_config} not found")
            for obj in desired.objects(settings, pool, inp, builder, mc, material):
                if obj.get("kind") == "Secret":
                    notes.append(f"pool {name}: {objects.ref(obj)} not shown: it holds credentials")
                else:
                    out.append(obj)
        except desired.Blocked as err:
            problems.append(f"pool {name}: {err}")
    return out, problems, notes
