"""The pure checks of `ocl-reconcile preflight` (reconcile/preflight/): each check's lines
from facts made here, one broken part at a time, against a good baseline in which every line is ok.
What they say comes from the sources they restate: the permissions table from kustomize/base and
the rollout component, the version rules from docs/rollout.md's table, auth key matching from
containers-auth.json(5) (host[:port][/namespace...], the most specific key wins, docker's legacy
`https://index.docker.io/v1/`), the Pod Security levels from the pod-security.kubernetes.io labels.
The real server's answers are tested in tests/realapi/test_realapi_preflight.py."""

from __future__ import annotations

import base64
import dataclasses
import json
import re

import pytest
import yaml

from reconcile import cli
from reconcile import preflight as P
from reconcile.contract import annotations as A
from reconcile.contract import naming
from reconcile.contract.problem import Problem
from reconcile.imagebuild import auth, settings
from tests.support import factory as F

SECRET_AUTH = base64.b64encode(b"pusher:not-for-your-eyes").decode()
DOCS = F.ROOT / "docs/preflight.md"


def read_settings(**overrides: str | None) -> settings.Settings:
    return settings.read(F.NS, {settings.BUILD_CONFIG: F.build_config(**overrides),
                                settings.OSIMAGEURL: F.osimageurl()})


def secret(name: str, *hosts: str) -> dict:
    return F.secret(name, {"auths": {h: {"auth": SECRET_AUTH} for h in hosts}})


def params(repository: str = F.REPO, pools: str = "worker") -> dict:
    return {"metadata": {"name": P.ROLLOUT_PARAMS, "namespace": P.ROLLOUT_PARAMS_NS},
            "data": {"repository": repository, "pools": pools}}


def good(**changes) -> P.Facts:
    """Facts of a cluster where every check is ok: what the realapi good setup reads."""
    found = read_settings(rollout="machineconfig")
    pool = F.pool()
    facts = P.Facts(
        F.NS, namespace_obj={"metadata": {"name": F.NS, "labels": {P.ENFORCE: "baseline"}}}, settings=found,
        secrets={"baseImagePullSecretName": secret("pull-secret", "quay.io"),
                 "finalImagePushSecretName": secret("push-secret", "registry.example.com:5000")},
        caller="admin", impersonated=True,
        builder_account={"metadata": {"name": "ocl-builder"}}, builder_scc=True,
        registry_url="https://registry.example.com:5000/v2/",
        cluster_version={"status": {"desired": {"version": "4.19.3"}}},
        pools=[pool], decisions={"worker": ("START", "")}, selector_policy=True,
        cronjob=cronjob("quay.io/ocl-reconciler/ocl-reconciler@sha256:" + "a" * 64),
        dry_run=P.DryRun("Pod", "ocl-build-worker-0123456789ab", "worker"),
        rollout_params=params(), rollout_params_read=True)
    facts.access = [P.Asked(n, True) for n in P.needs(found, F.NS)]
    return dataclasses.replace(facts, **changes)


def lines(facts: P.Facts, check: str) -> list[P.Result]:
    return [r for r in P.checks(facts) if r.check == check]


def only(facts: P.Facts, check: str) -> P.Result:
    (found,) = lines(facts, check)
    return found


def not_ok(facts: P.Facts) -> dict[str, str]:
    return {r.check: r.result for r in P.checks(facts) if r.result != P.OK}


def test_the_good_baseline_is_all_ok():
    results = P.checks(good())
    assert [r.check for r in results] == list(P.CHECKS)
    assert not_ok(good()) == {} and P.exit_code(results) == 0


# --- the permissions table is kustomize's rules ---------------------------------------------------

def kustomize_rules(*files: str) -> set[tuple[str, str, str, str, str, str]]:
    """(namespace, group, resource, verb, name, "Kind name") of every Role and ClusterRole rule in
    these files; our namespace as the table's placeholder."""
    out = set()
    for path in files:
        for doc in yaml.safe_load_all((F.ROOT / path).read_text()):
            if not doc or doc["kind"] not in ("Role", "ClusterRole"):
                continue
            ns = doc["metadata"].get("namespace", "")
            ns = P.OURS if ns == naming.DEFAULT_NAMESPACE else ns
            for rule in doc["rules"]:
                for group in rule["apiGroups"]:
                    for resource in rule["resources"]:
                        for verb in rule["verbs"]:
                            for name in rule.get("resourceNames") or [""]:
                                out.add((ns, group, resource, verb, name, f"{doc['kind']} {doc['metadata']['name']}",
                                         path))
    return out


