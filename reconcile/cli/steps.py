"""The steps commands share: the clock, the cluster (live or a snapshot), the one read and the
planner of what was read, and how a command fails (`Fatal`: exit 3 with one line)."""

from __future__ import annotations

import contextlib
import os
from datetime import UTC, datetime

EXIT_OK, EXIT_CHANGES, EXIT_BLOCKED, EXIT_FATAL = 0, 1, 2, 3
#: 128 + SIGINT, as a shell reports a command that Ctrl-C (or SIGTERM, handled as it) ended
EXIT_INTERRUPTED = 130
#: --keep-images: how many of a pool's newest images pruning keeps
KEEP_IMAGES = 2
#: --registry-ca default: the service CA (signs the internal registry's certificate), as mounted
REGISTRY_CA = "/etc/ocl/service-ca/service-ca.crt"


class Fatal(Exception):
    """The cluster or the snapshot cannot be read: exit 3 with one line."""


def now() -> datetime:
    """The clock; OCL_RECONCILE_NOW (RFC 3339) pins it for reproducible output."""
    pinned = os.environ.get("OCL_RECONCILE_NOW")
    if pinned:
        try:
            return datetime.strptime(pinned, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
        except ValueError:
            raise Fatal(f"OCL_RECONCILE_NOW={pinned!r} is not an RFC 3339 UTC time "
                        "like 2026-01-02T03:04:05Z") from None
    return datetime.now(UTC)


def cluster(args, now: datetime):
    """The cluster the flags name: the live one (cluster/live.py), or the snapshot --snapshot reads."""
    if not args.snapshot:
        from reconcile.cluster import live
        try:
            return live.connect(args.kubeconfig, args.context, args.timeout)
        except live.ConnectError as err:
            raise Fatal(str(err)) from None
    from reconcile.cluster import snapshot
    from reconcile.cluster.memory import MemoryCluster
    try:
        return MemoryCluster(snapshot.load(args.snapshot), clock=lambda: now)
    except snapshot.SnapshotError as err:
        raise Fatal(str(err)) from None


def planner(cluster, args, now: datetime):
    """Read the cluster and make the planner of what was read: (observed, planner). A failed read
    here or while planning is fatal (exit 3), as nothing can be planned without it."""
    from reconcile.cluster import observe
    from reconcile.cluster.planner import Planner, RegistryAccess
    ca = registry_ca(args)                                                      # before reading anything
    with reading(), getattr(cluster, "keep", contextlib.nullcontext)():      # a waiting run keeps the read
        seen = observe.observe(cluster, args.namespace)
    # a snapshot is a simulation: reuse and pruning never ask a registry
    access = None if args.snapshot else RegistryAccess(getattr(cluster, "deadline", None), ca)
    return seen, Planner(cluster, seen, now, args.pool, getattr(args, "keep_images", -1), access)


def registry_ca(args) -> str | None:
    """--registry-ca (a file that must exist), else the mounted service CA where it is."""
    if args.registry_ca and not os.path.isfile(args.registry_ca):
        raise Fatal(f"--registry-ca {args.registry_ca}: no such file")
    return args.registry_ca or (REGISTRY_CA if os.path.exists(REGISTRY_CA) else None)


@contextlib.contextmanager
def reading():
    """A failed read of the cluster in the block is fatal."""
    from reconcile.cluster import ClusterError
    try:
        yield
    except ClusterError as err:
        raise unreadable(err) from None


def unreadable(err: object) -> Fatal:
    return Fatal(f"cannot read the cluster: {err}")


def observe(cluster, args, now: datetime):
    """Read the cluster and plan every pool at once (diff, render, explain); the notices of what
    was read (cluster/notices.py)."""
    from reconcile.cluster import ClusterError, notices
    seen, planned = planner(cluster, args, now)
    with reading():
        plans = planned.plan()
    try:
        notices.say(cluster, seen, plans)
    except ClusterError as err:
        raise unreadable(err) from None
    return seen, planned, plans
