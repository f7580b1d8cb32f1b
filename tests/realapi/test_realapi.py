"""The reconciler against a real kube-apiserver and etcd (tests/support/realserver.py), authenticated as its
own ServiceAccount from kustomize/base with a token from the TokenRequest API, so the real RBAC
authorizer, validation, defaulting and admission decide. OpenShift's build-strategy and SCC
admission are imitated by ValidatingAdmissionPolicies (tests/tools/realapi/openshift-admission.yaml)."""

from __future__ import annotations

import copy
import json
import ssl
import subprocess
import sys
import urllib.parse
from typing import Any

import kubelet  # examples/kubelet.py
import pytest
import yaml

from reconcile.cluster import lease
from reconcile.contract import annotations as A
from reconcile.contract import naming
from reconcile.core import events
from tests.support import factory as F
from tests.support import realserver

pytestmark = pytest.mark.realapi      # fixtures `server` (one per session) and `real`: tests/conftest.py
BUILDERS = sorted(F.BUILD_KINDS)


def cluster(builder: str, *pools: dict[str, Any], extra: list[dict[str, Any]] | None = None):
    return F.cluster(*pools, extra=extra, settings=[
        F.build_config(imageBuilderType=builder), F.osimageurl(), F.secret("pull-secret"),
        F.secret("push-secret")])


# --- the lifecycle, as the ServiceAccount -------------------------------------------------------

@pytest.mark.parametrize("builder", BUILDERS)
def test_lifecycle_to_success_then_converged(real, builder):
    real.seed(cluster(builder))
    code, err = real.run()
    assert code == 0, err
    a = real.ann()
    assert a[A.STATE] == A.PENDING and a["example.com/keep"] == "theirs"
    build = real.build_object()
    assert build["kind"] == F.BUILD_KINDS[builder]
    # the harness's owned() reads ours() by label: the same objects, in the same order, as items()
    assert real.owned() == F.owned(real.api.items(), "worker") and len(real.owned()) >= 2
    assert a[A.BUILD] == f"{build['kind']}/{F.NS}/{build['metadata']['name']}"
    if builder == "custom-pod-builder":     # the server defaulted and mutated our Pod...
        assert build["spec"]["tolerations"] and build["spec"]["dnsPolicy"] == "ClusterFirst"
    code, out, _ = real.cli("diff")         # ...and diff still sees nothing to do
    assert code == 0, out

    real.finish("Running")
    assert real.run()[0] == 0
    assert real.ann()[A.STATE] == A.BUILDING

    name = build["metadata"]["name"]
    real.finish("Succeeded")
    code, err = real.run()
    assert code == 0, err
    a = real.ann()
    assert a[A.STATE] == A.SUCCEEDED
    assert a[A.IMAGE] == f"{F.REPO}@{kubelet.digest_for(name)}"
    assert real.owned() == []
    reasons = sorted(e["reason"] for e in real.events())
    assert reasons == ["BuildRunning", "BuildStarted", "BuildSucceeded"]

    # converged, from the audit log: one LIST per kind, the Lease its only writes
    mark = real.api.audit_mark()
    assert real.run()[0] == 0
    audit = real.api.audit(mark, realserver.RECONCILER)
    writes = [(e["verb"], e["objectRef"]["resource"]) for e in audit if e["verb"] not in ("get", "list")]
    assert writes == [("create", "leases"), ("delete", "leases")], writes
    lists = sorted((e["objectRef"]["resource"], urllib.parse.parse_qs(urllib.parse.urlsplit(
        e["requestURI"]).query).get("labelSelector", [""])[0]) for e in audit if e["verb"] == "list")
    assert len(lists) == len(set(lists)) == 6, lists         # one LIST per kind and purpose
    assert ("configmaps", "!app.kubernetes.io/managed-by") in lists
    # the OS streams singleton, read once; it is there without a status (the MCO's stream policy
    # denies every pool write without it: tests/support/realserver.py), so the ConfigMap's images stand
    streams = [(e["verb"], e["objectRef"].get("name"), e["responseStatus"]["code"]) for e in audit
               if e.get("objectRef", {}).get("resource") == "osimagestreams"]
    assert streams == [("get", "cluster", 200)], streams
    assert "nodes" not in {r for r, _ in lists}                 # every pool's architecture is recorded
    # and what the MCO publishes in its namespace, by name: its images ConfigMap is absent here (404)
    published = sorted((e["objectRef"]["namespace"], e["objectRef"]["name"], e["responseStatus"]["code"])
                       for e in audit if e.get("objectRef", {}).get("resource") == "configmaps" and e["verb"] == "get")
    images = [(F.MCO_NS, "machine-config-operator-images", 404)] if builder == "custom-pod-builder" else []
    assert published == [*images, (F.MCO_NS, "machine-config-osimageurl", 200)], published
    assert all(e["responseStatus"]["code"] < 300 for e in audit
               if e.get("objectRef", {}).get("resource") != "configmaps" or e["verb"] != "get")
    code, out, _ = real.cli("diff")
    assert code == 0, out