def table(rules) -> set:
    return {(r.namespace, r.group, r.resource, verb, name, r.role, r.source)
            for r in rules for verb in r.verbs for name in (r.names or ("",))}


def test_the_permissions_table_is_what_kustomize_base_grants():
    base = [str(p.relative_to(F.ROOT)) for p in sorted((F.ROOT / "kustomize/base").glob("*.yaml"))]
    assert table(P.PERMISSIONS) == kustomize_rules(*base)


def test_the_rollout_permissions_are_what_the_component_grants():
    assert table(P.ROLLOUT_PERMISSIONS) == kustomize_rules("kustomize/components/rollout/rbac.yaml")


def test_the_accounts_and_the_scc_are_those_kustomize_base_makes():
    docs = [d for p in (F.ROOT / "kustomize/base").glob("*.yaml") for d in yaml.safe_load_all(p.read_text()) if d]
    accounts = {d["metadata"]["name"] for d in docs if d["kind"] == "ServiceAccount"}
    assert {P.RECONCILER_ACCOUNT, P.builder_account()} == accounts
    (binding,) = [d for d in docs if d["kind"] == "RoleBinding"
                  and d["subjects"][0]["name"] == P.builder_account()]
    assert binding["roleRef"]["name"] == f"system:openshift:scc:{P.BUILDER_SCC}"


def test_needs_add_the_rollout_verbs_and_secrets_of_other_namespaces():
    base = P.needs(read_settings(), F.NS)
    assert len(base) == sum(len(r.verbs) * max(1, len(r.names)) for r in P.PERMISSIONS) == 39 + 3   # + watch (issue 40)
    assert {n.namespace for n in base if n.rule.namespace == P.OURS} == {F.NS}
    assert len(P.needs(read_settings(rollout="machineconfig"), F.NS)) == 42 + 4 + 1   # + the policy get
    # the global pull secret is in the table already; one of another namespace is asked for
    assert len(P.needs(read_settings(baseImagePullSecretName=None), F.NS)) == 42
    extra = P.needs(read_settings(finalImagePushSecretName="team-a/pusher"), F.NS)[-1]
    assert (extra.namespace, extra.verb, extra.rule.resource, extra.name) == ("team-a", "get", "secrets", "pusher")
    assert P.needs(read_settings(), "elsewhere")[0].namespace == "elsewhere"


# --- each check, one broken part at a time --------------------------------------------------------

def test_namespace():
    assert only(good(namespace_obj=None), "namespace").result == P.FAIL
    assert "kustomize/base makes it" in only(good(namespace_obj=None), "namespace").hint
    assert only(good(namespace_error="403 Forbidden"), "namespace").result == P.WARN


def test_settings_not_valid_or_not_readable():
    problem = good(settings=Problem("ConfigMap ocl-reconciler/on-cluster-build-config not found"))
    assert not_ok(problem) == {"settings": P.FAIL}
    # what needs valid settings has no line and is named as not checked
    assert {r.check for r in P.checks(problem)}.isdisjoint({"pull-secret", "push-secret", "registry", "pools",
                                                           "pod-security"})
    assert "not checked without valid settings" in only(problem, "settings").hint
    assert only(good(settings=None, settings_error="403"), "settings").result == P.FAIL


@pytest.mark.parametrize("key, check", [("baseImagePullSecretName", "pull-secret"),
                                        ("finalImagePushSecretName", "push-secret")])
def test_a_missing_or_unreadable_secret_fails(key, check):
    missing = good()
    missing.secrets[key] = None
    assert not_ok(missing) == {check: P.FAIL}
    assert "not found" in only(missing, check).message and "oc create secret" in only(missing, check).hint
    unreadable = good(secret_errors={key: "403 Forbidden"})
    assert only(unreadable, check).result == P.FAIL and "403" in only(unreadable, check).message


def test_a_secret_of_the_wrong_type_fails():
    facts = good()
    facts.secrets["finalImagePushSecretName"] = F.secret("push-secret", {"x": 1}, type_="Opaque", key="token")
    assert only(facts, "push-secret").result == P.FAIL
    assert "kubernetes.io/dockerconfigjson" in only(facts, "push-secret").hint


def test_a_secret_must_name_the_registry_it_is_for():
    push = good()
    push.secrets["finalImagePushSecretName"] = secret("push-secret", "quay.io")
    assert only(push, "push-secret").result == P.FAIL
    assert "registry.example.com:5000" in only(push, "push-secret").hint
    pull = good()                        # anonymous pulls may work: a warning
    pull.secrets["baseImagePullSecretName"] = secret("pull-secret", "registry.example.com:5000")
    assert only(pull, "pull-secret").result == P.WARN


