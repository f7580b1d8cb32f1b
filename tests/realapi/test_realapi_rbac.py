"""Least privilege, proven by the real RBAC authorizer: the Roles and the ClusterRole that
`kubectl kustomize kustomize/base` renders are installed on the real kube-apiserver, the reconciler
runs as its ServiceAccount with a TokenRequest token, and every scenario passes; then each verb of
each rule is removed in turn, and a scenario must fail with the server's 403, reported by us.
(tests/standin/test_rbac.py proves the same faster against the stand-in, with what only it can inject.)
The server serves openshift/api's ClusterImagePolicy CRD for this module only (a scenario lists them)."""

from __future__ import annotations

import base64
import copy
import json
from datetime import timedelta
from typing import Any

import pytest

from reconcile.cluster import lease, live
from reconcile.contract import annotations as A
from reconcile.contract import naming
from tests.realapi.test_realapi_image_policy import patched
from tests.support import factory as F
from tests.support import realserver
from tests.unit.test_builders import dockercfg_secret, labelled
from tests.unit.test_proxy import proxy_objects
from tests.unit.test_signing_plan import PUB_OLD

pytestmark = pytest.mark.realapi
RBAC = "/apis/rbac.authorization.k8s.io/v1"


def settings(builder: str) -> list[dict[str, Any]]:
    """A legacy pull secret (converted into a Secret of ours) and a labelled build input."""
    return [F.build_config(imageBuilderType=builder), F.osimageurl(),
            dockercfg_secret("pull-secret", {"quay.io": {"auth": "eDp5"}}), F.secret("push-secret"),
            labelled("Secret", "proxy", "proxy", {"https_proxy": "http://p:3128"})]


def lifecycle(builder):
    """Opt in (with the cluster Proxy and its trust bundle), the build runs, succeeds, is told."""
    def scenario(real) -> bool:
        real.seed(F.cluster(settings=settings(builder), extra=proxy_objects()))
        codes = [real.run()[0]]
        for phase in ("Running", "Succeeded"):
            real.finish(phase)
            codes.append(real.run()[0])
        told = sorted(e["reason"] for e in real.events())
        return codes == [0, 0, 0] and real.ann().get(A.STATE) == A.SUCCEEDED and told == [
            "BuildRunning", "BuildStarted", "BuildSucceeded"]
    return scenario


def adoption(builder):
    """Each create's response is lost once (the server made the object): the retry meets 409 and
    adopts it."""
    def scenario(real) -> bool:
        real.seed(F.cluster(settings=settings(builder)))
        original, lost = live.LiveCluster.create, set()

        def create(self, obj):
            if obj["kind"] in ("ConfigMap", "Secret", "Pod", "Build") and obj["kind"] not in lost:
                lost.add(obj["kind"])
                original(self, obj)                # made, but its answer never arrived
            return original(self, obj)
        with pytest.MonkeyPatch.context() as patched:
            patched.setattr(live.LiveCluster, "create", create)
            code, _ = real.run()
        return code == 0 and real.ann().get(A.STATE) == A.PENDING
    return scenario


def waiting(real) -> bool:
    """run --wait: the build is followed from watch events (our Pods and Builds, the pools) and its
    success recorded in the same run, while a thread plays the kubelet."""
    import threading

    import kubelet  # examples/kubelet.py
    real.seed(F.cluster(settings=settings("custom-pod-builder")))
    stop = threading.Event()

    def kubelet_plays():
        while not stop.wait(0.2):
            for pod in real.api.list("Pod", F.NS):
                if (pod.get("status") or {}).get("phase") in (None, "Pending"):
                    real.api.write_status(kubelet.set_phase(pod, "Succeeded"))
    thread = threading.Thread(target=kubelet_plays, daemon=True)
    thread.start()
    try:
        code, _ = real.run("--wait", "20")
    finally:
        stop.set()
        thread.join()
    return code == 0 and real.ann().get(A.STATE) == A.SUCCEEDED


