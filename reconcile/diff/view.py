"""`diff`: the plan shown the way `kubectl diff` shows changes, and as JSON for scripts.

Objects are sorted by group, kind, namespace and name; each gets a header line, a one-line change
summary (from deepdiff, run only on objects that differ; lists we treat as sets compared without
order) and a unified YAML diff. Server-populated fields are left out of both sides, numbers are
normalised, Secret values are masked like kubectl, and very long values (the encoded
MachineConfig) are shown by size and hash so that a change stays visible. `KUBECTL_EXTERNAL_DIFF`
is honoured as kubectl does."""

from __future__ import annotations

import difflib
import hashlib
import json
import os
import re
import shlex
import subprocess
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from reconcile.contract import objects, yamlio
from reconcile.core.actions import PoolPlan, Write
from reconcile.diff import masking, normalize

LONG_VALUE = 4096
#: Lists whose order means nothing to Kubernetes: compared as sets in the change summary.
SET_LIKE = ("env", "volumes", "volumeMounts", "items", "ownerReferences", "configMaps")
_COLORS = {"header": "\033[1m", "+": "\033[32m", "-": "\033[31m", "@": "\033[36m", "#": "\033[2m"}
_RESET = "\033[0m"


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
    """What a diff shows of an object: no server fields, numbers normalised."""
    if obj is None:
        return None
    return normalize.numbers(normalize.without_server_fields(obj))


def sides(action: Write) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """(live, desired) as shown: comparable, masked, long values summarised."""
    before = None if action.verb in ("create", "push") else action.obj
    after = {"create": action.obj, "push": action.obj, "patch": action.after, "prune": action.after,
             "delete": None}[action.verb]
    before, after = masking.mask_pair(comparable(before), comparable(after))
    return (_summarise(before) if before is not None else None,
            _summarise(after) if after is not None else None)


_PLAIN_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")


def _path(prefix: list[str], deepdiff_path: str) -> str:
    """A JSONPath-like path: `data.key`, a key that is not a plain name in brackets
    (`data['.dockerconfigjson']`, `metadata.annotations['ocl-reconciler.io/state']`), `[0]`."""
    parts = re.findall(r"\['((?:[^'\\]|\\.)*)'\]|\[(\d+)\]", deepdiff_path)
    text = ""
    for key in prefix + [key if key else int(index) for key, index in parts]:
        if isinstance(key, int):
            text += f"[{key}]"
        elif _PLAIN_KEY.match(key):
            text += f".{key}" if text else key
        else:
            text += "['" + key.replace("\\", "\\\\").replace("'", "\\'") + "']"
    return text


def _keyed(items: list[Any]) -> dict[str, Any] | None:
    """A list of named entries (env, volumes, ...) as a map by name, or None if it is not one."""
    if not all(isinstance(i, dict) and isinstance(i.get("name"), str) for i in items):
        return None
    keyed = {f"[name={i['name']}]": i for i in items}
    return keyed if len(keyed) == len(items) else None


def _differences(before: Any, after: Any, path: list[str]) -> list[tuple[list[str], Any, Any, bool]]:
    """The smallest subtrees that differ, so deepdiff (about 100 us a node) only sees those."""
    if before == after:
        return []
    set_like = bool(path) and path[-1] in SET_LIKE
    if isinstance(before, list) and isinstance(after, list) and set_like:
        b, a = _keyed(before), _keyed(after)
        if b is not None and a is not None:
            before, after, set_like = b, a, False
            if before == after:
                return []
    if isinstance(before, dict) and isinstance(after, dict) and before.keys() == after.keys():
        return [d for k in before if before[k] != after[k]
                for d in _differences(before[k], after[k], path + [k])]
    if isinstance(before, list) and isinstance(after, list) and len(before) == len(after) and not set_like:
        return [d for i, (b, a) in enumerate(zip(before, after, strict=True)) if b != a
                for d in _differences(b, a, path + [f"[{i}]"])]
    return [(path, before, after, set_like)]


_MARKS = {"values_changed": "~", "type_changes": "~", "dictionary_item_added": "+",
          "dictionary_item_removed": "-", "iterable_item_added": "+", "iterable_item_removed": "-"}


