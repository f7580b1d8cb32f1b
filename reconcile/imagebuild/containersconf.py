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


class Unreadable(ValueError):
    """A file the build needs is in the MachineConfig in a form we cannot read."""


def _percent_decode(text: str) -> bytes:
    raw = text.encode()
    return re.sub(rb"%([0-9A-Fa-f]{2})", lambda m: bytes([int(m.group(1), 16)]), raw)


def decode(contents: Mapping[str, Any], path: str) -> str:
    """An Ignition file's contents as text."""
    source = contents.get("source") or ""
    if not source.startswith("data:"):
        raise Unreadable(f"{path}: contents.source is not a data: URL")
    header, sep, payload = source[5:].partition(",")
    if not sep:
        raise Unreadable(f"{path}: contents.source is not a valid data: URL")
    try:
        base64_encoded = header.endswith(";base64")
        data = base64.b64decode(payload, validate=False) if base64_encoded else _percent_decode(payload)
        if contents.get("compression") == "gzip":
            data = gzip.decompress(data)
        elif contents.get("compression"):
            raise Unreadable(f"{path}: compression {contents['compression']!r} is not supported")
        return data.decode()
    except (binascii.Error, OSError, EOFError, UnicodeDecodeError) as err:
        raise Unreadable(f"{path}: cannot decode its contents: {err}") from None


def from_machineconfig(mc: Mapping[str, Any]) -> dict[str, str]:
    """{"registries.conf": ..., "policy.json": ...}, those of the two the MachineConfig has."""
    config = (mc.get("spec") or {}).get("config") or {}
    files = (config.get("storage") or {}).get("files") or [] if isinstance(config, Mapping) else []
    out: dict[str, str] = {}
    for entry in files:
        key = FILES.get(entry.get("path", "")) if isinstance(entry, Mapping) else None
        if key:             # Ignition: a later entry for the same path is an error; the last wins here
            out[key] = decode(entry.get("contents") or {}, entry["path"])
    return out