def lease_takeover(real) -> bool:
    stale = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
             "metadata": {"name": lease.NAME, "namespace": F.NS},
             "spec": {"holderIdentity": "crashed", "leaseDurationSeconds": 60,
                      "renewTime": (F.NOW - timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")}}
    real.seed(F.cluster(extra=[stale]))
    code, _ = real.run()
    return code == 0 and real.api.get("Lease", F.NS, lease.NAME) is None


def drift_and_conflict(real) -> bool:
    """A killed run left objects of ours that someone since recreated with other content; one is
    recreated again between our read and our delete (the real 409 of a uid precondition)."""
    real.seed(F.cluster(settings=settings("custom-pod-builder")))
    if real.run()[0] != 0:
        return False
    pool = real.pool()
    pool["metadata"]["annotations"] = {"example.com/keep": "theirs"}
    real.api.request("PUT", real.api.path("MachineConfigPool", "", "worker"), pool)
    for obj in real.owned():
        name = obj["metadata"]["name"]
        real.api.request("DELETE", real.api.path(obj["kind"], F.NS, name))
        if obj["kind"] == "Pod":
            continue
        key = "Dockerfile" if "Dockerfile" in obj.get("data", {}) else ".dockerconfigjson"
        if key in obj.get("data", {}):
            obj["data"][key] = base64.b64encode(b'{"auths": {}}').decode() if obj["kind"] == "Secret" \
                else "FROM drift"
            obj["metadata"]["annotations"][naming.CONTENT_HASH] = naming.content_hash(obj)
        real.api.create(obj)
    mark = real.api.audit_mark()
    with pytest.MonkeyPatch.context() as patched:
        real.recreate_before_our_first_delete("ConfigMap", patched)
        code, _ = real.run()
    audit = real.api.audit(mark, realserver.RECONCILER)
    deleted = {e["objectRef"]["resource"] for e in audit if e["verb"] == "delete"
               and e["responseStatus"]["code"] == 200}
    conflicts = [e for e in audit if e["verb"] == "delete" and e["responseStatus"]["code"] == 409]
    return code == 0 and {"configmaps", "secrets"} <= deleted and len(conflicts) == 1


def pruning(real) -> bool:
    """An old image is still used by a node: listed, kept, nothing deleted."""
    old = F.REPO + "@sha256:" + "1" * 64
    new = F.REPO + "@sha256:" + "2" * 64
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1", "annotations": {
        "machineconfiguration.openshift.io/currentImage": old}}}
    real.seed(F.cluster(F.pool(annotations={A.IMAGES: f"{new} {old}", A.IMAGE: new}), extra=[node]))
    code, _ = real.run("--keep-images", "1")
    return code == 0 and real.ann().get(A.IMAGES) == f"{new} {old}"


def global_pull_secret(real) -> bool:
    """No baseImagePullSecretName: openshift-config/pull-secret (RBAC by resourceNames) is copied."""
    from tests.unit.test_blocked import global_pull_secret as the_secret
    settings_ = [F.build_config(baseImagePullSecretName=None), F.osimageurl(), F.secret("push-secret")]
    real.seed(F.cluster(settings=settings_, extra=[the_secret()]))
    code, _ = real.run()
    return code == 0 and real.ann().get(A.STATE) == A.PENDING


def build_storage(real) -> bool:
    """buildStorage: persistent: the default StorageClass listed, the pool's volume made (its
    create's response lost once: adopted), kept after the success, deleted once the setting is off."""
    from tests.unit.test_storage import GP3
    real.seed(F.cluster(extra=[GP3], settings=[F.build_config(buildStorage="persistent"), F.osimageurl(),
                                               F.secret("pull-secret"), F.secret("push-secret")]))
    original, lost = live.LiveCluster.create, []

    def create(self, obj):
        if obj["kind"] == "PersistentVolumeClaim" and not lost:
            lost.append(original(self, obj))            # made, but its answer never arrived
        return original(self, obj)
    with pytest.MonkeyPatch.context() as patched:
        patched.setattr(live.LiveCluster, "create", create)
        codes = [real.run()[0]]
    made = [o["metadata"]["uid"] for o in real.owned() if o["kind"] == "PersistentVolumeClaim"]
    real.finish("Succeeded")
    codes.append(real.run()[0])
    kept = [o["metadata"]["uid"] for o in real.owned() if o["kind"] == "PersistentVolumeClaim"]
    config = real.api.get("ConfigMap", F.NS, "on-cluster-build-config")
    config["data"]["buildStorage"] = "emptyDir"
    real.api.request("PUT", real.api.path("ConfigMap", F.NS, "on-cluster-build-config"), config)
    codes.append(real.run()[0])
    gone = [o for o in real.owned() if o["kind"] == "PersistentVolumeClaim"
            and not o["metadata"].get("deletionTimestamp")]         # its finalizer keeps it Terminating
    return codes == [0, 0, 0] and len(made) == 1 and kept == made and not gone and bool(lost)


