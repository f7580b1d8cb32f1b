"""The namespace policy (kustomize/components/namespace-policy, in overlays/openshift), proven on the
real kube-apiserver as the reconciler's ServiceAccount (its TokenRequest token, no impersonation):
a kubernetes.io/service-account-token Secret, a Pod that runs as another ServiceAccount, one whose
automountServiceAccountToken is not false and one with a projected serviceAccountToken are each
refused with the policy's message (issue 31, row 6 of its table); our real runs pass (both
builders: the build Pod, the Build, the registry auth Secrets); the admin makes the same requests;
without the binding the ServiceAccount makes them too, so the refusals are the policy's.

The policy is installed for this module only: the other realapi modules run kustomize/base alone."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tests.support import factory as F
from tests.support import realserver

pytestmark = pytest.mark.realapi
POLICY = realserver.NAMESPACE_POLICY
DENIED = f"ValidatingAdmissionPolicy '{POLICY}' with binding '{POLICY}' denied request: "
SECRETS, PODS = realserver.RealAPI.path("Secret", F.NS), realserver.RealAPI.path("Pod", F.NS)
TOKEN_TYPE = "kubernetes.io/service-account-token"


@pytest.fixture(scope="module")
def installed(server):
    try:
        server.install_namespace_policy()
        yield server
    finally:
        try:
            server.remove_namespace_policy()
        finally:
            server.reset()


@pytest.fixture
def api(installed):
    installed.reset()
    installed.install_namespace_policy()
    return installed


def as_sa(server, method: str, path: str, body: Any = None):
    return server.request(method, path, body, "application/json", token=server.sa_token, ok=(403, 404, 409, 422))


def token_secret(name: str, account: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Secret", "type": TOKEN_TYPE,
            "metadata": {"name": name, "namespace": F.NS,
                         "annotations": {"kubernetes.io/service-account.name": account}}}


def pod(name: str, account: str, automount: bool | None = False, volumes: list | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"serviceAccountName": account, "restartPolicy": "Never",
                            "containers": [{"name": "c", "image": "registry.example.com/any@sha256:" + "0" * 64}]}
    if automount is not None:
        spec["automountServiceAccountToken"] = automount
    if volumes:
        spec["volumes"] = volumes
        spec["containers"][0]["volumeMounts"] = [{"name": v["name"], "mountPath": "/v/" + v["name"]} for v in volumes]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": F.NS}, "spec": spec}


PROJECTED_TOKEN = {"name": "token", "projected": {"sources": [
    {"configMap": {"name": "anything"}}, {"serviceAccountToken": {"path": "token", "expirationSeconds": 3600}}]}}

#: what row 6 of issue 31's table tried: (collection, object, the policy's message)
BAD = {
    "token-secret-for-itself": (SECRETS, token_secret("mine", "ocl-reconciler"),
                                f"ocl-reconciler may not create a Secret of type {TOKEN_TYPE}: mine"),
    "token-secret-for-the-builder": (SECRETS, token_secret("builders", "ocl-builder"),
                                     f"ocl-reconciler may not create a Secret of type {TOKEN_TYPE}: builders"),
    # its token mounted by the ServiceAccount admission plugin: the account is named first
    "pod-as-ocl-reconciler": (PODS, pod("as-us", "ocl-reconciler", automount=None),
                              "ocl-reconciler may create only Pods that run as the ServiceAccount ocl-builder: "
                              "as-us runs as ocl-reconciler"),
    "pod-as-default": (PODS, pod("as-default", "default"),
                       "ocl-reconciler may create only Pods that run as the ServiceAccount ocl-builder: "
                       "as-default runs as default"),
    "pod-as-builder-automount-true": (PODS, pod("automount", "ocl-builder", automount=True),
                                      "ocl-reconciler may create only Pods with automountServiceAccountToken: "
                                      "false: automount"),
    "pod-as-builder-automount-unset": (PODS, pod("unset", "ocl-builder", automount=None),
                                       "ocl-reconciler may create only Pods with automountServiceAccountToken: "
                                       "false: unset"),
    "pod-as-builder-projected-token": (PODS, pod("projected", "ocl-builder", volumes=[PROJECTED_TOKEN]),
                                       "ocl-reconciler may not create a Pod that mounts a projected "
                                       "serviceAccountToken: projected mounts it in token"),
}


def forbidden(path: str, name: str, message: str) -> str:
    return f'{"secrets" if path == SECRETS else "pods"} "{name}" is forbidden: {DENIED}{message}'


def ensure_default_account(api) -> None:
    """`default` as the ServiceAccount controller would make it (this harness runs no controllers)."""
    api.request("POST", realserver.RealAPI.path("ServiceAccount", F.NS),
                {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default", "namespace": F.NS}},
                ok=(409,))


@pytest.mark.parametrize("case", sorted(BAD))
def test_the_policy_refuses(api, case):
    ensure_default_account(api)
    path, obj, message = BAD[case]
    status, body = as_sa(api, "POST", path, obj)
    assert (status, body.get("reason"), body.get("message")) == \
        (403, "Forbidden", forbidden(path, obj["metadata"]["name"], message)), body
    assert api.request("GET", f"{path}/{obj['metadata']['name']}", ok=(404,))[0] == 404


def test_the_build_pods_shape_passes(api):
    """The rules admit what the build Pod is: ocl-builder, no token, projected ConfigMaps."""
    ok = pod("builder-shape", "ocl-builder", volumes=[
        {"name": "machineconfig", "projected": {"sources": [{"configMap": {"name": "a"}}, {"configMap": {"name": "b"}}]}}])
    status, body = as_sa(api, "POST", PODS + "?dryRun=All", ok)
    assert status == 201, body


@pytest.mark.parametrize("builder", sorted(F.BUILD_KINDS))
def test_a_reconcile_run_passes_the_policy(api, real, builder):
    """A whole run as the ServiceAccount creates its Secrets and its build Pod (or Build): all admitted."""
    real.seed(F.cluster(settings=[F.build_config(imageBuilderType=builder), F.osimageurl(),
                                  F.secret("pull-secret"), F.secret("push-secret")]))
    mark = api.audit_mark()
    code, err = real.run()
    assert code == 0, err
    creates = [e for e in api.audit(mark, realserver.RECONCILER) if e["verb"] == "create"]
    made = {e["objectRef"]["resource"] for e in creates if e["responseStatus"]["code"] == 201}
    assert {"pods" if builder == "custom-pod-builder" else "builds"} <= made, creates
    assert {e["responseStatus"]["code"] for e in creates} == {201}
    assert "ValidatingAdmissionPolicy" not in "".join(real.stderr)
    if builder == "custom-pod-builder":
        (p,) = [o for o in api.request("GET", PODS)[1]["items"] if o["metadata"]["name"].startswith("ocl-build-worker-")]
        assert p["spec"]["serviceAccountName"] == "ocl-builder" and p["spec"]["automountServiceAccountToken"] is False


def test_the_admin_makes_every_one_of_those_requests(api):
    ensure_default_account(api)
    for case, (path, obj, _) in sorted(BAD.items()):
        status, body = api.request("POST", path + "?dryRun=All", copy.deepcopy(obj), ok=(403, 422))
        assert status == 201, (case, body)


def test_without_the_policy_binding_the_same_requests_pass(api):
    """The refusals are the policy's: with base's RBAC alone the ServiceAccount makes each of them."""
    ensure_default_account(api)
    binding = f"{realserver.ROLLOUT_PATHS['ValidatingAdmissionPolicyBinding']}/{POLICY}"
    api.request("DELETE", binding)
    try:
        api.wait_namespace_policy("unbound", lambda status, message: status == 201)
        for case, (path, obj, _) in sorted(BAD.items()):
            status, body = as_sa(api, "POST", path + "?dryRun=All", copy.deepcopy(obj))
            assert status == 201, (case, body)
    finally:
        api.install_namespace_policy()
    path, obj, message = BAD["token-secret-for-itself"]
    assert as_sa(api, "POST", path, obj)[1]["message"] == forbidden(path, "mine", message)