@pytest.mark.parametrize("builder", BUILDERS)
def test_failure_is_recorded_and_a_new_config_starts_over(real, builder):
    real.seed(cluster(builder))
    assert real.run()[0] == 0
    real.finish("Failed")
    code, err = real.run()
    assert code == 0, err
    a = real.ann()
    assert a[A.STATE] == A.FAILED and "exit status 1" in a[A.MESSAGE]
    assert len(real.owned()) == 3                  # the failed build's objects stay for debugging
    assert any(e["reason"] == "BuildFailed" and e["type"] == "Warning" for e in real.events())

    real.new_rendered_config("rendered-worker-2")
    code, err = real.run()
    assert code == 0, err
    a = real.ann()
    assert (a[A.STATE], a[A.RENDERED]) == (A.PENDING, "rendered-worker-2")
    assert {o["metadata"]["annotations"]["ocl-reconciler.io/rendered-config"] for o in real.owned()} == {
        "rendered-worker-2"}


@pytest.mark.parametrize("builder", BUILDERS)
def test_new_config_interrupts_a_running_build(real, builder):
    real.seed(cluster(builder))
    assert real.run()[0] == 0
    old = real.build_object()["metadata"]["name"]
    real.finish("Running")
    assert real.run()[0] == 0
    real.new_rendered_config("rendered-worker-2")
    code, err = real.run()
    assert code == 0, err
    a = real.ann()
    assert a[A.STATE] == A.PENDING and f"interrupted {F.BUILD_KINDS[builder]}/{F.NS}/{old}" in a[A.MESSAGE]
    assert old not in [o["metadata"]["name"] for o in real.owned()]


@pytest.mark.parametrize("builder", BUILDERS)
def test_rebuild_token_and_transient_retry(real, builder):
    real.seed(cluster(builder))
    assert real.run()[0] == 0
    real.finish("Succeeded")
    assert real.run()[0] == 0
    assert real.ann()[A.STATE] == A.SUCCEEDED
    real.api.request("PATCH", real.api.path("MachineConfigPool", "", "worker"),
                     {"metadata": {"annotations": {A.REBUILD: "please-1"}}},
                     content_type="application/merge-patch+json")
    code, err = real.run()
    assert code == 0, err
    a = real.ann()
    assert (a[A.STATE], a[A.REBUILD_HANDLED], a[A.ATTEMPT]) == (A.PENDING, "please-1", "1")

    real.finish("Evicted")                         # the node lost it: worth another attempt
    code, err = real.run()
    assert code == 0, err
    a = real.ann()
    assert (a[A.STATE], a[A.ATTEMPT]) == (A.PENDING, "2")
    assert a[A.MESSAGE].startswith("attempt 2 of 3 after: attempt 1:")
    assert len([o for o in real.owned() if o["kind"] in ("Pod", "Build")]) == 1


@pytest.mark.parametrize("builder", BUILDERS)
def test_opt_out_and_pool_deleted(real, builder):
    real.seed(cluster(builder, F.pool(), F.pool("infra")))
    assert real.run()[0] == 0
    assert real.owned("worker") and real.owned("infra")
    pool = real.pool()
    del pool["metadata"]["labels"][A.LAYERING_LABEL]
    real.api.request("PUT", real.api.path("MachineConfigPool", "", "worker"), pool)
    # kube-apiserver collects no garbage (kube-controller-manager would): we delete what we own
    real.api.request("DELETE", real.api.path("MachineConfigPool", "", "infra"))
    code, err = real.run()
    assert code == 0, err
    assert real.owned("worker") == [] and real.owned("infra") == []
    assert not any(A.owned(k) for k in real.ann())
    assert real.ann()["example.com/keep"] == "theirs"