def test_no_secret_value_is_ever_said():
    for facts in (good(), good(secrets={"baseImagePullSecretName": secret("pull-secret", "elsewhere.io"),
                                        "finalImagePushSecretName": secret("push-secret", "elsewhere.io")})):
        out = P.text(P.checks(facts)) + P.as_json(P.checks(facts))
        assert SECRET_AUTH not in out and "not-for-your-eyes" not in out


# containers/image pkg/docker/config/config.go: authKeysForRef (the repository, each parent, the
# host) and normalizeAuthFileKey (a key with a scheme is its host; Docker Hub's names are one)
@pytest.mark.parametrize("key, repo, want", [
    ("quay.io", "quay.io/ocp/base", "quay.io"),
    ("https://quay.io", "quay.io/ocp/base", "https://quay.io"),
    ("quay.io/ocp", "quay.io/ocp/base", "quay.io/ocp"),
    ("quay.io/oc", "quay.io/ocp/base", None),               # a path component, not a string prefix
    ("quay.io.example.com", "quay.io/ocp/base", None),
    ("https://index.docker.io/v1/", "docker.io/library/busybox", "https://index.docker.io/v1/"),
    ("registry-1.docker.io", "docker.io/library/fedora", "registry-1.docker.io"),
    ("index.docker.io", "fedora", "index.docker.io"),        # a name without a host is Docker Hub's
    ("https://registry.example.com/team", "registry.example.com/other/img", "https://registry.example.com/team"),
    ("registry.example.com:5000", "registry.example.com/ocl", None),   # the port is part of the host
    ("docker.io/library", "busybox", "docker.io/library"),   # an official image's name is library/...
    ("docker.io/busybox", "busybox", None),
    ("index.docker.io/myorg", "docker.io/myorg/img", None),  # a key with a path matches only exactly
    ("Registry.Example/a", "Registry.Example/a/b", "Registry.Example/a"),
    # an upper-case first component without a dot is a host (below)
    ("Myregistry", "Myregistry/a", "Myregistry"),
    ("docker.io/Myregistry", "Myregistry/a", None),
])
def test_auth_keys_cover_repositories_as_containers_image_looks_them_up(key, repo, want):
    assert auth.key_for({key: {}}, repo) == want


# containers/image docker/reference/normalize.go splitDockerDomain (as distribution/reference): the
# first component is the domain when it is "localhost", contains "." or ":", or is not lower-case
# ("Uppercase namespaces are not allowed, so if the first element is not lowercase, we assume it to
# be a domain-name"); else the name is Docker Hub's, an official image's under "library/".
@pytest.mark.parametrize("repo, want", [
    ("Myregistry/a", ("Myregistry", "a")),
    ("myRegistry/team/a", ("myRegistry", "team/a")),
    ("myregistry/a", ("docker.io", "myregistry/a")),
    ("localhost/a", ("localhost", "a")),
    ("registry:5000/a", ("registry:5000", "a")),
    ("busybox", ("docker.io", "library/busybox")),
    ("index.docker.io/busybox", ("docker.io", "library/busybox")),
])
def test_the_host_of_a_repository_is_split_as_containers_image_does(repo, want):
    assert auth.host_and_path(repo) == want


def test_an_exact_key_wins_over_one_that_normalises_to_the_host():
    assert auth.key_for({"https://quay.io": {}, "quay.io": {}}, "quay.io/org/img") == "quay.io"


def test_the_most_specific_auth_key_wins():
    assert auth.key_for({"quay.io": {}, "quay.io/ocp": {}, "quay.io/ocp/base": {}}, "quay.io/ocp/base") == \
        "quay.io/ocp/base"


def test_permissions_missing_as_the_account_fail_per_rule_naming_what_grants_it():
    facts = good()
    facts.access = [P.Asked(a.need, not (a.need.rule.resource == "configmaps" and a.need.verb in ("create", "delete")
                                         and a.need.namespace == F.NS)) for a in facts.access]
    (line,) = lines(facts, "permissions")
    assert line.result == P.FAIL
    assert line.message == (f"ServiceAccount {F.NS}/ocl-reconciler (asked by impersonation) cannot create, "
                            f"delete configmaps in namespace {F.NS}")
    assert line.hint.startswith("Role ocl-reconciler (kustomize/base/role.yaml) grants it")


