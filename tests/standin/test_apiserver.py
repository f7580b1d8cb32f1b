"""The test API server behaves like kube-apiserver where we rely on it; checked by hand-made
requests and by the real `kubectl`, a client nobody here wrote."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import urllib.error
import urllib.request

import pytest

from tests.support import factory as F
from tests.support.apiserver import APIServer, Fault

CM = f"/api/v1/namespaces/{F.NS}/configmaps"
MCP = "/apis/machineconfiguration.openshift.io/v1/machineconfigpools"


def call(server, method, path, body=None, ctype="application/json"):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(server.url + path, data=data, method=method,
                                 headers={"Content-Type": ctype})
    try:
        with urllib.request.urlopen(req) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


@pytest.fixture
def server():
    with APIServer(F.cluster(F.pool("worker"), F.pool("infra", opted_in=False))) as s:
        yield s


def test_discovery(server):
    assert call(server, "GET", "/api")[1]["versions"] == ["v1"]
    groups = {g["name"] for g in call(server, "GET", "/apis")[1]["groups"]}
    assert {"coordination.k8s.io", "machineconfiguration.openshift.io", "build.openshift.io"} <= groups
    res = call(server, "GET", "/apis/machineconfiguration.openshift.io/v1")[1]["resources"]
    mcp = next(r for r in res if r["name"] == "machineconfigpools")
    assert (mcp["kind"], mcp["namespaced"], "patch" in mcp["verbs"]) == ("MachineConfigPool", False, True)
    assert any(r["name"] == "machineconfigpools/status" for r in res)


@pytest.mark.parametrize("selector, names", [
    ("ocl-reconciler.io/layering-enabled", ["worker"]),
    ("!ocl-reconciler.io/layering-enabled", ["infra"]),
    ("machineconfiguration.openshift.io/mco-built-in=", ["infra", "worker"]),
    ("machineconfiguration.openshift.io/mco-built-in!=", []),
    ("ocl-reconciler.io/layering-enabled in (,x)", ["worker"]),
    ("ocl-reconciler.io/layering-enabled notin (x)", ["infra", "worker"]),
])
def test_label_selectors(server, selector, names):
    code, body = call(server, "GET", f"{MCP}?labelSelector={urllib.request.quote(selector)}")
    assert code == 200 and [i["metadata"]["name"] for i in body["items"]] == names


def test_pagination(server):
    for i in range(5):
        call(server, "POST", CM, {"metadata": {"name": f"page-{i}"}, "data": {}})
    seen, token = [], None
    while True:
        q = "?limit=2" + (f"&continue={urllib.request.quote(token)}" if token else "")
        body = call(server, "GET", CM + q)[1]
        assert len(body["items"]) <= 2
        seen += [i["metadata"]["name"] for i in body["items"]]
        token = body["metadata"].get("continue")
        if not token:
            break
    assert seen == sorted(seen) and len(seen) == 6       # the 5 and on-cluster-build-config


def test_create_generate_name_and_already_exists(server):
    code, made = call(server, "POST", CM, {"metadata": {"generateName": "gen-"}, "data": {"a": "b"}})
    assert code == 201 and made["metadata"]["name"].startswith("gen-") and len(made["metadata"]["name"]) == 9
    assert made["metadata"]["uid"] and made["metadata"]["resourceVersion"] and made["metadata"]["creationTimestamp"]
    code, err = call(server, "POST", CM, {"metadata": {"name": made["metadata"]["name"]}})
    assert code == 409
    assert (err["kind"], err["reason"], err["code"]) == ("Status", "AlreadyExists", 409)


def test_put_with_stale_resource_version_conflicts(server):
    live = call(server, "GET", f"{CM}/on-cluster-build-config")[1]
    live["data"]["x"] = "1"
    code, new = call(server, "PUT", f"{CM}/on-cluster-build-config", live)
    assert code == 200 and new["metadata"]["resourceVersion"] != live["metadata"]["resourceVersion"]
    live["data"]["x"] = "2"
    code, err = call(server, "PUT", f"{CM}/on-cluster-build-config", live)
    assert (code, err["reason"]) == (409, "Conflict")


def test_patch_types(server):
    path = f"{CM}/on-cluster-build-config"
    rv = call(server, "GET", path)[1]["metadata"]["resourceVersion"]
    code, err = call(server, "PATCH", path, [{"op": "test", "path": "/metadata/resourceVersion", "value": "0"}],
                     "application/json-patch+json")
    assert (code, err["reason"]) == (422, "Invalid")
    code, body = call(server, "PATCH", path, [{"op": "test", "path": "/metadata/resourceVersion", "value": rv},
                                              {"op": "add", "path": "/data/j", "value": "1"}],
                      "application/json-patch+json")
    assert code == 200 and body["data"]["j"] == "1"
    code, body = call(server, "PATCH", path, {"data": {"m": "2", "j": None}}, "application/merge-patch+json")
    assert code == 200 and body["data"]["m"] == "2" and "j" not in body["data"]
    code, body = call(server, "PATCH", path, {"metadata": {"labels": {"s": "3"}}},
                      "application/strategic-merge-patch+json")
    assert code == 200 and body["metadata"]["labels"] == {"s": "3"} and body["data"]["m"] == "2"
    assert call(server, "PATCH", path, {"data": {}}, "text/plain")[0] == 415


def test_status_subresource(server):
    path = f"{MCP}/worker"
    pool = call(server, "GET", path)[1]
    pool["status"] = {"machineCount": 99}
    pool["spec"]["paused"] = True
    body = call(server, "PUT", path, pool)[1]
    assert body["status"] == {"machineCount": 3} and body["spec"]["paused"] is True   # main: no status
    assert body["metadata"]["generation"] == 2
    body["status"] = {"machineCount": 7}
    body["spec"]["paused"] = False
    after = call(server, "PUT", path + "/status", body)[1]
    assert after["status"] == {"machineCount": 7} and after["spec"]["paused"] is True  # status only
    code, _ = call(server, "PATCH", path + "/status", {"status": {"machineCount": 8}}, "application/merge-patch+json")
    assert code == 200 and call(server, "GET", path)[1]["status"] == {"machineCount": 8}


def test_delete_preconditions_and_garbage_collection(server):
    pool = call(server, "GET", f"{MCP}/worker")[1]
    owner = {"apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfigPool",
             "name": "worker", "uid": pool["metadata"]["uid"]}
    call(server, "POST", CM, {"metadata": {"name": "dependent", "ownerReferences": [owner]}})
    code, err = call(server, "DELETE", f"{MCP}/worker", {"preconditions": {"uid": "wrong"}})
    assert (code, err["reason"]) == (409, "Conflict")
    code, _ = call(server, "DELETE", f"{MCP}/worker",
                   {"preconditions": {"uid": pool["metadata"]["uid"]}, "propagationPolicy": "Background"})
    assert code == 200
    assert call(server, "GET", f"{CM}/dependent")[0] == 404
    code, err = call(server, "GET", f"{MCP}/worker")
    assert (code, err["kind"], err["reason"], err["details"]["name"]) == (404, "Status", "NotFound", "worker")


def test_faults_and_request_log(server):
    server.faults.append(Fault("status", nth=1, code=429, retry_after=3))
    req = urllib.request.Request(server.url + CM)
    with pytest.raises(urllib.error.HTTPError) as info:
        urllib.request.urlopen(req)
    assert info.value.code == 429 and info.value.headers["Retry-After"] == "3"
    server.faults.append(Fault("drop-response", match=lambda verb, res, ns, name: verb == "create"))
    with pytest.raises((urllib.error.URLError, ConnectionError)):
        call(server, "POST", CM, {"metadata": {"name": "applied-anyway"}})
    assert call(server, "GET", f"{CM}/applied-anyway")[0] == 200          # applied, response lost
    server.faults.append(Fault("reset", match=lambda verb, res, ns, name: verb == "create"))
    with pytest.raises((urllib.error.URLError, ConnectionError)):
        call(server, "POST", CM, {"metadata": {"name": "never-applied"}})
    assert call(server, "GET", f"{CM}/never-applied")[0] == 404
    assert [(r.verb, r.resource, r.name) for r in server.log][:3] == [
        ("list", "configmaps", ""), ("create", "configmaps", ""), ("get", "configmaps", "applied-anyway")]


# --- the real kubectl ------------------------------------------------------------------------------
KUBECTL = shutil.which("kubectl")


@pytest.fixture
def kubectl(server, tmp_path):
    if not KUBECTL:
        pytest.skip("kubectl is not on the PATH (it ships with this project's machine image)")
    env = dict(os.environ, KUBECONFIG=server.kubeconfig(tmp_path / "kubeconfig", namespace=F.NS),
               KUBECACHEDIR=str(tmp_path / "cache"), HOME=str(tmp_path))

    def run(*args, check=True, stdin=None):
        result = subprocess.run([KUBECTL, *args], capture_output=True, text=True, env=env, input=stdin,
                                timeout=60)
        if check and result.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)}: {result.stderr}")
        return result
    return run


def test_kubectl_get_with_selectors(kubectl):
    out = kubectl("get", "mcp", "-l", "ocl-reconciler.io/layering-enabled", "-o", "name").stdout
    assert out.split() == ["machineconfigpool.machineconfiguration.openshift.io/worker"]
    out = kubectl("get", "mcp", "-l", "!ocl-reconciler.io/layering-enabled", "-o", "name").stdout
    assert out.split() == ["machineconfigpool.machineconfiguration.openshift.io/infra"]
    got = json.loads(kubectl("get", "cm", "on-cluster-build-config", "-o", "json").stdout)
    assert got["data"]["finalImagePullspec"] == f"{F.REPO}:latest"


def test_kubectl_create_label_annotate_patch_delete(kubectl, server):
    manifest = json.dumps({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "made"},
                           "data": {"a": "b"}})
    kubectl("create", "--validate=false", "-f", "-", stdin=manifest)
    assert server.store.get("ConfigMap", F.NS, "made")["data"] == {"a": "b"}
    kubectl("label", "cm", "made", "tier=x")
    kubectl("annotate", "mcp", "worker", "example.com/who=kubectl")
    assert server.store.get("ConfigMap", F.NS, "made")["metadata"]["labels"] == {"tier": "x"}
    pool = server.store.get("MachineConfigPool", "", "worker")
    assert pool["metadata"]["annotations"]["example.com/who"] == "kubectl"
    assert pool["metadata"]["annotations"]["example.com/keep"] == "theirs"
    assert kubectl("get", "cm", "-l", "tier in (x,y)", "-o", "name").stdout.split() == ["configmap/made"]
    failing = json.dumps([{"op": "test", "path": "/metadata/resourceVersion", "value": "1"},
                          {"op": "add", "path": "/data/c", "value": "d"}])
    result = kubectl("patch", "cm", "made", "--type=json", "-p", failing, check=False)
    assert result.returncode != 0 and "is not equal to tested value" in result.stderr
    assert "c" not in server.store.get("ConfigMap", F.NS, "made")["data"]
    rv = server.store.get("ConfigMap", F.NS, "made")["metadata"]["resourceVersion"]
    passing = json.dumps([{"op": "test", "path": "/metadata/resourceVersion", "value": rv},
                          {"op": "add", "path": "/data/c", "value": "d"}])
    kubectl("patch", "cm", "made", "--type=json", "-p", passing)
    assert server.store.get("ConfigMap", F.NS, "made")["data"] == {"a": "b", "c": "d"}
    kubectl("delete", "cm", "made")
    assert server.store.get("ConfigMap", F.NS, "made") is None
    missing = kubectl("get", "cm", "made", check=False)
    assert missing.returncode == 1 and 'configmaps "made" not found' in missing.stderr
