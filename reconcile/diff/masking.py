"""Secret values never leave the process, nor a URL's credentials (a proxy's `http://***@proxy`,
should one be in an object by value): kubectl's masking (`***`, and `*** (before)` / `*** (after)` when a
value changed), applied to a Secret's `data` and `stringData` and to any annotation that mirrors
them (kubectl's last-applied-configuration, or one holding a value)."""

from __future__ import annotations

import base64
import binascii
import copy
from collections.abc import Mapping
from typing import Any

from reconcile.imagebuild.proxy import USERINFO

_FIELDS = ("data", "stringData")
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


def _values(secret: Mapping[str, Any] | None) -> set[str]:
    """Every form a value of the secret may take in an annotation: as stored, and decoded."""
    out: set[str] = set()
    for field in _FIELDS:
        for value in ((secret or {}).get(field) or {}).values():
            if not isinstance(value, str) or len(value) < 4:
                continue
            out.add(value)
            if field == "data":
                try:
                    decoded = base64.b64decode(value, validate=True).decode()
                except (binascii.Error, ValueError):
                    continue
                if len(decoded) >= 4:
                    out.add(decoded)
    return out


def _mask_fields(b: dict[str, Any] | None, a: dict[str, Any] | None, fields: tuple[str, ...],
                 mirrors: set[str] | None = None) -> None:
    for field in fields:
        old = _at(b, field)
        new = _at(a, field)
        for key in set(old) | set(new):
            if mirrors is not None and key != LAST_APPLIED and not any(
                    v in str(old.get(key, "")) + "\0" + str(new.get(key, "")) for v in mirrors):
                continue
            changed = key in old and key in new and old[key] != new[key]
            if key in old:
                old[key] = "*** (before)" if changed else "***"
            if key in new:
                new[key] = "*** (after)" if changed else "***"


def _at(obj: dict[str, Any] | None, field: str) -> dict[str, Any]:
    if obj is None:
        return {}
    node: Any = obj
    for part in field.split("."):
        if not isinstance(node, dict) or not isinstance(node.get(part), dict):
            return {}
        node = node[part]
    return node


def _strip_userinfo(node: Any) -> Any:
    if isinstance(node, str):
        return USERINFO.sub(r"\1***@", node)
    if isinstance(node, dict):
        return {k: _strip_userinfo(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_strip_userinfo(v) for v in node]
    return node


def mask_pair(before: Mapping[str, Any] | None, after: Mapping[str, Any] | None
              ) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    before, after = _strip_userinfo(before), _strip_userinfo(after)
    if not any(o and o.get("kind") == "Secret" for o in (before, after)):
        return (dict(before) if before else None), (dict(after) if after else None)
    b = copy.deepcopy(dict(before)) if before else None
    a = copy.deepcopy(dict(after)) if after else None
    mirrors = _values(before) | _values(after)
    _mask_fields(b, a, ("metadata.annotations",), mirrors)
    _mask_fields(b, a, _FIELDS)
    return b, a