def test_a_missing_rollout_verb_points_at_the_component():
    facts = good()
    facts.access = [P.Asked(a.need, a.need.rule not in P.ROLLOUT_PERMISSIONS or a.need.verb != "patch")
                    for a in facts.access]
    (line,) = lines(facts, "permissions")
    assert "cannot patch machineconfigs.machineconfiguration.openshift.io cluster-wide" in line.message
    assert "kustomize/components/rollout" in line.hint


def test_permissions_asked_for_another_caller_say_nothing_certain_about_the_account():
    facts = good(impersonated=False, caller="developer")
    assert only(facts, "permissions").result == P.WARN
    assert "you may not impersonate" in only(facts, "permissions").message
    facts.access = [dataclasses.replace(a, allowed=False) for a in facts.access]
    assert {r.result for r in lines(facts, "permissions")} == {P.WARN}
    itself = good(impersonated=False, caller=f"system:serviceaccount:{F.NS}:ocl-reconciler")
    assert only(itself, "permissions").result == P.OK and "(you are it)" in only(itself, "permissions").message
    assert only(good(access=None, access_error="404"), "permissions").result == P.WARN


def test_the_builder_account():
    assert only(good(builder_account=None), "builder-account").result == P.FAIL
    assert only(good(builder_scc=False), "builder-account").result == P.FAIL
    assert "system:openshift:scc:anyuid" in only(good(builder_scc=False), "builder-account").hint
    # no SCC where there is no OpenShift
    assert only(good(builder_scc=False, cluster_version=None), "builder-account").result == P.OK
    assert only(good(builder_scc=None, builder_scc_error="may not impersonate"), "builder-account").result == P.WARN
    build = good(settings=read_settings(imageBuilderType="openshift-image-builder"))
    assert f"ServiceAccount {F.NS}/builder exists" in only(build, "builder-account").message
    assert only(dataclasses.replace(build, builder_account=None), "builder-account").result == P.FAIL


@pytest.mark.parametrize("error, result, hint", [
    ("registry.example.com:5000: the registry answered 401 Unauthorized", P.FAIL, "Secret ocl-reconciler/push-secret"),
    ("registry.example.com:5000: the registry's token service refused: 403", P.FAIL, "push-secret"),
    ("registry.example.com:5000: [SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed", P.FAIL,
     "--registry-ca"),
    ("registry.example.com:5000: [Errno 111] Connection refused", P.FAIL, "reachable"),
])
def test_the_registrys_answers(error, result, hint):
    line = only(good(registry_url="", registry_error=error), "registry")
    assert line.result == result and hint in line.hint


def test_a_service_name_is_not_reachable_from_outside_the_cluster():
    found = read_settings(finalImagePullspec="image-registry.openshift-image-registry.svc:5000/ocl/os:latest")
    line = only(good(settings=found, registry_url="", registry_error="[Errno -2] Name or service not known"),
                "registry")
    assert line.result == P.WARN and "inside the cluster" in line.hint


def test_a_loopback_registry_may_answer_in_plain_http():
    assert "plain HTTP" in only(good(registry_url="http://127.0.0.1:5000/v2/"), "registry").message


def version(v: str | None) -> dict | None:
    return None if v is None else {"status": {"desired": {"version": v}, "history": []}}


@pytest.mark.parametrize("at, mode, result", [
    # docs/rollout.md, "Which OpenShift, what reads what"
    ("4.14.10", "annotation", P.WARN),          # the annotation rolls out only with BuildSuccess
    ("4.15.2", "machineconfig", P.WARN),         # works, not verified there: a test pool first
    ("4.16.0", "annotation", P.WARN),            # nothing reads the annotation
    ("4.16.0", "machineconfig", P.OK),
    ("4.19.3", "machineconfig", P.OK),
    ("4.13.9", "machineconfig", P.WARN),         # never checked against
    ("", "machineconfig", P.WARN),
    (None, "machineconfig", P.WARN),             # not OpenShift
])
def test_what_the_version_means_for_the_rollout(at, mode, result):
    line = only(good(settings=read_settings(rollout=mode), cluster_version=version(at)), "openshift-version")
    assert line.result == result
    if mode == "annotation":
        assert "rollout: machineconfig" in line.hint


def test_the_version_comes_from_desired_else_the_newest_history():
    assert P.version_of({"status": {"history": [{"version": "4.17.1"}, {"version": "4.16.9"}]}}) == "4.17.1"
    assert P.version_of({"status": {"desired": {"version": "4.18.0-rc.1"}}}) == "4.18.0-rc.1"
    assert P.minor("4.18.0-rc.1") == (4, 18) and P.minor("4.9") == (4, 9) and P.minor("v4") is None


