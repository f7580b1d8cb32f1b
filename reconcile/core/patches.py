"""JSON patches that are safe under concurrency: they touch only keys we own (pool annotations),
and the one that adds the whole annotations map leads with a `test` of resourceVersion."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

import jsonpatch


def pointer(*parts: str) -> str:
    return "".join("/" + p.replace("~", "~0").replace("/", "~1") for p in parts)


def annotation_ops(live: Mapping[str, Any], change: Mapping[str, str | None]) -> list[dict[str, Any]]:
    """Set or remove only the named annotation keys; other owners' keys are never in the patch.

    An object without annotations needs the whole map added, and `add` on a member that exists
    replaces it (RFC 6902): that op is guarded by a resourceVersion `test`, so annotations someone
    wrote since our read make the server answer 422 and we re-plan, instead of wiping them."""
    current = (live.get("metadata") or {}).get("annotations")
    if current is None:
        added = {k: v for k, v in change.items() if v is not None}
        if not added:
            return []
        return guarded(live, [{"op": "add", "path": "/metadata/annotations", "value": added}])
    ops = []
    for key, value in sorted(change.items()):
        path = pointer("metadata", "annotations", key)
        ops.append({"op": "remove", "path": path} if value is None
                   else {"op": "add", "path": path, "value": value})
    return ops


def guarded(live: Mapping[str, Any], ops: list[dict[str, Any]]) -> list[dict[str, Any]]:
    rv = (live.get("metadata") or {}).get("resourceVersion")
    return ([{"op": "test", "path": "/metadata/resourceVersion", "value": rv}] if rv else []) + ops


def apply(obj: Mapping[str, Any], ops: list[dict[str, Any]]) -> dict[str, Any]:
    return jsonpatch.apply_patch(copy.deepcopy(dict(obj)), [o for o in ops if o["op"] != "test"])
