"""`render`: the desired build objects of every opted-in pool's current inputs, nothing applied."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from reconcile import builders, desired, lifecycle, objects
from reconcile.settings import Settings


def render(settings: Settings | str, pools: Iterable[Mapping[str, Any]],
           get_machineconfig: Callable[[str], Mapping[str, Any] | None],
           only: Iterable[str] = ()) -> tuple[list[dict[str, Any]], list[str]]:
    """(objects, problems): problems are one line per pool that cannot be rendered."""
    selected = set(only)
    out: list[dict[str, Any]] = []
    problems: list[str] = []
    for pool in sorted(pools, key=objects.name):
        name = objects.name(pool)
        if not lifecycle.opted_in(pool) or (selected and name not in selected):
            continue
        if isinstance(settings, str):
            problems.append(f"pool {name}: {settings}")
            continue
        builder = builders.for_type(settings.builder_type)
        if builder is None:
            problems.append(f"pool {name}: imageBuilderType {settings.builder_type!r} is not supported yet")
            continue
        try:
            inp = desired.inputs(settings, pool)
            mc = get_machineconfig(inp.rendered_config)
            if mc is None:
                raise desired.Blocked(f"MachineConfig {inp.rendered_config} not found")
            out.extend(desired.objects(settings, pool, inp, builder, mc))
        except desired.Blocked as err:
            problems.append(f"pool {name}: {err}")
    return out, problems
