"""An in-memory cluster with the API server behaviour our writes rely on: uid, resourceVersion
and creationTimestamp assigned on create, JSON patch with `test`, delete with a uid
precondition, and garbage collection of dependents through ownerReferences. A waiting run
(cluster/follow.py) watches it too: its events are made from successive states (`MemoryWatcher`),
and `world`, when set (the tests, the demo), is what changes it meanwhile: a kubelet, the MCO."""

from __future__ import annotations

import copy
import itertools
import uuid
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

import jsonpatch

from reconcile.cluster import AlreadyExists, Changed, Invalid, NotFound
from reconcile.contract import objects

Key = tuple[str, str, str]   # kind, namespace, name


def _key(obj: Mapping[str, Any]) -> Key:
    return objects.identity(obj)


class MemoryCluster:
    def __init__(self, items: Iterable[Mapping[str, Any]] = (),
                 clock: Callable[[], datetime] = lambda: datetime.now(UTC)):
        self.clock = clock
        self.store: dict[Key, dict[str, Any]] = {}
        self.writes: list[tuple[str, str]] = []
        self.requests = 0                      # calls made, as an API server would count them
        self.outcomes: dict[tuple[str, str], int] = {}
        for obj in items:
            self.store[_key(obj)] = copy.deepcopy(dict(obj))
        highest = max((int(rv) for o in self.store.values()
                       if str(rv := objects.meta(o).get("resourceVersion", "")).isdigit()), default=0)
        self._rv = itertools.count(highest + 1)
        self.version = highest
        #: the resourceVersion of the last LIST (where a watch of what it read starts)
        self.last_resource_version = str(highest)
        #: one step of whatever else changes this cluster while a run waits (None: nothing does,
        #: as for a snapshot); it changes it through `become`
        self.world: Callable[[MemoryCluster], None] | None = None

    def _count(self, verb: str) -> None:
        self.requests += 1
        self.outcomes[(verb, "ok")] = self.outcomes.get((verb, "ok"), 0) + 1

    # reads ---------------------------------------------------------------------------------
    def get(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        self._count("get")
        return self._get(kind, namespace, name)

    def _get(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        namespaced = objects.KINDS.get(kind, ("", True))[1]
        obj = self.store.get((kind, namespace if namespaced else "", name))
        return copy.deepcopy(obj) if obj is not None else None

    def list(self, kind: str, namespace: str | None, selector: Mapping[str, Any] | None = None,
             metadata_only: bool = False) -> list[dict[str, Any]]:
        self._count("list")
        out = [copy.deepcopy(objects.metadata_only(o) if metadata_only else o)
               for (k, ns, _), o in sorted(self.store.items())
               if k == kind and (namespace is None or ns == namespace or ns == "")
               and objects.matches(selector or {}, objects.labels(o))]
        self.last_resource_version = str(self.version)
        return out

    def serves(self, api_version: str, plural: str) -> bool:
        """A snapshot serves a resource when it holds its CRD or an object of it."""
        self._count("get")
        crd = f"{plural}.{objects.group(api_version)}"
        return any((k == "CustomResourceDefinition" and name == crd)
                   or (o.get("apiVersion") == api_version and f"{k.lower()}s" == plural)
                   for (k, _, name), o in self.store.items())

    def items(self) -> list[dict[str, Any]]:
        return [copy.deepcopy(o) for _, o in sorted(self.store.items())]

    # writes --------------------------------------------------------------------------------
    def _stamp(self, obj: dict[str, Any]) -> None:
        self.version = next(self._rv)
        obj.setdefault("metadata", {})["resourceVersion"] = str(self.version)

    def become(self, items: Iterable[Mapping[str, Any]]) -> None:
        """The world's step (`world`): the cluster now holds these objects; each new or changed
        one gets a new resourceVersion, as a server's write would give it (not counted as ours)."""
        wanted = {_key(o): copy.deepcopy(dict(o)) for o in items}
        for key in [k for k in self.store if k not in wanted]:
            del self.store[key]
        for key, obj in wanted.items():
            live = self.store.get(key)
            if live is not None and _content(live) == _content(obj):
                continue
            uid = str(uuid.uuid5(uuid.NAMESPACE_URL, "/".join(key)))
            obj.setdefault("metadata", {}).setdefault("uid", uid)
            self._stamp(obj)
            self.store[key] = obj

    def watcher(self, streams: list[Any]) -> MemoryWatcher:
        return MemoryWatcher(self, streams)

    def create(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        self._count("create")
        new = copy.deepcopy(dict(obj))
        key = _key(new)
        if key in self.store:
            raise AlreadyExists(f"{key[0]} {key[1]}/{key[2]} already exists")
        _validate(new)
        md = new.setdefault("metadata", {})
        md["uid"] = str(uuid.uuid5(uuid.NAMESPACE_URL, f"{'/'.join(key)}/{len(self.writes)}"))
        md["creationTimestamp"] = self.clock().strftime("%Y-%m-%dT%H:%M:%SZ")
        self._stamp(new)
        self.store[key] = new
        self.writes.append(("create", objects.ref(new)))
        return copy.deepcopy(new)

    def patch(self, kind: str, namespace: str, name: str,
              ops: list[dict[str, Any]]) -> dict[str, Any]:
        self._count("patch")
        live = self._get(kind, namespace, name)
        if live is None:
            raise NotFound(f"{kind} {namespace}/{name} not found")
        try:
            new = jsonpatch.apply_patch(live, ops)
        except jsonpatch.JsonPatchTestFailed as err:
            raise Changed(f"{kind} {namespace}/{name}: {err}") from None
        except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException) as err:
            raise Invalid(f"{kind} {namespace}/{name}: {err}") from None
        for field in ("uid", "name", "namespace"):
            if objects.meta(new).get(field) != objects.meta(live).get(field):
                raise Invalid(f"{kind} {namespace}/{name}: metadata.{field} is immutable")
        _check_immutable(live, new)
        self._stamp(new)
        self.store[_key(new)] = new
        self.writes.append(("patch", objects.ref(new)))
        return copy.deepcopy(new)

    def replace(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        """PUT: compare-and-swap on metadata.resourceVersion."""
        self._count("replace")
        new = copy.deepcopy(dict(obj))
        key = _key(new)
        live = self.store.get(key)
        if live is None:
            raise NotFound(f"{key[0]} {key[1]}/{key[2]} not found")
        rv = objects.meta(new).get("resourceVersion")
        if not rv:
            raise Invalid(f"{key[0]} {key[1]}/{key[2]}: metadata.resourceVersion must be specified "
                          "for an update")
        if rv != objects.meta(live).get("resourceVersion"):
            raise Changed(f"{key[0]} {key[1]}/{key[2]}: the object has been modified")
        for field in ("uid", "creationTimestamp"):
            if field in objects.meta(live):
                new["metadata"][field] = objects.meta(live)[field]
        _check_immutable(live, new)
        self._stamp(new)
        self.store[key] = new
        self.writes.append(("update", objects.ref(new)))
        return copy.deepcopy(new)

    def delete(self, kind: str, namespace: str, name: str, uid: str | None = None,
               resource_version: str | None = None) -> None:
        self._count("delete")
        live = self._get(kind, namespace, name)
        if live is None:
            raise NotFound(f"{kind} {namespace}/{name} not found")
        if uid and objects.meta(live).get("uid") != uid:
            raise Changed(f"{kind} {namespace}/{name}: uid precondition failed")
        if resource_version and objects.meta(live).get("resourceVersion") != resource_version:
            raise Changed(f"{kind} {namespace}/{name}: resourceVersion precondition failed")
        del self.store[_key(live)]
        self.writes.append(("delete", objects.ref(live)))
        self._collect(objects.meta(live).get("uid"))

    def _collect(self, owner_uid: str | None) -> None:
        """Background cascade: dependents whose every owner is gone are deleted too."""
        if not owner_uid:
            return
        uids = {objects.meta(o).get("uid") for o in self.store.values()}
        for key, obj in list(self.store.items()):
            owners = objects.meta(obj).get("ownerReferences") or []
            if owners and any(o.get("uid") == owner_uid for o in owners) \
                    and not any(o.get("uid") in uids for o in owners):
                if key in self.store:
                    del self.store[key]
                    self._collect(objects.meta(obj).get("uid"))


def _content(obj: Mapping[str, Any]) -> Any:
    return {k: v for k, v in obj.items() if k != "metadata"} | {
        "metadata": {k: v for k, v in (obj.get("metadata") or {}).items() if k != "resourceVersion"}}


class MemoryWatcher:
    """Watch events of an in-memory cluster, made from successive states: each `next` compares what
    each stream selects with what it said last (by resourceVersion), after one step of the
    cluster's `world` when nothing changed. None: nothing can change any more (no world)."""

    def __init__(self, cluster: MemoryCluster, streams: list[Any]):
        self.cluster, self.streams = cluster, streams
        # what each stream's LIST held: the objects at or below its resourceVersion
        self.seen = {s: {k: objects.meta(o).get("resourceVersion") for k, o in self._selected(s).items()
                         if int(objects.meta(o).get("resourceVersion") or 0) <= int(s.resource_version or 0)}
                     for s in streams}

    def _selected(self, stream: Any) -> dict[Key, dict[str, Any]]:
        return {k: o for k, o in self.cluster.store.items() if stream.selects(o)}

    def _changes(self) -> list[Any]:
        from reconcile.cluster.watch import ADDED, DELETED, MODIFIED, Event
        out = []
        for stream in self.streams:
            now = self._selected(stream)
            seen = self.seen[stream]
            for key in sorted(set(seen) - set(now)):
                gone = {"kind": key[0], "metadata": {"namespace": key[1], "name": key[2]}}
                out.append(Event(DELETED, stream, gone))
            for key, obj in sorted(now.items()):
                version = objects.meta(obj).get("resourceVersion")
                if seen.get(key) != version:
                    shown = objects.metadata_only(obj) if stream.metadata_only else obj
                    out.append(Event(MODIFIED if key in seen else ADDED, stream, copy.deepcopy(shown)))
            self.seen[stream] = {k: objects.meta(o).get("resourceVersion") for k, o in now.items()}
        return out

    def next(self, timeout: float) -> list[Any] | None:
        changes = self._changes()
        if changes:
            return changes
        if self.cluster.world is None:
            return None
        self.cluster.world(self.cluster)
        return self._changes()

    def close(self) -> None:
        pass


def _validate(obj: Mapping[str, Any]) -> None:
    """The server-side rules a snapshot run would otherwise get past: a core/v1 Event about a
    cluster-scoped object without eventTime lives in "" or `default`
    (kubernetes/kubernetes pkg/apis/core/validation/events.go, legacyValidateEvent)."""
    if obj.get("kind") != "Event" or obj.get("eventTime"):
        return
    involved = (obj.get("involvedObject") or {}).get("namespace") or ""
    own = objects.namespace(obj)
    if (not involved and own not in ("", "default")) or (involved and own != involved):
        raise Invalid(f'Event "{objects.name(obj)}" is invalid: involvedObject.namespace: Invalid value: '
                      f'"{involved}": does not match event.namespace')


def _check_immutable(live: Mapping[str, Any], new: Mapping[str, Any]) -> None:
    """An immutable ConfigMap or Secret keeps its data and stays immutable (GA since 1.21): it can
    only be deleted (kubernetes/kubernetes pkg/apis/core/validation ValidateConfigMapUpdate)."""
    if live.get("kind") not in ("ConfigMap", "Secret") or not live.get("immutable"):
        return
    fields = ("data", "binaryData", "stringData")
    if not new.get("immutable") or any(live.get(f) != new.get(f) for f in fields):
        raise Invalid(f"{live['kind']} \"{objects.name(live)}\" is invalid: data: Forbidden: field is "
                      "immutable when `immutable` is set")