# --- Events ------------------------------------------------------------------------------------

def test_events_are_accepted_and_shown_by_kubectl(real):
    real.seed(cluster("custom-pod-builder"))
    assert real.run()[0] == 0
    real.finish("Failed")
    assert real.run()[0] == 0
    out = real.api.kubectl("get", "events", "-A", "--field-selector", "involvedObject.name=worker",
                           "-o", "json", kubeconfig=real.admin).stdout
    reasons = sorted(e["reason"] for e in json.loads(out)["items"])
    assert reasons == ["BuildFailed", "BuildStarted"]
    described = real.api.kubectl("describe", "mcp", "worker", kubeconfig=real.admin).stdout
    assert "BuildStarted" in described and "BuildFailed" in described, described


def test_an_event_the_server_refuses_never_blocks_the_pool(real, server, monkeypatch):
    """The 422 every run met when Events went to our namespace: logged, counted, pool annotated."""
    monkeypatch.setattr(events, "NAMESPACE", F.NS)
    rbac = "/apis/rbac.authorization.k8s.io/v1/namespaces/" + F.NS
    grant = [("roles", {"metadata": {"name": "test-events"}, "rules": [
        {"apiGroups": [""], "resources": ["events"], "verbs": ["create"]}]}),
        ("rolebindings", {"metadata": {"name": "test-events"}, "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "test-events"},
            "subjects": [{"kind": "ServiceAccount", "name": "ocl-reconciler", "namespace": F.NS}]})]
    for plural, body in grant:          # so that validation, not RBAC, is what refuses
        server.request("POST", f"{rbac}/{plural}", body)
    real.seed(cluster("custom-pod-builder"))
    try:
        code, err = real.run("--metrics-file", str(real.tmp / "m.prom"))
    finally:
        for plural, _ in grant:
            server.request("DELETE", f"{rbac}/{plural}/test-events")
    assert code == 0, err
    assert real.ann()[A.STATE] == A.PENDING
    assert "cannot record Event" in err and "does not match event.namespace" in err, err
    assert 'ocl_errors_total{reason="event"} 1.0' in (real.tmp / "m.prom").read_text()


# --- admission ---------------------------------------------------------------------------------

def test_the_build_pod_needs_our_service_account(real, server):
    """Under the namespace's `default` account, uid 1000 is refused as OpenShift's SCC admission
    refuses it; under ocl-builder (anyuid bound by kustomize/base) it is admitted."""
    real.seed(cluster("custom-pod-builder"))
    assert real.run()[0] == 0
    pod = real.build_object()
    assert pod["spec"]["serviceAccountName"] == "ocl-builder"
    for key in ("uid", "resourceVersion", "creationTimestamp", "managedFields"):
        pod["metadata"].pop(key, None)
    pod["metadata"]["name"] += "-x"
    pod.pop("status", None)
    for sa, expect in (("default", 403), ("ocl-builder", 201)):
        pod["spec"]["serviceAccountName"] = sa
        pod["spec"].pop("serviceAccount", None)
        status, body = server.request("POST", server.path("Pod", F.NS) + "?dryRun=All", pod,
                                      as_user=realserver.RECONCILER, ok=(201, 403))
        assert status == expect, body
        if status == 403:
            assert "unable to validate against any security context constraint" in body["message"]


def test_anyuid_admits_the_build_pod_only_without_a_seccomp_profile(real, server):
    """The build Pod's uid 1000 is admitted only by anyuid, which lists no seccompProfiles and so
    refuses any profile set, RuntimeDefault included (the SCC imitation, from apiserver-library-go's
    seccomp strategy): the Pod as rendered sets none, as the MCO's build Pod sets none."""
    real.seed(cluster("custom-pod-builder"))
    assert real.run()[0] == 0
    pod = real.build_object()
    (container,) = pod["spec"]["containers"]
    assert "seccompProfile" not in container["securityContext"]
    assert "seccompProfile" not in (pod["spec"].get("securityContext") or {})
    for key in ("uid", "resourceVersion", "creationTimestamp", "managedFields"):
        pod["metadata"].pop(key, None)
    pod.pop("status", None)
    for where in ("container", "pod"):
        changed = copy.deepcopy(pod)
        changed["metadata"]["name"] += f"-{where}"
        ctx = (changed["spec"]["containers"][0]["securityContext"] if where == "container"
               else changed["spec"].setdefault("securityContext", {}))
        ctx["seccompProfile"] = {"type": "RuntimeDefault"}
        status, body = server.request("POST", server.path("Pod", F.NS) + "?dryRun=All", changed,
                                      as_user=realserver.RECONCILER, ok=(201, 403))
        assert (status, "seccomp may not be set" in body.get("message", "")) == (403, True), (where, body)