def change_summary(before: Mapping[str, Any] | None, after: Mapping[str, Any] | None) -> str:
    """One line: `~changed +added -removed` paths, from deepdiff on the parts that differ."""
    if before is None:
        return "new object"
    if after is None:
        return "deleted"
    if before == after:                                 # the cheap check first
        return "no change"
    from deepdiff import DeepDiff

    parts = []
    for path, b, a, unordered in _differences(before, after, []):
        diff = DeepDiff({"v": b}, {"v": a}, ignore_order=unordered)
        for kind, mark in _MARKS.items():
            for found in sorted(diff.get(kind, [])):
                parts.append(f"{mark}{_path(path, str(found).replace(chr(91) + repr('v') + chr(93), '', 1))}")
    if not parts:
        return "no change"
    return " ".join(parts[:12]) + (f" (+{len(parts) - 12} more)" if len(parts) > 12 else "")


def _label(obj: Mapping[str, Any]) -> str:
    ns = objects.namespace(obj)
    return f"{obj.get('kind')}.{ns + '.' if ns else ''}{objects.name(obj)}"


def _header(action: Write) -> str:
    obj = action.obj
    ns, name = objects.namespace(obj), objects.name(obj)
    group = objects.group(obj.get("apiVersion", "")) or "core"
    what = f"{group}/{obj.get('kind')} {f'{ns}/{name}' if ns else name}"
    if action.verb == "prune":
        return f"===== prune {what}: delete {len(action.images)} image(s) from the registry ====="
    if action.verb == "push":
        return f"===== push {obj.get('kind')} {ns}/{name}: {obj.get('image')} to the registry ====="
    return f"===== {action.verb} {what} ====="


def _sorted_actions(plans: Iterable[PoolPlan]) -> list[Write]:
    """The writes a diff shows: Events are records of what happened, not state to compare."""
    return sorted((a for p in plans for a in p.actions if a.obj.get("kind") != "Event"),
                  key=lambda a: objects.sort_key(a.obj))


def _paint(line: str, color: bool) -> str:
    if not color:
        return line
    if line.startswith("====="):
        key = "header"
    elif line.startswith(("+++", "---")):
        key = "header"
    else:
        key = line[:1]
    code = _COLORS.get(key)
    return f"{code}{line.rstrip(chr(10))}{_RESET}\n" if code else line


def unified(plans: Iterable[PoolPlan], color: bool = False) -> str:
    plans = list(plans)
    out: list[str] = []
    for action in _sorted_actions(plans):
        before, after = sides(action)
        out.append(_paint(_header(action) + "\n", color))
        out.extend(_paint(f"# delete image {image}\n", color) for image in action.images)
        out.append(_paint(f"# {change_summary(before, after)}\n", color))
        label = _label(action.obj)
        for line in difflib.unified_diff(yamlio.dump(before).splitlines(keepends=True) if before else [],
                                         yamlio.dump(after).splitlines(keepends=True) if after else [],
                                         f"live/{label}", f"desired/{label}"):
            out.append(_paint(line, color))
    out.extend(_paint(f"# pool {p.pool}: {note}\n", color) for p in plans for note in p.notes)
    if out or any(p.state_before != p.state_after and p.state_after for p in plans):
        out.append(summary(plans) + "\n")
    return "".join(out)


def summary(plans: Iterable[PoolPlan]) -> str:
    plans = list(plans)
    counts = ", ".join(f"{sum(p.count(v) for p in plans)} to {v}" for v in ("create", "patch", "delete"))
    images = sum(p.count("prune") for p in plans)
    counts += f", {images} images to delete from the registry" if images else ""
    pushes = sum(p.count("push") for p in plans)
    counts += f", {pushes} image index(es) to push to the registry" if pushes else ""
    moves = [f"{p.pool} {p.state_before or '-'} -> {p.state_after}"
             + (f" ({p.transition.lower()})" if p.state_before == p.state_after else "")
             for p in plans if p.state_after and (p.state_before != p.state_after or _told(p))]
    return counts + ("; pools: " + ", ".join(moves) if moves else "") + rollouts(plans)