def mosc(name: str, pool: str) -> dict:
    return {"metadata": {"name": name}, "spec": {"machineConfigPool": {"name": pool}}}


def test_a_machineosconfig_for_a_pool_we_build_is_two_builders():
    assert only(good(machineosconfigs=[mosc("worker", "worker")]), "mco-builder").result == P.FAIL
    assert only(good(machineosconfigs=[mosc("infra", "infra")]), "mco-builder").result == P.OK


@pytest.mark.parametrize("at, result", [("4.14.3", P.FAIL), ("4.15.1", P.WARN), ("4.16.0", P.OK)])
def test_settings_in_the_mcos_namespace_on_4_14_and_4_15_meet_its_own_builder(at, result):
    facts = good(namespace=settings.MCO_NAMESPACE, cluster_version=version(at))
    assert only(facts, "mco-builder").result == result


def test_pools():
    none = good(pools=[F.pool(opted_in=False)])
    assert only(none, "pools").result == P.WARN and "oc label mcp/worker" in only(none, "pools").hint
    blocked = good(decisions={"worker": ("BLOCKED", "MachineConfig rendered-worker-1 not found")})
    assert only(blocked, "pools").result == P.FAIL
    assert only(blocked, "pools").message.endswith("would be Blocked: MachineConfig rendered-worker-1 not found")
    assert "rollout: annotation" in only(good(settings=read_settings()), "pools").message


def test_an_overridden_pool_is_a_warning_saying_what_to_rename():
    from reconcile.core.rollout import check as rolloutcheck
    from tests.unit.test_rolloutcheck import OTHER, OURS, mc, pool
    worker = pool("worker", ("worker",), ["ocl-osimageurl-worker", "zz-os"])
    worker["metadata"]["labels"] = {A.LAYERING_LABEL: ""}
    worker["metadata"]["annotations"].update({A.ROLLOUT: f"rendered-x={OTHER}", A.OVERRIDDEN_BY: "zz-os"})
    ours = mc("ocl-osimageurl-worker", "worker", OURS)
    found = rolloutcheck.problems([worker], [ours])
    assert list(found) == ["worker"]
    warned = [r for r in lines(good(rollouts=found), "pools") if r.result == P.WARN]
    (line,) = warned
    assert "rename zz-os to sort before ocl-osimageurl-worker, or remove its osImageURL" in line.message
    del worker["metadata"]["annotations"][A.OVERRIDDEN_BY]
    worker["metadata"]["annotations"][A.ROLLOUT] = f"rendered-x={OURS}"
    assert rolloutcheck.problems([worker], [ours]) == {}


def test_a_custom_pool_that_selects_workers_machineconfigs_inherits_the_image():
    infra = F.pool("infra", opted_in=False)
    infra["spec"]["machineConfigSelector"] = {"matchExpressions": [
        {"key": "machineconfiguration.openshift.io/role", "operator": "In", "values": ["worker", "infra"]}]}
    line = only(good(pools=[F.pool(), infra]), "pools")
    assert line.result == P.OK and "rolls its image out to worker, infra (infra inherit it)" in line.message


def old_shape(name: str = "infra") -> dict:
    """A custom pool made before 4.18: it selects its own role only, which the MCO's policy
    custom-machine-config-pool-selector denies (tests/unit/test_admission.py has every case)."""
    pool = F.pool(name)
    pool["spec"]["machineConfigSelector"] = {"matchLabels": {"machineconfiguration.openshift.io/role": name}}
    return pool


@pytest.mark.parametrize("served, error, result, said", [
    (True, "", P.FAIL, "(served here)"),
    (None, "403 Forbidden: no", P.FAIL, "(whether this cluster serves it cannot be read: 403 Forbidden: no)"),
    (False, "", P.WARN, "(not served here; OpenShift 4.18 and later deploy it)")])
def test_a_pool_the_mcos_selector_policy_denies(served, error, result, said):
    facts = good(pools=[F.pool(), old_shape()], selector_policy=served, selector_policy_error=error,
                 decisions={"worker": ("START", ""), "infra": ("START", "")})
    line = only(facts, "pool-admission")
    assert line.result == result and said in line.message
    assert line.message.startswith("MachineConfigPool infra: ValidatingAdmissionPolicy "
                                   "custom-machine-config-pool-selector")
    assert "no run can record its state" in line.message
    assert line.hint.startswith("give MachineConfigPool infra a machineConfigSelector that also selects worker, "
                                "e.g. matchExpressions: [{key: machineconfiguration.openshift.io/role, "
                                "operator: In, values: [worker, infra]}]")