# --- every object we create passes the real server's validation ---------------------------------

def _rich_cluster(builder: str) -> list[dict[str, Any]]:
    """Build inputs, proxy and trust bundle, a MachineConfig split over ConfigMaps, extensions, and a
    pool name of 100 characters."""
    from tests.unit.test_builders import INPUTS
    from tests.unit.test_proxy import proxy_objects
    long_name = ("pool-" + "x" * 100)[:100]
    big = json.loads((F.SHARED / "machineconfigs/generated/mc-incompressible-over-1MiB-after-encoding.json")
                     .read_text())
    big["metadata"] = {"name": "rendered-worker-big"}
    ext = F.machineconfig(f"rendered-{long_name}-1")
    ext["spec"].update(extensions=["usbguard"], kernelType="realtime")
    settings = [F.build_config(imageBuilderType=builder),
                F.osimageurl(baseOSExtensionsContainerImage="quay.io/ocp/extensions@sha256:" + "e" * 64),
                F.secret("pull-secret"), F.secret("push-secret")]
    return [*settings, F.pool(rendered="rendered-worker-big"), F.pool(long_name), big, ext,
            *copy.deepcopy(INPUTS), *proxy_objects()]


@pytest.mark.parametrize("builder", BUILDERS)
def test_every_object_we_render_passes_server_side_dry_run(real, builder):
    items = _rich_cluster(builder)
    real.seed(items)
    code, out, err = real.cli("render")
    assert code == 0, err
    docs = [d for d in yaml.safe_load_all(out) if d]
    kinds = sorted({d["kind"] for d in docs})
    assert kinds == sorted({"ConfigMap", F.BUILD_KINDS[builder]} | ({"Secret"} if "Secret" in kinds else set()))
    assert sum(1 for d in docs if "machineconfig.json.gz.001" in json.dumps(list(d.get("data", {})))) >= 1
    # as the ServiceAccount: validation, defaulting, RBAC and the imitated OpenShift admission
    done = real.api.kubectl("create", "--dry-run=server", "-o", "name", "-f", "-", kubeconfig=real.kubeconfig,
                            check=False, input=out)
    assert done.returncode == 0, done.stderr
    assert len(done.stdout.split()) == len(docs)
    # and `run` creates them for real
    code, err = real.run()
    assert code == 0, err
    assert {A.PENDING} == {real.ann(p["metadata"]["name"])[A.STATE] for p in items
                           if p["kind"] == "MachineConfigPool"}


# --- real concurrency --------------------------------------------------------------------------

def _before_first(monkeypatch, kind: str, meddle) -> list[int]:
    """Run `meddle()` (a foreign write) right before our first PATCH of `kind` is sent."""
    from reconcile.cluster import live
    original, calls = live.LiveCluster.patch, []

    def patch(self, k, namespace, name, ops):
        if k == kind and not calls:
            calls.append(1)
            meddle(namespace, name)
        return original(self, k, namespace, name, ops)
    monkeypatch.setattr(live.LiveCluster, "patch", patch)
    return calls


def test_a_foreign_annotation_on_a_bare_pool_survives_our_guarded_add(real, monkeypatch):
    pool = F.pool()
    del pool["metadata"]["annotations"]
    real.seed(cluster("custom-pod-builder", pool))

    def meddle(namespace, name):
        real.api.request("PATCH", real.api.path("MachineConfigPool", "", name),
                         {"metadata": {"annotations": {"other.io/late": "kept"}}},
                         content_type="application/merge-patch+json")
    calls = _before_first(monkeypatch, "MachineConfigPool", meddle)
    mark = real.api.audit_mark()
    code, err = real.run()
    assert code == 0, err
    assert calls and "re-reading and re-planning" in err
    a = real.ann()
    assert a["other.io/late"] == "kept" and a[A.STATE] == A.PENDING
    codes = [e["responseStatus"]["code"] for e in real.api.audit(mark, realserver.RECONCILER)
             if e["verb"] == "patch" and e["objectRef"]["resource"] == "machineconfigpools"]
    assert codes == [422, 200], codes            # the real answer to a failed `test` op


