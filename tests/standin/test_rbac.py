"""Least privilege, proven: the test API server authorises every request against the Role and
ClusterRole that `kubectl kustomize kustomize/base` renders. The lifecycle of both builders (with
adoption, conflicts, Lease takeover, converted auth and build inputs) passes with those rules, and
removing any single verb from any rule makes a scenario fail with a clear 403."""

from __future__ import annotations

import copy
import dataclasses
import functools
import shutil
import subprocess
from datetime import timedelta

import kubelet
import pytest
import yaml

from reconcile import cli
from reconcile.cluster import lease
from reconcile.contract import annotations as A
from reconcile.contract import naming
from tests.support import factory as F
from tests.support.apiserver import APIServer, Fault, Request, builds_succeed
from tests.unit.test_builders import dockercfg_secret, labelled

KUBECTL = shutil.which("kubectl")
pytestmark = pytest.mark.skipif(KUBECTL is None, reason="kubectl is not on the PATH (needed to render "
                                                         "kustomize/base)")
USER = f"system:serviceaccount:{F.NS}:ocl-reconciler"


def rendered_rules():
    """{scope: rules}: scope is a Role's namespace, or "" for the ClusterRole (a copy each call)."""
    return copy.deepcopy(_rendered_rules())


@functools.cache
def _rendered_rules():
    out = subprocess.run([KUBECTL, "kustomize", str(F.ROOT / "kustomize/base")], capture_output=True,
                         text=True, check=True).stdout
    docs = [d for d in yaml.safe_load_all(out) if d and d["kind"] in ("Role", "ClusterRole")]
    return {d["metadata"].get("namespace", "") if d["kind"] == "Role" else "": d["rules"] for d in docs}


def authorizer(rules_by_scope):
    def allows(rules, req: Request) -> bool:
        # resourceNames, as RBAC reads them: only requests naming one of them (never a list)
        return any(req.group in r["apiGroups"] and req.resource in r["resources"] and req.verb in r["verbs"]
                   and (not r.get("resourceNames") or req.name in r["resourceNames"]) for r in rules)

    def authorize(req: Request):
        checks = [req]
        if req.verb == "create" and req.group == "build.openshift.io" and req.resource == "builds":
            # OpenShift's build admission also checks create on the strategy's subresource; ours is
            # a Docker strategy with imageOptimizationPolicy SkipLayers (openshift/openshift-apiserver
            # pkg/build/apiserver/admission/strategyrestrictions/admission.go, resourceForStrategyType)
            checks.append(dataclasses.replace(req, resource="builds/optimizeddocker"))
        for check in checks:
            if not (allows(rules_by_scope.get("", []), check) or (
                    check.namespace and allows(rules_by_scope.get(check.namespace, []), check))):
                where = f'in the namespace "{check.namespace}"' if check.namespace else "at the cluster scope"
                what = f'{check.resource}.{check.group}' if check.group else check.resource
                return (f'{what} "{check.name}" is forbidden: User "{USER}" cannot {check.verb} resource '
                        f'"{check.resource}" in API group "{check.group}" {where}')
        return None
    return authorize


def run(items, authorize, tmp_path, faults=(), extra=()):
    with APIServer(items, authorize=authorize, clock=lambda: F.NOW) as server:
        server.faults.extend(copy.deepcopy(list(faults)))
        code = cli.main(["run", "--kubeconfig", server.kubeconfig(tmp_path / "kc"), "--timeout", "10", *extra])
        return code, server.items()


def phase(items, name):
    items = copy.deepcopy(items)
    for obj in items:
        if obj["kind"] in ("Pod", "Build"):
            kubelet.set_phase(obj, name)
    return items