def test_pools_the_selector_policy_admits_pass_and_opted_out_ones_are_not_judged():
    facts = good(pools=[F.pool(), F.pool("infra"), old_shape("legacy") | {"metadata": {"name": "legacy"}}])
    assert only(facts, "pool-admission").result == P.OK
    assert "every opted-in pool selects the worker role" in only(facts, "pool-admission").message


def test_pod_security_by_the_servers_dry_run():
    refused = P.DryRun("Pod", "p", "worker", 'pods "p" is forbidden: violates PodSecurity "restricted:latest": '
                                            "allowPrivilegeEscalation != false", 403)
    line = only(good(dry_run=refused), "pod-security")
    assert line.result == P.FAIL and f"{P.ENFORCE}=baseline" in line.hint
    scc = dataclasses.replace(refused, error="unable to validate against any security context constraint")
    assert "SCC anyuid" in only(good(dry_run=scc), "pod-security").hint
    rbac = dataclasses.replace(refused, error='User "x" cannot create resource "pods"')
    assert only(good(dry_run=rbac), "pod-security").result == P.WARN
    build = P.DryRun("Build", "b", "worker")
    assert "OpenShift's build controller" in only(good(dry_run=build), "pod-security").message


@pytest.mark.parametrize("level, result", [("restricted", P.FAIL), ("baseline", P.OK), ("privileged", P.OK),
                                           (None, P.WARN)])
def test_without_a_build_object_the_namespace_label_is_judged(level, result):
    labels = {P.ENFORCE: level} if level else {}
    facts = good(dry_run=None, dry_run_skipped="no opted-in pool can be built",
                 namespace_obj={"metadata": {"name": F.NS, "labels": labels}})
    assert only(facts, "pod-security").result == result


def test_exit_codes_text_and_json():
    results = P.checks(good(builder_scc=None, registry_url="", registry_error="the registry answered 401 x"))
    assert P.exit_code(results) == 2 and P.exit_code(P.checks(good(builder_scc=None))) == 1
    text = P.text(results).splitlines()
    assert len(text) == len(results) + 1
    assert re.match(r"^fail  registry +\S", next(t for t in text if " registry " in t))
    assert " -> put credentials" in next(t for t in text if " registry " in t)
    assert text[-1].startswith(f"preflight: {len(results) - 2} ok, 1 warning(s), 1 failure(s)")
    parsed = json.loads(P.as_json(results))
    assert [set(d) for d in parsed] == [{"check", "result", "message", "hint"}] * len(results)


def test_docs_have_a_section_for_every_check():
    headings = set(re.findall(r"^### `([a-z-]+)`", DOCS.read_text(), re.M))
    assert headings == set(P.CHECKS)


# --- rollout-params: the rollout policy's parameter (issue 31 item 1) ------------------------------

PATCH = ("oc patch configmap ocl-reconciler-rollout -n openshift-config --type merge -p "
         f"'{{\"data\":{{\"repository\":\"{F.REPO}\",\"pools\":\"infra,worker\"}}}}'")


def test_rollout_params_agree_with_the_settings_and_the_pools():
    ok = only(good(pools=[F.pool("worker"), F.pool("infra")], rollout_params=params(pools=" infra , worker")),
              "rollout-params")
    assert ok.result == P.OK and f"names {F.REPO} and the opted-in pools (infra, worker)" in ok.message
    assert lines(good(settings=read_settings()), "rollout-params") == []         # annotation rollout: not asked


def test_rollout_params_missing_a_pool_or_naming_another_repository_fail_with_the_patch():
    two = [F.pool("worker"), F.pool("infra"), F.pool("master", opted_in=False)]
    missing = only(good(pools=two), "rollout-params")
    assert missing.result == P.FAIL and missing.hint == PATCH
    assert "data.pools (worker) does not list the opted-in infra" in missing.message
    other = only(good(pools=two, rollout_params=params("evil.example.com/pwn/os", "infra,worker")), "rollout-params")
    assert other.result == P.FAIL and other.hint == PATCH
    assert f"data.repository is evil.example.com/pwn/os, the settings' is {F.REPO}" in other.message
    unset = only(good(rollout_params={"data": {}}), "rollout-params")
    assert unset.result == P.FAIL and "data.repository is not set" in unset.message \
        and "data.pools (none) does not list the opted-in worker" in unset.message


def test_rollout_params_listing_a_pool_not_opted_in_warns():
    extra = only(good(rollout_params=params(pools="worker,master")), "rollout-params")
    assert extra.result == P.WARN and "lists master, not opted in" in extra.message
    assert extra.hint.endswith("-p '{\"data\":{\"repository\":\"" + F.REPO + "\",\"pools\":\"worker\"}}'")