def signing_off_under_policy(real) -> bool:
    """Signing turned off while a pool records a signed image and a ClusterImagePolicy covers our
    repository (the LIST of ClusterImagePolicies): every pool is Blocked, naming the policy. The
    policy is kustomize/components/image-policy's, patched as docs/signing.md has it, and admitted by
    openshift/api's CRD."""
    image = f"{F.REPO}@sha256:" + "1" * 64
    pool = F.pool(annotations={A.STATE: A.SUCCEEDED, A.IMAGE: image, A.SIGNED: f"{image}=sha256:" + "2" * 64})
    real.seed(F.cluster(pool, extra=[patched(F.REPO, PUB_OLD)]))
    code, _ = real.run()
    a = real.ann()
    return code == 2 and a.get(A.STATE) == A.BLOCKED and \
        "ClusterImagePolicy ocl-reconciler-images requires" in a.get(A.MESSAGE, "")


SCENARIOS = {"lifecycle-pod": lifecycle("custom-pod-builder"), "global-pull-secret": global_pull_secret,
             "build-storage": build_storage,
             "lifecycle-build": lifecycle("openshift-image-builder"),
             "drift-and-conflict": drift_and_conflict, "lease-takeover": lease_takeover,
             "adoption-pod": adoption("custom-pod-builder"),
             "adoption-build": adoption("openshift-image-builder"), "pruning": pruning,
             "signing-off-under-policy": signing_off_under_policy, "waiting": waiting}


@pytest.fixture(scope="module")
def image_policies(server):
    """openshift/api's ClusterImagePolicy CRD, served for this module only (realserver.UNSERVED),
    so that the LIST a scenario needs gets the server's own answer, 403 included."""
    with server.serving(realserver.mco_src_crds((realserver.IMAGE_POLICY_CRD,))):
        yield


def roles(server) -> dict[tuple[str, str], dict[str, Any]]:
    """(namespace or "", name) -> the installed Role or ClusterRole of ours."""
    out = {}
    for ns in (F.NS, F.MCO_NS, "openshift-config", "default"):
        for role in server.request("GET", f"{RBAC}/namespaces/{ns}/roles")[1]["items"]:
            if role["metadata"]["name"].startswith("ocl-reconciler"):
                out[(ns, role["metadata"]["name"])] = role
    out[("", "ocl-reconciler")] = server.request("GET", f"{RBAC}/clusterroles/ocl-reconciler")[1]
    return out


def _role_path(ns: str, name: str) -> str:
    return f"{RBAC}/namespaces/{ns}/roles/{name}" if ns else f"{RBAC}/clusterroles/{name}"


def _allowed(server, ns: str, resource: str, verb: str, group: str, name: str = "") -> bool:
    res, _, sub = resource.partition("/")
    review = {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": {
        "user": realserver.RECONCILER,
        "groups": ["system:serviceaccounts", f"system:serviceaccounts:{F.NS}", "system:authenticated"],
        "resourceAttributes": {"namespace": ns, "verb": verb, "group": group, "resource": res,
                               "subresource": sub, "name": name}}}
    return server.request("POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews", review)[1][
        "status"].get("allowed", False)