def lifecycle(builder):
    """Opt in (legacy pull secret converted, a labelled build input), build runs, succeeds."""
    def scenario(authorize, tmp_path):
        settings = [F.build_config(imageBuilderType=builder), F.osimageurl(),
                    dockercfg_secret("pull-secret", {"quay.io": {"auth": "eDp5"}}), F.secret("push-secret"),
                    labelled("Secret", "proxy", "proxy", {"https_proxy": "http://p:3128"})]
        codes, items = [], F.cluster(settings=settings)
        for step in (None, "Running", "Succeeded"):
            code, items = run(phase(items, step) if step else items, authorize, tmp_path)
            codes.append(code)
        told = sorted(o["reason"] for o in items if o["kind"] == "Event")     # Events are best effort
        return codes == [0, 0, 0] and F.the_pool(items)["metadata"]["annotations"][A.STATE] == A.SUCCEEDED \
            and told == ["BuildRunning", "BuildStarted", "BuildSucceeded"]
    return scenario


def adoption(builder):
    """Every create's response is lost once: the retry finds the object and adopts it."""
    def scenario(authorize, tmp_path):
        settings = [F.build_config(imageBuilderType=builder), F.osimageurl(),
                    dockercfg_secret("pull-secret", {"quay.io": {"auth": "eDp5"}}), F.secret("push-secret")]
        faults = [Fault("drop-response", match=lambda v, r, ns, n, res=res: v == "create" and r == res)
                  for res in ("configmaps", "secrets", "pods", "builds")]
        code, items = run(F.cluster(settings=settings), authorize, tmp_path, faults)
        return code == 0 and F.the_pool(items)["metadata"]["annotations"][A.STATE] == A.PENDING
    return scenario


def waiting(authorize, tmp_path):
    """run --wait: the build is followed from watch events (our Pods and Builds, the pools) and its
    success recorded in the same run, while a thread plays the kubelet on the server."""
    settings = [F.build_config(), F.osimageurl(), dockercfg_secret("pull-secret", {"quay.io": {"auth": "eDp5"}}),
                F.secret("push-secret")]
    with APIServer(F.cluster(settings=settings), authorize=authorize, clock=lambda: F.NOW) as server:
        with builds_succeed(server):
            code = cli.main(["run", "--kubeconfig", server.kubeconfig(tmp_path / "kc"), "--timeout", "10",
                             "--wait", "20"])
        items = server.items()
    return code == 0 and F.the_pool(items)["metadata"]["annotations"][A.STATE] == A.SUCCEEDED


