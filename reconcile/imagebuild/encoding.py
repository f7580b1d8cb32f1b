"""The MachineConfig as the build receives it: compact JSON, gzip level 9 with mtime 0, base64.

Only the fields that describe the config travel; server-populated metadata (resourceVersion,
uid, managedFields, ...) is dropped so that a bookkeeping change on the MachineConfig never makes
our ConfigMap look out of date.
"""

from __future__ import annotations

import base64
import gzip
import json
from collections.abc import Mapping
from typing import Any

try:  # zlib-ng writes the same gzip format 2-3x faster at level 9 (bench/plan_scale.py)
    from zlib_ng import gzip_ng as _gzip
except ImportError:  # pragma: no cover - platforms without a zlib-ng wheel
    _gzip = gzip

#: An encoded MachineConfig larger than one ConfigMap is split in parts of this size (the API
#: server refuses a ConfigMap over 1 MiB of data: key and metadata fit in what is left)...
PART_SIZE = 1_000_000
#: ...up to this ceiling: beyond it the pool is Blocked.
CEILING = 8 * 1024 * 1024
KEY = "machineconfig.json.gz"


def parts(encoded: str) -> dict[str, str]:
    """ConfigMap data for the encoded MachineConfig: one key when it fits, else numbered keys
    (`machineconfig.json.gz.000`, ...) whose values, concatenated in key order, are the whole."""
    if len(encoded) + len(KEY) <= PART_SIZE:
        return {KEY: encoded}
    return {f"{KEY}.{i // PART_SIZE:03d}": encoded[i:i + PART_SIZE]
            for i in range(0, len(encoded), PART_SIZE)}
_KEPT_METADATA = ("name", "labels", "annotations")


def build_view(machineconfig: Mapping[str, Any]) -> dict[str, Any]:
    md = machineconfig.get("metadata") or {}
    return {
        "apiVersion": machineconfig.get("apiVersion", "machineconfiguration.openshift.io/v1"),
        "kind": machineconfig.get("kind", "MachineConfig"),
        "metadata": {k: md[k] for k in _KEPT_METADATA if k in md},
        "spec": machineconfig.get("spec") or {},
    }


def json_bytes(machineconfig: Mapping[str, Any]) -> bytes:
    return json.dumps(build_view(machineconfig), separators=(",", ":"), ensure_ascii=False).encode()


def encode(machineconfig: Mapping[str, Any]) -> str:
    raw = json_bytes(machineconfig)
    return base64.b64encode(_gzip.compress(raw, compresslevel=9, mtime=0)).decode("ascii")


def decode(text: str) -> Any:
    return json.loads(gzip.decompress(base64.b64decode(text)))
