"""The deployment: every overlay builds with `kubectl kustomize` and validates strictly; the
CronJob is restricted and its deadlines fit the Lease; Argo CD's waves order RBAC and settings
before the CronJob; the argocd-cm component builds into an Argo CD install."""

from __future__ import annotations

import copy
import os
import shutil
import subprocess
from pathlib import Path

import kubernetes_validate
import pytest
import yaml

from tests.support import factory as F
from tests.support import realserver

KUBECTL = shutil.which("kubectl")
OVERLAYS = ["base", "overlays/openshift", "overlays/openshift-4.16", "overlays/argocd", "overlays/openshift-rollout"]
pytestmark = pytest.mark.skipif(KUBECTL is None, reason="kubectl is not on the PATH (it ships with this "
                                                         "project's machine image; kustomize comes with it)")


def build(path) -> list[dict]:
    return [d for d in yaml.safe_load_all(realserver.kustomize(path, KUBECTL)) if d]


def by_kind(docs, kind):
    return [d for d in docs if d["kind"] == kind]


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_overlay_builds_and_validates_strictly(overlay):
    docs = build(F.ROOT / "kustomize" / overlay)
    assert {d["kind"] for d in docs} >= {"ServiceAccount", "Role", "ClusterRole", "RoleBinding",
                                        "ClusterRoleBinding", "CronJob"}
    for doc in docs:
        if doc["apiVersion"].startswith("monitoring.coreos.com/"):
            continue                            # not a Kubernetes kind: promtool checks it (tests/realtools/test_alerts.py)
        kubernetes_validate.validate(doc, "1.32.0", strict=True)
        name = doc["metadata"]["name"]
        # ours; the MCO's only for the Role that reads what it publishes (issue 21)
        expected = "openshift-config" if name.endswith("trust-bundle") or name == "ocl-reconciler-rollout" else \
            "default" if name.endswith("-events") else \
            F.MCO_NS if name.endswith("-published") else F.NS
        if doc["kind"] in ("Namespace", "ClusterRole", "ClusterRoleBinding", "MachineConfig", "PrometheusRule") \
                or doc["kind"].startswith("ValidatingAdmissionPolicy"):
            continue                            # cluster-scoped
        assert doc["metadata"].get("namespace") == expected, (doc["kind"], name)


