"""What counts as a difference. Only what we set is compared: server-populated fields (status,
uid, resourceVersion, managedFields, creationTimestamp, generation) and anything the server
defaults are left out; numbers compare by value (1 == 1.0, as Python compares them); the encoded
MachineConfig is compared by its decoded JSON, since Go's and zlib's gzip bytes differ."""

from __future__ import annotations

import binascii
import zlib
from collections.abc import Mapping
from typing import Any

from reconcile.build import encoding

SERVER_METADATA = ("managedFields", "resourceVersion", "uid", "creationTimestamp", "generation",
                   "selfLink", "deletionGracePeriodSeconds")


def project(live: Any, desired: Any) -> Any:
    """`live` cut down to the keys `desired` sets: fields the server adds never differ."""
    if isinstance(live, dict) and isinstance(desired, dict):
        return {k: project(live[k], v) for k, v in desired.items() if k in live}
    return live


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


def data_value_equal(key: str, live: Any, desired: Any) -> bool:
    if live == desired:
        return True
    if key == encoding.KEY and isinstance(live, str) and isinstance(desired, str):
        try:
            return encoding.decode(live) == encoding.decode(desired)
        except (ValueError, binascii.Error, OSError, EOFError, zlib.error):
            return False
    return False


def data_equal(live: Mapping[str, Any] | None, desired: Mapping[str, Any]) -> bool:
    live = live or {}
    return all(k in live and data_value_equal(k, live[k], v) for k, v in desired.items())