def test_rollout_params_not_found_fails_with_the_create_command_and_unreadable_warns():
    gone = only(good(rollout_params=None), "rollout-params")
    assert gone.result == P.FAIL and "not found: the policy denies every MachineConfig write of ours" in gone.message
    assert gone.hint == ("oc create configmap ocl-reconciler-rollout -n openshift-config "
                         f"--from-literal=repository={F.REPO} --from-literal=pools=worker "
                         "--dry-run=client -o yaml | oc apply -f -")
    hidden = only(good(rollout_params=None, rollout_params_error="forbidden"), "rollout-params")
    assert hidden.result == P.WARN and "cannot read ConfigMap openshift-config/ocl-reconciler-rollout" in hidden.message


# --- the command line ---------------------------------------------------------------------------

def test_a_snapshot_is_refused(tmp_path, capsys):
    snap = tmp_path / "c.yaml"
    snap.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": F.cluster()}))
    assert cli.main(["preflight", "--snapshot", str(snap)]) == 2
    assert "preflight asks the live server" in capsys.readouterr().err


def test_an_unreachable_server_is_exit_3(tmp_path, capsys):
    from tests.support.realserver import free_port
    kubeconfig = tmp_path / "kc"
    kubeconfig.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "c", "cluster": {"server": f"https://127.0.0.1:{free_port()}"}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}]}))
    assert cli.main(["preflight", "--kubeconfig", str(kubeconfig), "--timeout", "1"]) == 3
    assert capsys.readouterr().err.startswith("error: cannot read the cluster: ")


def test_a_missing_registry_ca_is_exit_3(tmp_path, capsys):
    assert cli.main(["preflight", "--registry-ca", str(tmp_path / "none.crt"), "--kubeconfig",
                     str(tmp_path / "kc")]) == 3
    assert "--registry-ca" in capsys.readouterr().err


# --- issue 29: what preflight says must be what is so --------------------------------------------

def test_the_global_pull_secret_is_not_named_as_a_settings_key():
    """Item 11: with baseImagePullSecretName unset the global pull secret is used (docs/admin.md,
    "Creating the settings", step 3); the line must not say it comes from that key."""
    found = read_settings(baseImagePullSecretName=None)
    assert found.pull_secret == settings.GLOBAL_PULL_SECRET
    missing = good(settings=found, secrets={"finalImagePushSecretName": secret("push-secret", "registry.example.com:5000")})
    line = only(missing, "pull-secret")
    assert "from on-cluster-build-config key" not in line.message and "global pull secret" in line.message
    assert "oc create secret" not in line.hint
    present = good(settings=found, secrets={"baseImagePullSecretName": secret("pull-secret", "quay.io"),
                                            "finalImagePushSecretName": secret("push-secret", "registry.example.com:5000")})
    assert "from on-cluster-build-config key" not in only(present, "pull-secret").message


def test_an_unreadable_namespace_is_said_not_a_missing_label():
    """Item 12: run as our ServiceAccount, which may not read Namespaces, preflight warned that the
    namespace has no enforce label; the 403 is what is so."""
    refused = 'namespaces "ocl-reconciler" is forbidden: User "system:serviceaccount:ocl-reconciler:ocl-reconciler" cannot get resource "namespaces"'
    facts = good(namespace_obj=None, namespace_error=f"403 Forbidden: {refused}", dry_run=None,
                 dry_run_skipped="no opted-in pool can be built")
    line = only(facts, "pod-security")
    assert "no pod-security.kubernetes.io/enforce label" not in line.message
    assert "cannot read Namespace" in line.message and "403" in line.message


def cronjob(image):
    return {"metadata": {"name": P.CRONJOB}, "spec": {"jobTemplate": {"spec": {"template": {
        "metadata": {"labels": {"app.kubernetes.io/name": "ocl-reconciler"}},
        "spec": {"containers": [{"name": "reconcile", "image": image}]}}}}}}


