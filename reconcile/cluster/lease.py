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
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from reconcile.cluster import AlreadyExists, Changed, Cluster, ClusterError, NotFound
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
        return _made(cluster.create(body), body)
    except AlreadyExists:
        pass
    live = cluster.get("Lease", namespace, NAME)
    if live is None:                                      # released in between: try once more
        try:
            return _made(cluster.create(body), body)
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
    except Changed:
        again = cluster.get("Lease", namespace, NAME)
        return again if again is not None and _held_by(again, holder) else None


def _made(echo: dict[str, Any], body: dict[str, Any]) -> dict[str, Any]:
    """The Lease as created: what we sent, with the metadata the server answered (a live create
    answers metadata only), so that a renewal sends it back whole."""
    return dict(body, metadata=dict(body["metadata"], **(echo.get("metadata") or {})))


def _held_by(lease: dict[str, Any], holder: str) -> bool:
    return (lease.get("spec") or {}).get("holderIdentity") == holder


def seconds_of(lease: dict[str, Any]) -> int:
    return int((lease.get("spec") or {}).get("leaseDurationSeconds") or 0)


def renew(cluster: Cluster, lease: dict[str, Any], now: datetime) -> dict[str, Any] | None:
    """A waiting run's renewal (cluster/follow.py): `renewTime` moved to now by a compare-and-swap
    on the Lease as we hold it. None when it is not ours any more (taken over, or deleted): the
    run then stops writing. Other errors are the caller's (it cannot tell: it stops too)."""
    spec = dict(lease.get("spec") or {}, renewTime=_micro(now.replace(tzinfo=None)))
    try:
        return cluster.replace(dict(lease, spec=spec))
    except (Changed, NotFound):
        return None


@dataclass
class Keeper:
    """The Lease of a run that waits (cluster/follow.py): renewed every third of its duration, so
    that it stays live however long the wait (its duration stays --timeout + 60 s: a killed run
    still frees it that soon). Once a renewal fails, `lost`: the run writes nothing more and does
    not release it (another run may hold it now)."""
    cluster: Cluster
    held: dict[str, Any]
    last: float                 # the clock (monotonic) of the last renewal
    lost: bool = False

    @property
    def every(self) -> float:
        return max(1.0, seconds_of(self.held) / 3)

    def keep(self, clock: float, now: datetime) -> bool:
        """Still ours (renewed when due)?"""
        if self.lost:
            return False
        if clock - self.last < self.every:
            return True
        try:
            fresh = renew(self.cluster, self.held, now)
        except ClusterError as err:
            log.error("cannot renew Lease %s/%s: %s; writing nothing more",
                      objects.namespace(self.held), NAME, err)
            fresh = None
        else:
            if fresh is None:
                log.error("Lease %s/%s is not ours any more: writing nothing more",
                          objects.namespace(self.held), NAME)
        if fresh is None:
            self.lost = True
            return False
        self.held, self.last = fresh, clock
        return True


def release(cluster: Cluster, lease: dict[str, Any]) -> None:
    try:
        cluster.delete("Lease", objects.namespace(lease), NAME, objects.meta(lease).get("uid"))
    except (NotFound, Changed):
        pass                                              # expired and taken over: not ours now


@contextlib.contextmanager
def releasing(cluster: Cluster, lease: dict[str, Any],
              keeper: Keeper | None = None) -> Iterator[dict[str, Any]]:
    """Hold the Lease taken for the block, and release it after (a failure to release is a
    warning: the Lease expires). With `keeper`, the Lease as last renewed, and none once lost."""
    try:
        yield lease
    finally:
        if keeper is None or not keeper.lost:
            try:
                release(cluster, keeper.held if keeper else lease)
            except ClusterError as err:
                log.warning("could not release the Lease: %s", err)