def _put_rules(server, key, rules, wait_for: tuple[str, str, str, str, str, bool] | None = None) -> None:
    import time
    role = copy.deepcopy(server.request("GET", _role_path(*key))[1])
    role["rules"] = rules
    server.request("PUT", _role_path(*key), role)
    deadline = time.monotonic() + 10
    while wait_for and _allowed(server, *wait_for[:5]) != wait_for[5]:      # the authorizer's cache
        assert time.monotonic() < deadline, f"RBAC change not seen: {wait_for}"
        time.sleep(0.05)


def removals():
    for (ns, name), rules in _rendered().items():
        for index, rule in enumerate(rules):
            for verb in rule["verbs"]:
                yield pytest.param(ns, name, index, verb,
                                   id=f"{ns or 'cluster'}-{rule['resources'][0]}-{verb}")


def _rendered() -> dict[tuple[str, str], list[dict[str, Any]]]:
    """The rules kustomize/base renders (the source of truth the server was given)."""
    import yaml
    kubectl = realserver.kubectl_binary()
    if kubectl is None:
        return {}
    out = realserver.kustomize(F.ROOT / "kustomize/base", kubectl)
    return {(d["metadata"].get("namespace", "") if d["kind"] == "Role" else "", d["metadata"]["name"]): d["rules"]
            for d in yaml.safe_load_all(out) if d and d["kind"] in ("Role", "ClusterRole")}


#: {scenario: the reconciler's requests, as the audit log has them}, filled once per worker by
#: the first test of this module that needs it (`_needs`)
_NEEDS: dict[str, list[dict[str, Any]]] = {}


def _needs(real, server) -> dict[str, list[dict[str, Any]]]:
    """Every scenario passes with the rendered rules; what each asked of the server is noted."""
    if not _NEEDS:
        for name, scenario in SCENARIOS.items():
            server.reset()
            mark = server.audit_mark()
            assert scenario(real), name
            _NEEDS[name] = [e["objectRef"] | {"verb": e["verb"]} for e in server.audit(mark, realserver.RECONCILER)
                            if e.get("objectRef")]
    return _NEEDS


def _asks(requests: list[dict[str, Any]], ns: str, rule: dict[str, Any], verb: str) -> bool:
    """Whether one of these requests is one the rule's verb allowed (RBAC's matching, read from
    kubernetes/kubernetes plugin/pkg/auth/authorizer/rbac/rbac.go RuleAllows: group, resource with
    its subresource, verb, resourceNames; a Role's only in its namespace)."""
    return any(r["verb"] == verb and r.get("apiGroup", "") in rule["apiGroups"]
               and "/".join(filter(None, (r.get("resource"), r.get("subresource")))) in rule["resources"]
               and (not ns or r.get("namespace") == ns)
               and (not rule.get("resourceNames") or r.get("name") in rule["resourceNames"]) for r in requests)


def test_every_scenario_passes_with_the_rendered_rules(real, server, image_policies):
    assert {k: r["rules"] for k, r in roles(server).items()} == _rendered()
    _NEEDS.clear()
    assert set(_needs(real, server)) == set(SCENARIOS)


@pytest.mark.parametrize("ns, name, index, verb", list(removals()))
def test_removing_any_verb_breaks_a_scenario_with_the_servers_403(real, server, image_policies, ns, name, index,
                                                                  verb):
    rules = _rendered()[(ns, name)]
    rule = rules[index]
    resource, group = rule["resources"][0], rule["apiGroups"][0]
    narrowed = copy.deepcopy(rules)
    narrowed[index]["verbs"] = [v for v in rule["verbs"] if v != verb]
    narrowed = [r for r in narrowed if r["verbs"]]          # a rule needs at least one verb
    where = ns or F.NS
    named = (rule.get("resourceNames") or [""])[0]
    needs = _needs(real, server)
    _put_rules(server, (ns, name), narrowed, (where, resource, verb, group, named, False))
    try:
        broken = []
        # those that made a request the removed verb allowed first (the first that breaks ends it)
        for scenario_name in sorted(SCENARIOS, key=lambda n: not _asks(needs[n], ns, rule, verb)):
            scenario = SCENARIOS[scenario_name]
            server.reset()
            real.stderr.clear()
            try:
                ok = scenario(real)
            except AssertionError:          # e.g. no build object to finish: the scenario broke
                ok = False
            err = "".join(real.stderr)
            if not ok:
                broken.append(scenario_name)
                said = f'cannot {verb} resource \\"{resource}\\"' in err or \
                    f'cannot {verb} resource "{resource}"' in err or \
                    (resource == "builds/optimizeddocker" and "build strategy Docker is not allowed" in err)
                assert said and "403 Forbidden" in err, (scenario_name, err[-800:])
                break
        assert broken, f"no scenario needs {verb} on {resource}: the rule is wider than the code"
    finally:
        _put_rules(server, (ns, name), rules, (where, resource, verb, group, named, True))
        server.reset()


