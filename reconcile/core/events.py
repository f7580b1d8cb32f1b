"""Kubernetes Events on the pool, one per state change, named from the transition itself
(pool uid, the time of the pool's previous transition, new state, reason, build or image) so that
a rerun never duplicates one (the previous transition time changes only once the state is
recorded, after the Event), while a later transition to the same state, a second rollback to
the same image for instance, is a new Event.

They live in `default`: a core/v1 Event about a cluster-scoped object (a MachineConfigPool) with no
`eventTime` must be in namespace "" or `default`, else kube-apiserver answers 422
(kubernetes/kubernetes pkg/apis/core/validation/events.go, legacyValidateEvent); the MCO binds
its events Role in `default` for the same reason. An Event is best effort: see apply."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

from reconcile.contract import annotations as A
from reconcile.contract import naming, objects
from reconcile.imagebuild import templates

#: Where Events about pools go (see above); `kubectl describe mcp` searches every namespace.
NAMESPACE = "default"

#: state -> (reason, type)
REASONS = {A.PENDING: ("BuildStarted", "Normal"), A.BUILDING: ("BuildRunning", "Normal"),
           A.SUCCEEDED: ("BuildSucceeded", "Normal"), A.FAILED: ("BuildFailed", "Warning"),
           A.BLOCKED: ("Blocked", "Warning")}
#: A success that reused an image instead of building one.
REUSED = "BuildReused"


def event(pool: Mapping[str, Any], state: str, subject: str, message: str, time: str,
          reason: str | None = None, since: str = "") -> dict[str, Any]:
    """`since`: the pool's previous transition time; `reason` overrides the state's."""
    default, kind = REASONS[state]
    text = message or {A.PENDING: f"started {subject}", A.BUILDING: f"{subject} is running",
                       A.SUCCEEDED: f"built {subject}"}.get(state, state)
    return _event(pool, reason or default, kind, text, time,
                  (since, state, reason or default, subject, message if state == A.BLOCKED else ""))


def notice(pool: Mapping[str, Any], reason: str, message: str, subject: str, time: str,
           since: str = "", kind: str = "Normal") -> dict[str, Any]:
    """An Event about the pool that is not a state change (the rollout of its image)."""
    return _event(pool, reason, kind, message, time, (since, reason, subject))


def _event(pool: Mapping[str, Any], reason: str, kind: str, message: str, time: str,
           key: tuple[str, ...]) -> dict[str, Any]:
    uid = objects.meta(pool).get("uid", "")
    joined = "|".join((uid, objects.name(pool), *key))
    name = f"{naming.pool_label(objects.name(pool))}.{hashlib.sha256(joined.encode()).hexdigest()[:16]}"
    return templates.render_object("event.yaml.j2", name=name, namespace=NAMESPACE,
                                   pool=objects.name(pool), uid=uid, reason=reason,
                                   message=A.one_line(message, 1024), type=kind, time=time)
