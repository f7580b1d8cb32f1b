"""What a build depends on beyond the settings and the pool's own objects: the OS stream the pool
names (build/osstream.py) and its nodes' architecture (build/architecture.py), each read from the
cluster at most once per run, and only when some pool needs it.

- The singleton `OSImageStream` is read once when some pool is opted in (a 404 where the API is
  not served: the ConfigMap's images then stand).
- The nodes are read (one metadata-only LIST) when some pool's build is due, or some pool has no
  architecture recorded (`ocl-reconciler.io/arch`: a new pool, one an earlier version built, one
  built before it had nodes). In a steady run every pool's recorded architecture stands, so a
  steady run reads neither."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from reconcile.build import architecture, osstream
from reconcile.contract import annotations as A
from reconcile.contract import objects


class Unfit(ValueError):
    """No image of these inputs could boot the pool's nodes; the message says why."""


@dataclass(frozen=True)
class Platform:
    #: the OSImageStream `cluster` (None: absent, not served, or no pool names a stream)
    streams: Mapping[str, Any] | None = None
    #: the nodes (labels are enough); None: not read this run, the recorded architecture stands
    nodes: tuple[Mapping[str, Any], ...] | None = None
    #: every pool: a node belongs to one only
    pools: tuple[Mapping[str, Any], ...] = ()


def stream(pool: Mapping[str, Any], platform: Platform) -> osstream.Stream | None:
    try:
        return osstream.of_pool(pool, platform.streams)
    except osstream.Unlisted as err:
        raise Unfit(str(err)) from None


def arch(pool: Mapping[str, Any], platform: Platform) -> architecture.Arch:
    recorded = objects.annotations(pool).get(A.ARCH)
    if platform.nodes is None and recorded:
        return architecture.Arch(recorded, -1)
    try:
        return architecture.of_pool(pool, platform.pools, platform.nodes or ())
    except architecture.Mixed as err:
        raise Unfit(str(err)) from None


def _in_scope(pools: Iterable[Mapping[str, Any]], only: Iterable[str]) -> list[Mapping[str, Any]]:
    selected = set(only)
    return [p for p in pools if A.LAYERING_LABEL in objects.labels(p)
            and (not selected or objects.name(p) in selected)]


def needs_streams(pools: Iterable[Mapping[str, Any]], only: Iterable[str] = ()) -> bool:
    """Some pool is opted in: where the cluster lists OS streams, a pool that names none builds on
    the default stream, so the singleton is read (one GET) whenever there is a pool to build."""
    return bool(_in_scope(pools, only))


def needs_nodes(pools: Iterable[Mapping[str, Any]], only: Iterable[str] = ()) -> bool:
    """Some opted-in pool has no architecture recorded (its nodes are read before deciding)."""
    return any(not objects.annotations(p).get(A.ARCH) for p in _in_scope(pools, only))
