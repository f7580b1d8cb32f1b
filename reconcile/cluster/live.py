"""The live API server, through the official `kubernetes` client's configuration and transport.

Requests are plain REST on the paths of the kinds we use (no discovery round-trips, no model
deserialisation): one LIST per kind, paginated. 429, 5xx and connection errors are retried with
exponential backoff and full jitter, `Retry-After` honoured, all bounded by one deadline for the
whole run. The client is imported lazily: `--help` and snapshot runs never pay for it.
"""

from __future__ import annotations

import json
import logging
import os
import random
import time
import urllib.parse
import urllib.request
from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any

from reconcile.cluster import (
    AlreadyExists,
    Changed,
    ClusterError,
    Denied,
    Forbidden,
    Invalid,
    NotFound,
    Unauthorized,
    Unreachable,
)
from reconcile.contract import admission, objects

log = logging.getLogger("reconcile")

PAGE = 500
#: metadata-only pages hold ~1 KB an item: larger pages keep a steady run at one LIST per kind
#: (3 ConfigMaps a pool at 200 pools is 600 items)
METADATA_PAGE = 10_000
RETRYABLE = {429, 500, 502, 503, 504}
#: kube-apiserver answers a LIST with metadata only for this Accept (any resource, built-in or CRD)
METADATA_ONLY = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json"
#: ...and a write with the written object's metadata only (every handler transforms its answer so)
METADATA_ECHO = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json"
MAX_LIST_RESTARTS = 3


class ConnectError(Exception):
    """No usable kubeconfig or in-cluster configuration."""


def api_prefix(api_version: str) -> str:
    """The REST path of an API version: the core group under /api, the others under /apis."""
    return f"/api/{api_version}" if "/" not in api_version else f"/apis/{api_version}"


def path_of(kind: str, namespace: str, name: str = "") -> str:
    api_version, namespaced, plural = objects.KINDS[kind]
    prefix = api_prefix(api_version)
    base = f"{prefix}/namespaces/{urllib.parse.quote(namespace)}/{plural}" if namespaced and namespace \
        else f"{prefix}/{plural}"
    return f"{base}/{urllib.parse.quote(name)}" if name else base