def rollouts(plans: Iterable[PoolPlan]) -> str:
    """`; roll out: worker -> worker, infra`: the pools that will roll out each image this plan
    hands to the MCO (rollout: machineconfig), inheriting pools among them."""
    parts = [f"{p.pool} -> {', '.join(p.rollout)}" for p in plans if p.rollout]
    return "; roll out: " + "; ".join(parts) if parts else ""


def _told(plan: PoolPlan) -> bool:
    """Does the plan record a transition (an Event), even to the same state (a reuse)?"""
    return any(a.verb == "create" and a.obj.get("kind") == "Event" for a in plan.actions)


def _masked_ops(action: Write) -> list[dict[str, Any]]:
    if action.obj.get("kind") != "Secret":
        return list(action.patch)
    return [dict(op, value="***") if "value" in op and op["op"] != "test" else dict(op)
            for op in action.patch]


def as_json(plans: Iterable[PoolPlan], strays: Iterable[Any] = ()) -> str:
    """The plan for scripts: per pool the state change and the ordered writes (JSON patches for
    patches, the object for creates); Secret values masked. `strays` (core/rollout/ `Stray`):
    MachineConfigs named like ours we did not write, not changes of the plan."""
    plans = list(plans)
    out: dict[str, Any] = {"summary": summary(plans), "pools": [],
                           "strays": [{"name": s.name, "pool": s.pool or None, "why": s.why} for s in strays]}
    for plan in plans:
        actions = []
        for action in plan.actions:
            entry: dict[str, Any] = {"verb": action.verb, "apiVersion": action.obj.get("apiVersion"),
                                     "kind": action.obj.get("kind"),
                                     "namespace": objects.namespace(action.obj) or None,
                                     "name": objects.name(action.obj)}
            if action.verb == "prune":
                entry["images"] = list(action.images)
            if action.verb in ("patch", "prune"):
                entry["patch"] = _masked_ops(action)
            elif action.verb in ("create", "push"):
                entry["object"] = masking.mask_pair(None, action.obj)[1]
            actions.append(entry)
        out["pools"].append({"pool": plan.pool, "transition": plan.transition,
                             "stateBefore": plan.state_before, "stateAfter": plan.state_after,
                             "message": plan.message, "actions": actions, "notes": list(plan.notes)})
    return json.dumps(out, indent=2, sort_keys=False) + "\n"


_SAFE_ARG = re.compile(r"^[a-zA-Z0-9-=]+$")


def external(plans: Iterable[PoolPlan], command: str) -> int:
    """Write live and desired trees as kubectl does and run KUBECTL_EXTERNAL_DIFF on them; its
    exit status is ours (0 same, 1 different, >1 error). Arguments are kept only when they match
    kubectl's `^[a-zA-Z0-9-=]+$`."""
    words = shlex.split(command)
    program, args = words[0], [w for w in words[1:] if _SAFE_ARG.match(w)]
    with tempfile.TemporaryDirectory(prefix="ocl-diff-") as tmp:
        live, merged = Path(tmp, "LIVE"), Path(tmp, "MERGED")
        live.mkdir()
        merged.mkdir()
        for action in _sorted_actions(plans):
            before, after = sides(action)
            obj = action.obj
            name = ".".join(filter(None, (obj.get("apiVersion", "").replace("/", "."), obj.get("kind"),
                                          objects.namespace(obj), objects.name(obj))))
            if before is not None:
                (live / name).write_text(yamlio.dump(before))
            if after is not None:
                (merged / name).write_text(yamlio.dump(after))
        try:
            return subprocess.run([program, *args, str(live), str(merged)], check=False).returncode
        except OSError as err:
            raise RuntimeError(f"KUBECTL_EXTERNAL_DIFF={command!r}: {err.strerror}") from None


def color_wanted(choice: str, stream: Any) -> bool:
    if choice == "always":
        return True
    if choice == "never":
        return False
    return bool(getattr(stream, "isatty", lambda: False)()) and os.environ.get("TERM") != "dumb"