def fits(job, args, period=None):
    """The run ends before the Job's deadline (its wait, then the last pass's --timeout); a run killed
    at the deadline leaves a Lease (--timeout + 60 s, renewed every third of that while it waits:
    reconcile/cluster/lease.py) that has expired by the first tick concurrencyPolicy Forbid lets start."""
    timeout, wait = (float(args[args.index(f) + 1]) if f in args else 0.0 for f in ("--timeout", "--wait"))
    deadline = job["activeDeadlineSeconds"]
    assert wait + timeout < deadline
    if period:
        lease_seconds = timeout + 60
        freed = deadline + (lease_seconds - lease_seconds / 3 if wait else lease_seconds)
        assert freed <= -(-deadline // period) * period


def test_cronjob_is_restricted_and_fits_the_lease():
    (cron,) = by_kind(build(F.ROOT / "kustomize/overlays/openshift"), "CronJob")
    spec = cron["spec"]
    job = spec["jobTemplate"]["spec"]
    pod = job["template"]["spec"]
    (container,) = pod["containers"]
    assert spec["schedule"] == "*/5 * * * *" and spec["concurrencyPolicy"] == "Forbid"
    assert spec["startingDeadlineSeconds"] > 0 and job["backoffLimit"] == 0
    assert spec["successfulJobsHistoryLimit"] >= 1 and spec["failedJobsHistoryLimit"] >= 1
    args = container["args"]
    assert args[:3] == ["run", "--log-format", "json"]
    fits(job, args, int(spec["schedule"].split()[0].removeprefix("*/")) * 60)
    sc = container["securityContext"]
    assert sc["runAsNonRoot"] and sc["readOnlyRootFilesystem"] and not sc["allowPrivilegeEscalation"]
    assert sc["capabilities"] == {"drop": ["ALL"]} and sc["seccompProfile"] == {"type": "RuntimeDefault"}
    assert pod["securityContext"]["runAsNonRoot"] and container["resources"]["limits"]["memory"]
    assert container["image"] == "quay.io/ocl-reconciler/ocl-reconciler:v0.1.0"
    assert pod["serviceAccountName"] == "ocl-reconciler"


def test_argocd_overlay_waves_and_hook():
    docs = build(F.ROOT / "kustomize/overlays/argocd")
    wave = {(d["kind"], d["metadata"]["name"]): int(d["metadata"].get("annotations", {}).get(
        "argocd.argoproj.io/sync-wave", 0)) for d in docs if d["kind"] != "Job"}
    cron = wave[("CronJob", "ocl-reconciler")]
    for kind in ("ServiceAccount", "Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding"):
        assert wave[("Namespace", F.NS)] < wave[(kind, "ocl-reconciler")] \
            < wave[("ConfigMap", "on-cluster-build-config")] < cron
    (hook,) = by_kind(docs, "Job")
    annotations = hook["metadata"]["annotations"]
    assert annotations["argocd.argoproj.io/hook"] == "PostSync"
    assert "BeforeHookCreation" in annotations["argocd.argoproj.io/hook-delete-policy"]
    (cronjob,) = by_kind(docs, "CronJob")
    # the hook runs the CronJob's Pod: the same image, label, service-CA mount (--registry-ca's default),
    # but waits less (a sync lasts as long as its hook: docs/argocd.md)
    hook_args = hook["spec"]["template"]["spec"]["containers"][0]["args"]
    cron_args = cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["args"]
    waits = [float(a[a.index("--wait") + 1]) for a in (hook_args, cron_args)]
    assert 0 < waits[0] < waits[1]
    fits(hook["spec"], hook_args)
    same = copy.deepcopy(hook["spec"]["template"])
    same["spec"]["containers"][0]["args"] = cron_args
    assert same == cronjob["spec"]["jobTemplate"]["spec"]["template"]


def test_argocd_cm_component_merges_into_an_argo_cd_install(tmp_path):
    shutil.copytree(F.ROOT / "kustomize/overlays/argocd/argocd-cm", tmp_path / "argocd-cm")
    (tmp_path / "argocd-cm.yaml").write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: argocd-cm}\n"    # as Argo CD's install.yaml has it
        "data: {url: https://argocd.example.com}\n")
    (tmp_path / "kustomization.yaml").write_text("namespace: argocd\nresources: [argocd-cm.yaml]\ncomponents: [argocd-cm]\n")
    (cm,) = build(tmp_path)
    assert cm["data"]["url"] == "https://argocd.example.com"                # merged, not replaced
    for key in ("resource.customizations.health.machineconfiguration.openshift.io_MachineConfigPool",
                "resource.customizations.health.build.openshift.io_Build"):
        assert cm["data"][key].startswith("-- Health of")


def test_generated_objects_carry_argo_cd_annotations_and_no_tracking(run_cli):
    pool = F.pool("worker")
    pool["metadata"]["labels"]["app.kubernetes.io/instance"] = "mcp-app"
    pool["metadata"]["annotations"]["argocd.argoproj.io/tracking-id"] = "mcp-app:machineconfiguration.openshift.io/MachineConfigPool:/worker"
    code, out, err = run_cli("render", "--snapshot", str(run_cli.write(F.cluster(pool))))
    docs = list(yaml.safe_load_all(out))
    assert code == 0 and err == "" and len(docs) == 3
    for doc in docs:
        md = doc["metadata"]
        assert md["annotations"]["argocd.argoproj.io/compare-options"] == "IgnoreExtraneous"
        assert md["annotations"]["argocd.argoproj.io/sync-options"] == "Prune=false"
        assert "app.kubernetes.io/instance" not in md["labels"]
        assert "argocd.argoproj.io/tracking-id" not in md["annotations"]
    waves = {d["kind"]: int(d["metadata"]["annotations"]["argocd.argoproj.io/sync-wave"]) for d in docs}
    assert waves["ConfigMap"] < waves["Pod"]


def test_cmp_plugin_generate_prints_only_manifests(tmp_path):
    import os
    import sys

    from tests.support.apiserver import APIServer
    plugin = yaml.safe_load((F.ROOT / "kustomize/overlays/argocd/cmp/plugin.yaml").read_text())
    assert plugin["kind"] == "ConfigManagementPlugin"
    generate = plugin["spec"]["generate"]
    with APIServer(F.cluster(F.pool("worker"), F.pool("infra"))) as server:
        env = dict(os.environ, KUBECONFIG=server.kubeconfig(tmp_path / "kc"), ARGOCD_ENV_OCL_POOL="infra",
                   PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}")
        result = subprocess.run(generate["command"] + generate["args"], capture_output=True, text=True,
                                env=env, timeout=60)
        assert server.writes() == []
    assert result.returncode == 0, result.stderr
    docs = list(yaml.safe_load_all(result.stdout))
    assert [d["metadata"]["labels"]["ocl-reconciler.io/pool"] for d in docs] == ["infra"] * 3


