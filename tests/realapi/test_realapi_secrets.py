"""Issue 31 item 5, reading Secrets, on the real kube-apiserver (v1.34): a run reads only what it
needs (the two named Secrets by name, the labelled build inputs by label, ours as metadata), the
server's audit log says so; and what RBAC can and cannot narrow, decided by the server's own RBAC
authorizer (docs/design.md, "Reading Secrets").

RBAC matches a request by verb, group, resource and name, nothing else (kubernetes/kubernetes
plugin/pkg/auth/authorizer/rbac/rbac.go RuleAllows; pkg/apis/rbac/v1/evaluation_helpers.go
ResourceNameMatches). A LIST has a name only when it carries the field selector `metadata.name=`
(staging/src/k8s.io/apiserver/pkg/endpoints/handlers/get.go ListResource: "the value of that
field is propagated to requestInfo as the name"). KEP-4601 (kubernetes/enhancements
keps/sig-auth/4601-authorize-with-selectors, GA in 1.34) hands LIST's label and field selectors to
authorizers, but its non-goals exclude "a generic in-tree authorizer that manages field or label
selectors": a webhook authorizer may use them, RBAC does not. So `list secrets` cannot be narrowed
to the labelled inputs, and whoever may LIST may read any Secret by name through it."""

from __future__ import annotations

import base64
import time
import urllib.parse
from collections.abc import Callable
from typing import Any

import pytest

from reconcile.contract import naming
from reconcile.imagebuild import buildinputs
from tests.support import factory as F
from tests.support import realserver
from tests.unit.test_builders import labelled

pytestmark = pytest.mark.realapi
SECRETS = f"/api/v1/namespaces/{F.NS}/secrets"
RBAC = f"/apis/rbac.authorization.k8s.io/v1/namespaces/{F.NS}"
CANARY = "s3cret-of-another-team"
PROBE = "secret-probe"


def unrelated() -> dict[str, Any]:
    """A Secret someone else keeps in our namespace: no label of ours, not named by the settings."""
    obj = F.secret("team-db-password")
    obj["type"], obj["data"] = "Opaque", {"password": base64.b64encode(CANARY.encode()).decode()}
    return obj


ENTITLEMENT = labelled("Secret", "rhsm", "entitlement", {"123.pem": "x", "123-key.pem": "y"})


def test_a_run_reads_the_named_secrets_by_name_and_the_inputs_by_label(real, server):
    real.seed(F.cluster(extra=[ENTITLEMENT, unrelated()]))
    mark = server.audit_mark()
    code, err = real.run()
    assert code == 0, err
    (pod,) = [o for o in real.owned() if o["kind"] == "Pod"]
    assert "rhsm" in {v.get("secret", {}).get("secretName") for v in pod["spec"]["volumes"]}   # the input is used
    reads = [(e["verb"], e["objectRef"].get("name", ""), urllib.parse.urlsplit(e["requestURI"]).query)
             for e in server.audit(mark, realserver.RECONCILER)
             if e["objectRef"].get("resource") == "secrets" and e["verb"] in ("get", "list", "watch")]
    assert sorted((verb, name) for verb, name, _ in reads if verb == "get") == [
        ("get", "pull-secret"), ("get", "push-secret")]
    selectors = {urllib.parse.parse_qs(query).get("labelSelector", [""])[0] for verb, _, query in reads
                 if verb == "list"}
    assert selectors == {f"{naming.MANAGED_BY}={naming.MANAGER}", *buildinputs.LABELS}, reads
    assert all("team-db-password" not in name + query for _, name, query in reads)
    assert CANARY not in err


def test_our_token_can_read_every_secret_of_its_namespace(real, server):
    """Row 6's "read an unrelated Secret", as our ServiceAccount: allowed, by GET and by LIST. The
    Role needs `get` (the named Secrets; ours, adopted after a lost create) and `list` (ours, and
    the labelled inputs), and neither can be narrowed to them (below): documented, not fixed."""
    real.seed([unrelated()])
    token = server.sa_token
    _, secret = server.request("GET", f"{SECRETS}/team-db-password", token=token)
    assert base64.b64decode(secret["data"]["password"]).decode() == CANARY
    _, page = server.request("GET", SECRETS, token=token)
    assert "team-db-password" in {o["metadata"]["name"] for o in page["items"]}
    status, _ = server.request("GET", "/api/v1/namespaces/default/secrets", token=token, ok=(403,))
    assert status == 403                                     # outside our namespace: refused