def lease_takeover(authorize, tmp_path):
    stale = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
             "metadata": {"name": lease.NAME, "namespace": F.NS, "uid": "old", "resourceVersion": "5"},
             "spec": {"holderIdentity": "crashed", "leaseDurationSeconds": 60,
                      "renewTime": (F.NOW - timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")}}
    code, items = run(F.cluster(extra=[stale]), authorize, tmp_path)
    return code == 0 and not any(o["kind"] == "Lease" for o in items)


def drift_and_conflict(authorize, tmp_path):
    """A killed run left objects of ours that someone since recreated with other content (an
    immutable object cannot be edited); one is recreated again while we replace it."""
    settings = [F.build_config(), F.osimageurl(),
                dockercfg_secret("pull-secret", {"quay.io": {"auth": "eDp5"}}), F.secret("push-secret")]
    code, items = run(F.cluster(settings=settings), authorize, tmp_path)
    if code != 0:
        return False
    items = [o for o in items if o["kind"] not in ("Pod", "Event")]
    F.the_pool(items)["metadata"]["annotations"] = {"example.com/keep": "theirs"}
    for obj in F.owned(items):
        obj["data"] = {k: "ZHJpZnQ=" for k in obj["data"]} if obj["kind"] == "Secret" else \
            dict(obj["data"], Dockerfile="FROM drift") if "Dockerfile" in obj["data"] else obj["data"]
        obj["metadata"]["annotations"][naming.CONTENT_HASH] = naming.content_hash(obj)

    def race(verb, resource, ns, name):
        if verb == "delete" and resource == "configmaps" and not race.done:
            race.done = True                   # recreated under us: our uid precondition fails
            race.server.store.store[("ConfigMap", ns, name)]["metadata"]["uid"] = "someone-elses"
        return False
    race.done = False
    with APIServer(items, authorize=authorize, clock=lambda: F.NOW) as server:
        race.server = server
        server.faults.append(Fault("status", match=race, times=0))
        code = cli.main(["run", "--kubeconfig", server.kubeconfig(tmp_path / "kc"), "--timeout", "10"])
        replaced = {r.resource for r in server.log if r.verb == "delete"} & \
            {r.resource for r in server.log if r.verb == "create"}
        return code == 0 and race.done and {"configmaps", "secrets"} <= replaced


def cluster_proxy(authorize, tmp_path):
    proxy_obj = {"apiVersion": "config.openshift.io/v1", "kind": "Proxy", "metadata": {"name": "cluster"},
                 "spec": {"trustedCA": {"name": "user-ca-bundle"}},
                 "status": {"httpsProxy": "http://proxy.example.com:3128"}}
    bundle = {"apiVersion": "v1", "kind": "ConfigMap",
              "metadata": {"name": "user-ca-bundle", "namespace": "openshift-config"},
              "data": {"ca-bundle.crt": "-----BEGIN CERTIFICATE-----\n"}}
    code, items = run(F.cluster(extra=[proxy_obj, bundle]), authorize, tmp_path)
    return code == 0 and any(o["kind"] == "ConfigMap" and "ca.crt" in o.get("data", {}) for o in items)


def pruning(authorize, tmp_path):
    """An old image is still used by a node: listed, kept, nothing deleted."""
    old = "registry.example.com:5000/ocl/os-image@sha256:" + "1" * 64
    new = "registry.example.com:5000/ocl/os-image@sha256:" + "2" * 64
    pool = F.pool(annotations={A.IMAGES: f"{new} {old}", A.IMAGE: new})
    # keep 1: the old one is a candidate, and the node protects it
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1", "annotations": {
        "machineconfiguration.openshift.io/currentImage": old}}}
    code, items = run(F.cluster(pool, extra=[node]), authorize, tmp_path, extra=["--keep-images", "1"])
    return code == 0 and F.the_pool(items)["metadata"]["annotations"][A.IMAGES] == f"{new} {old}"


def global_pull_secret(authorize, tmp_path):
    """No baseImagePullSecretName: openshift-config/pull-secret is read and copied."""
    from tests.unit.test_blocked import global_pull_secret as the_secret
    settings = [F.build_config(baseImagePullSecretName=None), F.osimageurl(), F.secret("push-secret")]
    code, items = run(F.cluster(settings=settings, extra=[the_secret()]), authorize, tmp_path)
    return code == 0 and F.the_pool(items)["metadata"]["annotations"][A.STATE] == A.PENDING


def build_storage(authorize, tmp_path):
    """buildStorage: persistent: the default StorageClass listed, the pool's volume made (its
    create's response lost once: adopted), kept after the success, deleted once the setting is off."""
    from tests.unit.test_storage import GP3
    settings = [F.build_config(buildStorage="persistent"), F.osimageurl(), F.secret("pull-secret"),
                F.secret("push-secret")]
    lost = Fault("drop-response", match=lambda v, r, ns, n: v == "create" and r == "persistentvolumeclaims")
    code, items = run(F.cluster(settings=settings, extra=[GP3]), authorize, tmp_path, [lost])
    made = [o for o in items if o["kind"] == "PersistentVolumeClaim"]
    code2, items = run(phase(items, "Succeeded"), authorize, tmp_path)
    kept = [o for o in items if o["kind"] == "PersistentVolumeClaim"]
    next(o for o in items if o["metadata"]["name"] == "on-cluster-build-config")["data"]["buildStorage"] = "emptyDir"
    code3, items = run(items, authorize, tmp_path)
    return (code, code2, code3) == (0, 0, 0) and len(made) == 1 and kept == made and \
        not [o for o in items if o["kind"] == "PersistentVolumeClaim"]


