"""Secret values never leave the process: kubectl's masking (`***`, and `*** (before)` /
`*** (after)` when a value changed), applied to Secret `data` and `stringData`."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

_FIELDS = ("data", "stringData")


def mask_pair(before: Mapping[str, Any] | None, after: Mapping[str, Any] | None
              ) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    if not any(o and o.get("kind") == "Secret" for o in (before, after)):
        return (dict(before) if before else None), (dict(after) if after else None)
    b = copy.deepcopy(dict(before)) if before else None
    a = copy.deepcopy(dict(after)) if after else None
    for field in _FIELDS:
        old = (b or {}).get(field) or {}
        new = (a or {}).get(field) or {}
        for key in set(old) | set(new):
            changed = key in old and key in new and old[key] != new[key]
            if b is not None and key in old:
                b[field][key] = "*** (before)" if changed else "***"
            if a is not None and key in new:
                a[field][key] = "*** (after)" if changed else "***"
    return b, a