def test_the_placeholder_and_the_cronjob_are_kustomize_bases():
    import yaml as _yaml
    (doc,) = [d for d in _yaml.safe_load_all((F.ROOT / "kustomize/base/cronjob.yaml").read_text()) if d]
    assert doc["metadata"]["name"] == P.CRONJOB
    assert doc["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["image"] == P.PLACEHOLDER_IMAGE


@pytest.mark.parametrize("image, result", [
    ("ocl-reconciler:latest", P.FAIL),                          # kustomize/base's placeholder
    ("quay.io/ocl-reconciler/ocl-reconciler:latest", P.WARN),   # a moving tag
    ("quay.io/ocl-reconciler/ocl-reconciler", P.WARN),          # no tag is latest
    ("quay.io/ocl-reconciler/ocl-reconciler:v0.1.0", P.OK),     # docs/admin.md: a new tag per version
    ("quay.io/ocl-reconciler/ocl-reconciler@sha256:" + "a" * 64, P.OK),
])
def test_the_cronjobs_image(image, result):
    """Issue 29 item 1 and deliverable 3: re-applying kustomize/base resets the image to its
    placeholder; preflight said ok while every Job failed to pull."""
    line = only(good(cronjob=cronjob(image)), "cronjob")
    assert line.result == result, line
    assert image in line.message


def test_a_job_pod_that_cannot_pull_the_image_fails_the_cronjob_line():
    image = "quay.io/ocl-reconciler/ocl-reconciler@sha256:" + "a" * 64
    pod = {"metadata": {"name": "ocl-reconciler-29123-abcde"}, "status": {"containerStatuses": [
        {"name": "reconcile", "image": image, "state": {"waiting": {
            "reason": "ImagePullBackOff", "message": 'Back-off pulling image "quay.io/..."'}}}]}}
    line = only(good(cronjob=cronjob(image), cronjob_pods=[pod]), "cronjob")
    assert line.result == P.FAIL and "ImagePullBackOff" in line.message and pod["metadata"]["name"] in line.message
    assert only(good(cronjob=None), "cronjob").result == P.FAIL


def test_no_hint_tells_to_re_apply_kustomize_base_alone():
    """Issue 29 item 1: that resets the CronJob's image; every hint says to re-apply your overlay."""
    assert "your overlay" in P.APPLY_BASE and "kubectl kustomize kustomize/base |" not in P.APPLY_BASE


def test_a_held_master_pool_is_explained_with_the_mcos_own_message():
    """Issue 30 item 3: the MCO's upgrade waits for pools labelled required-for-upgrade
    (syncRequiredMachineConfigPools, pkg/operator/sync.go) and reports a paused one."""
    from reconcile.contract import annotations as A
    from reconcile.core.rollout import hold
    master = F.pool("master", annotations={A.GATE: hold.HELD})
    master["metadata"]["labels"][hold.REQUIRED_FOR_UPGRADE] = ""
    master["spec"]["paused"] = True
    found = [r for r in lines(good(pools=[master], decisions={"master": ("BUILT", "")}), "pools")
             if "required for upgrades" in r.message]
    (line,) = found
    assert line.result == P.WARN and "is paused and cannot sync until it is unpaused" in line.message
    assert "holdTimeout (7200s)" in line.message


@pytest.mark.parametrize("keys, classes, result, says", [
    ({}, None, P.OK, "buildStorage: emptyDir: every build starts from an empty emptyDir"),
    ({"buildStorage": None}, [("gp3-csi", True)], P.OK, "a volume of StorageClass gp3-csi (the cluster's default)"),
    ({"buildStorage": None, "buildStorageClass": "fast"}, [("gp3-csi", True), ("fast", False)], P.OK,
     "StorageClass fast (buildStorageClass)"),
    ({"buildStorage": None}, [("slow", False)], P.WARN,
     "new builds would use an emptyDir: the cluster has no default StorageClass; set buildStorageClass"),
    ({"buildStorage": None, "buildStorageClass": "fast"}, [("gp3-csi", True)], P.WARN,
     "StorageClass fast (buildStorageClass) not found"),
    ({"buildStorage": None}, "forbidden", P.WARN, "cannot list StorageClasses: forbidden"),
    ({"buildStorage": "persistent", "imageBuilderType": "openshift-image-builder"}, None, P.WARN,
     "an OpenShift Build has no persistent build storage"),
])
def test_build_storage_says_where_builds_keep_their_images(keys, classes, result, says):
    """The class a run would choose (the default: the StorageClass annotated
    storageclass.kubernetes.io/is-default-class, kubernetes/kubernetes pkg/volume/util/storageclass.go)."""
    from reconcile.core import storage
    from tests.unit.test_storage import storage_class
    read = storage.Classes(problem=f"cannot list StorageClasses: {classes}") if isinstance(classes, str) else \
        storage.Classes(tuple(storage_class(n, d) for n, d in classes)) if classes else None
    found = only(good(settings=read_settings(**keys), storage_classes=read), "build-storage")
    assert (found.result, says in found.message) == (result, True), found