def test_a_configmap_recreated_between_our_read_and_delete_is_replanned(real, monkeypatch):
    """Ours are immutable: the real server refuses an edit; someone recreated one with other content.
    Metadata says so (its hash), we replace it; recreated again under us, our delete's uid
    precondition gets the real 409, we re-read and re-plan."""
    from reconcile.contract import naming
    real.seed(cluster("custom-pod-builder"))
    assert real.run()[0] == 0
    dockerfile = next(o for o in real.owned() if "Dockerfile" in o.get("data", {}))
    name = dockerfile["metadata"]["name"]
    assert dockerfile["immutable"] is True
    edited = copy.deepcopy(dockerfile)
    edited["data"]["Dockerfile"] = "FROM drift"
    status, body = real.api.request("PUT", real.api.path("ConfigMap", F.NS, name), edited, ok=(422,))
    assert status == 422 and "field is immutable" in body["message"]
    real.api.request("DELETE", real.api.path("ConfigMap", F.NS, name))
    edited["metadata"]["annotations"][naming.CONTENT_HASH] = naming.content_hash(edited)
    real.api.create(edited)
    real.api.request("DELETE", real.api.path("Pod", F.NS, real.build_object()["metadata"]["name"]))
    pool = real.pool()
    pool["metadata"]["annotations"][A.STATE] = A.FAILED        # a build is due again
    pool["metadata"]["annotations"][A.BUILD] = "Pod/x/gone"
    real.api.request("PUT", real.api.path("MachineConfigPool", "", "worker"), pool)
    raced = real.recreate_before_our_first_delete("ConfigMap", monkeypatch)
    mark = real.api.audit_mark()
    code, err = real.run()
    assert code == 0, err
    assert raced and "re-reading and re-planning" in err
    after = real.api.get("ConfigMap", F.NS, name)
    assert after["data"]["Dockerfile"].startswith("# Generated by ocl-reconciler") and after["immutable"] is True
    codes = [e["responseStatus"]["code"] for e in real.api.audit(mark, realserver.RECONCILER)
             if e["verb"] == "delete" and e["objectRef"]["resource"] == "configmaps"]
    assert codes == [409, 200], codes


def test_two_runs_at_once_exactly_one_holds_the_lease(real, monkeypatch):
    """A second process starts while this run holds the Lease: the real server's create answers it
    409, it skips with no writes; this run then reconciles."""
    real.seed(cluster("custom-pod-builder"))
    original, other = lease.acquire, []

    def acquire(*args, **kwargs):
        held = original(*args, **kwargs)
        other.append(subprocess.run(
            [sys.executable, "-m", "reconcile", "run", "--kubeconfig", real.kubeconfig, "--timeout", "30"],
            cwd=F.ROOT, capture_output=True, text=True, timeout=60))
        return held
    monkeypatch.setattr(lease, "acquire", acquire)
    mark = real.api.audit_mark()
    code, err = real.run()
    assert code == 0, err
    (second,) = other
    assert second.returncode == 0 and "another run holds the Lease" in second.stderr, second.stderr
    audit = real.api.audit(mark, realserver.RECONCILER)
    lease_creates = [e["responseStatus"]["code"] for e in audit
                     if e["verb"] == "create" and e["objectRef"]["resource"] == "leases"]
    assert lease_creates == [201, 409], lease_creates
    assert len([e for e in audit if e["verb"] == "create" and e["objectRef"]["resource"] == "pods"]) == 1
    assert real.ann()[A.STATE] == A.PENDING


