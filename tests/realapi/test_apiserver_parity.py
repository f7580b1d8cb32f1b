"""Keeps the stand-in honest: the same request sequence goes to tests/support/apiserver.py and to the real
kube-apiserver, and their status codes and reasons must agree. The stand-in stays only for the
faults a real server cannot be made to produce (resets, lost responses, 5xx, 429)."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

import pytest

from reconcile.cluster.live import METADATA_ECHO
from tests.support import factory as F
from tests.support.apiserver import APIServer
from tests.unit.test_builders import generate

pytestmark = pytest.mark.realapi
NS = F.NS
CM = f"/api/v1/namespaces/{NS}/configmaps"
JSON_PATCH = "application/json-patch+json"


def event(namespace: str, name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Event", "metadata": {"name": name, "namespace": namespace},
            "involvedObject": {"apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfigPool",
                               "name": "worker", "uid": "u-1"},
            "reason": "BuildStarted", "message": "started", "type": "Normal", "count": 1,
            "firstTimestamp": "2026-11-29T12:00:00Z", "lastTimestamp": "2026-11-29T12:00:00Z",
            "source": {"component": "ocl-reconciler"}}


def sequence(rv: dict[str, str]) -> list[tuple[str, str, str, Any, str]]:
    """(label, method, path, body, content type); `rv` is filled in as the sequence runs."""
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "parity", "labels": {"t": "p"}},
          "data": {"k": "v"}}
    build = generate("openshift-image-builder")[-1]
    build["metadata"]["ownerReferences"][0]["uid"] = "u-1"
    return [
        ("create", "POST", CM, cm, "application/json"),
        ("create again", "POST", CM, cm, "application/json"),
        ("get missing", "GET", f"{CM}/nope", None, ""),
        ("add the whole annotations map", "PATCH", f"{CM}/parity",
         [{"op": "add", "path": "/metadata/annotations", "value": {"a": "1"}}], JSON_PATCH),
        ("failed test op", "PATCH", f"{CM}/parity",
         [{"op": "test", "path": "/metadata/resourceVersion", "value": "1"},
          {"op": "add", "path": "/data/x", "value": "y"}], JSON_PATCH),
        ("remove a missing member", "PATCH", f"{CM}/parity",
         [{"op": "remove", "path": "/metadata/annotations/missing"}], JSON_PATCH),
        ("key with a slash", "PATCH", f"{CM}/parity",
         [{"op": "add", "path": "/metadata/annotations/ocl-reconciler.io~1state", "value": "Pending"}],
         JSON_PATCH),
        ("stale PUT", "PUT", f"{CM}/parity", dict(cm, metadata=dict(cm["metadata"], resourceVersion="1")),
         "application/json"),
        ("fresh PUT", "PUT", f"{CM}/parity", "fresh", "application/json"),
        ("delete with a wrong uid", "DELETE", f"{CM}/parity",
         {"kind": "DeleteOptions", "apiVersion": "v1", "preconditions": {"uid": "not-it"}}, "application/json"),
        ("page of one", "GET", f"{CM}?limit=1&labelSelector=t%3Dp", None, ""),
        ("bad continue token", "GET", f"{CM}?limit=1&continue=garbage", None, ""),
        ("Event about a pool in our namespace", "POST", f"/api/v1/namespaces/{NS}/events",
         event(NS, "worker.parity"), "application/json"),
        ("Event about a pool in default", "POST", "/api/v1/namespaces/default/events",
         event("default", "worker.parity"), "application/json"),
        ("the same Event again", "POST", "/api/v1/namespaces/default/events",
         event("default", "worker.parity"), "application/json"),
        ("invalid name", "POST", CM, dict(cm, metadata={"name": "Not_Valid"}), "application/json"),
        ("our Build", "POST", f"/apis/build.openshift.io/v1/namespaces/{NS}/builds", build, "application/json"),
        ("delete", "DELETE", f"{CM}/parity", None, ""),
        ("delete missing", "DELETE", f"{CM}/parity", None, ""),
        ("create, answered with metadata only", "POST", CM, dict(cm, metadata={"name": "echo"}), "application/json"),
    ]


def send(url: str, method: str, path: str, body: Any, ctype: str, token: str, ctx,
         accept: str = "application/json") -> tuple[int, dict]:
    data = json.dumps(body).encode() if body is not None else None
    headers = {"Authorization": f"Bearer {token}", "Accept": accept}
    if ctype:
        headers["Content-Type"] = ctype
    req = urllib.request.Request(url + path, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(req, context=ctx, timeout=30) as resp:
            return resp.status, json.loads(resp.read() or b"{}")
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read() or b"{}")


def play(url: str, token: str, ctx) -> list[tuple[str, int, str, Any]]:
    """(label, status, reason, what a success returned that matters)."""
    out, rv = [], {}
    for label, method, path, body, ctype in sequence(rv):
        if body == "fresh":
            _, live = send(url, "GET", f"{CM}/parity", None, "", token, ctx)
            body = dict(live, data={"k": "fresh"})
        metadata_only = label == "create, answered with metadata only"      # what live.create asks for
        status, resp = send(url, method, path, body, ctype, token, ctx,
                            METADATA_ECHO if metadata_only else "application/json")
        reason = resp.get("reason", "") if status >= 300 else ""
        seen: Any = None
        if label == "page of one":
            seen = (len(resp.get("items") or []), bool((resp.get("metadata") or {}).get("continue")))
        elif label == "key with a slash":
            seen = (resp.get("metadata") or {}).get("annotations")
        elif metadata_only:
            md = resp.get("metadata") or {}
            seen = (resp.get("apiVersion"), resp.get("kind"), sorted(resp), md.get("name"),
                    md.get("namespace"), bool(md.get("uid")), bool(md.get("resourceVersion")))
        elif label == "our Build" and status < 300:
            seen = sorted(resp.get("spec", {}).get("strategy", {}).get("dockerStrategy", {}))
        out.append((label, status, reason, seen))
    return out


def test_the_stand_in_answers_as_the_real_server_does(server):
    server.reset()
    import ssl
    real = play(server.url, "ocl-test-admin-token",
                ssl.create_default_context(cafile=str(server.root / "certs/apiserver.crt")))
    with APIServer([]) as standin:
        imitation = play(standin.url, "test-token", None)
    server.reset()
    assert [r[:2] for r in real] == [
        ("create", 201), ("create again", 409), ("get missing", 404), ("add the whole annotations map", 200),
        ("failed test op", 422), ("remove a missing member", 422), ("key with a slash", 200),
        ("stale PUT", 409), ("fresh PUT", 200), ("delete with a wrong uid", 409), ("page of one", 200),
        ("bad continue token", 400), ("Event about a pool in our namespace", 422),
        ("Event about a pool in default", 201), ("the same Event again", 409), ("invalid name", 422),
        ("our Build", 201), ("delete", 200), ("delete missing", 404), ("create, answered with metadata only", 201)]
    assert real[-1][3] == ("meta.k8s.io/v1", "PartialObjectMetadata", ["apiVersion", "kind", "metadata"], "echo",
                           NS, True, True)
    assert imitation == real
