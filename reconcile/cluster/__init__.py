"""The shell that talks to a cluster: the live API (`live`) or an in-memory one loaded from a
snapshot (`memory`), behind one protocol that returns plain dicts and raises the errors below; and
the shell around them: one read (`observe`), the planner of what was read (`planner`), one
executor (`apply`), what a command says of what it read (`notices`), the single-run guard (`lease`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol


class ClusterError(Exception):
    """A request failed; `status` is the HTTP-like code (0 when there was none)."""
    status = 0


class NotFound(ClusterError):
    status = 404


class AlreadyExists(ClusterError):
    status = 409


class Changed(ClusterError):
    """The object changed since it was read (resourceVersion test failed)."""
    status = 409


class Invalid(ClusterError):
    status = 422


class Forbidden(ClusterError):
    status = 403


class Denied(ClusterError):
    """An admission policy refused the write (kube-apiserver answers a ValidatingAdmissionPolicy's
    denial 422, or 403 for a policy whose reason is Forbidden): `policy` and `reason` say which and
    why. The same write is refused again until the object changes, so it is never retried."""

    def __init__(self, message: str, status: int, policy: str, reason: str):
        super().__init__(message)
        self.status, self.policy, self.reason = status, policy, reason


class Unauthorized(ClusterError):
    """The server did not accept our credentials (a token expired or revoked)."""
    status = 401


class Unreachable(ClusterError):
    """The server could not be reached, or kept failing, until the run's deadline."""


class Cluster(Protocol):
    def get(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None: ...

    def list(self, kind: str, namespace: str | None, selector: Mapping[str, Any] | None = None,
             metadata_only: bool = False) -> list[dict[str, Any]]:
        """One LIST; `metadata_only` reads apiVersion, kind and metadata alone
        (PartialObjectMetadataList), which is all a steady run needs of our objects."""
        ...

    def serves(self, api_version: str, plural: str) -> bool:
        """Does the cluster serve this resource (discovery)?"""
        ...

    def create(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        """The created object: at least its apiVersion, kind and metadata (all the live API
        answers with: nothing reads the echo of a body it sent)."""
        ...

    def patch(self, kind: str, namespace: str, name: str,
              ops: list[dict[str, Any]]) -> dict[str, Any]: ...

    def replace(self, obj: Mapping[str, Any]) -> dict[str, Any]: ...

    def delete(self, kind: str, namespace: str, name: str, uid: str | None = None,
               resource_version: str | None = None) -> None:
        """DELETE with `preconditions` on the uid (and the resourceVersion) read: `Changed`
        when the object was replaced (or changed) since."""
        ...