@pytest.fixture
def probe(server) -> Callable[[list[dict[str, Any]], str, int], str]:
    """A ServiceAccount of our namespace bound to a Role whose rules a test sets: `put(rules, path,
    status)` replaces them and waits until the request `path` answers `status` (RBAC's cache);
    returns the account's token."""
    sa = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": PROBE, "namespace": F.NS}}
    role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": {"name": PROBE, "namespace": F.NS}, "rules": []}
    binding = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
               "metadata": {"name": PROBE, "namespace": F.NS},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": PROBE},
               "subjects": [{"kind": "ServiceAccount", "name": PROBE, "namespace": F.NS}]}
    server.request("POST", f"/api/v1/namespaces/{F.NS}/serviceaccounts", sa)
    server.request("POST", f"{RBAC}/roles", role)
    server.request("POST", f"{RBAC}/rolebindings", binding)
    token = server.service_account_token(F.NS, PROBE)

    def put(rules: list[dict[str, Any]], path: str, status: int) -> str:
        _, current = server.request("GET", f"{RBAC}/roles/{PROBE}")
        server.request("PUT", f"{RBAC}/roles/{PROBE}", dict(current, rules=rules))
        deadline = time.monotonic() + 10
        while server.request("GET", path, token=token, ok=(403,))[0] != status:
            assert time.monotonic() < deadline, f"RBAC change not seen: {path} did not answer {status}"
            time.sleep(0.05)
        return token
    try:
        yield put
    finally:
        for path in (f"{RBAC}/rolebindings/{PROBE}", f"{RBAC}/roles/{PROBE}",
                     f"/api/v1/namespaces/{F.NS}/serviceaccounts/{PROBE}"):
            server.request("DELETE", path, ok=(404,))


def secrets_rule(verb: str, names: tuple[str, ...] = ()) -> dict[str, Any]:
    return {"apiGroups": [""], "resources": ["secrets"], "verbs": [verb],
            **({"resourceNames": list(names)} if names else {})}


def by_name(name: str) -> str:
    return f"{SECRETS}?fieldSelector=" + urllib.parse.quote(f"metadata.name={name}")


def test_rbac_narrows_secrets_by_name_only_never_by_label(real, server, probe):
    """`get` and `list` limited to the named Secrets by resourceNames: each is readable by GET, and
    by a LIST with its metadata.name field selector; an unrelated Secret is not. But the LIST of the
    labelled inputs (a label selector) is refused: RBAC has no rule for it."""
    real.seed(F.cluster(extra=[ENTITLEMENT, unrelated()]))
    named = ("pull-secret", "push-secret")
    token = probe([secrets_rule("get", named), secrets_rule("list", named)], f"{SECRETS}/push-secret", 200)
    assert server.request("GET", f"{SECRETS}/team-db-password", token=token, ok=(403,))[0] == 403
    _, page = server.request("GET", by_name("pull-secret"), token=token)
    assert [o["metadata"]["name"] for o in page["items"]] == ["pull-secret"]
    for selector in buildinputs.LABELS:
        path = f"{SECRETS}?labelSelector=" + urllib.parse.quote(selector)
        assert server.request("GET", path, token=token, ok=(403,))[0] == 403, selector
    assert server.request("GET", SECRETS, token=token, ok=(403,))[0] == 403


def test_narrowing_get_alone_hides_nothing_from_whoever_may_list(real, server, probe):
    """`get` limited to the named Secrets, `list` as the labelled inputs need it: the unrelated
    Secret's GET is refused, and a LIST by its name hands it over, data and all."""
    real.seed(F.cluster(extra=[ENTITLEMENT, unrelated()]))
    token = probe([secrets_rule("get", ("pull-secret", "push-secret")), secrets_rule("list")],
                  f"{SECRETS}/team-db-password", 403)
    _, page = server.request("GET", by_name("team-db-password"), token=token)
    (secret,) = page["items"]
    assert base64.b64decode(secret["data"]["password"]).decode() == CANARY


def test_an_rbac_rule_has_no_label_selector(server):
    """The server's own schema of rbac.authorization.k8s.io/v1 PolicyRule: verbs, apiGroups,
    resources, resourceNames, nonResourceURLs. A rule with a label selector is refused, not ignored,
    when the request asks for strict field validation."""
    role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": {"name": "probe-label-selector", "namespace": F.NS},
            "rules": [dict(secrets_rule("list"), labelSelector={"matchLabels": {buildinputs.LABEL: "entitlement"}})]}
    status, body = server.request("POST", f"{RBAC}/roles?fieldValidation=Strict&dryRun=All", role, ok=(400,))
    assert status == 400 and 'unknown field "rules[0].labelSelector"' in body["message"], body
