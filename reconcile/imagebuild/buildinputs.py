"""Build inputs discovered by label (the coreos-assembler idea): Secrets and ConfigMaps labelled
`ocl-reconciler.io/build-input=<type>` are handed to every build, the way the type table in
`manifests/build-inputs.yaml` says. Pure: the shell lists the objects, this decides how they are
mounted, which env vars they set, and what is skipped or conflicts."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from reconcile.contract import objects
from reconcile.imagebuild import templates

LABEL = "ocl-reconciler.io/build-input"
ALIAS = "coreos-assembler.coreos.com/secret"
LABELS = (LABEL, ALIAS)
TABLE = "build-inputs.yaml"


class Conflict(ValueError):
    """Two inputs (or an input and the build itself) would set the same env var or path."""


@dataclass(frozen=True)
class Mount:
    volume: str            # volume name, unique per object
    kind: str              # Secret | ConfigMap
    source: str            # the object's name
    path: str              # mount path in the build process and in every RUN step


@dataclass(frozen=True)
class Inputs:
    mounts: tuple[Mount, ...] = ()
    env: tuple[dict[str, Any], ...] = ()        # Kubernetes EnvVar objects
    types: frozenset[str] = frozenset()
    merge: Mapping[str, tuple[Mapping[str, Any], ...]] = field(default_factory=dict)
    skipped: tuple[str, ...] = ()                # one line per object not used, saying why

    @property
    def note(self) -> str:
        return "; ".join(self.skipped)


def input_type(obj: Mapping[str, Any]) -> str | None:
    labels = objects.labels(obj)
    for key in LABELS:
        if key in labels:
            return labels[key]
    return None


def _volume_name(obj: Mapping[str, Any]) -> str:
    digest = hashlib.sha256(f"{obj.get('kind')}/{objects.name(obj)}".encode()).hexdigest()[:10]
    return f"input-{digest}"


def _keys(obj: Mapping[str, Any]) -> set[str]:
    return set(obj.get("data") or {}) | set(obj.get("binaryData") or {}) | set(obj.get("stringData") or {})


def discover(found: Iterable[Mapping[str, Any]], reserved_env: Iterable[str] = (),
             reserved_paths: Iterable[str] = ()) -> Inputs:
    """Inputs from the labelled objects. Raises Conflict naming both sides of a clash."""
    table = templates.table(TABLE)
    env_owner: dict[str, str] = {e: "the build itself" for e in reserved_env}
    path_owner: dict[str, str] = {p: "the build itself" for p in reserved_paths}
    mounts, env, types, skipped = [], [], set(), []
    merge: dict[str, list[Mapping[str, Any]]] = {}

    def claim(owners: dict[str, str], what: str, key: str, who: str) -> None:
        if key in owners:
            raise Conflict(f"build inputs {owners[key]} and {who} both set {what} {key}")
        owners[key] = who

    for obj in sorted(found, key=lambda o: (o.get("kind", ""), objects.name(o))):
        kind, who = obj.get("kind", ""), objects.ref(obj)
        kind_type = input_type(obj)
        entry = table.get(kind_type) if kind_type else None
        if entry is None:
            skipped.append(f"skipped {who}: unknown build-input type {kind_type!r} "
                           f"(known: {', '.join(sorted(table))})")
            continue
        if entry.get("merge"):
            if kind != "Secret":
                skipped.append(f"skipped {who}: type {kind_type!r} must be a Secret")
                continue
            merge.setdefault(entry["merge"], []).append(obj)
            types.add(kind_type)
            continue
        keys = _keys(obj)
        ref_kind = "secretKeyRef" if kind == "Secret" else "configMapKeyRef"
        if entry.get("mount"):
            claim(path_owner, "path", entry["mount"], who)
            mounts.append(Mount(_volume_name(obj), kind, objects.name(obj), entry["mount"]))
            for key, var in sorted((entry.get("files") or {}).items()):
                if key in keys:
                    claim(env_owner, "env var", var, who)
                    env.append({"name": var, "value": f"{entry['mount']}/{key}"})
        for key, var in sorted((entry.get("env") or {}).items()):
            if key in keys:
                claim(env_owner, "env var", var, who)
                env.append({"name": var, "valueFrom": {ref_kind: {"name": objects.name(obj), "key": key}}})
        types.add(kind_type)
    return Inputs(tuple(mounts), tuple(env), frozenset(types),
                  {k: tuple(v) for k, v in merge.items()}, tuple(skipped))