class LiveCluster:
    def __init__(self, api_client: Any, deadline: float, *,
                 sleep: Callable[[float], None] | None = None,
                 clock: Callable[[], float] = time.monotonic):
        self.api = api_client
        self.deadline = deadline
        self.sleep = sleep or (lambda seconds: time.sleep(seconds))
        self.clock = clock
        self.requests = 0
        self.bytes_read = 0
        #: the resourceVersion of the last LIST: where a watch of what it read starts (cluster/watch.py)
        self.last_resource_version = ""
        self.outcomes: Counter[tuple[str, str]] = Counter()   # (verb, outcome) for metrics

    # transport --------------------------------------------------------------------------------
    def _send(self, method: str, path: str, query: list[tuple[str, str]], body: Any,
              content_type: str, accept: str = "application/json") -> tuple[int, Mapping[str, str], bytes]:
        import urllib3
        headers = {"Accept": accept, "Content-Type": content_type, "User-Agent": "ocl-reconciler"}
        _, url, headers, _, _ = self.api.param_serialize(
            method, path, query_params=query, header_params=headers, auth_settings=["BearerToken"])
        remaining = max(0.1, self.deadline - self.clock())
        try:
            resp = self.api.rest_client.request(
                method, url, headers=headers,
                body=body,                           # the client serialises it as JSON
                _request_timeout=(min(remaining, 10.0), min(remaining, 60.0)))
            data = resp.read()
            self.bytes_read += len(data)
        except (urllib3.exceptions.HTTPError, OSError) as err:
            return 0, {}, str(err).encode()
        except Exception as err:           # ApiException(status=0) for TLS problems
            if getattr(err, "status", None) == 0:
                return 0, {}, str(err).encode()
            raise
        return resp.status, resp.headers, data

    def request(self, method: str, path: str, query: list[tuple[str, str]] | None = None,
                body: Any = None, content_type: str = "application/json",
                accept: str = "application/json") -> Any:
        """One API call with the run's retries and deadline, for what the Cluster verbs do not cover
        (preflight's reviews and dry runs); the verbs below go through it too."""
        attempt = 0
        while True:
            self.requests += 1
            status, headers, data = self._send(method, path, query or [], body, content_type, accept)
            self.outcomes[(method.lower(), str(status) if status else "connection-error")] += 1
            if 200 <= status < 300:
                return json.loads(data) if data else None
            if status and status not in RETRYABLE:
                raise _error(status, data, method, path)
            attempt += 1
            what = f"HTTP {status}" if status else f"connection error ({_short(data)})"
            delay = _retry_after(headers) if status else None
            if delay is None:
                delay = random.uniform(0, min(5.0, 0.2 * 2 ** attempt))
            if self.clock() + delay >= self.deadline:
                where = f"{method} {path}: " if method == "GET" else ""
                raise Unreachable(f"{where}gave up at the run's deadline after {attempt} "
                                  f"attempt(s); last: {what}")
            log.debug("%s %s: %s, retrying in %.2fs", method, path, what, delay)
            self.sleep(delay)

    # the Cluster protocol -----------------------------------------------------------------------
    def get(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        try:
            return self.request("GET", path_of(kind, namespace, name))
        except NotFound:
            return None

    def list(self, kind: str, namespace: str | None, selector: Mapping[str, Any] | None = None,
             metadata_only: bool = False) -> list[dict[str, Any]]:
        query: list[tuple[str, str]] = [("limit", str(METADATA_PAGE if metadata_only else PAGE))]
        if selector:
            query.append(("labelSelector", objects.selector_string(selector)))
        items: list[dict[str, Any]] = []
        token = None
        api_version = objects.KINDS[kind][0]
        restarts = 0
        while True:
            try:
                page = self.request("GET", path_of(kind, namespace or ""),
                                     query + ([("continue", token)] if token else []),
                                     accept=METADATA_ONLY if metadata_only else "application/json")
            except ClusterError as err:
                # a continue token expires (410 Gone, reason Expired) when etcd compacted past the
                # first page's revision: start the LIST again for one consistent view
                if err.status != 410 or not token or restarts >= MAX_LIST_RESTARTS:
                    raise
                restarts += 1
                log.debug("LIST %s: continue token expired; restarting the LIST", kind)
                items, token = [], None
                continue
            for item in page.get("items") or []:
                if metadata_only:           # PartialObjectMetadata: made to look like the kind it is
                    item["apiVersion"], item["kind"] = api_version, kind
                else:
                    item.setdefault("apiVersion", api_version)
                    item.setdefault("kind", kind)
                items.append(item)
            if not token:               # every page is of the first page's resourceVersion
                self.last_resource_version = str((page.get("metadata") or {}).get("resourceVersion") or "")
            token = (page.get("metadata") or {}).get("continue")
            if not token:
                return items

    def watch_lines(self, stream: Any, version: str, seconds: int) -> Any:
        """One watch request (`?watch=true` from `version`, the server ending it after `seconds`),
        its lines as they come, through the client's `iter_resp_lines`. Counted as one request;
        an error status raises the ClusterError it is (410 Gone: the version is too old)."""
        from kubernetes.watch.watch import iter_resp_lines
        query = [("watch", "true"), ("allowWatchBookmarks", "true"), ("timeoutSeconds", str(seconds))]
        if version:
            query.append(("resourceVersion", version))
        if stream.selector:
            query.append(("labelSelector", objects.selector_string(dict(stream.selector))))
        headers = {"Accept": METADATA_ECHO if stream.metadata_only else "application/json",
                   "User-Agent": "ocl-reconciler"}
        _, url, headers, _, _ = self.api.param_serialize(
            "GET", path_of(stream.kind, stream.namespace or ""), query_params=query, header_params=headers,
            auth_settings=["BearerToken"])
        self.requests += 1
        resp = self.api.rest_client.request("GET", url, headers=headers,
                                            _request_timeout=(10.0, seconds + 30.0))
        self.outcomes[("watch", str(resp.status))] += 1
        if not 200 <= resp.status < 300:
            raise _error(resp.status, resp.read(), "GET", path_of(stream.kind, stream.namespace or ""))
        return iter_resp_lines(resp.response)

    def watcher(self, streams: list[Any]) -> Any:
        """Watch these streams until closed (cluster/watch.py)."""
        from reconcile.cluster import watch
        return watch.LiveWatcher(self, streams)

    def serves(self, api_version: str, plural: str) -> bool:
        """Discovery of one group version: does the server serve this resource?"""
        try:
            found = self.request("GET", api_prefix(api_version)) or {}
        except NotFound:
            return False
        return any(r.get("name") == plural for r in found.get("resources") or [])

    def create(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        """The created object's apiVersion, kind and metadata: the server answers a create with
        the object's metadata alone (PartialObjectMetadata, as for a metadata-only LIST), as no
        caller reads the echo of what it sent (a ConfigMap's is a MiB of encoded MachineConfig)."""
        echo = self.request("POST", path_of(obj["kind"], objects.namespace(obj)), body=dict(obj),
                             accept=METADATA_ECHO) or {}
        return {"apiVersion": obj.get("apiVersion"), "kind": obj["kind"],
                "metadata": echo.get("metadata") or {}}

    def patch(self, kind: str, namespace: str, name: str,
              ops: list[dict[str, Any]]) -> dict[str, Any]:
        return self.request("PATCH", path_of(kind, namespace, name), body=list(ops),
                             content_type="application/json-patch+json")

    def replace(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        return self.request("PUT", path_of(obj["kind"], objects.namespace(obj), objects.name(obj)),
                             body=dict(obj))

    def delete(self, kind: str, namespace: str, name: str, uid: str | None = None,
               resource_version: str | None = None) -> None:
        body: dict[str, Any] = {"apiVersion": "v1", "kind": "DeleteOptions",
                                "propagationPolicy": "Background"}
        preconditions = {k: v for k, v in (("uid", uid), ("resourceVersion", resource_version)) if v}
        if preconditions:
            body["preconditions"] = preconditions
        self.request("DELETE", path_of(kind, namespace, name), body=body)


def _short(data: bytes) -> str:
    text = data.decode(errors="replace").strip().splitlines()
    return text[-1][:200] if text else "no detail"


def _retry_after(headers: Mapping[str, str]) -> float | None:
    value = (headers or {}).get("Retry-After")
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:
        return None


def _error(status: int, data: bytes, method: str, path: str) -> ClusterError:
    try:
        body = json.loads(data)
    except ValueError:
        body = {}
    message = (body.get("message") if isinstance(body, dict) else None) or _short(data)
    reason = body.get("reason", "") if isinstance(body, dict) else ""
    where = f"{method} {path}: " if method == "GET" else ""   # a write's caller names the object
    text = f"{where}{status} {reason}: {message}".replace(" :", ":")
    denied = admission.denial(message) if status in (403, 422) else None
    if denied is not None:
        return Denied(text, status, denied.policy, denied.message)
    if status == 404:
        return NotFound(text)
    if status == 409:
        return AlreadyExists(text) if reason == "AlreadyExists" else Changed(text)
    if status == 422:
        return Invalid(text)
    if status == 401:
        return Unauthorized(text)
    if status == 403:
        return Forbidden(text)
    err = ClusterError(text)
    err.status = status
    return err


def connect(kubeconfig: str | None, context: str | None, timeout: float) -> LiveCluster:
    """Configuration chosen the way kubectl chooses: --kubeconfig, then $KUBECONFIG (a list),
    then ~/.kube/config, then the in-cluster service account."""
    from kubernetes import client, config
    from kubernetes.config.config_exception import ConfigException

    cfg = client.Configuration()
    source = kubeconfig or os.environ.get("KUBECONFIG")
    default = os.path.expanduser("~/.kube/config")
    try:
        if source or os.path.exists(default):
            paths = source or default
            missing = [p for p in paths.split(os.pathsep) if p and not os.path.exists(p)]
            if kubeconfig and missing:
                raise ConnectError(f"kubeconfig {missing[0]} not found")
            config.load_kube_config(config_file=paths, context=context, client_configuration=cfg,
                                    persist_config=False)
        elif os.environ.get("KUBERNETES_SERVICE_HOST"):
            config.load_incluster_config(client_configuration=cfg)
        else:
            raise ConnectError("no kubeconfig (--kubeconfig, $KUBECONFIG, ~/.kube/config) and not "
                               "running in a cluster; pass --snapshot FILE to work offline")
    except (ConfigException, ValueError, TypeError, KeyError, OSError) as err:
        first = (str(err).splitlines() or [type(err).__name__])[0]
        raise ConnectError(f"invalid kubeconfig: {first}") from None
    except Exception as err:            # yaml.YAMLError without importing yaml here
        if type(err).__module__.startswith("yaml"):
            raise ConnectError(f"invalid kubeconfig: not valid YAML ({type(err).__name__})") from None
        raise
    cfg.retries = False                     # our own retries, bounded by the run's deadline
    cfg.proxy = cfg.proxy or env_proxy(cfg.host)
    return LiveCluster(client.ApiClient(cfg), time.monotonic() + timeout)


def env_proxy(server: str) -> str | None:
    """The proxy the standard variables (HTTPS_PROXY, HTTP_PROXY, NO_PROXY) choose for the API
    server, as curl and kubectl honour them; the client does not read them itself."""
    parts = urllib.parse.urlsplit(server)
    proxies = urllib.request.getproxies_environment()
    chosen = proxies.get(parts.scheme)
    if not chosen or urllib.request.proxy_bypass_environment(parts.hostname or "", proxies):
        return None
    return chosen
