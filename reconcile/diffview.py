"""`diff`: the plan shown as a unified YAML diff per object, like `kubectl diff`.

Server-populated fields are left out of both sides, Secret values are masked, and very long
values (the encoded MachineConfig) are shown by size and hash so a change stays visible."""

from __future__ import annotations

import difflib
import hashlib
from collections.abc import Iterable, Mapping
from typing import Any

from reconcile import masking, objects, yamlio
from reconcile.plan import Action, PoolPlan

_SERVER_FIELDS = ("managedFields", "resourceVersion", "uid", "creationTimestamp", "generation",
                  "selfLink")
LONG_VALUE = 4096


def _summarise(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _summarise(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_summarise(v) for v in value]
    if isinstance(value, str) and len(value) > LONG_VALUE:
        digest = hashlib.sha256(value.encode()).hexdigest()[:16]
        return f"<{len(value)} bytes, sha256 {digest}>"
    return value


def comparable(obj: Mapping[str, Any] | None) -> dict[str, Any] | None:
    if obj is None:
        return None
    out = {k: v for k, v in obj.items() if k != "status"}
    md = {k: v for k, v in (obj.get("metadata") or {}).items() if k not in _SERVER_FIELDS}
    out["metadata"] = md
    return _summarise(out)


def _yaml(obj: Mapping[str, Any] | None) -> list[str]:
    if obj is None:
        return []
    return yamlio.dump(obj).splitlines(keepends=True)


def sides(action: Action) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    before = None if action.verb == "create" else action.obj
    after = {"create": action.obj, "patch": action.after, "delete": None}[action.verb]
    before, after = masking.mask_pair(comparable(before), comparable(after))
    return before, after


def render(plans: Iterable[PoolPlan]) -> str:
    plans = list(plans)
    actions = sorted((a for p in plans for a in p.actions), key=lambda a: objects.sort_key(a.obj))
    out: list[str] = []
    for action in actions:
        before, after = sides(action)
        kind, ns, name = action.obj.get("kind"), objects.namespace(action.obj), objects.name(action.obj)
        where = f"{ns}/{name}" if ns else name
        out.append(f"===== {action.verb} {objects.group(action.obj.get('apiVersion', '')) or 'core'}"
                   f"/{kind} {where} =====\n")
        label = f"{kind}.{ns + '.' if ns else ''}{name}"
        out.extend(difflib.unified_diff(_yaml(before), _yaml(after), f"live/{label}",
                                        f"desired/{label}"))
    if actions or any(p.state_before != p.state_after and p.state_after for p in plans):
        out.append(summary(plans) + "\n")
    return "".join(out)


def summary(plans: Iterable[PoolPlan]) -> str:
    plans = list(plans)
    counts = ", ".join(f"{sum(p.count(v) for p in plans)} to {v}" for v in ("create", "patch", "delete"))
    moves = [f"{p.pool} {p.state_before or '-'} -> {p.state_after}"
             for p in plans if p.state_after and p.state_before != p.state_after]
    return counts + ("; pools: " + ", ".join(moves) if moves else "")