def test_the_rendered_rules_name_build_subresources_explicitly():
    """`create` on builds/optimizeddocker, which OpenShift's build admission checks for our
    Docker-strategy Build with imageOptimizationPolicy SkipLayers."""
    rules = _rendered()[(F.NS, "ocl-reconciler")]
    assert {"apiGroups": ["build.openshift.io"], "resources": ["builds/optimizeddocker"],
            "verbs": ["create"]} in rules
    assert json.dumps(rules).count("events") == 0        # Events go to `default` (events.yaml)


def test_base_alone_lists_no_machineconfigs_and_status_still_answers(real, server):
    """kustomize/base grants `get` on MachineConfigs, no `list` (the rollout Component adds it): with
    `rollout: annotation` a run lists none, and status, which tries (our MachineConfigs, then every
    one's metadata for strays), gets the server's 403 once, shows the table and says no stray."""
    from reconcile.core import rollout
    real.seed(F.cluster())
    real.api.create({"apiVersion": f"{F.MCO}/v1", "kind": "MachineConfig",
                     "metadata": {"name": rollout.name("master"), "labels": rollout.labels("master")},
                     "spec": {"osImageURL": F.REPO + "@sha256:" + "1" * 64}})
    assert not _allowed(server, "", "machineconfigs", "list", F.MCO)
    mark = real.api.audit_mark()
    code, err = real.run()
    assert code == 0, err
    code, out, err = real.cli("status")
    assert code == 0 and out.startswith("POOL ") and "stray" not in err, err
    lists = [(e["responseStatus"]["code"], e["requestURI"].split("?")[0]) for e in real.api.audit(mark, realserver.RECONCILER)
             if e["verb"] == "list" and e["objectRef"]["resource"] == "machineconfigs"]
    assert lists == [(403, f"/apis/{F.MCO}/v1/machineconfigs")]          # status's first, and no more


def test_a_role_from_before_build_storage_fails_no_run_with_the_default(real, server):
    """The image upgraded before the Role (an Argo CD sync that has not reached the RBAC yet): with
    `buildStorage` unset a run lists our PersistentVolumeClaims, and the server answers 403. That
    is no failed run: builds use an emptyDir and the pool says why, once."""
    from tests.unit.test_storage import GP3
    key = next(k for k, rules in _rendered().items() if k[0] and any(
        "persistentvolumeclaims" in r["resources"] for r in rules))
    rules = _rendered()[key]
    older = [r for r in rules if "persistentvolumeclaims" not in r["resources"]]
    _put_rules(server, key, older, (key[0], "persistentvolumeclaims", "list", "", "", False))
    try:
        real.seed(F.cluster(extra=[GP3], settings=[F.build_config(buildStorage=None), F.osimageurl(),
                                                   F.secret("pull-secret"), F.secret("push-secret")]))
        code, err = real.run()
        assert code == 0, err
        assert not [v for v in real.build_object()["spec"]["volumes"] if "persistentVolumeClaim" in v]
        assert real.ann()[A.BUILD_STORAGE].startswith(
            f"emptyDir: cannot list PersistentVolumeClaims in {F.NS}: ")
        assert "re-apply your overlay" in real.ann()[A.BUILD_STORAGE]
        real.finish("Running")
        code, err = real.run()                                  # converged: still no failure
        assert code == 0, err
    finally:
        _put_rules(server, key, rules, (key[0], "persistentvolumeclaims", "list", "", "", True))
        server.reset()
