"""The cluster as a waiting run reads it (cluster/follow.py): the LISTs and GETs of the first
pass's read (cluster/observe.py) are kept, and each later pass reads them here instead of asking
again. They stay current two ways: watch events, for the kinds a wait needs (`WATCHED`: our build
Pods and Builds, the MachineConfigPools), and our own writes, for the rest (our ConfigMaps,
Secrets, MachineConfigs: nobody else writes them). What the planner reads beyond that (a rendered
MachineConfig, the nodes, build material) goes to the cluster as in any run.

The same protocol as the cluster it wraps (cluster/__init__.py `Cluster`); anything else (request
counts, the deadline, `items` of a snapshot) is the wrapped cluster's."""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Iterator, Mapping
from typing import Any

from reconcile.cluster import NotFound, watch
from reconcile.contract import objects

#: Kinds whose kept LISTs are watched: what the waits (core/waits.py) look at.
WATCHED = frozenset({"Pod", "Build", "MachineConfigPool"})

ListKey = tuple[str, str | None, tuple[tuple[str, Any], ...], bool]
ObjKey = tuple[str, str]


def _version(obj: Mapping[str, Any]) -> int:
    text = str(objects.meta(obj).get("resourceVersion") or "")
    return int(text) if text.isdigit() else -1


class Cache:
    def __init__(self, cluster: Any):
        self.cluster = cluster
        self.lists: dict[ListKey, dict[ObjKey, dict[str, Any]]] = {}
        self.versions: dict[ListKey, str] = {}
        self.gets: dict[tuple[str, str, str], dict[str, Any] | None] = {}
        self.keeping = False
        #: a watched object changed since the last `changed()` (something may have moved)
        self.dirty = False

    def __getattr__(self, name: str) -> Any:           # requests, outcomes, deadline, items, ...
        return getattr(self.cluster, name)

    @contextlib.contextmanager
    def keep(self) -> Iterator[None]:
        """Within this block (the first pass's read), LISTs and GETs are kept."""
        self.keeping = True
        try:
            yield
        finally:
            self.keeping = False

    # reads -----------------------------------------------------------------------------------
    def list(self, kind: str, namespace: str | None, selector: Mapping[str, Any] | None = None,
             metadata_only: bool = False) -> list[dict[str, Any]]:
        key: ListKey = (kind, namespace, tuple(sorted((selector or {}).items())), metadata_only)
        if key in self.lists:
            return [copy.deepcopy(o) for _, o in sorted(self.lists[key].items())]
        items = self.cluster.list(kind, namespace, selector, metadata_only)
        if self.keeping:
            self.lists[key] = {(objects.namespace(o), objects.name(o)): copy.deepcopy(o) for o in items}
            self.versions[key] = str(getattr(self.cluster, "last_resource_version", "") or "")
        return items

    def get(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        key = (kind, namespace, name)
        if key in self.gets:
            return copy.deepcopy(self.gets[key])
        found = self.cluster.get(kind, namespace, name)
        if self.keeping and kind not in WATCHED:
            self.gets[key] = copy.deepcopy(found)
        return found

    def serves(self, api_version: str, plural: str) -> bool:
        return self.cluster.serves(api_version, plural)

    # writes, kept as they are answered --------------------------------------------------------
    def create(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        made = self.cluster.create(obj)
        self._put(dict(obj, metadata=dict(objects.meta(obj), **(made.get("metadata") or {}))))
        return made

    def patch(self, kind: str, namespace: str, name: str, ops: list[dict[str, Any]]) -> dict[str, Any]:
        done = self.cluster.patch(kind, namespace, name, ops)
        self._put(dict(done or {}, kind=kind) if done else {}, namespace, name)
        return done

    def replace(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        done = self.cluster.replace(obj)
        self._put(dict(done or obj, kind=obj["kind"]))
        return done

    def delete(self, kind: str, namespace: str, name: str, uid: str | None = None,
               resource_version: str | None = None) -> None:
        try:
            self.cluster.delete(kind, namespace, name, uid, resource_version)
        except NotFound:
            self._drop(kind, namespace, name)           # already gone
            raise
        self._drop(kind, namespace, name)

    # what the watches say ----------------------------------------------------------------------
    def streams(self) -> list[watch.Stream]:
        """The watches that keep the watched LISTs current, each from its LIST's resourceVersion."""
        return [watch.Stream(kind, ns, sel, meta, self.versions.get(key, ""))
                for key in sorted(self.lists, key=str) for kind, ns, sel, meta in [key] if kind in WATCHED]

    def apply(self, event: watch.Event) -> None:
        s = event.stream
        key: ListKey = (s.kind, s.namespace, s.selector, s.metadata_only)
        kept = self.lists.get(key)
        if kept is None:
            return
        at = (objects.namespace(event.obj), objects.name(event.obj))
        if event.type == watch.DELETED:
            if kept.pop(at, None) is not None:
                self.dirty = True
        elif event.type in (watch.ADDED, watch.MODIFIED):
            old = kept.get(at)
            if old is None or _version(event.obj) < 0 or _version(event.obj) > _version(old):
                kept[at] = copy.deepcopy(dict(event.obj))
                self.dirty = True

    def relist(self, stream: watch.Stream) -> watch.Stream:
        """A stream whose resourceVersion expired: its LIST read again; the stream from there."""
        key: ListKey = (stream.kind, stream.namespace, stream.selector, stream.metadata_only)
        items = self.cluster.list(stream.kind, stream.namespace, dict(stream.selector), stream.metadata_only)
        self.lists[key] = {(objects.namespace(o), objects.name(o)): copy.deepcopy(o) for o in items}
        self.versions[key] = str(getattr(self.cluster, "last_resource_version", "") or "")
        self.dirty = True
        return watch.Stream(stream.kind, stream.namespace, stream.selector, stream.metadata_only,
                            self.versions[key])

    def changed(self) -> bool:
        """Did a watched object change since last asked?"""
        was, self.dirty = self.dirty, False
        return was

    def _put(self, obj: dict[str, Any], namespace: str | None = None, name: str | None = None) -> None:
        kind = obj.get("kind")
        if not kind or not objects.meta(obj):
            return
        ns = objects.namespace(obj) if namespace is None else namespace
        at = (ns, objects.name(obj) if name is None else name)
        for (k, lns, sel, meta), kept in self.lists.items():
            if k != kind or (lns and lns != ns):
                continue
            if objects.matches(dict(sel), objects.labels(obj)):
                old = kept.get(at)
                if old is None or _version(obj) < 0 or _version(obj) >= _version(old):
                    kept[at] = copy.deepcopy(objects.metadata_only(obj) if meta else obj)
            else:
                kept.pop(at, None)                  # a label taken off: no longer selected

    def _drop(self, kind: str, namespace: str, name: str) -> None:
        for (k, _, _, _), kept in self.lists.items():
            if k == kind:
                kept.pop((namespace if objects.KINDS.get(kind, ("", True))[1] else "", name), None)
