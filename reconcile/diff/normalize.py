"""What a diff shows of an object: server-populated fields (status, uid, resourceVersion,
managedFields, creationTimestamp, generation) are left out, and numbers compare by value
(1 == 1.0, as Python compares them). Our ConfigMaps and Secrets are never compared by content:
their content hash says whether they are right (`create_missing` in core/actions/step.py)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

SERVER_METADATA = ("managedFields", "resourceVersion", "uid", "creationTimestamp", "generation",
                   "selfLink", "deletionGracePeriodSeconds")


def without_server_fields(obj: Mapping[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in obj.items() if k != "status"}
    out["metadata"] = {k: v for k, v in (obj.get("metadata") or {}).items() if k not in SERVER_METADATA}
    return out


def numbers(value: Any) -> Any:
    """Integral floats as ints, so `1.0` and `1` print the same."""
    if isinstance(value, dict):
        return {k: numbers(v) for k, v in value.items()}
    if isinstance(value, list):
        return [numbers(v) for v in value]
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


