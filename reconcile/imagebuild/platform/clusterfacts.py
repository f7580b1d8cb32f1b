"""What a build depends on beyond the settings and the pool's own objects: the OS stream the pool
builds on (`osstream`) and its nodes' architecture (`architecture`), each read from the cluster at
most once per run.

- The singleton `OSImageStream` is read (one GET) whenever some pool is opted in: a pool that names
  no stream builds on the default one. Where the API is not served the GET answers 404 and the
  ConfigMap's images stand.
- The nodes are read (one metadata-only LIST) when some pool's build is due or some pool has no
  architecture recorded (`ocl-reconciler.io/arch` absent or empty: a new pool, one an earlier
  version built, one built before it had nodes, one Blocked before its first build). Only those
  pools (`fresh`) take their architecture from the nodes; every other pool's recorded architecture
  stands until its own next build, so one pool's new build never changes another's build id."""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from reconcile.contract import annotations as A
from reconcile.contract import objects
from reconcile.imagebuild.platform import architecture, osstream


class Unfit(ValueError):
    """No image of these inputs could boot the pool's nodes, or what decides it could not be read;
    the message says why."""


@dataclass(frozen=True)
class ClusterFacts:
    #: the OSImageStream `cluster` (None: absent or not served)
    streams: Mapping[str, Any] | None = None
    #: the nodes (labels are enough); None: not read this run
    nodes: tuple[Mapping[str, Any], ...] | None = None
    #: every pool: a node belongs to one only
    pools: tuple[Mapping[str, Any], ...] = ()
    #: the pools whose architecture comes from `nodes` (None: every pool)
    fresh: frozenset[str] | None = None
    #: why the facts could not be read (a 403): every pool that needs them is Blocked saying so
    problem: str = ""

    @functools.cached_property
    def members(self) -> dict[str, list[Mapping[str, Any]]]:
        """Each pool's nodes, worked out once for all pools."""
        return architecture.members(self.pools, self.nodes or ())

    def reads_nodes_for(self, pool: str) -> bool:
        return self.nodes is not None and (self.fresh is None or pool in self.fresh)

    def with_fresh(self, fresh: frozenset[str]) -> ClusterFacts:
        """The same facts for other `fresh` pools, sharing the node-to-pool assignment: a run that
        decides one pool at a time works it out once, not once a pool."""
        other = replace(self, fresh=fresh)
        other.__dict__["members"] = self.members
        return other


def stream(pool: Mapping[str, Any], facts: ClusterFacts) -> osstream.OSStream | None:
    if facts.problem:
        raise Unfit(facts.problem)
    try:
        return osstream.of_pool(pool, facts.streams, facts.pools)
    except osstream.Unlisted as err:
        raise Unfit(str(err)) from None


def arch(pool: Mapping[str, Any], facts: ClusterFacts) -> str:
    """The architecture to build the pool for: its nodes' where they are read for it, else the one
    recorded. A pool with none of its nodes left (scaled to zero) keeps the one recorded: its next
    nodes are most likely of it, and an image of another would not boot them. Raises Unfit."""
    recorded = objects.annotations(pool).get(A.ARCH) or ""
    if recorded and not facts.reads_nodes_for(objects.name(pool)):
        return recorded
    try:
        found = architecture.of_pool(pool, facts.pools, facts.nodes or (), facts.members)
    except architecture.Mixed as err:
        raise Unfit(str(err)) from None
    return found.name or recorded


def _in_scope(pools: Iterable[Mapping[str, Any]], only: Iterable[str]) -> list[Mapping[str, Any]]:
    selected = set(only)
    return [p for p in pools if A.LAYERING_LABEL in objects.labels(p)
            and (not selected or objects.name(p) in selected)]


def needs_streams(pools: Iterable[Mapping[str, Any]], only: Iterable[str] = ()) -> bool:
    """Some pool is opted in: where the cluster lists OS streams, a pool that names none builds on
    the default stream, so the singleton is read whenever there is a pool to build."""
    return bool(_in_scope(pools, only))


def machine_count(pool: Mapping[str, Any]) -> str | None:
    """The MCO's count of the pool's nodes (`status.machineCount`), as recorded with ARCH_NODES."""
    count = (pool.get("status") or {}).get("machineCount")
    return str(count) if type(count) is int else None


def unrecorded(pools: Iterable[Mapping[str, Any]], only: Iterable[str] = ()) -> frozenset[str]:
    """The opted-in pools with no architecture recorded, or whose node count changed since it was
    (ARCH_NODES: a node joined or left): their nodes are read before deciding."""
    def stale(pool: Mapping[str, Any]) -> bool:
        ann = objects.annotations(pool)
        return not ann.get(A.ARCH) or (A.ARCH_NODES in ann and ann[A.ARCH_NODES] != machine_count(pool))
    return frozenset(objects.name(p) for p in _in_scope(pools, only) if stale(p))
