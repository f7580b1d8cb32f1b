"""Argo CD's own controllers sync the product from git onto the real node (issue 54).

tests/support/argocdnode.py's `synced` sets up the module: Argo CD's application-controller and
repo-server (and redis) against the node's kube-apiserver, a git repository with the project's
kustomize/ and a test overlay of overlays/argocd (the image, the settings, the CronJob suspended),
the product's Application and a second one that manages the pool `worker`, both synced once.

Expected waves, hook and health come from docs/argocd.md and Argo CD's documented states
(operationState.phase, syncResult.resources[].syncPhase/hookPhase, sync.status, health.status); the
order is the one Argo CD records (gitops-engine numbers each resource result in the order it ran
it), never our timestamps. One Application setup serves every test of the module."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from reconcile.contract import annotations as A
from tests.support import argocdnode, argocdreal, nodejobs
from tests.support import factory as F
from tests.support.argocdnode import (
    HOOK,
    OVERLAY,
    POOLS,
    PRODUCT,
    Setup,
    documented_message,
    health_is,
    overlay,
    settings,
)

pytestmark = pytest.mark.realnode

#: docs/argocd.md "The overlay": the Namespace -3, the ServiceAccounts -2, RBAC -1, the settings 0,
#: the CronJob 1; the pool and namespace policies of overlays/openshift -2; a kind without a wave 0
#: (Argo CD's sync-waves.md)
DOC_WAVES = {"Namespace": -3, "ServiceAccount": -2, "ValidatingAdmissionPolicy": -2,
             "ValidatingAdmissionPolicyBinding": -2, "Role": -1, "RoleBinding": -1, "ClusterRole": -1,
             "ClusterRoleBinding": -1, "ConfigMap": 0, "PrometheusRule": 0, "CronJob": 1}


@pytest.fixture(scope="module")
def setup(node, tmp_path_factory) -> Iterator[Setup]:
    with argocdnode.synced(node, tmp_path_factory) as s:
        yield s


def the_first_sync_applies_the_documented_waves_in_order_then_the_hook_runs_once_and_is_deleted(setup: Setup) -> None:
    op = setup.first
    assert op["phase"] == "Succeeded", op.get("message")
    results = op["syncResult"]["resources"]             # in the order Argo CD ran them
    synced = [r for r in results if r.get("syncPhase") == "Sync"]
    assert {r["kind"] for r in synced} == set(DOC_WAVES), results
    waves = [DOC_WAVES[r["kind"]] for r in synced]
    assert waves == sorted(waves), [(r["kind"], r["name"]) for r in synced]
    assert all(r["status"] == "Synced" for r in synced), synced
    # what Argo CD read of each object's wave is the documented one
    for r in (r for r in setup.status()["resources"] if not r.get("hook")):
        assert r.get("syncWave", 0) == DOC_WAVES[r["kind"]], r
    (hook,) = [r for r in results if r.get("hookType")]
    assert results[-1] == hook
    assert (hook["kind"], hook["name"], hook["syncPhase"], hook["hookPhase"]) == ("Job", HOOK, "PostSync", "Succeeded")
    # HookSucceeded: the Job is gone; its run wrote the pool
    assert setup.api.request("GET", f"/apis/batch/v1/namespaces/{F.NS}/jobs/{HOOK}", ok=(404,))[0] == 404
    assert setup.ann()[A.STATE] == A.SUCCEEDED
    assert setup.ann()[A.BUILD] == f"Build/{F.NS}/{setup.builds[-1]}"
    # the CronJob is there; Argo CD 2.14 has no CronJob check (docs/argocd.md), so no health of its own
    cronjob = setup.resource("CronJob", nodejobs.CRONJOB, PRODUCT)
    assert cronjob["status"] == "Synced" and "health" not in cronjob, cronjob
    assert setup.status()["health"]["status"] == "Healthy"


def a_second_sync_and_a_hard_refresh_find_nothing_to_change(setup: Setup) -> None:
    """Argo CD's own diff decides: every resource Synced after a second sync and after a hard
    refresh (which compares with the manifests generated again). kubectl's own words for each apply
    are kept as a figure: `configured` is a write with no difference Argo CD's diff sees."""
    op = setup.sync_and_settle(PRODUCT)            # the pool is built: the hook's run has nothing to wait for
    setup.figures["second sync: kubectl 'configured'"] = sorted(
        r["name"] for r in op["syncResult"]["resources"]
        if r.get("syncPhase") == "Sync" and r.get("message", "").endswith(" configured"))
    for name in (PRODUCT, POOLS):
        s = setup.refreshed(name, "hard")
        assert (s["sync"]["status"], s["health"]["status"]) == ("Synced", "Healthy"), s
        drift = [r for r in s["resources"] if not r.get("hook") and r["status"] != "Synced"]
        assert not drift, drift


def run_from_cronjob(setup: Setup, name: str) -> str:
    """`kubectl create job --from=cronjob/...` (docs/admin.md): one run of the shipped template."""
    setup.kubectl("create", "job", name, f"--from=cronjob/{nodejobs.CRONJOB}", "-n", F.NS)
    return name


