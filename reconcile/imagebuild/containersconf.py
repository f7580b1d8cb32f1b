"""The cluster's container-tools configuration as its nodes get it, for the build to use:
`/etc/containers/registries.conf` (mirrors from ImageDigestMirrorSet / ImageTagMirrorSet, blocked
and insecure registries) and `/etc/containers/policy.json` (the signature policy), both read from
the rendered MachineConfig's Ignition files. The MCO builds with the same two files: it copies
them into its `etc-registries-` and `etc-policy-` ConfigMaps and mounts them over
`/etc/containers/` in the build Pod (openshift/machine-config-operator
pkg/controller/build/buildrequest/buildrequest.go), so that on a disconnected cluster the
Containerfile's FROM resolves through the mirrors. Pure: decodes Ignition `data:` URLs (RFC 2397,
optionally gzip-compressed as Ignition 3 allows)."""

from __future__ import annotations

import base64
import binascii
import gzip
import re
from collections.abc import Mapping
from typing import Any

#: node path -> key in our ConfigMap (and file name in the build Pod)
FILES = {"/etc/containers/registries.conf": "registries.conf", "/etc/containers/policy.json": "policy.json"}
MOUNT = "/etc/ocl/containers"


class UnreadableFile(ValueError):
    """A file the build needs is in the MachineConfig in a form we cannot read."""


def _percent_decode(text: str) -> bytes:
    raw = text.encode()
    return re.sub(rb"%([0-9A-Fa-f]{2})", lambda m: bytes([int(m.group(1), 16)]), raw)


_NAMES = {dict: "an object", Mapping: "an object", list: "an array", str: "a string", int: "a number",
          float: "a number", bool: "a boolean"}


def _typed(value: Any, want: type, at: str) -> Any:
    """`value` if it is a `want` (or null: absent); Ignition is not checked by the MachineConfig CRD
    (spec.config preserves unknown fields), so a live cluster serves any shape."""
    if value is not None and not isinstance(value, want):
        raise UnreadableFile(f"{at} is {_NAMES.get(type(value), type(value).__name__)}, not {_NAMES[want]}")
    return value


def decode(contents: Mapping[str, Any], path: str, at: str = "contents") -> str:
    """An Ignition file's contents as text; `at` is where the contents are, for messages."""
    source = _typed(contents.get("source"), str, f"{path}: {at}.source") or ""
    compression = _typed(contents.get("compression"), str, f"{path}: {at}.compression")
    if not source.startswith("data:"):
        raise UnreadableFile(f"{path}: contents.source is not a data: URL")
    header, sep, payload = source[5:].partition(",")
    if not sep:
        raise UnreadableFile(f"{path}: contents.source is not a valid data: URL")
    try:
        base64_encoded = header.endswith(";base64")
        data = base64.b64decode(payload, validate=False) if base64_encoded else _percent_decode(payload)
        if compression == "gzip":
            data = gzip.decompress(data)
        elif compression:
            raise UnreadableFile(f"{path}: compression {compression!r} is not supported")
        return data.decode()
    except (binascii.Error, OSError, EOFError, UnicodeDecodeError) as err:
        raise UnreadableFile(f"{path}: cannot decode its contents: {err}") from None


def from_machineconfig(mc: Mapping[str, Any]) -> dict[str, str]:
    """{"registries.conf": ..., "policy.json": ...}, those of the two the MachineConfig has.
    Raises UnreadableFile naming the key when the Ignition around them is not of Ignition's shape."""
    config = (mc.get("spec") or {}).get("config") or {}
    if not isinstance(config, Mapping):
        return {}                       # desired.objects blocks the pool saying so
    storage = _typed(config.get("storage"), Mapping, "spec.config.storage") or {}
    files = _typed(storage.get("files"), list, "spec.config.storage.files") or []
    out: dict[str, str] = {}
    for i, entry in enumerate(files):
        at = f"spec.config.storage.files[{i}]"
        entry = _typed(entry, Mapping, at) or {}
        key = FILES.get(_typed(entry.get("path"), str, f"{at}.path") or "")
        if key:             # Ignition: a later entry for the same path is an error; the last wins here
            contents = _typed(entry.get("contents"), Mapping, f"{entry['path']}: {at}.contents") or {}
            out[key] = decode(contents, entry["path"], f"{at}.contents")
    return out
