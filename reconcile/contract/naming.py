"""Deterministic names, labels and owner references for everything we create.

The build id is a short hash of the build's inputs as `core/desired.BuildInputs` lists them (the
pool, its rendered config, the images, release, pullspec, builder type, custom Dockerfile, the pull
and push secrets' names, the rebuild token), so the same inputs always give the same names (a
killed run is resumed, not repeated) and a change of any of them gives new ones. Labelled build
inputs, the cluster Proxy and the templates are not in it: changing them needs the rebuild token.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

#: Where the settings and our build objects live unless `-n` says otherwise (the MCO's namespace).
#: Our own namespace (docs/namespace.md): never the MCO's, where our token would
#: mean much more than we use.
DEFAULT_NAMESPACE = "ocl-reconciler"
#: The MCO's two standard pools, named after their nodes' roles.
MASTER, WORKER = "master", "worker"
MANAGED_BY = "app.kubernetes.io/managed-by"
#: On every ConfigMap and Secret we create (all `immutable: true`): a hash of its content, so that
#: metadata alone says whether it is the one wanted. One whose hash differs is replaced.
CONTENT_HASH = "ocl-reconciler.io/content-hash"
MANAGER = "ocl-reconciler"
POOL_LABEL = "ocl-reconciler.io/pool"
BUILD_ID_LABEL = "ocl-reconciler.io/build-id"
#: One LIST per kind with this selector finds everything we made.
SELECTOR = {MANAGED_BY: MANAGER}
_MAX_NAME = 253


def build_id(inputs: Mapping[str, Any]) -> str:
    canonical = json.dumps(inputs, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()[:12]


def object_name(role: str, pool: str, bid: str) -> str:
    """`ocl-<role>-<pool>-<build id>`, the pool part shortened so the name stays valid."""
    room = _MAX_NAME - len(f"ocl-{role}--{bid}")
    return f"ocl-{role}-{pool[:room].rstrip('-.')}-{bid}"


def pool_label(pool: str) -> str:
    """The pool's name as a label value: itself when it fits in 63 characters, else shortened
    with a hash of the whole name, so two long names never share a value."""
    if len(pool) <= 63:
        return pool
    digest = hashlib.sha256(pool.encode()).hexdigest()[:10]
    return f"{pool[:52].rstrip('-._')}-{digest}"


def our_labels(pool: str, bid: str) -> dict[str, str]:
    return {MANAGED_BY: MANAGER, POOL_LABEL: pool_label(pool), BUILD_ID_LABEL: bid}


def our_annotations(rendered_config: str, wave: int) -> dict[str, str]:
    """On everything we create: the rendered config it is for, and what Argo CD needs when it
    renders us as a Config Management Plugin: inputs (wave 0) before the build (wave 1), not part
    of the app's sync status, never pruned by Argo CD (we clean up our own objects)."""
    return {"ocl-reconciler.io/rendered-config": rendered_config,
            "argocd.argoproj.io/sync-wave": str(wave),
            "argocd.argoproj.io/compare-options": "IgnoreExtraneous",
            "argocd.argoproj.io/sync-options": "Prune=false"}


def owner_reference(pool: Mapping[str, Any], controller: bool = True) -> dict[str, Any]:
    """`controller` False for a MachineConfig: the render controller enqueues only the controller
    owner of a MachineConfig that has one (core/rollout/)."""
    md = pool.get("metadata") or {}
    return {
        "apiVersion": pool.get("apiVersion", "machineconfiguration.openshift.io/v1"),
        "kind": "MachineConfigPool",
        "name": md.get("name", ""),
        "uid": md.get("uid", ""),
        "controller": controller,
        "blockOwnerDeletion": False,
    }


def content_hash(obj: Mapping[str, Any]) -> str:
    """The hash a ConfigMap or Secret of ours carries in CONTENT_HASH: of its type and data."""
    content = {k: obj.get(k) for k in ("type", "data", "binaryData")}
    canonical = json.dumps(content, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:32]


def seal(obj: dict[str, Any]) -> dict[str, Any]:
    """Make a ConfigMap or Secret of ours immutable and content-addressed (in place; returned)."""
    obj["immutable"] = True
    obj.setdefault("metadata", {}).setdefault("annotations", {})[CONTENT_HASH] = content_hash(obj)
    return obj