def signing_off_under_policy(authorize, tmp_path):
    """Signing turned off while a pool records a signed image and a ClusterImagePolicy covers our
    repository (the LIST of ClusterImagePolicies): every pool is Blocked, naming the policy."""
    image = f"{F.REPO}@sha256:" + "1" * 64
    pool = F.pool(annotations={A.STATE: A.SUCCEEDED, A.IMAGE: image, A.SIGNED: f"{image}=sha256:" + "2" * 64})
    policy = {"apiVersion": "config.openshift.io/v1", "kind": "ClusterImagePolicy",
              "metadata": {"name": "ocl-reconciler-images"},
              "spec": {"scopes": [F.REPO], "policy": {"rootOfTrust": {"policyType": "PublicKey"}}}}
    code, items = run(F.cluster(pool, extra=[policy]), authorize, tmp_path)
    a = F.the_pool(items)["metadata"]["annotations"]
    return code == 2 and a[A.STATE] == A.BLOCKED and "ClusterImagePolicy ocl-reconciler-images requires" in a[A.MESSAGE]


SCENARIOS = {"lifecycle-pod": lifecycle("custom-pod-builder"), "cluster-proxy": cluster_proxy,
             "build-storage": build_storage,
             "global-pull-secret": global_pull_secret,
             "pruning": pruning,
             "lifecycle-build": lifecycle("openshift-image-builder"),
             "adoption-pod": adoption("custom-pod-builder"), "adoption-build": adoption("openshift-image-builder"),
             "lease-takeover": lease_takeover, "waiting": waiting, "drift-and-conflict": drift_and_conflict,
             "signing-off-under-policy": signing_off_under_policy}


@pytest.fixture(autouse=True)
def quiet(monkeypatch):
    monkeypatch.setenv("OCL_RECONCILE_NOW", "2026-11-29T12:00:00Z")
    monkeypatch.setattr("reconcile.cluster.live.time.sleep", lambda s: None)


def recorded(authorize, asked):
    """`authorize`, noting every request it is asked about in `asked`."""
    def noting(req: Request):
        asked.append(req)
        return authorize(req)
    return noting


@pytest.fixture(scope="module")
def needs(tmp_path_factory):
    """{scenario: the requests it made} with the rendered rules, every scenario passing: what a
    removal is checked against (test_removing_any_verb_...)."""
    authorize, out = authorizer(rendered_rules()), {}
    for name, scenario in SCENARIOS.items():
        out[name] = []
        assert scenario(recorded(authorize, out[name]), tmp_path_factory.mktemp(name)), name
    return out


def test_every_scenario_passes_with_the_rendered_rules(needs):
    assert set(needs) == set(SCENARIOS) and all(needs.values())


def _without(rules, index, verb):
    out = copy.deepcopy(rules)
    out[index]["verbs"] = [v for v in out[index]["verbs"] if v != verb]
    return out


def removals():
    for scope, rules in rendered_rules().items():
        for index, rule in enumerate(rules):
            for verb in rule["verbs"]:
                yield pytest.param(scope, index, verb, id=f"{scope or 'cluster'}-{rule['resources'][0]}-{verb}")


@pytest.mark.parametrize("scope, index, verb", list(removals()) if KUBECTL else [])
def test_removing_any_verb_breaks_a_scenario_with_a_clear_403(tmp_path, capsys, needs, scope, index, verb):
    """Every scenario one of whose requests the narrowed rules refuse runs again under them (one
    none of whose requests is refused would make the same requests and get the same answers, so it
    is not run again); at least one must fail, and each that fails says 403 and what was refused."""
    rules = rendered_rules()
    resource = rules[scope][index]["resources"][0]
    rules[scope] = _without(rules[scope], index, verb)
    authorize = authorizer(rules)
    touched = [name for name, asked in needs.items() if any(authorize(req) for req in asked)]
    broken = []
    for name in touched:
        capsys.readouterr()
        ok = SCENARIOS[name](authorize, tmp_path)
        err = capsys.readouterr().err
        if ok:
            continue
        broken.append(name)
        assert f'cannot {verb} resource \\"{resource}\\"' in err or f'cannot {verb} resource "{resource}"' in err, (name, err[-600:])
        assert "403 Forbidden" in err
    assert broken, f"no scenario needs {verb} on {resource}: the rule is wider than the code"
