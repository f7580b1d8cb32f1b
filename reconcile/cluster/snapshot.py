"""Cluster snapshots as `oc get ... -o yaml` prints them: a `kind: List` (or any `*List`) or a
multi-document YAML stream, read from a file or `-` for stdin."""

from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping
from typing import Any

import yaml

from reconcile.contract import yamlio


class SnapshotError(Exception):
    """The snapshot cannot be read; one line saying why."""


def _flatten(doc: Any, where: str) -> Iterable[dict[str, Any]]:
    if doc is None:
        return
    if not isinstance(doc, dict):
        raise SnapshotError(f"{where}: expected a Kubernetes object, got {type(doc).__name__}")
    if str(doc.get("kind", "")).endswith("List") and "items" in doc:
        for item in doc.get("items") or []:
            yield from _flatten(item, where)
        return
    if not doc.get("kind") or not (doc.get("metadata") or {}).get("name"):
        raise SnapshotError(f"{where}: an object without kind or metadata.name")
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
    out: list[dict[str, Any]] = []
    for doc in docs:
        out.extend(_flatten(doc, f"snapshot {path}"))
    return out


def dump(items: Iterable[Mapping[str, Any]]) -> str:
    doc = {"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""},
           "items": list(items)}
    return yamlio.dump(doc)


def write(path: str, items: Iterable[Mapping[str, Any]]) -> None:
    text = dump(items)
    if path == "-":
        sys.stdout.write(text)
        return
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(text)