def rebuild(setup: Setup, token: str) -> str:
    """A rebuild token set as docs/contract.md says (yours to set), then a run that acts on it."""
    setup.api.request("PATCH", setup.api.path("MachineConfigPool", "", "worker"),
                      {"metadata": {"annotations": {A.REBUILD: token}}}, content_type="application/merge-patch+json")
    return run_from_cronjob(setup, f"run-{token}")


def the_pools_health_through_the_controller_follows_the_reconcilers_record(setup: Setup) -> None:
    """docs/argocd.md's table: Pending/Building -> Progressing, Failed -> Degraded, Succeeded ->
    Healthy, the message `STATE: MESSAGE`; the Application's health is its worst resource's."""
    before = setup.builds[-1]
    rebuild(setup, "fail-1")
    building = setup.argo.wait("Progressing", lambda: health_is(setup, "Progressing"))
    assert building["message"] == documented_message(setup.ann()), building
    setup.finish_build("Failed", after=before)
    degraded = setup.argo.wait("Degraded", lambda: health_is(setup, "Degraded"), seconds=90)
    ann = setup.ann()
    assert ann[A.STATE] == A.FAILED
    assert degraded["message"] == documented_message(ann)
    failed = setup.builds[-1]
    rebuild(setup, "ok-2")
    setup.finish_build("Succeeded", after=failed)
    healthy = setup.argo.wait("Healthy", lambda: health_is(setup, "Healthy"), seconds=90)
    assert healthy["message"] == documented_message(setup.ann())
    assert setup.status(POOLS)["sync"]["status"] == "Synced"    # our annotations are no drift


def a_settings_change_in_git_syncs_and_the_hook_builds_it_in_that_sync(setup: Setup) -> None:
    before = setup.ann()[A.BUILD]
    setup.repo.write(f"{OVERLAY}/kustomization.yaml",
                     overlay(setup.image, settings(finalImagePullspec=f"{F.REPO}:v2")))
    sha = setup.repo.commit("a new pullspec")
    committed = time.monotonic()
    op = setup.sync_and_settle(PRODUCT, build="Succeeded", after=before.rsplit("/", 1)[1])
    setup.figures["settings change: commit to Synced+Healthy s"] = round(time.monotonic() - committed, 1)
    assert op["syncResult"]["revision"] == sha
    (cm,) = [r for r in op["syncResult"]["resources"] if r["kind"] == "ConfigMap"]
    assert "configured" in cm["message"], cm
    ann = setup.ann()
    assert ann[A.BUILD] != before and ann[A.STATE] == A.SUCCEEDED
    assert ann[A.IMAGE].startswith(f"{F.REPO}@sha256:")


def deleting_the_application_with_cascade_removes_what_we_shipped_and_leaves_the_pool(setup: Setup) -> None:
    shipped = [(r.get("group", ""), r["version"], r["kind"], r.get("namespace", ""), r["name"])
               for r in setup.status()["resources"] if not r.get("hook")]
    before = setup.ann()
    setup.argo.patch_app(PRODUCT, {"metadata": {"finalizers": ["resources-finalizer.argocd.argoproj.io"]}})
    setup.api.request("DELETE", f"{argocdreal.APP_PATH}/{PRODUCT}")
    argocdnode.wait_gone(setup.api, f"{argocdreal.APP_PATH}/{PRODUCT}", seconds=120)
    setup.argo.wait("what we shipped gone", lambda: not [s for s in shipped if exists(setup, *s)], seconds=90)
    # docs/admin.md "Uninstalling": the pools and what the runs wrote stay until the opt-out cleans them
    assert setup.ann() == before
    # installed again as before: the module's setup tears down what it finds
    setup.api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": F.NS}})
    setup.api.load(F.find(nodejobs.scenario(), "Secret"))
    setup.argo.create_app(PRODUCT, setup.repo.folder, OVERLAY)
    setup.sync_and_settle(PRODUCT)


#: The module's phases, in this order, on its one Argo CD setup.
PHASES = (the_first_sync_applies_the_documented_waves_in_order_then_the_hook_runs_once_and_is_deleted,
          a_second_sync_and_a_hard_refresh_find_nothing_to_change,
          the_pools_health_through_the_controller_follows_the_reconcilers_record,
          a_settings_change_in_git_syncs_and_the_hook_builds_it_in_that_sync,
          deleting_the_application_with_cascade_removes_what_we_shipped_and_leaves_the_pool)


def test_argo_cd_syncs_the_product_and_follows_the_pools_as_docs_argocd_md_says(setup):
    """Every phase of PHASES in order, one test: the module's Argo CD setup takes 60 to 100 s, and
    make test's worksteal split separate tests over workers, each setting Argo CD up again. A
    failure's traceback names the phase."""
    for phase in PHASES:
        phase(setup)


def exists(setup: Setup, group: str, version: str, kind: str, ns: str, name: str) -> bool:
    what = f"{kind}.{version}.{group}" if group else kind
    out = setup.api.kubectl("get", what, name, *(["-n", ns] if ns else []), "--ignore-not-found", "-o", "name",
                            kubeconfig=setup.node.admin)
    return bool(out.stdout.strip())
