"""Watch streams, for a run that waits (`run --wait`, cluster/follow.py): what one stream is (a kind,
namespace, label selector, as the LIST that started it, from that LIST's resourceVersion), what
it says (`Event`), and the live server's watcher: one thread a stream on the official `kubernetes`
client's transport (its `iter_resp_lines` splits the stream), all feeding one queue. A stream that
ends (the server's `timeoutSeconds`, a dropped connection) starts again from the last
resourceVersion seen (a BOOKMARK moves it too); one the server says expired (410 Gone) asks for
its LIST again (`Event.type == RELIST`). The in-memory cluster has its own watcher (cluster/memory.py)."""

from __future__ import annotations

import json
import logging
import queue
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from reconcile.contract import objects

log = logging.getLogger("reconcile")

ADDED, MODIFIED, DELETED, RELIST, ERROR = "ADDED", "MODIFIED", "DELETED", "RELIST", "ERROR"
#: Answers that no retry changes (a Role without `watch`, a token refused): the run is told.
REFUSED = (401, 403)
#: A watch request's own timeout (the server ends the stream then; it is started again).
STREAM_SECONDS = 240


@dataclass(frozen=True)
class Stream:
    """One watch: what a LIST read, from the resourceVersion that LIST answered."""
    kind: str
    namespace: str | None
    selector: tuple[tuple[str, Any], ...] = ()
    metadata_only: bool = False
    resource_version: str = ""

    def selects(self, obj: Mapping[str, Any]) -> bool:
        ns = objects.namespace(obj)
        return obj.get("kind") == self.kind and (not self.namespace or ns == self.namespace) \
            and objects.matches(dict(self.selector), objects.labels(obj))


@dataclass(frozen=True)
class Event:
    type: str
    stream: Stream
    obj: Mapping[str, Any] = field(default_factory=dict)


class LiveWatcher:
    """The live API's watches (cluster/live.py `LiveCluster.watcher`): `next` returns what arrived
    within `timeout` seconds (an empty list when nothing did)."""

    def __init__(self, cluster: Any, streams: list[Stream]):
        self.cluster = cluster
        self.events: queue.Queue[Event] = queue.Queue()
        self.stopped = threading.Event()
        self.threads = []
        # every stream is opened here, before any is read: one the server refuses (a Role without
        # `watch`) is said first, whatever the others bring
        opened = []
        for s in streams:
            try:
                opened.append((s, self.cluster.watch_lines(s, s.resource_version, STREAM_SECONDS)))
            except Exception as err:        # refused, or a dropped connection: the thread starts it again
                if getattr(err, "status", 0) in REFUSED:
                    self.events.put(Event(ERROR, s, {"message": str(err)}))
                    return
                opened.append((s, None))
        for s, lines in opened:
            t = threading.Thread(target=self._follow, args=(s, lines), daemon=True, name=f"watch-{s.kind}")
            self.threads.append(t)
            t.start()

    def next(self, timeout: float) -> list[Event] | None:
        try:
            got = [self.events.get(timeout=max(0.0, timeout))]
        except queue.Empty:
            return []
        while True:                         # everything that came with it, at once
            try:
                got.append(self.events.get_nowait())
            except queue.Empty:
                return got

    def close(self) -> None:
        self.stopped.set()

    def _follow(self, stream: Stream, opened: Any = None) -> None:
        version, backoff = stream.resource_version, 0.2
        while not self.stopped.is_set():
            try:
                lines, opened = opened or self.cluster.watch_lines(stream, version, STREAM_SECONDS), None
                for line in lines:
                    if self.stopped.is_set():
                        return
                    event = json.loads(line) if line else None
                    if not isinstance(event, dict):
                        continue
                    kind, obj = event.get("type"), event.get("object") or {}
                    if kind == "ERROR":
                        if obj.get("code") == 410:          # too old: the LIST is read again
                            self.events.put(Event(RELIST, stream))
                            return
                        log.debug("watch %s: %s", stream.kind, obj.get("message"))
                        break
                    version = objects.meta(obj).get("resourceVersion") or version
                    if kind in (ADDED, MODIFIED, DELETED):
                        obj.setdefault("kind", stream.kind)
                        self.events.put(Event(kind, stream, obj))
                backoff = 0.2
            except Exception as err:        # a dropped stream: start it again, never the run's error
                if getattr(err, "status", 0) == 410:
                    self.events.put(Event(RELIST, stream))
                    return
                if getattr(err, "status", 0) in REFUSED:
                    self.events.put(Event(ERROR, stream, {"message": str(err)}))
                    return
                log.debug("watch %s: %s; again in %.1fs", stream.kind, err, backoff)
                self.stopped.wait(backoff)
                backoff = min(5.0, backoff * 2)
            else:
                time.sleep(0)
