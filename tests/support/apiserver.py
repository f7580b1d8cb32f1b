"""A test API server that behaves like kube-apiserver for the kinds this project uses.

Started by the tests on 127.0.0.1 with a free port, it serves an in-memory store over HTTP:
discovery, GET/LIST (label selectors with =, ==, !=, exists, !key, in, notin; limit/continue),
POST (generateName), PUT (resourceVersion compare-and-swap), PATCH (json, merge, strategic merge
for maps), the status subresource, DELETE with preconditions and background garbage collection,
`kind: Status` error bodies, watch (`?watch=true` from a resourceVersion: ADDED, MODIFIED and
DELETED lines made from successive states of the store, polled, until `timeoutSeconds`), a request
log and fault injection. It is checked against the real
`kubectl` in tests/standin/test_apiserver.py.
"""

from __future__ import annotations

import contextlib
import copy
import json
import random
import re
import socket
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import jsonpatch

from reconcile.cluster import AlreadyExists, Invalid, NotFound
from reconcile.cluster import Changed as Conflict
from reconcile.cluster.memory import MemoryCluster
from reconcile.contract import objects


@dataclass(frozen=True)
class Resource:
    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool
    status: bool = False
    short: tuple[str, ...] = ()

    @property
    def group_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version


RESOURCES = [
    Resource("", "v1", "configmaps", "ConfigMap", True, short=("cm",)),
    Resource("", "v1", "secrets", "Secret", True),
    Resource("", "v1", "pods", "Pod", True, status=True, short=("po",)),
    Resource("", "v1", "persistentvolumeclaims", "PersistentVolumeClaim", True, status=True, short=("pvc",)),
    Resource("storage.k8s.io", "v1", "storageclasses", "StorageClass", False, short=("sc",)),
    Resource("", "v1", "events", "Event", True, short=("ev",)),
    Resource("", "v1", "namespaces", "Namespace", False, status=True, short=("ns",)),
    Resource("", "v1", "nodes", "Node", False, status=True, short=("no",)),
    Resource("coordination.k8s.io", "v1", "leases", "Lease", True),
    Resource("machineconfiguration.openshift.io", "v1", "machineconfigpools", "MachineConfigPool",
             False, status=True, short=("mcp",)),
    Resource("machineconfiguration.openshift.io", "v1", "machineconfigs", "MachineConfig", False,
             short=("mc",)),
    Resource("machineconfiguration.openshift.io", "v1", "osimagestreams", "OSImageStream", False,
             status=True),
    Resource("build.openshift.io", "v1", "builds", "Build", True, status=True),
    Resource("config.openshift.io", "v1", "proxies", "Proxy", False, status=True),
    # served from OpenShift 4.20 (openshift/api config/v1 types_image_policy.go); signing off lists it
    Resource("config.openshift.io", "v1", "clusterimagepolicies", "ClusterImagePolicy", False, status=True),
    Resource("operator.openshift.io", "v1", "machineconfigurations", "MachineConfiguration", False,
             status=True),
]
BY_PATH = {(r.group, r.version, r.plural): r for r in RESOURCES}
VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]


class HttpError(Exception):
    def __init__(self, code: int, reason: str, message: str, details: dict | None = None):
        super().__init__(message)
        self.code, self.reason, self.message, self.details = code, reason, message, details or {}


# --- label selectors ------------------------------------------------------------------------------
_TERM = re.compile(r"^\s*(?P<neg>!)?\s*(?P<key>[A-Za-z0-9_./-]+)\s*"
                   r"(?:(?P<op>==|=|!=)\s*(?P<val>[A-Za-z0-9_.-]*)|\s+(?P<setop>in|notin)\s*"
                   r"\((?P<set>[^)]*)\))?\s*$")