def test_an_expired_continue_token_restarts_the_list_on_the_real_server(real, monkeypatch):
    """etcd compacted past the first page's revision: the real server answers the continue request
    410 Expired, and the LIST starts again."""
    import time

    from reconcile.cluster import live
    real.seed(cluster("custom-pod-builder", *(F.pool(f"p{i}") for i in range(3))))
    monkeypatch.setattr(live, "PAGE", 1)
    original, waited = live.LiveCluster.request, []

    def request(self, method, path, query=None, body=None, content_type="application/json",
                accept="application/json"):
        if method == "GET" and path.endswith("/machineconfigpools") and any(k == "continue" for k, _ in query or []) \
                and not waited:
            waited.append(1)
            for i in range(4):      # new revisions, then wait for the apiserver's compactor (1 s)
                real.api.request("PATCH", real.api.path("MachineConfigPool", "", "p0"),
                                 {"metadata": {"annotations": {"other.io/tick": str(i)}}},
                                 content_type="application/merge-patch+json")
                time.sleep(1)
        return original(self, method, path, query, body, content_type, accept)
    monkeypatch.setattr(live.LiveCluster, "request", request)
    mark = real.api.audit_mark()
    code, err = real.run()
    assert code == 0, err
    pool_lists = [e for e in real.api.audit(mark, realserver.RECONCILER)
                  if e["verb"] == "list" and e["objectRef"]["resource"] == "machineconfigpools"]
    codes = [e["responseStatus"]["code"] for e in pool_lists]
    assert 410 in codes and codes[-1] == 200, codes
    assert all(real.ann(f"p{i}")[A.STATE] == A.PENDING for i in range(3))


def test_without_the_builder_service_account_the_pool_is_blocked_saying_why(real, server):
    """ServiceAccount admission refuses a Pod whose ServiceAccount does not exist."""
    sa = server.get("ServiceAccount", F.NS, "ocl-builder")
    server.request("DELETE", server.path("ServiceAccount", F.NS, "ocl-builder"))
    try:
        real.seed(cluster("custom-pod-builder"))
        code, err = real.run()
    finally:
        server.create(sa)
    assert code == 2
    a = real.ann()
    assert a[A.STATE] == A.BLOCKED
    assert a[A.MESSAGE].startswith(f"create Pod/{F.NS}/ocl-build-worker-"), a[A.MESSAGE]
    assert "403 Forbidden" in a[A.MESSAGE] and 'serviceaccount "ocl-builder" not found' in a[A.MESSAGE], a[A.MESSAGE]
    (told,) = real.events()
    assert (told["reason"], told["type"], told["message"]) == ("Blocked", "Warning", a[A.MESSAGE])


def test_the_harness_starts_quickly_and_leaves_no_process(tmp_path):
    import os
    api = realserver.RealAPI(tmp_path, realserver.binaries())
    api.start()
    pids = [p.pid for p in api.procs]
    assert len(pids) == 2 and api.request("GET", "/readyz")[0] == 200
    api.stop()
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


def test_a_token_the_server_does_not_accept_is_a_401_we_say(real, server):
    kubeconfig = server.kubeconfig(real.tmp / "bad.kubeconfig", "not-a-token", "nobody")
    real.seed(cluster("custom-pod-builder"))
    real.capsys.readouterr()
    from reconcile import cli as ocl
    code = ocl.main(["run", "--kubeconfig", kubeconfig, "--timeout", "10"])
    err = real.capsys.readouterr().err
    assert code == 3 and "401 Unauthorized" in err, err


def test_a_steady_run_reads_our_configmaps_and_secrets_as_metadata_only(real, monkeypatch):
    from reconcile.cluster import live
    real.seed(cluster("custom-pod-builder"))
    assert real.run()[0] == 0
    sent = []
    original = live.LiveCluster._send

    def send(self, method, path, query, body, content_type, accept="application/json"):
        sent.append((path.rsplit("/", 1)[-1], dict(query).get("labelSelector"), accept))
        status, headers, data = original(self, method, path, query, body, content_type, accept)
        if "PartialObjectMetadataList" in accept:
            assert json.loads(data)["kind"] == "PartialObjectMetadataList"     # the real server's answer
        return status, headers, data
    monkeypatch.setattr(live.LiveCluster, "_send", send)
    assert real.run()[0] == 0
    ours = "app.kubernetes.io/managed-by=ocl-reconciler"
    assert ("configmaps", ours, live.METADATA_ONLY) in sent and ("secrets", ours, live.METADATA_ONLY) in sent
    assert ("configmaps", "!app.kubernetes.io/managed-by", "application/json") in sent


# --- image reuse against the real docker-registry (issue 14) -------------------------------------