def test_containerfile_is_non_root_and_pins_every_runtime_dependency():
    text = (F.ROOT / "Containerfile").read_text()
    users = [line.split()[1] for line in text.splitlines() if line.startswith("USER ")]
    assert users[-1] not in ("0", "root")
    assert "-r requirements.lock" in text and "--no-deps" in text
    import re

    def norm(name):
        return re.sub(r"[-_.]+", "-", name).lower()
    # one requirement a logical line: a pin and its `--hash=sha256:` lines (pip's hash-checking mode)
    lines = [line for line in re.sub(r"\\\n", " ", (F.ROOT / "requirements.lock").read_text()).splitlines()
             if line and not line.startswith("#")]
    pins = {norm(line.split("==")[0]) for line in lines}
    assert all(re.fullmatch(r"[\w.-]+==\S+( +--hash=sha256:[0-9a-f]{64})+", line) for line in lines), lines
    import tomllib
    deps = tomllib.loads((F.ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    for dep in deps:
        name = norm(dep.split(">")[0].split("=")[0].split("<")[0].strip())
        assert name in pins, f"{name} is not pinned in requirements.lock"


def _key(doc):
    return doc["kind"], doc["metadata"].get("namespace", ""), doc["metadata"]["name"]


def test_rollout_component_adds_only_its_rbac_and_policy():
    """components/rollout adds to overlays/openshift exactly: a ClusterRole with the four verbs of
    `rollout: machineconfig`, its binding to our ServiceAccount, and the admission policy that
    narrows them (tests/realapi/test_realapi_rollout_policy.py proves it on a real server); base and the
    other overlays grant no MachineConfig write."""
    plain = {_key(d): d for d in build(F.ROOT / "kustomize/overlays/openshift")}
    rollout = {_key(d): d for d in build(F.ROOT / "kustomize/overlays/openshift-rollout")}
    assert {k: v for k, v in rollout.items() if k in plain} == plain        # nothing of base changed
    added = {k[0]: v for k, v in rollout.items() if k not in plain}
    assert sorted(added) == ["ClusterRole", "ClusterRoleBinding", "ConfigMap", "ValidatingAdmissionPolicy",
                             "ValidatingAdmissionPolicyBinding"]
    assert {v["metadata"]["name"] for v in added.values()} == {"ocl-reconciler-rollout"}
    assert added["ClusterRole"]["rules"] == [{"apiGroups": [F.MCO], "resources": ["machineconfigs"],
                                              "verbs": ["list", "create", "patch", "delete"]},
                                             # the node disruption policy (liveChanges, issue 39)
                                             {"apiGroups": ["operator.openshift.io"], "resources": ["machineconfigurations"],
                                              "resourceNames": ["cluster"], "verbs": ["get"]}]
    assert added["ClusterRoleBinding"]["roleRef"]["name"] == "ocl-reconciler-rollout"
    assert added["ClusterRoleBinding"]["subjects"] == [
        {"kind": "ServiceAccount", "name": "ocl-reconciler", "namespace": F.NS}]
    policy = added["ValidatingAdmissionPolicy"]["spec"]
    assert policy["failurePolicy"] == "Fail"
    (rule,) = policy["matchConstraints"]["resourceRules"]
    assert rule["resources"] == ["machineconfigs"] and rule["operations"] == ["CREATE", "UPDATE", "DELETE"]
    assert policy["paramKind"] == {"apiVersion": "v1", "kind": "ConfigMap"}
    assert added["ValidatingAdmissionPolicyBinding"]["spec"] == {
        "policyName": "ocl-reconciler-rollout", "validationActions": ["Deny"],
        "paramRef": {"name": "ocl-reconciler-rollout", "namespace": "openshift-config",
                     "parameterNotFoundAction": "Deny"}}
    # the parameter: in openshift-config (our ServiceAccount writes no ConfigMap there), a
    # placeholder annotation and no data: the administrator sets it with `oc patch`, and a re-apply of
    # the overlay (three-way merge) leaves what they set (docs/admin.md)
    params = added["ConfigMap"]
    assert params["metadata"]["namespace"] == "openshift-config" and "data" not in params
    assert "data.repository" in params["metadata"]["annotations"]["ocl-reconciler.io/edit-me"]
    for overlay in ("base", "overlays/openshift", "overlays/argocd"):
        for doc in build(F.ROOT / "kustomize" / overlay):
            for r in doc.get("rules") or []:
                if "machineconfigs" in r["resources"] or "*" in r["resources"]:
                    assert r["verbs"] == ["get"], (overlay, doc["metadata"]["name"], r)


def test_the_pool_policy_ships_with_every_openshift_overlay_but_the_4_16_one():
    """components/pool-policy (issue 31 item 2) is what overlays/openshift adds to
    overlays/openshift-4.16: the policy on pools and its binding, nothing else, and they are in every
    overlay built on overlays/openshift; the 4.16 overlay and base hold no admissionregistration
    object (releases before 4.17 do not serve admissionregistration.k8s.io/v1 ones). Argo CD syncs
    the policy before the RBAC whose `patch` it narrows. tests/realapi/test_realapi_pool_policy.py
    proves its rules on a real server."""
    with_policy = {_key(d): d for d in build(F.ROOT / "kustomize/overlays/openshift")}
    without = {_key(d): d for d in build(F.ROOT / "kustomize/overlays/openshift-4.16")}
    assert {k: v for k, v in with_policy.items() if k in without} == without       # nothing else changed
    both = {k: v for k, v in with_policy.items() if k not in without}
    assert {k[2] for k in both} == {"ocl-reconciler-pools", "ocl-reconciler-namespace"}       # and components/namespace-policy
    added = {k[0]: v for k, v in both.items() if k[2] == "ocl-reconciler-pools"}
    assert sorted(added) == ["ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"]
    policy = added["ValidatingAdmissionPolicy"]["spec"]
    assert policy["failurePolicy"] == "Fail"
    (rule,) = policy["matchConstraints"]["resourceRules"]
    assert rule["apiGroups"] == [F.MCO] and rule["resources"] == ["machineconfigpools"]      # not /status
    assert rule["operations"] == ["CREATE", "UPDATE", "DELETE"]
    rollout = next(yaml.safe_load_all((F.ROOT / "kustomize/components/rollout/policy.yaml").read_text()))
    assert policy["matchConditions"] == rollout["spec"]["matchConditions"]           # our SA, as there
    assert all(v.get("reason") == "Forbidden" and v["message"].startswith("ocl-reconciler may ")
               and "\n" not in v["message"] for v in policy["validations"])
    assert added["ValidatingAdmissionPolicyBinding"]["spec"] == {"policyName": "ocl-reconciler-pools",
                                                                 "validationActions": ["Deny"]}
    for overlay in ("base", "overlays/openshift-4.16"):
        assert not [d for d in build(F.ROOT / "kustomize" / overlay)
                    if d["apiVersion"].startswith("admissionregistration.k8s.io/")], overlay
    ours = {k for k in with_policy if k not in without}
    assert {_key(d) for d in build(F.ROOT / "kustomize/overlays/openshift-rollout")} >= ours
    argocd = {_key(d): d for d in build(F.ROOT / "kustomize/overlays/argocd")}
    wave = {k: int(d["metadata"].get("annotations", {}).get("argocd.argoproj.io/sync-wave", 0))
            for k, d in argocd.items()}
    for kind in ("ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"):
        assert wave[(kind, "", "ocl-reconciler-pools")] < wave[("ClusterRole", "", "ocl-reconciler")] \
            == wave[("ClusterRoleBinding", "", "ocl-reconciler")]


def test_the_namespace_policy_ships_with_every_openshift_overlay_but_the_4_16_one():
    """components/namespace-policy (issue 31 item 5): a policy on the Secrets and Pods our
    ServiceAccount creates, and its binding, in overlays/openshift and every overlay built on it, not
    in base nor overlays/openshift-4.16; synced by Argo CD before the RBAC whose `create` it narrows.
    tests/realapi/test_realapi_namespace_policy.py proves its rules on a real server."""
    with_policy = {_key(d): d for d in build(F.ROOT / "kustomize/overlays/openshift")}
    added = {k[0]: v for k, v in with_policy.items() if k[2] == "ocl-reconciler-namespace"}
    assert sorted(added) == ["ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"]
    assert all(v["metadata"]["labels"]["app.kubernetes.io/component"] == "namespace-policy" for v in added.values())
    policy = added["ValidatingAdmissionPolicy"]["spec"]
    assert policy["failurePolicy"] == "Fail"
    (rule,) = policy["matchConstraints"]["resourceRules"]
    assert rule["apiGroups"] == [""] and sorted(rule["resources"]) == ["pods", "secrets"]
    assert rule["operations"] == ["CREATE"]
    rollout = next(yaml.safe_load_all((F.ROOT / "kustomize/components/rollout/policy.yaml").read_text()))
    assert policy["matchConditions"] == rollout["spec"]["matchConditions"]           # our SA, as there
    assert all(v.get("reason") == "Forbidden" and v["message"].startswith("ocl-reconciler may ")
               and "\n" not in v["message"] for v in policy["validations"])
    assert added["ValidatingAdmissionPolicyBinding"]["spec"] == {"policyName": "ocl-reconciler-namespace",
                                                                 "validationActions": ["Deny"]}
    for overlay in ("base", "overlays/openshift-4.16"):
        assert not [d for d in build(F.ROOT / "kustomize" / overlay) if d["metadata"]["name"] == "ocl-reconciler-namespace"]
    for overlay in ("overlays/openshift-rollout", "overlays/argocd"):
        assert {_key(d) for d in build(F.ROOT / "kustomize" / overlay)} >= {_key(v) for v in added.values()}, overlay
    argocd = {_key(d): d for d in build(F.ROOT / "kustomize/overlays/argocd")}
    for kind in ("ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"):
        wave = argocd[(kind, "", "ocl-reconciler-namespace")]["metadata"]["annotations"]["argocd.argoproj.io/sync-wave"]
        assert wave == "-2"


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_binding_names_our_service_account_in_our_namespace(overlay):
    """Issue 21: no subject is left in the MCO's namespace (a binding there would grant nothing to
    the new install, or something to an old one)."""
    docs = build(F.ROOT / "kustomize" / overlay)
    bindings = [d for d in docs if d["kind"] in ("RoleBinding", "ClusterRoleBinding")]
    assert bindings
    for binding in bindings:
        for subject in binding["subjects"]:
            assert subject["kind"] == "ServiceAccount" and subject["name"] in ("ocl-reconciler", "ocl-builder")
            assert subject.get("namespace", binding["metadata"].get("namespace")) == F.NS, binding["metadata"]


def test_the_rollout_components_objects_carry_argo_cds_waves(tmp_path):
    """An Argo CD overlay that adds components/rollout (docs/argocd.md: RBAC in wave -1) orders its
    ClusterRole and binding with the other RBAC, and its admission policy before them, so that the
    MachineConfig verbs are never granted while the policy that narrows them is missing (issue 29
    item 14: they landed in wave 0)."""
    (tmp_path / "kustomization.yaml").write_text(yaml.safe_dump({
        "apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization",
        "resources": [os.path.relpath(F.ROOT / "kustomize/overlays/argocd", tmp_path)],
        "components": [os.path.relpath(F.ROOT / "kustomize/components/rollout", tmp_path)]}))
    docs = build(tmp_path)
    wave = {(d["kind"], d["metadata"]["name"]): int(d["metadata"].get("annotations", {}).get(
        "argocd.argoproj.io/sync-wave", 0)) for d in docs if d["kind"] != "Job"}
    rbac = wave[("ClusterRole", "ocl-reconciler")]
    assert rbac == -1
    assert wave[("ClusterRole", "ocl-reconciler-rollout")] == wave[("ClusterRoleBinding", "ocl-reconciler-rollout")] \
        == rbac
    assert wave[("ValidatingAdmissionPolicy", "ocl-reconciler-rollout")] < rbac
    assert wave[("ValidatingAdmissionPolicyBinding", "ocl-reconciler-rollout")] < rbac


def test_the_argocd_overlays_settings_name_only_what_the_docs_create():
    """docs/admin.md ("Creating the settings", step 3): leave baseImagePullSecretName out, the global
    pull secret is used; `global-pull-secret-copy` exists only for pools with the MCO's own layering
    label (../shared/reference/mco-rollout.md section 2), so naming it blocks every pool (issue 29
    item 10). The rollout mode is said, not left to a default."""
    (settings,) = [d for d in build(F.ROOT / "kustomize/overlays/argocd")
                   if d["kind"] == "ConfigMap" and d["metadata"]["name"] == "on-cluster-build-config"]
    assert "baseImagePullSecretName" not in settings["data"]
    assert settings["data"]["rollout"] in ("annotation", "machineconfig")
    assert settings["data"]["finalImagePushSecretName"] == "builder-push-secret"      # admin.md step 2