def parse_selector(text: str) -> list[Callable[[dict[str, str]], bool]]:
    terms, depth, cur = [], 0, ""
    for ch in text:
        depth += ch == "("
        depth -= ch == ")"
        if ch == "," and depth == 0:
            terms.append(cur)
            cur = ""
        else:
            cur += ch
    if cur.strip():
        terms.append(cur)
    preds = []
    for term in terms:
        m = _TERM.match(term)
        if not m or (m["neg"] and (m["op"] or m["setop"])):
            raise HttpError(400, "BadRequest", f"unable to parse requirement: {term!r}")
        key = m["key"]
        if m["neg"]:
            preds.append(lambda ls, k=key: k not in ls)
        elif m["op"] in ("=", "=="):
            preds.append(lambda ls, k=key, v=m["val"]: ls.get(k) == v)
        elif m["op"] == "!=":
            preds.append(lambda ls, k=key, v=m["val"]: ls.get(k) != v)
        elif m["setop"]:
            values = {v.strip() for v in m["set"].split(",")}
            if m["setop"] == "in":
                preds.append(lambda ls, k=key, vs=values: k in ls and ls[k] in vs)
            else:
                preds.append(lambda ls, k=key, vs=values: ls.get(k) not in vs)
        else:
            preds.append(lambda ls, k=key: k in ls)
    return preds


def parse_field_selector(text: str) -> list[Callable[[dict[str, Any]], bool]]:
    preds = []
    for term in filter(None, text.split(",")):
        m = re.match(r"^(metadata\.name|metadata\.namespace)(==|=|!=)(.*)$", term.strip())
        if not m:
            raise HttpError(400, "BadRequest", f"field label not supported: {term}")
        attr = m[1].split(".")[1]
        if m[2] == "!=":
            preds.append(lambda o, a=attr, v=m[3]: objects.meta(o).get(a, "") != v)
        else:
            preds.append(lambda o, a=attr, v=m[3]: objects.meta(o).get(a, "") == v)
    return preds


# --- patches ----------------------------------------------------------------------------------------
def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch; also the map semantics of strategic merge patch."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if key.startswith("$"):
            continue                                   # SMP directives: not needed here
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_patch(out.get(key), value)
    return out


# --- faults -----------------------------------------------------------------------------------------
@dataclass
class Fault:
    """Fail the `nth` request (1-based, counting every request), the `nth_write` write request,
    or those matching `match`."""
    action: str                         # "status" | "reset" | "drop-response" | "latency"
    nth: int | None = None
    nth_write: int | None = None
    match: Callable[[str, str, str, str], bool] | None = None   # (verb, resource, ns, name)
    code: int = 500
    retry_after: int | None = None
    seconds: float = 0.0
    times: int = 1                      # how many matching requests it hits (0 = forever)
    hits: int = 0


@dataclass
class Request:
    verb: str
    resource: str
    namespace: str
    name: str
    subresource: str = ""
    query: dict[str, str] = field(default_factory=dict)
    group: str = ""
    metadata_only: bool = False          # Accept: ...;as=PartialObjectMetadataList (or ...Metadata)
    status: int = 0                      # the HTTP status answered (0: none, the connection was dropped)


class Store(MemoryCluster):
    """The server's state: the product's in-memory cluster plus what only a server needs."""

    def generate_name(self, prefix: str) -> str:
        alphabet = "bcdfghjklmnpqrstvwxz2456789"
        return prefix + "".join(random.choice(alphabet) for _ in range(5))


class APIServer:
    def __init__(self, items: list[dict[str, Any]] = (), *, authorize=None, clock=None):
        self.store = Store(items, **({"clock": clock} if clock else {}))
        self.log: list[Request] = []
        self.faults: list[Fault] = []
        self.authorize = authorize       # (Request) -> str | None (reason to refuse)
        self.lock = threading.RLock()
        self.count = 0
        self.write_count = 0
        self.httpd: ThreadingHTTPServer | None = None
        self.thread: threading.Thread | None = None

    # lifecycle --------------------------------------------------------------------------------
    def start(self) -> APIServer:
        server = self

        class Handler(_Handler):
            api = server

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02},
                                       daemon=True)
        self.thread.start()
        return self

    def stop(self) -> None:
        if self.httpd:
            self.httpd.shutdown()
            self.httpd.server_close()
            self.httpd = None

    def __enter__(self) -> APIServer:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    @property
    def url(self) -> str:
        assert self.httpd
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def kubeconfig(self, path, namespace: str = "default") -> str:
        config = {"apiVersion": "v1", "kind": "Config", "current-context": "test",
                  "clusters": [{"name": "test", "cluster": {"server": self.url}}],
                  "users": [{"name": "test", "user": {"token": "test-token"}}],
                  "contexts": [{"name": "test", "context": {"cluster": "test", "user": "test",
                                                            "namespace": namespace}}]}
        path.write_text(json.dumps(config))
        return str(path)

    def items(self) -> list[dict[str, Any]]:
        with self.lock:
            return self.store.items()

    def writes(self) -> list[Request]:
        return [r for r in self.log if r.verb not in ("get", "list", "watch", "discovery")]

    # request handling -------------------------------------------------------------------------
    def fault_for(self, req: Request) -> Fault | None:
        with self.lock:
            self.count += 1
            if req.verb in ("create", "update", "patch", "delete"):
                self.write_count += 1
            for fault in self.faults:
                if fault.times and fault.hits >= fault.times:
                    continue
                if fault.nth is not None:
                    hit = fault.nth == self.count
                elif fault.nth_write is not None:
                    hit = req.verb in ("create", "update", "patch", "delete") and fault.nth_write == self.write_count
                else:
                    hit = fault.match is not None and fault.match(req.verb, req.resource, req.namespace, req.name)
                if hit:
                    fault.hits += 1
                    return fault
        return None