@pytest.mark.parametrize("builder", BUILDERS)
def test_a_rollback_reuses_the_image_the_real_registry_still_has(real, builder, tmp_path):
    """A -> B -> A builds twice; after A's manifest is deleted, A builds again; with the registry
    down, a rollback builds and says why. The registry is the real docker-registry (GET of the
    manifest and its config, whose build-id label must be A's, with the push secret's credentials,
    which it does not check), the API server the real one."""
    from tests.support import realbuild as R
    R.require_registry()
    reg = R.Registry(tmp_path)
    try:
        repo = f"{reg.host}/ocl/os-image"
        real.seed(F.cluster(settings=[
            F.build_config(imageBuilderType=builder, finalImagePullspec=f"{repo}:latest"), F.osimageurl(),
            F.secret("pull-secret"), F.secret("push-secret", payload={"auths": {reg.host: {"auth": "dTpw"}}})]))
        built = {}
        for rendered, marker in (("rendered-worker-1", "a"), ("rendered-worker-2", "b")):
            if rendered != "rendered-worker-1":
                real.new_rendered_config(rendered)
            assert real.run()[0] == 0
            build_id = real.build_object()["metadata"]["labels"]["ocl-reconciler.io/build-id"]
            real.finish("Succeeded", digest=R.push_image(reg, "ocl/os-image", marker, {naming.BUILD_ID_LABEL: build_id}))
            assert real.run()[0] == 0
            built[rendered] = (build_id, real.ann()[A.IMAGE])

        # back to A: the registry has it, nothing is built
        mark = real.api.audit_mark()
        real.switch_config("rendered-worker-1")
        code, err = real.run()
        assert code == 0, err
        id_a, image_a = built["rendered-worker-1"]
        a = real.ann()
        assert (a[A.STATE], a[A.IMAGE], a[A.MESSAGE]) == (A.SUCCEEDED, image_a, f"reused {image_a} of build {id_a}")
        creates = [e["objectRef"]["resource"] for e in real.api.audit(mark, realserver.RECONCILER)
                   if e["verb"] == "create"]
        assert "pods" not in creates and "builds" not in creates and "configmaps" not in creates, creates
        assert real.owned() == []
        assert [e["reason"] for e in real.events()].count("BuildReused") == 1

        # A's manifest deleted: going B (reused) then A builds A again, saying why
        R.delete_manifest(reg, "ocl/os-image", image_a.split("@")[1])
        real.switch_config("rendered-worker-2")
        assert real.run()[0] == 0
        assert real.ann()[A.MESSAGE] == f"reused {built['rendered-worker-2'][1]} of build {built['rendered-worker-2'][0]}"
        real.switch_config("rendered-worker-1")
        assert real.run()[0] == 0
        a = real.ann()
        assert a[A.STATE] == A.PENDING and a[A.MESSAGE] == f"building again: {image_a} is gone from the registry"
        assert real.build_object()["metadata"]["labels"]["ocl-reconciler.io/build-id"] == id_a
        real.finish("Succeeded", digest=R.push_image(reg, "ocl/os-image", "a2"))
        assert real.run()[0] == 0 and real.ann()[A.STATE] == A.SUCCEEDED
    finally:
        reg.stop()

    # the registry is down: a rollback to B builds, and says it could not ask
    real.switch_config("rendered-worker-2")
    code, err = real.run()
    assert code == 0, err
    a = real.ann()
    image_b = built["rendered-worker-2"][1]
    assert a[A.STATE] == A.PENDING
    assert a[A.MESSAGE].startswith(f"building again: could not ask the registry for {image_b}: "), a[A.MESSAGE]
    assert real.build_object()["metadata"]["labels"]["ocl-reconciler.io/build-id"] == built["rendered-worker-2"][0]



def test_the_harness_reconnects_after_the_server_closes_an_idle_connection(server):
    """kube-apiserver closes a keep-alive connection idle for 90 s (k8s.io/apiserver
    pkg/server/secure_serving.go, `IdleTimeout: 90 * time.Second`). The thread that held it may
    see the close as an SSL EOF on its next write (once, in a shuffled make test, at the setup of a
    module after the Lease test's minute of waiting): it must open another connection, as for a
    RemoteDisconnected, not fail. The close is played on the kept connection: its timing cannot be."""
    server.request("GET", "/api/v1/namespaces/default")

    class ClosedByTheServer:
        def request(self, *args: Any, **kwargs: Any) -> None:
            raise ssl.SSLEOFError(8, "EOF occurred in violation of protocol (_ssl.c:2427)")

        def close(self) -> None:
            pass

    server._conns.conn = ClosedByTheServer()
    status, body = server.request("GET", "/api/v1/namespaces/default")
    assert status == 200 and body["metadata"]["name"] == "default"
