"""Cluster snapshots as `oc get ... -o yaml` prints them: a `kind: List` (or any `*List`) or a
multi-document YAML stream, read from a file or `-` for stdin."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Mapping
from typing import Any

import yaml

from reconcile.contract import objects, yamlio


class SnapshotError(Exception):
    """The snapshot cannot be read; one line saying why."""


#: What an API server guarantees of the objects it serves, for the fields this program reads: the
#: ObjectMeta of every object, ConfigMap and Secret data (core/v1), MachineConfigPool and
#: MachineConfig by their CRDs (openshift/api; tests/unit/test_fuzz.py holds these rows to
#: ../shared/schemas). A snapshot that breaks one is not objects a cluster can serve, and is refused
#: naming the key; a live cluster cannot send them. What no schema checks (the Ignition inside a
#: MachineConfig's spec.config), and spec.config itself, are for the readers to judge: they block
#: only the pool.
#: kind ("*": every kind) -> rows of `path JSON-type`: `*` is any key of a map, `[]` any list item.
_SHAPE_ROWS = {
    "*": """apiVersion string; metadata object; metadata.name string; metadata.namespace string;
        metadata.uid string; metadata.resourceVersion string; metadata.generation integer;
        metadata.creationTimestamp string; metadata.deletionTimestamp string;
        metadata.labels object; metadata.labels.* string; metadata.annotations object;
        metadata.annotations.* string; metadata.finalizers array; metadata.finalizers[] string;
        metadata.ownerReferences array; metadata.ownerReferences[] object;
        metadata.ownerReferences[].apiVersion string; metadata.ownerReferences[].kind string;
        metadata.ownerReferences[].name string; metadata.ownerReferences[].uid string;
        metadata.ownerReferences[].controller boolean;
        metadata.ownerReferences[].blockOwnerDeletion boolean""",
    "ConfigMap": "data object; data.* string; binaryData object; binaryData.* string; immutable boolean",
    "Secret": """data object; data.* string; stringData object; stringData.* string; type string;
        immutable boolean""",
    "MachineConfigPool": """spec object; spec.configuration object; spec.configuration.name string;
        spec.paused boolean; spec.osImageStream object; spec.osImageStream.name string;
        spec.nodeSelector object; spec.nodeSelector.matchLabels object;
        spec.nodeSelector.matchLabels.* string; spec.nodeSelector.matchExpressions array;
        spec.nodeSelector.matchExpressions[] object; spec.nodeSelector.matchExpressions[].key string;
        spec.nodeSelector.matchExpressions[].operator string;
        spec.nodeSelector.matchExpressions[].values array;
        spec.nodeSelector.matchExpressions[].values[] string;
        spec.machineConfigSelector object; spec.machineConfigSelector.matchLabels object;
        spec.machineConfigSelector.matchLabels.* string; spec.machineConfigSelector.matchExpressions array;
        spec.machineConfigSelector.matchExpressions[] object;
        spec.machineConfigSelector.matchExpressions[].key string;
        spec.machineConfigSelector.matchExpressions[].operator string;
        spec.machineConfigSelector.matchExpressions[].values array;
        spec.machineConfigSelector.matchExpressions[].values[] string;
        status object; status.configuration object; status.configuration.name string;
        status.machineCount integer; status.readyMachineCount integer; status.updatedMachineCount integer;
        status.degradedMachineCount integer; status.unavailableMachineCount integer;
        status.observedGeneration integer; status.conditions array; status.conditions[] object;
        status.conditions[].type string; status.conditions[].status string;
        status.conditions[].reason string; status.conditions[].message string""",
    "MachineConfig": """spec object; spec.extensions array; spec.extensions[] string;
        spec.kernelArguments array; spec.kernelArguments[] string; spec.kernelType string;
        spec.fips boolean; spec.osImageURL string; spec.baseOSExtensionsContainerImage string""",
}
#: rows whose CRD says `nullable: true`: the server keeps (and serves) their null, so a snapshot does
#: too (a rendered MachineConfig's `kernelArguments: null` is part of what the build encodes)
NULLABLE = frozenset({("MachineConfig", "spec.kernelArguments")})
SHAPES: tuple[tuple[str, str, str], ...] = tuple(
    (kind, *row.split()) for kind, rows in _SHAPE_ROWS.items() for row in rows.split(";"))
_TYPES = {"string": str, "integer": int, "boolean": bool, "object": dict, "array": list}


def _json_type(value: Any) -> str:
    for name, types in (("null", type(None)), ("boolean", bool), ("integer", int), ("number", float),
                        ("string", str), ("object", dict), ("array", list)):
        if isinstance(value, types):
            return name
    return type(value).__name__         # YAML's own: a timestamp, binary, a set


def _walk(value: Any, steps: list[str], at: str) -> Iterable[tuple[str, Any, Any]]:
    """(path, parent, key) of every value at `steps` below `value`; a parent of the wrong type has
    no children here (its own row says so)."""
    step, rest = steps[0], steps[1:]
    if step == "[]" and isinstance(value, list):
        for i, item in enumerate(value):
            yield from _walk(item, rest, f"{at}[{i}]") if rest else [(f"{at}[{i}]", value, i)]
    elif step == "*" and isinstance(value, dict):
        for key, item in list(value.items()):
            yield from _walk(item, rest, _child(at, key)) if rest else [(_child(at, key), value, key)]
    elif step not in ("[]", "*") and isinstance(value, dict) and step in value:
        yield from _walk(value[step], rest, _child(at, step)) if rest else [(_child(at, step), value, step)]


def _child(at: str, key: Any) -> str:
    """`at.key`, or `at[<repr>]` for a key that would not read as one line (shortened)."""
    if isinstance(key, str) and key and key.isprintable() and len(key) <= 253:
        return f"{at}.{key}" if at else key
    return f"{at}[{_short(key)}]"


def _steps(path: str) -> list[str]:
    return [s for part in path.split(".") for s in ([part[:-2], "[]"] if part.endswith("[]") else [part])]


#: Deeper than any object a cluster serves (Ignition's own schema is a few levels deep), and far from
#: Python's recursion limit, which copying a deeper one would reach.
MAX_DEPTH = 100


def _keys(value: Any, at: str, depth: int = 0) -> str | None:
    """What is not JSON in `value`: the path of the first map key that is not a string (JSON has no
    other), or of a value nested deeper than MAX_DEPTH; None when all is well."""
    if depth > MAX_DEPTH and isinstance(value, dict | list):
        return f"{at} nests deeper than {MAX_DEPTH} levels"
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                return f"the key {_child(at, key)} is not a string"
            found = _keys(item, _child(at, key), depth + 1)
            if found:
                return found
    elif isinstance(value, list):
        for i, item in enumerate(value):
            found = _keys(item, f"{at}[{i}]", depth + 1)
            if found:
                return found
    return None


def admit(doc: dict[str, Any]) -> str | None:
    """Why `doc` is not an object a cluster serves (one phrase naming the key), or None; drops the
    nulls of its fields, as a server never serves them (but those of NULLABLE rows, which it does)."""
    kind = doc.get("kind")
    if kind is None or kind == "":
        return "an object without kind or metadata.name"
    if not isinstance(kind, str):
        return f"kind is {_a(_json_type(kind))}, not a string"
    if not kind.isprintable() or len(kind) > 253:
        return f"kind {_short(kind)} is not a kind"
    name = doc["metadata"].get("name") if isinstance(doc.get("metadata"), dict) else None
    what = f"{kind} {name}" if isinstance(name, str) and name.isprintable() and len(name) <= 253 else kind
    not_json = _keys(doc, "")
    if not_json:
        return f"{what}: {not_json}"
    for rule_kind, path, want in SHAPES:
        if rule_kind not in ("*", kind):
            continue
        steps = _steps(path)
        for at, parent, key in _walk(doc, steps, ""):
            value = parent[key]
            if value is None and (rule_kind, path) in NULLABLE:
                continue
            if value is None and steps[-1] not in ("[]", "*") and path != "apiVersion":
                del parent[key]         # null: absent, as a server serves it (it drops such nulls)
                continue
            if not isinstance(value, _TYPES[want]) or (want == "integer" and isinstance(value, bool)):
                got = "null" if value is None else _a(_json_type(value))
                return f"{what}: {at} is {got}, not {_a(want)}"
    if not isinstance(name, str) or not name:
        return "an object without kind or metadata.name"
    # the kinds we read or write are named so (ValidateObjectMeta with NameIsDNSSubdomain); Events and
    # unknown kinds only as a path segment
    if kind in objects.KINDS and kind != "Event" and not objects.valid_name(name):
        return f"{kind}: metadata.name {_short(name)} is not a valid name (a lowercase RFC 1123 subdomain)"
    if "/" in name or name in (".", "..") or not name.isprintable():
        return f"{kind}: metadata.name {_short(name)} is not a valid name"
    ns = doc["metadata"].get("namespace")
    if ns and not objects.valid_namespace(ns):
        return f"{what}: metadata.namespace {_short(ns)} is not a namespace (a lowercase RFC 1123 label)"
    return None


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _a(json_type: str) -> str:
    return f"an {json_type}" if json_type[0] in "aeiou" else f"a {json_type}"


def _flatten(doc: Any, where: str) -> Iterable[dict[str, Any]]:
    if doc is None:
        return
    if not isinstance(doc, dict):
        raise SnapshotError(f"{where}: expected a Kubernetes object, got {type(doc).__name__}")
    if str(doc.get("kind", "")).endswith("List") and "items" in doc:
        items = doc.get("items") or []
        if not isinstance(items, list):
            raise SnapshotError(f"{where}: {doc['kind']} items is {_a(_json_type(items))}, not an array")
        for item in items:
            yield from _flatten(item, where)
        return
    problem = admit(doc)
    if problem:
        raise SnapshotError(f"{where}: {problem}")
    yield doc


def load(path: str) -> list[dict[str, Any]]:
    try:
        if path == "-":
            text = sys.stdin.read()
        else:
            with open(path, encoding="utf-8") as fh:
                text = fh.read()
        docs = yamlio.load_all(text)
    except OSError as err:
        raise SnapshotError(f"cannot read snapshot {path}: {err.strerror}") from None
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        at = f" at line {mark.line + 1}" if mark else ""
        raise SnapshotError(f"snapshot {path} is not valid YAML{at}") from None
    out: dict[tuple[str, str, str], dict[str, Any]] = {}
    for doc in docs:
        for obj in _flatten(doc, f"snapshot {path}"):
            key = objects.identity(obj)
            if key in out and out[key] != obj:      # which one is the cluster's? neither is dropped
                kind, ns, name = key
                raise SnapshotError(f"snapshot {path}: {kind} {f'{ns}/' if ns else ''}{name} appears twice "
                                    "with different content")
            out.setdefault(key, obj)                # the same object twice (outputs concatenated): once
    return list(out.values())


def dump(items: Iterable[Mapping[str, Any]]) -> str:
    doc = {"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""},
           "items": list(items)}
    return yamlio.dump(doc)


def write(path: str, items: Iterable[Mapping[str, Any]]) -> None:
    text = dump(items)
    if path == "-":
        sys.stdout.write(text)
        return
    # it holds every Secret read: the owner's alone, an existing file included
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.fchmod(fd, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(text)
