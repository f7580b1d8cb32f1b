"""Least privilege by place (issue 21), asked of the real kube-apiserver's RBAC authorizer with
SubjectAccessReview, as the reconciler's ServiceAccount after a fresh `kustomize/base` install:
what the token may do in our namespace, and the little it may do anywhere else. The MCO's
namespace holds the node bootstrap token and the machine config server's key
(openshift/machine-config-operator manifests/machineconfigserver/node-bootstrapper-token.yaml,
daemonset.yaml), and accounts bound to the privileged SCC: none of it is ours to touch."""

from __future__ import annotations

import pytest

from tests.support import factory as F
from tests.support import realserver

pytestmark = pytest.mark.realapi
MCO, CONFIG = F.MCO_NS, "openshift-config"


def allowed(server, namespace, verb, resource, name="", subresource="", group=""):
    review = {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
              "spec": {"user": realserver.RECONCILER,
                       "groups": ["system:serviceaccounts", f"system:serviceaccounts:{F.NS}",
                                  "system:authenticated"],
                       "resourceAttributes": {"namespace": namespace, "verb": verb, "resource": resource,
                                              "name": name, "subresource": subresource, "group": group}}}
    _, body = server.request("POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews", review)
    return body["status"].get("allowed", False)


#: (namespace, verb, resource, name, subresource, expected): the matrix of issue 21, item 3.
MATRIX = [
    # Secrets: only ours, and the global pull secret by name
    (F.NS, "get", "secrets", "push-secret", "", True),
    (F.NS, "list", "secrets", "", "", True),
    (CONFIG, "get", "secrets", "pull-secret", "", True),
    (CONFIG, "get", "secrets", "other", "", False),
    (CONFIG, "list", "secrets", "", "", False),
    (MCO, "get", "secrets", "node-bootstrapper-token", "", False),
    (MCO, "get", "secrets", "machine-config-server-tls", "", False),
    (MCO, "list", "secrets", "", "", False),
    (MCO, "watch", "secrets", "", "", False),
    ("default", "list", "secrets", "", "", False),
    ("kube-system", "get", "secrets", "any", "", False),
    ("", "list", "secrets", "", "", False),                 # every namespace at once
    ("", "watch", "secrets", "", "", False),
    (CONFIG, "watch", "secrets", "", "", False),
    # Pods: created, exec'd or attached only in our namespace (and never exec/attach at all)
    (F.NS, "create", "pods", "", "", True),
    (MCO, "create", "pods", "", "", False),
    ("default", "create", "pods", "", "", False),
    (MCO, "create", "pods", "x", "exec", False),
    (MCO, "create", "pods", "x", "attach", False),
    (F.NS, "create", "pods", "x", "exec", False),
    (F.NS, "create", "pods", "x", "attach", False),
    (CONFIG, "create", "pods", "", "", False),
    ("kube-system", "create", "pods", "", "", False),
    ("", "create", "pods", "", "", False),
    # the MCO's namespace: get of the two ConfigMaps it publishes, nothing else
    (MCO, "get", "configmaps", "machine-config-osimageurl", "", True),
    (MCO, "get", "configmaps", "machine-config-operator-images", "", True),
    (MCO, "get", "configmaps", "machine-config-operator-config", "", False),
    (MCO, "list", "configmaps", "", "", False),
    (MCO, "create", "configmaps", "", "", False),
    (MCO, "delete", "configmaps", "machine-config-osimageurl", "", False),
    (MCO, "get", "pods", "x", "", False),
    (MCO, "list", "pods", "", "", False),
    (MCO, "delete", "pods", "x", "", False),
    (MCO, "get", "leases", "ocl-reconciler", "", False),
    # openshift-config: the trust bundle by name
    (CONFIG, "get", "configmaps", "user-ca-bundle", "", True),
    (CONFIG, "get", "configmaps", "admin-kubeconfig-client-ca", "", False),
]


@pytest.mark.parametrize("namespace, verb, resource, name, subresource, expected", MATRIX,
                         ids=[f"{m[0]}-{m[1]}-{m[2]}{'/' + m[4] if m[4] else ''}-{m[3] or 'all'}" for m in MATRIX])
def test_the_reconcilers_token_may_do_this_much_and_no_more(server, namespace, verb, resource, name,
                                                           subresource, expected):
    assert allowed(server, namespace, verb, resource, name, subresource) is expected


def test_the_review_itself_can_say_yes_and_no_for_the_same_account(server):
    """The matrix means something only if the reviews answer as the authorizer does for real
    requests: a named get the Role grants, a list it does not, both asked and both seen."""
    assert allowed(server, MCO, "get", "configmaps", "machine-config-osimageurl")
    assert not allowed(server, MCO, "get", "configmaps", "")
    status, _ = server.request("GET", realserver.RealAPI.path("ConfigMap", MCO), as_user=realserver.RECONCILER,
                               ok=(403,))
    assert status == 403


def test_our_namespace_enforces_the_pod_security_level_the_build_pod_needs(server):
    """kustomize/base labels it `baseline`; the real PodSecurity admission then admits our build
    Pod and refuses a privileged one."""
    ns = server.get("Namespace", "", F.NS)
    labels = ns["metadata"]["labels"]
    assert labels["pod-security.kubernetes.io/enforce"] == "baseline"
    assert labels["security.openshift.io/scc.podSecurityLabelSync"] == "false"
    privileged = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "psa-probe", "namespace": F.NS},
                  "spec": {"containers": [{"name": "c", "image": "busybox",
                                           "securityContext": {"privileged": True}}]}}
    status, body = server.request("POST", server.path("Pod", F.NS) + "?dryRun=All", privileged, ok=(403,))
    assert status == 403 and 'violates PodSecurity "baseline' in body["message"]