def _status(code: int, reason: str, message: str, details: dict | None = None) -> dict[str, Any]:
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": message, "reason": reason, "details": details or {}, "code": code}


_ERRORS = {NotFound: (404, "NotFound"), AlreadyExists: (409, "AlreadyExists"),
           Conflict: (409, "Conflict"), Invalid: (422, "Invalid")}


#: the Accept of a metadata-only answer: PartialObjectMetadataList (a LIST) or PartialObjectMetadata
_METADATA_AS = re.compile(r"as=PartialObjectMetadata(List)?(;|,|$)")


class _Handler(BaseHTTPRequestHandler):
    api: APIServer
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: Any) -> None:   # quiet
        pass

    def setup(self) -> None:
        super().setup()
        # headers and body go out as separate writes: without this, Nagle's algorithm and the
        # client's delayed ACK add 40 ms to every request on a kept-alive connection
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    # plumbing ---------------------------------------------------------------------------------
    def _send(self, code: int, body: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def _read_raw(self) -> None:
        """Read the request body before answering, faults included: a kept-alive connection
        must not carry an unread body into the next request."""
        length = int(self.headers.get("Content-Length") or 0)
        self.raw = self.rfile.read(length) if length else b""

    def _body(self) -> Any:
        raw = self.raw
        if not raw:
            return None
        if "protobuf" in (self.headers.get("Content-Type") or ""):
            raise HttpError(415, "UnsupportedMediaType", "the body of the request was in an unknown "
                                                         "format: application/vnd.kubernetes.protobuf")
        try:
            return json.loads(raw)
        except ValueError:
            import yaml
            try:
                return yaml.safe_load(raw)
            except yaml.YAMLError:
                raise HttpError(400, "BadRequest", "request body is neither JSON nor YAML") from None

    def _reset(self) -> None:
        """Close the connection abruptly (RST), as a dying proxy would."""
        try:
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
        except OSError:
            pass
        self.close_connection = True
        self.connection.close()

    def do_GET(self) -> None:
        self._handle("GET")

    def do_POST(self) -> None:
        self._handle("POST")

    def do_PUT(self) -> None:
        self._handle("PUT")

    def do_PATCH(self) -> None:
        self._handle("PATCH")

    def do_DELETE(self) -> None:
        self._handle("DELETE")

    # routing ----------------------------------------------------------------------------------
    def _route(self, method: str) -> tuple[Request, Resource | None, Any]:
        url = urllib.parse.urlsplit(self.path)
        query = dict(urllib.parse.parse_qsl(url.query))
        parts = [urllib.parse.unquote(p) for p in url.path.strip("/").split("/") if p]
        if not parts or parts[0] not in ("api", "apis") or len(parts) <= (2 if parts[0] == "api" else 3):
            return Request("discovery", "/".join(parts), "", "", query=query), None, parts
        if parts[0] == "api":
            group, version, rest = "", parts[1], parts[2:]
        else:
            group, version, rest = parts[1], parts[2], parts[3:]
        namespace = ""
        if len(rest) >= 3 and rest[0] == "namespaces":
            namespace, rest = rest[1], rest[2:]
        if not rest:
            raise HttpError(404, "NotFound", f"the server could not find the requested resource ({url.path})")
        res = BY_PATH.get((group, version, rest[0]))
        if res is None:
            raise HttpError(404, "NotFound", f"the server could not find the requested resource ({url.path})")
        name = rest[1] if len(rest) > 1 else ""
        sub = rest[2] if len(rest) > 2 else ""
        if sub and not (sub == "status" and res.status):
            raise HttpError(404, "NotFound", f"subresource {sub} of {res.plural} not found")
        verb = {"GET": "get" if name else "list", "POST": "create", "PUT": "update",
                "PATCH": "patch", "DELETE": "delete"}[method]
        if verb == "list" and query.get("watch") in ("true", "1"):
            verb = "watch"
        if res.namespaced and not namespace and verb not in ("list", "watch"):
            raise HttpError(404, "NotFound", f"{res.plural} is namespaced: a namespace is required")
        if verb == "create" and name:
            raise HttpError(405, "MethodNotAllowed", "POST to a named resource")
        return Request(verb, res.plural, namespace, name, sub, query, res.group,
                       bool(_METADATA_AS.search(self.headers.get("Accept") or ""))), res, None

    def _handle(self, method: str) -> None:
        api = self.api
        self._read_raw()
        try:
            req, res, parts = self._route(method)
        except HttpError as err:
            self._send(err.code, _status(err.code, err.reason, err.message))
            return
        with api.lock:
            api.log.append(req)
        fault = api.fault_for(req)
        if fault and fault.action == "latency":
            time.sleep(fault.seconds)
            fault = None
        if fault and fault.action == "reset":
            self._reset()
            return
        if fault and fault.action == "status":
            headers = {"Retry-After": str(fault.retry_after)} if fault.retry_after is not None else {}
            reason = {410: "Expired", 429: "TooManyRequests", 503: "ServiceUnavailable", 504: "Timeout"}.get(
                fault.code, "InternalError")
            req.status = fault.code
            self._send(fault.code, _status(fault.code, reason, f"injected fault {fault.code}"), headers)
            return
        try:
            if res is None:
                code, body = 200, self._discovery(parts)
            else:
                if api.authorize:
                    refusal = api.authorize(req)
                    if refusal:
                        raise HttpError(403, "Forbidden", refusal)
                body_in = self._body() if method in ("POST", "PUT", "PATCH", "DELETE") else None
                if req.verb == "watch":
                    req.status = 200
                    self._watch(req, res)
                    return
                with api.lock:
                    code, body = self._serve(method, req, res, body_in)
        except HttpError as err:
            code, body = err.code, _status(err.code, err.reason, err.message, err.details)
        except tuple(_ERRORS) as err:  # type: ignore[misc]
            c, reason = _ERRORS[type(err)]
            code, body = c, _status(c, reason, str(err), {"name": req.name, "kind": req.resource})
        except Exception as err:  # noqa: BLE001 - a server answers 500, it does not hang up
            code, body = 500, _status(500, "InternalError", f"{type(err).__name__}: {err}")
        if fault and fault.action == "drop-response":
            self._reset()                       # done, but the client never hears of it
            req.status = code
            return
        req.status = code
        if res is not None and req.verb != "list" and 200 <= code < 300 and req.metadata_only:
            # as kube-apiserver transforms the answer of any verb (create, get, patch, ...) for
            # Accept: ...;as=PartialObjectMetadata;g=meta.k8s.io;v=v1
            body = {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
                    "metadata": (body or {}).get("metadata", {})}
        self._send(code, body)

    # discovery --------------------------------------------------------------------------------
    def _discovery(self, parts: list[str]) -> dict[str, Any]:
        if parts == ["version"]:
            return {"major": "1", "minor": "32", "gitVersion": "v1.32.0-ocl-test",
                    "platform": "linux/amd64"}
        if parts == ["api"]:
            return {"kind": "APIVersions", "versions": ["v1"],
                    "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1"}]}
        if parts == ["apis"]:
            groups = sorted({r.group for r in RESOURCES if r.group})
            return {"kind": "APIGroupList", "apiVersion": "v1", "groups": [
                {"name": g, "versions": [{"groupVersion": f"{g}/v1", "version": "v1"}],
                 "preferredVersion": {"groupVersion": f"{g}/v1", "version": "v1"}} for g in groups]}
        if (len(parts) == 2 and parts[0] == "api") or (len(parts) == 3 and parts[0] == "apis"):
            group, version = ("", parts[1]) if parts[0] == "api" else (parts[1], parts[2])
            listed = [r for r in RESOURCES if (r.group, r.version) == (group, version)]
            if not listed:
                raise HttpError(404, "NotFound", "the server could not find the requested resource")
            resources = []
            for r in listed:
                resources.append({"name": r.plural, "singularName": r.kind.lower(), "kind": r.kind,
                                  "namespaced": r.namespaced, "verbs": VERBS,
                                  "shortNames": list(r.short)})
                if r.status:
                    resources.append({"name": f"{r.plural}/status", "singularName": "", "kind": r.kind,
                                      "namespaced": r.namespaced, "verbs": ["get", "patch", "update"]})
            return {"kind": "APIResourceList", "apiVersion": "v1",
                    "groupVersion": listed[0].group_version, "resources": resources}
        if len(parts) == 2 and parts[0] == "apis":
            g = parts[1]
            if not any(r.group == g for r in RESOURCES):
                raise HttpError(404, "NotFound", "the server could not find the requested resource")
            return {"kind": "APIGroup", "apiVersion": "v1", "name": g,
                    "versions": [{"groupVersion": f"{g}/v1", "version": "v1"}],
                    "preferredVersion": {"groupVersion": f"{g}/v1", "version": "v1"}}
        raise HttpError(404, "NotFound", "the server could not find the requested resource")

    # verbs ------------------------------------------------------------------------------------
    def _serve(self, method: str, req: Request, res: Resource, body: Any) -> tuple[int, Any]:
        store = self.api.store
        ns = req.namespace if res.namespaced else ""
        if req.verb == "list":
            return 200, self._list(req, res)
        if req.verb == "get":
            obj = store.get(res.kind, ns, req.name)
            if obj is None and res.kind == "Namespace" and (req.name == "default" or any(
                    objects.namespace(o) == req.name for o in store.store.values())):
                obj = {"apiVersion": "v1", "kind": "Namespace",          # implied by its contents
                       "metadata": {"name": req.name, "uid": f"ns-{req.name}"},
                       "status": {"phase": "Active"}}
            if obj is None:
                raise HttpError(404, "NotFound", f'{res.plural} "{req.name}" not found',
                                {"name": req.name, "kind": res.plural})
            return 200, obj
        if req.verb == "create":
            return 201, self._create(req, res, body or {})
        if req.verb == "delete":
            return 200, self._delete(req, res, body or {})
        live = store.get(res.kind, ns, req.name)
        if live is None:
            raise HttpError(404, "NotFound", f'{res.plural} "{req.name}" not found',
                            {"name": req.name, "kind": res.plural})
        if req.verb == "update":
            new = body or {}
            if objects.meta(new).get("name") not in (None, req.name):
                raise HttpError(400, "BadRequest", "the name of the object does not match the URL")
        else:
            new = self._patched(live, body)
        new = self._scope(res, req, live, new)
        if req.verb == "update":
            return 200, store.replace(new)
        # a patch is applied to what we read; concurrent writers are serialised by the lock
        new.setdefault("metadata", {})["resourceVersion"] = objects.meta(live).get("resourceVersion")
        if objects.meta(new).get("uid") != objects.meta(live).get("uid"):
            raise HttpError(422, "Invalid", "metadata.uid: field is immutable")
        return 200, store.replace(new)

    def _patched(self, live: dict[str, Any], patch: Any) -> dict[str, Any]:
        ctype = (self.headers.get("Content-Type") or "").split(";")[0].strip()
        if ctype == "application/json-patch+json":
            if not isinstance(patch, list):
                raise HttpError(400, "BadRequest", "json patch must be a list of operations")
            try:
                return jsonpatch.apply_patch(live, patch)
            except jsonpatch.JsonPatchTestFailed as err:
                raise HttpError(422, "Invalid", f"the server rejected our request due to an error in "
                                                f"our request: {err}") from None
            except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException) as err:
                raise HttpError(422, "Invalid", f"the server rejected our request: {err}") from None
        if ctype in ("application/merge-patch+json", "application/strategic-merge-patch+json"):
            if not isinstance(patch, dict):
                raise HttpError(400, "BadRequest", "merge patch must be an object")
            rv = (patch.get("metadata") or {}).get("resourceVersion")
            if rv and rv != objects.meta(live).get("resourceVersion"):
                raise HttpError(409, "Conflict", "the object has been modified; please apply your "
                                                 "changes to the latest version and try again")
            return merge_patch(live, patch)
        raise HttpError(415, "UnsupportedMediaType", f"the body of the request was in an unknown format: {ctype}")

    def _scope(self, res: Resource, req: Request, live: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
        """The status subresource writes only status; the main endpoint never writes it."""
        new = copy.deepcopy(new)
        if res.status and req.subresource == "status":
            out = copy.deepcopy(live)
            out["status"] = new.get("status")
            out["metadata"]["resourceVersion"] = objects.meta(new).get(
                "resourceVersion", objects.meta(live).get("resourceVersion"))
            return out
        if res.status:
            if "status" in live:
                new["status"] = copy.deepcopy(live["status"])
            else:
                new.pop("status", None)
        md = new.setdefault("metadata", {})
        for fixed in ("uid", "creationTimestamp", "namespace"):
            if fixed in objects.meta(live):
                if fixed == "uid" and md.get("uid") not in (None, live["metadata"]["uid"]):
                    raise HttpError(422, "Invalid", "metadata.uid: field is immutable")
                md[fixed] = live["metadata"][fixed]
        spec_changed = {k: v for k, v in new.items() if k not in ("metadata", "status")} != \
            {k: v for k, v in live.items() if k not in ("metadata", "status")}
        md["generation"] = objects.meta(live).get("generation", 1) + (1 if spec_changed else 0)
        return new

    def _create(self, req: Request, res: Resource, body: dict[str, Any]) -> dict[str, Any]:
        if not isinstance(body, dict):
            raise HttpError(400, "BadRequest", "the request body must be an object")
        if body.get("kind") not in (None, res.kind):
            raise HttpError(400, "BadRequest", f"kind {body.get('kind')} does not match {res.plural}")
        obj = copy.deepcopy(body)
        obj["kind"], obj["apiVersion"] = res.kind, res.group_version
        md = obj.setdefault("metadata", {})
        if not md.get("name"):
            if not md.get("generateName"):
                raise HttpError(422, "Invalid", f"{res.kind} is invalid: metadata.name: Required value")
            md["name"] = self.api.store.generate_name(md["generateName"])
        if res.namespaced:
            if md.get("namespace") not in (None, "", req.namespace):
                raise HttpError(400, "BadRequest", "the namespace of the object does not match the URL")
            md["namespace"] = req.namespace
        else:
            md.pop("namespace", None)
        md.pop("resourceVersion", None)
        md["generation"] = 1
        if res.status:
            obj["status"] = {"phase": "Pending"} if res.kind == "Pod" else {}
        if not re.fullmatch(r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?", md["name"]) or len(md["name"]) > 253:
            raise HttpError(422, "Invalid", f'{res.kind} "{md["name"]}" is invalid: metadata.name: '
                                            "a lowercase RFC 1123 subdomain must consist of lower case "
                                            "alphanumeric characters, '-' or '.'")
        try:
            return self.api.store.create(obj)
        except AlreadyExists:
            raise HttpError(409, "AlreadyExists", f'{res.plural} "{md["name"]}" already exists',
                            {"name": md["name"], "kind": res.plural}) from None

    def _delete(self, req: Request, res: Resource, options: dict[str, Any]) -> dict[str, Any]:
        store = self.api.store
        ns = req.namespace if res.namespaced else ""
        live = store.get(res.kind, ns, req.name)
        if live is None:
            raise HttpError(404, "NotFound", f'{res.plural} "{req.name}" not found',
                            {"name": req.name, "kind": res.plural})
        pre = options.get("preconditions") or {}
        if pre.get("uid") and pre["uid"] != objects.meta(live).get("uid"):
            raise HttpError(409, "Conflict", f"Precondition failed: UID in precondition: {pre['uid']}, "
                                             f"UID in object meta: {objects.meta(live).get('uid')}")
        if pre.get("resourceVersion") and pre["resourceVersion"] != objects.meta(live).get("resourceVersion"):
            raise HttpError(409, "Conflict", "Precondition failed: resourceVersion")
        policy = options.get("propagationPolicy") or self.api_query(req, "propagationPolicy") or "Background"
        if policy == "Orphan":
            uid = objects.meta(live).get("uid")
            for obj in list(store.store.values()):
                refs = objects.meta(obj).get("ownerReferences") or []
                if any(r.get("uid") == uid for r in refs):
                    obj["metadata"]["ownerReferences"] = [r for r in refs if r.get("uid") != uid]
            store.delete(res.kind, ns, req.name)
        else:
            store.delete(res.kind, ns, req.name)   # background: dependents are collected at once
        return live

    def _watch(self, req: Request, res: Resource) -> None:
        """A watch: the objects the request selects, compared every 20 ms with what it last said
        (those at or below its resourceVersion were said by the LIST it follows); each change one
        JSON line of a chunked answer, until timeoutSeconds or the server stops."""
        api = self.api
        preds = parse_selector(req.query.get("labelSelector", ""))

        def selected() -> dict[tuple[str, str], dict[str, Any]]:
            with api.lock:
                return {(ns, name): copy.deepcopy(o) for (kind, ns, name), o in api.store.store.items()
                        if kind == res.kind and (not req.namespace or ns == req.namespace)
                        and all(p(dict(objects.labels(o))) for p in preds)}

        def version(o: dict[str, Any]) -> int:
            text = str(objects.meta(o).get("resourceVersion") or "0")
            return int(text) if text.isdigit() else 0

        since = int(req.query.get("resourceVersion") or 0)
        seen = {k: version(o) for k, o in selected().items() if version(o) <= since}
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        until = time.monotonic() + float(req.query.get("timeoutSeconds") or 60)
        try:
            while time.monotonic() < until and api.httpd is not None:
                now = selected()
                lines = [{"type": "DELETED", "object": {"kind": res.kind, "apiVersion": res.group_version,
                                                         "metadata": {"namespace": k[0], "name": k[1]}}}
                         for k in sorted(set(seen) - set(now))]
                for k, o in sorted(now.items()):
                    if seen.get(k) != version(o):
                        o.setdefault("apiVersion", res.group_version)
                        o.setdefault("kind", res.kind)
                        lines.append({"type": "MODIFIED" if k in seen else "ADDED", "object": o})
                seen = {k: version(o) for k, o in now.items()}
                for line in lines:
                    data = json.dumps(line).encode() + b"\n"
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                self.wfile.flush()
                time.sleep(0.02)
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except OSError:
            return                                  # the client went away

    @staticmethod
    def api_query(req: Request, key: str) -> str:
        return req.query.get(key, "")

    def _list(self, req: Request, res: Resource) -> dict[str, Any]:
        store = self.api.store
        items = store.list(res.kind, req.namespace or None if res.namespaced else None)
        if req.query.get("labelSelector"):
            preds = parse_selector(req.query["labelSelector"])
            items = [o for o in items if all(p(dict(objects.labels(o))) for p in preds)]
        if req.query.get("fieldSelector"):
            fpreds = parse_field_selector(req.query["fieldSelector"])
            items = [o for o in items if all(p(o) for p in fpreds)]
        items.sort(key=lambda o: (objects.namespace(o), objects.name(o)))
        start = 0
        if req.query.get("continue"):
            try:
                start = int(json.loads(urllib.parse.unquote(req.query["continue"]))["offset"])
            except (ValueError, KeyError, TypeError):
                raise HttpError(400, "BadRequest", "invalid continue token") from None
        limit = int(req.query.get("limit") or 0)
        page = items[start:start + limit] if limit else items[start:]
        meta: dict[str, Any] = {"resourceVersion": str(next(store._rv))}
        if limit and start + limit < len(items):
            meta["continue"] = json.dumps({"offset": start + limit})
            meta["remainingItemCount"] = len(items) - start - limit
        for item in page:
            item.setdefault("apiVersion", res.group_version)
            item.setdefault("kind", res.kind)
        if "as=PartialObjectMetadataList" in (self.headers.get("Accept") or ""):
            # metadata only, as kube-apiserver answers this Accept for any resource
            return {"kind": "PartialObjectMetadataList", "apiVersion": "meta.k8s.io/v1", "metadata": meta,
                    "items": [{"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
                               "metadata": i.get("metadata", {})} for i in page]}
        return {"kind": f"{res.kind}List", "apiVersion": res.group_version, "metadata": meta,
                "items": page}



@contextlib.contextmanager
def builds_succeed(server: APIServer, every: float = 0.05) -> Iterator[None]:
    """A thread plays the kubelet and the build controller on the server's store while the block
    runs: each new build Pod or Build ends Succeeded."""
    import kubelet  # examples/kubelet.py

    stop = threading.Event()

    def play() -> None:
        while not stop.wait(every):
            with server.lock:
                for obj in server.store.store.values():
                    if obj["kind"] in ("Pod", "Build") and \
                            (obj.get("status") or {}).get("phase") in (None, "Pending", "New"):
                        kubelet.set_phase(obj, "Succeeded")
                        server.store._stamp(obj)
    thread = threading.Thread(target=play, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
