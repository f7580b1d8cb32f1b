"""`ocl-reconcile preflight` on the real kube-apiserver, run as the admin (who may impersonate, as a
cluster-admin may): a good setup passes, and each broken part gives its own `fail` line, decided by
the server itself: its RBAC authorizer answers the SelfSubjectAccessReviews (asked as our
ServiceAccount, by impersonation), its PodSecurity admission judges the dry-run build Pod, and a
real `docker-registry` with TLS and htpasswd basic auth answers `/v2/` (tests/support/realbuild.py;
no fake registry is needed for this). ClusterVersion, which OpenShift serves, is a CRD made here;
MachineOSConfig is openshift/api's CRD (../shared/schemas); both are removed after."""

from __future__ import annotations

import base64
import copy
import json
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from reconcile import cli
from reconcile.contract import annotations as A
from tests.realapi.test_realapi_rbac import _put_rules, _rendered
from tests.support import factory as F
from tests.support import realbuild as R
from tests.support import realserver

pytestmark = pytest.mark.realapi
USER, PASSWORD = "pusher", "s3cret-push"
VERSION = "4.19.3"
#: config.openshift.io/v1 ClusterVersion, as openshift/api config/v1 types_cluster_version.go has
#: it (status.desired.version, status.history[].version and state), structural and loose
CLUSTERVERSION_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "clusterversions.config.openshift.io"},
    "spec": {"group": "config.openshift.io", "scope": "Cluster",
             "names": {"kind": "ClusterVersion", "listKind": "ClusterVersionList", "plural": "clusterversions",
                       "singular": "clusterversion"},
             "versions": [{"name": "v1", "served": True, "storage": True, "subresources": {"status": {}},
                           "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                               "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                               "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}}}}]}}
MOSC_CRD = F.SHARED / "schemas/machineosconfigs.crd.yaml"


def _htpasswd(path: Path) -> Path:
    """An htpasswd file with a bcrypt entry, the only kind docker-registry accepts."""
    return R.htpasswd(path, USER, PASSWORD)


PUBLISHED = "quay.io/ocl-reconciler/ocl-reconciler@sha256:" + "c" * 64


def set_image(server, kubeconfig: str, image: str) -> None:
    server.kubectl("set", "image", "cronjob/ocl-reconciler", f"reconcile={image}", "-n", F.NS,
                   kubeconfig=kubeconfig)


@pytest.fixture(scope="module")
def openshift(server, tmp_path_factory):
    """A ClusterVersion at VERSION, the rollout component installed (rollout: machineconfig), and a
    registry with TLS and basic auth: what a good setup has. All undone after the module."""
    R.require_registry()
    root = tmp_path_factory.mktemp("preflight")
    ca = R.TestCA(root / "ca")
    reg = R.Registry(root, tls=ca, htpasswd=_htpasswd(root / "htpasswd"))
    try:
        with server.serving([CLUSTERVERSION_CRD]):
            yield from _good_setup(server, reg, ca, root)
    finally:
        reg.stop()


def _good_setup(server, reg, ca, root):
    version = {"apiVersion": "config.openshift.io/v1", "kind": "ClusterVersion", "metadata": {"name": "version"},
               "spec": {"channel": "stable-4.19"}}
    path = "/apis/config.openshift.io/v1/clusterversions"
    made = server.request("POST", path, version)[1]
    made["status"] = {"desired": {"version": VERSION}, "history": [{"state": "Completed", "version": VERSION}]}
    server.request("PUT", f"{path}/version/status", made)
    # its parameter as docs/admin.md has the administrator edit it: the registry's repository, worker
    server.install_rollout(f"{reg.host}/ocl/os-image", ("worker",))
    # an overlay sets the CronJob's image (docs/admin.md, kustomize edit set image); kustomize/base's
    # placeholder fails the cronjob line (test_the_base_placeholder_image_fails_the_cronjob_line)
    admin = server.kubeconfig(root / "admin.kubeconfig")
    set_image(server, admin, PUBLISHED)
    try:
        yield reg, ca
    finally:
        set_image(server, admin, "ocl-reconciler:latest")
        server.remove_rollout()
        server.request("DELETE", f"{path}/version", ok=(404,))


def secret(name: str, host: str, user: str = USER, password: str = PASSWORD) -> dict[str, Any]:
    token = base64.b64encode(f"{user}:{password}".encode()).decode()
    return F.secret(name, {"auths": {host: {"auth": token}}})


def good(reg, **overrides: str) -> list[dict[str, Any]]:
    """A cluster ready for its first run: settings pushing to the registry with its credentials, a
    pull secret for the base image's registry, the worker pool labelled."""
    keys = {"finalImagePullspec": f"{reg.host}/ocl/os-image:latest", "rollout": "machineconfig", **overrides}
    settings = [F.build_config(**keys),
                F.osimageurl(), secret("pull-secret", "quay.io"), secret("push-secret", reg.host)]
    return F.cluster(settings=settings)


def preflight(real, ca, *extra: str, kubeconfig: str | None = None) -> tuple[int, list[dict[str, str]]]:
    args = ["preflight", "-o", "json", *(["--registry-ca", str(ca.ca)] if ca else []), *extra]
    real.capsys.readouterr()
    code = cli.main([*args, "--kubeconfig", kubeconfig or real.admin, "--timeout", "30"])
    out, _ = real.capsys.readouterr()
    return code, json.loads(out)


def by_check(lines: list[dict[str, str]]) -> dict[str, list[dict[str, str]]]:
    out: dict[str, list[dict[str, str]]] = {}
    for line in lines:
        out.setdefault(line["check"], []).append(line)
    return out


def failing(lines: list[dict[str, str]]) -> set[str]:
    return {line["check"] for line in lines if line["result"] == "fail"}


def test_a_stray_machineconfig_fails_preflight(real, openshift):
    """Issue 31 item 4: an administrator's ocl-osimageurl-ghost labelled as ours, for a pool that
    does not exist, is seen in the labelled LIST and fails the check; nothing else changes."""
    reg, ca = openshift
    real.seed(good(reg) + [{"apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfig",
                            "metadata": {"name": "ocl-osimageurl-ghost", "labels": {
                                "machineconfiguration.openshift.io/role": "ghost",
                                "app.kubernetes.io/managed-by": "ocl-reconciler"}},
                            "spec": {"osImageURL": f"{reg.host}/ocl/os-image@sha256:{'1' * 64}"}}])
    code, lines = preflight(real, ca)
    assert code == 2 and failing(lines) == {"stray-machineconfigs"}, lines
    (line,) = by_check(lines)["stray-machineconfigs"]
    assert line["message"] == ("stray MachineConfig ocl-osimageurl-ghost: no MachineConfigPool ghost exists; "
                               "the reconciler did not write it")


def test_a_mixed_pool_is_checked_for_each_architecture_against_the_real_registry(real, openshift):
    """Issue 55 item 5: the nodes (one LIST) and the base image's platforms (its index in the real
    registry, read with the pull secret's credentials over TLS) for each architecture of a mixed
    pool: amd64 has a node and a base; arm64 has a node, but the base offers amd64 and s390x only
    (image-spec image-index.md: `platform.architecture` of each entry)."""
    reg, ca = openshift
    with R.basic_auth(USER, PASSWORD):
        index = R.push_index(reg, "ocp/base", "multi", archs=("amd64", "s390x"))
    items = good(reg, buildStorage="emptyDir")
    items = [o for o in items if not (o["kind"] == "Secret" and o["metadata"]["name"] == "pull-secret")]
    items += [secret("pull-secret", reg.host), F.node("worker-1", "worker", "arm64")]
    for o in items:
        if o["metadata"]["name"] == "machine-config-osimageurl":
            o["data"]["baseOSContainerImage"] = f"{reg.host}/ocp/base@{index}"
    real.seed(items)
    for node in ("worker-0", "worker-1"):
        # Ready, as its kubelet reports it (the status subresource); then without the not-ready
        # taint the server's TaintNodesByCondition admission put on it at creation, as the node
        # lifecycle controller takes it off a Ready node (kubernetes v1.34.2
        # plugin/pkg/admission/nodetaint, pkg/controller/nodelifecycle)
        got = real.api.get("Node", "", node)
        assert {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"} in got["spec"]["taints"]
        got["status"] = {"conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                                         "lastHeartbeatTime": "2026-11-29T12:00:00Z",
                                         "lastTransitionTime": "2026-11-29T12:00:00Z"}]}
        got = real.api.write_status(got)
        got["spec"]["taints"] = []
        real.api.request("PUT", real.api.path("Node", "", node), got)
    code, lines = preflight(real, ca)
    got = {(line["result"], line["message"]) for line in by_check(lines)["architectures"]}
    assert ("ok", "MachineConfigPool worker: amd64: 1 schedulable node(s)") in got, lines
    assert ("ok", "MachineConfigPool worker: arm64: 1 schedulable node(s)") in got, lines
    assert ("fail", f"MachineConfigPool worker: arm64: the base image {reg.host}/ocp/base@{index} offers "
                    "amd64, s390x, not linux/arm64") in got, lines
    assert code == 2 and "architectures" in failing(lines)


def test_a_good_setup_passes_every_check(real, openshift):
    reg, ca = openshift
    real.seed(good(reg))
    code, lines = preflight(real, ca)
    assert code == 0, lines
    assert [line["result"] for line in lines] == ["ok"] * len(lines)
    checks = by_check(lines)
    assert list(checks) == ["namespace", "cronjob", "settings", "pull-secret", "push-secret", "permissions",
                            "builder-account", "build-storage", "registry", "architectures", "openshift-version",
                            "mco-builder", "pools",
                            "stray-machineconfigs", "pool-admission", "rollout-params", "pod-security",
                            "image-policy", "policy-key", "rendered-policy"]
    # no signing (docs/preflight.md: `image-policy` is ok with signing off and no policy covering
    # us, which a server that does not serve ClusterImagePolicies has none of; `policy-key` and
    # `rendered-policy` one ok line each then)
    assert [len(checks[c]) for c in ("image-policy", "policy-key", "rendered-policy")] == [1, 1, 1]
    assert checks["image-policy"][0]["message"].startswith("signing is off")
    # each ok says what it saw, as the server answered it
    assert "asked by impersonation" in checks["permissions"][0]["message"]
    assert f"answers https://{reg.host}/v2/ with the push credentials" in checks["registry"][0]["message"]
    assert "may use SCC anyuid (asked as it)" in checks["builder-account"][0]["message"]
    assert f"OpenShift {VERSION}" in checks["openshift-version"][0]["message"]
    assert "the next run's lifecycle row is START" in checks["pools"][0]["message"]
    assert "the server admits Pod ocl-build-worker-" in checks["pod-security"][0]["message"]
    assert PASSWORD not in json.dumps(lines) and base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode() \
        not in json.dumps(lines)


def test_build_storage_names_the_class_the_real_server_lists_as_default(real, openshift):
    """The default `buildStorage: persistent`: without a default StorageClass a warning (builds use
    an emptyDir), with one (the annotation of kubernetes/kubernetes pkg/volume/util/storageclass.go)
    its name; listed as our ServiceAccount, by impersonation."""
    reg, ca = openshift
    real.seed(good(reg, buildStorage=None))
    code, lines = preflight(real, ca)
    (line,) = by_check(lines)["build-storage"]
    assert (code, line["result"]) == (1, "warn"), lines
    assert "the cluster has no default StorageClass; set buildStorageClass" in line["message"]
    real.seed([{"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "provisioner": "ebs.csi.aws.com",
                "metadata": {"name": "gp3-csi", "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}}}])
    mark = real.api.audit_mark()
    code, lines = preflight(real, ca)
    (line,) = by_check(lines)["build-storage"]
    assert (code, line["result"]) == (0, "ok"), lines
    assert line["message"].endswith("a volume of StorageClass gp3-csi (the cluster's default)")
    asked = [e for e in real.api.audit(mark) if (e.get("objectRef") or {}).get("resource") == "storageclasses"]
    # metadata-only LISTs, no GET per class: the line's as our ServiceAccount, and the dry run's
    # plan (the `pools` line) as the caller
    assert {e["verb"] for e in asked} == {"list"}, asked
    assert realserver.RECONCILER in [(e.get("impersonatedUser") or {}).get("username") for e in asked], asked


def test_the_rollout_parameter_must_agree_with_the_settings_and_pools(real, openshift, server):
    """The policy's parameter names F.REPO and not infra (opted in): fail, with the one patch that
    fixes it; after that patch (as an administrator would run it), ok."""
    reg, ca = openshift
    repository = f"{reg.host}/ocl/os-image"
    real.seed(good(reg) + [F.pool("infra"), F.machineconfig("rendered-infra-1")])
    server.write_rollout_params(F.REPO, ["worker"])
    try:
        code, lines = preflight(real, ca)
        (line,) = by_check(lines)["rollout-params"]
        assert code == 2 and line["result"] == "fail", lines
        assert f"data.repository is {F.REPO}, the settings' is {repository}" in line["message"]
        assert "data.pools (worker) does not list the opted-in infra" in line["message"]
        body = {"data": {"repository": repository, "pools": "infra,worker"}}
        assert line["hint"] == ("oc patch configmap ocl-reconciler-rollout -n openshift-config --type merge -p "
                                f"'{json.dumps(body, separators=(',', ':'))}'")
        server.request("PATCH", realserver.object_path(realserver.rollout_params()), body,
                       "application/merge-patch+json")
        code, lines = preflight(real, ca)
        (line,) = by_check(lines)["rollout-params"]
        assert line["result"] == "ok", line
    finally:
        server.write_rollout_params(repository, ["worker"])


def test_it_writes_nothing(real, openshift, server):
    reg, ca = openshift
    real.seed(good(reg))
    mark = server.audit_mark()
    assert preflight(real, ca)[0] == 0
    writes = [e for e in server.audit(mark, "admin") if e["verb"] not in ("get", "list", "watch")
              and e["objectRef"]["resource"] not in ("selfsubjectaccessreviews", "selfsubjectreviews")]
    # preflight's requests (the server's own, such as its lease, are not), impersonated ones among
    # them: the one write is the build Pod's dry run, which the server admits and does not store
    assert [(e["verb"], e["objectRef"]["resource"], "dryRun=All" in e["requestURI"]) for e in writes] == [
        ("create", "pods", True)]
    assert not server.list("Pod", F.NS)


def test_with_the_build_builder_the_namespaces_builder_account_and_the_build_are_checked(real, openshift, server):
    """openshift-image-builder: OpenShift's build controller runs the Build's Pod under the
    namespace's `builder` ServiceAccount (made here: no OpenShift controller runs); the Build is
    sent as a dry run, through the imitation of OpenShift's build strategy admission."""
    reg, ca = openshift
    real.seed(good(reg, imageBuilderType="openshift-image-builder"))
    code, lines = preflight(real, ca)
    assert code == 2 and failing(lines) == {"builder-account"}, lines
    assert by_check(lines)["builder-account"][0]["message"].startswith(f"ServiceAccount {F.NS}/builder not found")
    server.create({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "builder", "namespace": F.NS}})
    try:
        code, lines = preflight(real, ca)
    finally:
        server.request("DELETE", server.path("ServiceAccount", F.NS, "builder"))
    assert code == 0, lines
    assert "the server admits Build ocl-build-worker-" in by_check(lines)["pod-security"][0]["message"]


def test_a_missing_secret_fails_its_own_line(real, openshift):
    reg, ca = openshift
    real.seed([o for o in good(reg) if o["metadata"]["name"] != "push-secret"])
    code, lines = preflight(real, ca)
    # the pools line says what the run then does: Blocked on the Secret, not START (issue 29 item 5)
    assert code == 2 and failing(lines) == {"push-secret", "pools"}, lines
    (pools,) = by_check(lines)["pools"]
    assert "would be Blocked" in pools["message"] and "push-secret" in pools["message"], pools
    (line,) = by_check(lines)["push-secret"]
    assert line["message"] == (f"Secret {F.NS}/push-secret (from on-cluster-build-config key "
                               "'finalImagePushSecretName') not found")
    assert "oc create secret docker-registry push-secret" in line["hint"]


@pytest.mark.parametrize("ns, role, resource, verb", [
    (F.NS, "ocl-reconciler", "configmaps", "delete"),
    ("", "ocl-reconciler", "machineconfigpools", "patch"),
    ("default", "ocl-reconciler-events", "events", "create"),
])
def test_a_removed_rbac_verb_fails_the_permissions_line(real, openshift, server, ns, role, resource, verb):
    reg, ca = openshift
    real.seed(good(reg))
    rules = _rendered()[(ns, role)]
    narrowed = copy.deepcopy(rules)
    for rule in narrowed:
        if resource in rule["resources"]:
            rule["verbs"] = [v for v in rule["verbs"] if v != verb]
    narrowed = [r for r in narrowed if r["verbs"]]
    group = next(r["apiGroups"][0] for r in rules if resource in r["resources"])
    _put_rules(server, (ns, role), narrowed, (ns or F.NS, resource, verb, group, "", False))
    try:
        code, lines = preflight(real, ca)
    finally:
        _put_rules(server, (ns, role), rules, (ns or F.NS, resource, verb, group, "", True))
    assert code == 2 and failing(lines) == {"permissions"}, lines
    (line,) = [x for x in by_check(lines)["permissions"] if x["result"] == "fail"]
    where = f"in namespace {ns}" if ns else "cluster-wide"
    assert f"cannot {verb} {resource}" in line["message"] and line["message"].endswith(where)
    assert line["message"].startswith(f"ServiceAccount {F.NS}/ocl-reconciler (asked by impersonation)")
    assert f"Role {role}" in line["hint"]


def test_a_bad_pullspec_fails_the_settings_line(real, openshift):
    reg, ca = openshift
    real.seed(good(reg, finalImagePullspec=f"{reg.host}/ocl/os-image@sha256:" + "0" * 64))
    code, lines = preflight(real, ca)
    assert code == 2 and failing(lines) == {"settings"}, lines
    (line,) = by_check(lines)["settings"]
    assert "key 'finalImagePullspec'" in line["message"] and "no digest" in line["message"]
    # what needs valid settings is said not to have run, and has no line
    assert "registry" not in by_check(lines) and "not checked without valid settings" in line["hint"]


def test_a_registry_that_refuses_the_credentials_fails_the_registry_line(real, openshift):
    reg, ca = openshift
    items = [secret("push-secret", reg.host, password="wrong") if o["metadata"]["name"] == "push-secret" else o
             for o in good(reg)]
    real.seed(items)
    code, lines = preflight(real, ca)
    assert code == 2 and failing(lines) == {"registry"}, lines
    (line,) = by_check(lines)["registry"]
    assert line["message"] == f"{reg.host} refuses the push credentials: {reg.host}: the registry answered 401 Unauthorized"
    assert "wrong" not in json.dumps(lines)


def test_a_registry_certificate_is_verified(real, openshift):
    """Without --registry-ca (and no service CA mounted here), the test CA's certificate does not
    verify: never a reason to fall back to plain HTTP."""
    reg, _ = openshift
    real.seed(good(reg))
    code, lines = preflight(real, None)
    assert code == 2 and failing(lines) == {"registry"}, lines
    (line,) = by_check(lines)["registry"]
    assert "CERTIFICATE_VERIFY_FAILED" in line["message"] and "--registry-ca" in line["hint"]


def test_a_machineosconfig_for_our_pool_fails_two_builders(real, openshift, server):
    reg, ca = openshift
    real.seed(good(reg))
    path = "/apis/machineconfiguration.openshift.io/v1/machineosconfigs"
    # the MCO's controllers (test_realapi_live_table, _follow, ...) may have left the CRD served
    with server.serving([yaml.safe_load(MOSC_CRD.read_text())]):
        server.request("POST", path, {
            "apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineOSConfig",
            "metadata": {"name": "worker"},
            "spec": {"machineConfigPool": {"name": "worker"}, "imageBuilder": {"imageBuilderType": "Job"},
                     "renderedImagePushSecret": {"name": "push-secret"},
                     "renderedImagePushSpec": f"{reg.host}/ocl/mco-image:latest"}})
        try:
            code, lines = preflight(real, ca)
        finally:
            server.request("DELETE", f"{path}/worker", ok=(404,))
    assert code == 2 and failing(lines) == {"mco-builder"}, lines
    (line,) = by_check(lines)["mco-builder"]
    assert line["message"].startswith("MachineOSConfig worker has the MCO build pool worker")
    assert "two builders" in line["message"] and "oc delete machineosconfig worker" in line["hint"]


def test_a_pool_that_would_inherit_the_image_with_an_os_stream_fails_the_pools_line(real, openshift):
    """The rollout's selector check (core/rollout/, as decide runs it): `infra` selects worker's
    MachineConfigs, so it would inherit worker's osImageURL, which the MCO refuses to render with
    an OS stream."""
    reg, ca = openshift
    infra = F.pool("infra", opted_in=False)
    infra["spec"]["machineConfigSelector"] = {"matchLabels": {"machineconfiguration.openshift.io/role": "worker"}}
    infra["spec"]["osImageStream"] = {"name": "rhel-10"}
    real.seed(good(reg) + [infra, F.machineconfig("rendered-infra-1"), F.osimagestream("rhel-9", "rhel-10")])
    code, lines = preflight(real, ca)
    assert code == 2 and failing(lines) == {"pools"}, lines
    (line,) = by_check(lines)["pools"]
    assert line["message"].startswith("MachineConfigPool worker would be Blocked: MachineConfigPool infra selects "
                                      "MachineConfig ocl-osimageurl-worker and sets spec.osImageStream.name")


def _label(server, level: str) -> None:
    """Set our namespace's enforce level and wait until PodSecurity admission applies it (it reads
    namespaces from a cache): a Pod that sets no securityContext passes `baseline`, not `restricted`."""
    ns = server.get("Namespace", "", F.NS)
    ns["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] = level
    server.request("PUT", f"/api/v1/namespaces/{F.NS}", ns)
    probe = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "psa-probe", "namespace": F.NS},
             "spec": {"containers": [{"name": "c", "image": "busybox"}]}}
    deadline = time.monotonic() + 10
    while True:
        status, _ = server.request("POST", server.path("Pod", F.NS) + "?dryRun=All", probe, ok=(403,))
        if (status == 403) == (level == "restricted"):
            return
        assert time.monotonic() < deadline, f"PodSecurity never applied {level}"
        time.sleep(0.1)


def test_a_restricted_namespace_fails_pod_security(real, openshift, server):
    reg, ca = openshift
    real.seed(good(reg))
    _label(server, "restricted")
    try:
        code, lines = preflight(real, ca)
    finally:
        _label(server, "baseline")
    assert code == 2 and failing(lines) == {"pod-security", "pools"}, lines   # the run would be refused too
    (line,) = by_check(lines)["pod-security"]
    assert 'violates PodSecurity "restricted:latest"' in line["message"]
    assert "allowPrivilegeEscalation" in line["message"]          # the server's own words
    assert "pod-security.kubernetes.io/enforce=baseline" in line["hint"]


def test_as_the_reconcilers_own_account_it_asks_for_itself(real, openshift):
    """Run with the ServiceAccount's token (as in the cluster): the reviews are its own; what only
    an administrator may read is a warning, never a failure of the setup."""
    reg, ca = openshift
    real.seed(good(reg))
    code, lines = preflight(real, ca, kubeconfig=real.kubeconfig)
    checks = by_check(lines)
    assert checks["permissions"] == [{"check": "permissions", "result": "ok", "hint": "",
                                      "message": f"all 47 permissions a run uses are granted to ServiceAccount "
                                                 f"{F.NS}/ocl-reconciler (you are it)"}]
    assert code == 1 and not failing(lines), lines
    assert checks["namespace"][0]["result"] == "warn" and "403" in checks["namespace"][0]["message"]


def test_the_good_setup_is_what_a_run_then_does(real, openshift):
    """The preflight's `pools` line says start; the run then starts the build the dry run judged."""
    reg, ca = openshift
    real.seed(good(reg))
    _, lines = preflight(real, ca)
    judged = by_check(lines)["pod-security"][0]["message"].split(" of pool")[0].rsplit(" ", 1)[-1]
    assert real.run()[0] == 0
    assert real.ann().get(A.STATE) == A.PENDING
    assert real.build_object()["metadata"]["name"] == judged


def test_without_the_scc_binding_the_pools_line_says_the_run_blocks(real, openshift):
    """Issue 29 item 5: with the SCC RoleBinding missing, the pools line said START while the run's
    Pod create is refused at admission (no Pod: the pool is Blocked with the 403). The dry run of the
    build Pod is the witness: the pools line now says Blocked with the server's refusal."""
    reg, ca = openshift
    real.seed(good(reg))
    saved = real.api.kubectl("get", "rolebinding", "ocl-builder-anyuid", "-n", F.NS, "-o", "json",
                             kubeconfig=real.admin).stdout
    real.api.kubectl("delete", "rolebinding", "ocl-builder-anyuid", "-n", F.NS, kubeconfig=real.admin)
    try:
        code, lines = preflight(real, ca)
        assert code == 2 and {"builder-account", "pod-security", "pools"} <= failing(lines), lines
        (pools,) = by_check(lines)["pools"]
        assert "would be Blocked" in pools["message"]
        assert "security context constraint" in pools["message"], pools
        code, err = real.run()                              # the reference: the run blocks the same way
        assert code == 2 and real.ann()[A.STATE] == A.BLOCKED, err
        assert not [o for o in real.owned() if o["kind"] == "Pod"]
    finally:
        obj = json.loads(saved)
        for key in ("uid", "resourceVersion", "creationTimestamp", "managedFields"):
            obj["metadata"].pop(key, None)
        real.api.kubectl("apply", "-f", "-", kubeconfig=real.admin, input=json.dumps(obj))


def test_the_base_placeholder_image_fails_the_cronjob_line(real, openshift, server):
    """Issue 29 item 1: `kubectl kustomize kustomize/base | oc apply -f -` from a checkout sets the
    CronJob's image back to the placeholder; preflight said ok while every Job failed to pull."""
    reg, ca = openshift
    real.seed(good(reg))
    real.api.kubectl("kustomize", str(F.ROOT / "kustomize/base"), kubeconfig=real.admin)     # it renders
    rendered = real.api.kubectl("kustomize", str(F.ROOT / "kustomize/base"), kubeconfig=real.admin).stdout
    real.api.kubectl("apply", "-f", "-", kubeconfig=real.admin, input=rendered)
    try:
        code, lines = preflight(real, ca)
        assert code == 2 and "cronjob" in failing(lines), lines
        (line,) = by_check(lines)["cronjob"]
        assert "ocl-reconciler:latest" in line["message"] and "kustomize edit set image" in line["hint"]
    finally:
        set_image(server, real.admin, PUBLISHED)
