"""Single-run guard: a coordination.k8s.io/v1 Lease taken at the start of `run` and released at
the end. A CronJob's `concurrencyPolicy: Forbid` does not cover `kubectl create job --from` or a
laptop run; the Lease does. Taken by create, or by compare-and-swap over an expired one."""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import socket
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

from reconcile.cluster import AlreadyExists, Cluster, ClusterError, Conflict, NotFound
from reconcile.contract import naming, objects

NAME = "ocl-reconciler"
log = logging.getLogger("reconcile")


def _micro(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class BadTime(ValueError):
    """A Lease time that is not an RFC 3339 time: nobody can tell whether it expired."""


def _parse(text: str | None) -> datetime | None:
    """A Lease's MicroTime as naive UTC; None when absent; Unreadable when it cannot be parsed."""
    if not text:
        return None
    try:
        parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise BadTime(text) from None
    return parsed.astimezone(UTC).replace(tzinfo=None) if parsed.tzinfo else parsed


def holder_identity() -> str:
    return f"{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(3)}"


def expires(lease: dict[str, Any]) -> datetime | None:
    spec = lease.get("spec") or {}
    renewed = _parse(spec.get("renewTime") or spec.get("acquireTime"))
    if renewed is None:
        return None
    return renewed + timedelta(seconds=int(spec.get("leaseDurationSeconds") or 0))


def acquire(cluster: Cluster, namespace: str, holder: str, duration: int,
            now: datetime) -> dict[str, Any] | None:
    """The Lease we now hold, or None when another holder's Lease is live."""
    naive = now.replace(tzinfo=None)
    body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": NAME, "namespace": namespace,
                         "labels": {naming.MANAGED_BY: naming.MANAGER}},
            "spec": {"holderIdentity": holder, "leaseDurationSeconds": duration,
                     "acquireTime": _micro(naive), "renewTime": _micro(naive)}}
    try:
        return cluster.create(body)
    except AlreadyExists:
        pass
    live = cluster.get("Lease", namespace, NAME)
    if live is None:                                      # released in between: try once more
        try:
            return cluster.create(body)
        except AlreadyExists:
            return None
    if _held_by(live, holder):                               # our create went through, its answer not
        return live
    try:
        until = expires(live)
    except BadTime as err:       # a time we cannot read is never taken for an expired one
        log.warning("Lease %s/%s has a time that cannot be read (%r): not taken over; skipped",
                    namespace, NAME, str(err))
        return None
    if until is not None and until > naive:
        log.info("another run holds Lease %s/%s (holder %s, until %sZ): skipped", namespace, NAME,
                 (live.get("spec") or {}).get("holderIdentity", "?"), until.isoformat(timespec="seconds"))
        return None
    taken = dict(body, metadata={**body["metadata"],
                                 "resourceVersion": objects.meta(live).get("resourceVersion")})
    try:
        log.info("took over expired Lease %s/%s", namespace, NAME)
        return cluster.replace(taken)
    except Conflict:
        again = cluster.get("Lease", namespace, NAME)
        return again if again is not None and _held_by(again, holder) else None


def _held_by(lease: dict[str, Any], holder: str) -> bool:
    return (lease.get("spec") or {}).get("holderIdentity") == holder


def release(cluster: Cluster, lease: dict[str, Any]) -> None:
    try:
        cluster.delete("Lease", objects.namespace(lease), NAME, objects.meta(lease).get("uid"))
    except (NotFound, Conflict):
        pass                                              # expired and taken over: not ours now


@contextlib.contextmanager
def releasing(cluster: Cluster, lease: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Hold the Lease taken for the block, and release it after (a failure to release is a
    warning: the Lease expires)."""
    try:
        yield lease
    finally:
        try:
            release(cluster, lease)
        except ClusterError as err:
            log.warning("could not release the Lease: %s", err)
