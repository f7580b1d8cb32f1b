"""A failed CronJob run as Argo CD's own application-controller shows it (issue 54 item 3, its
last case): docs/argocd.md "What a failed run does to the Application", for Argo CD 2.14.21.

The module's own Argo CD and Applications (tests/support/argocdnode.py's `synced`: the product and
the pool `worker`, synced once, the pool built). Then, from git, the CronJob resumed with a tick
every minute (the finest a schedule can say; `*/5` as shipped): one more sync, whose hook has
nothing to do. Then the MCO's ConfigMap `machine-config-osimageurl` goes, which the run reads on
every run, so that every run from then on is `Blocked` for every opted-in pool and exits 2
(docs/contract.md's table of failures). Not the pull Secret: the run reads it only for a new build,
so a rebuild would have to be asked for, and the image it replaces joins the pool's history.

Expected values come from the docs and from upstream, not from our output:
- the Job: kubernetes' job controller (pkg/controller/job/job_controller.go) ends a Job whose Pods
  failed past `backoffLimit: 0` with the condition `Failed`, reason `BackoffLimitExceeded`,
  message `Job has reached the specified backoff limit`;
- the Pod: exit 2 (docs/contract.md: a pool Blocked), and its termination message (the CronJob's
  `terminationMessagePolicy: FallbackToLogsOnError`: the log's tail) says why;
- the product's Application: argo-cd v2.14.21's controller/health.go (setApplicationHealth) takes
  the Application's health from its resources' and skips one whose health is nil, writing none in
  its entry. A CronJob's is: gitops-engine's GetHealthCheckFunc has only Job in `batch`, argo-cd's
  resource_customizations/batch/CronJob holds actions, no health.lua, and our argocd-cm adds none.
  So the CronJob entry has no health, and the Application stays `Healthy` (and `Synced`: a run
  changes nothing Argo CD compares);
- the pools' Application: docs/argocd.md's table for MachineConfigPool, `Blocked` -> `Degraded`
  with `Blocked: MESSAGE`, and docs/contract.md's message for a missing ConfigMap,
  `ConfigMap <ns>/<name> not found`."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from reconcile.contract import annotations as A
from tests.support import argocdnode, nodejobs
from tests.support import factory as F
from tests.support.argocdnode import OVERLAY, POOLS, PRODUCT, Setup, health_is, overlay, settings

pytestmark = pytest.mark.realnode

#: the CronJob as the test's git has it after the first sync: resumed, a tick every minute
EVERY_MINUTE = {"suspend": False, "schedule": "* * * * *"}
MISSING = "machine-config-osimageurl"
#: docs/contract.md: "`on-cluster-build-config` or `machine-config-osimageurl` missing | `Blocked`:
#: `ConfigMap <ns>/<name> not found` | blocks every opted-in pool; exit 2"
BLOCKED_MESSAGE, BLOCKED_EXIT = f"ConfigMap {F.MCO_NS}/{MISSING} not found", 2
#: kubernetes pkg/controller/job/job_controller.go, for a Job past its backoffLimit
JOB_FAILED = {"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded",
              "message": "Job has reached the specified backoff limit"}


@pytest.fixture(scope="module")
def setup(node, tmp_path_factory) -> Iterator[Setup]:
    with argocdnode.synced(node, tmp_path_factory) as s:
        yield s


def failed_run(setup: Setup) -> str:
    """The CronJob resumed from git and synced, the MCO's ConfigMap deleted, then the first Job the
    CronJob controller starts after that, followed to its end."""
    setup.repo.write(f"{OVERLAY}/kustomization.yaml", overlay(setup.image, settings(), cronjob=EVERY_MINUTE))
    setup.repo.commit("the CronJob resumed, a run every minute")
    setup.sync_and_settle(PRODUCT)
    setup.api.request("DELETE", f"/api/v1/namespaces/{F.MCO_NS}/configmaps/{MISSING}")
    deleted = time.monotonic()
    before = set(setup.scheduled_jobs())            # started before the deletion: they may have read it
    job = setup.argo.wait("the CronJob's next run", lambda: min(set(setup.scheduled_jobs()) - before, default=None),
                          seconds=100)
    assert setup.wait_job(job) == "Failed/BackoffLimitExceeded", setup.describe(job)
    setup.figures["deletion to the next run's Job Failed s"] = round(time.monotonic() - deleted, 1)
    return job


def condition(job: dict[str, Any], kind: str) -> dict[str, Any]:
    (found,) = [c for c in job["status"]["conditions"] if c["type"] == kind]
    return found


def test_a_failed_cronjob_run_leaves_the_application_healthy_and_the_pools_application_degraded(setup):
    job = failed_run(setup)
    # the Job and its Pod, as the Job controller and the kubelet ended them
    failed = condition(setup.job_object(job), "Failed")
    assert {k: failed.get(k) for k in JOB_FAILED} == JOB_FAILED, failed
    terminated = setup.terminated(job)
    assert terminated["exitCode"] == BLOCKED_EXIT, terminated
    assert BLOCKED_MESSAGE in (terminated.get("message") or ""), terminated
    assert setup.ann()[A.STATE] == A.BLOCKED
    # the product's Application as the controller reports it once it compared after the failure
    status = setup.refreshed(PRODUCT)
    assert status["reconciledAt"] >= failed["lastTransitionTime"], (status["reconciledAt"], failed)
    assert (status["sync"]["status"], status["health"]["status"]) == ("Synced", "Healthy"), status
    cronjob = setup.resource("CronJob", nodejobs.CRONJOB, PRODUCT)
    assert cronjob["status"] == "Synced" and "health" not in cronjob, cronjob
    assert not [r for r in status["resources"] if r["kind"] == "Job"], status["resources"]   # not ours to judge
    # the CronJob's live status says it was the controller's run (what Argo CD 3.2's check would read)
    live = setup.api.request("GET", f"/apis/batch/v1/namespaces/{F.NS}/cronjobs/{nodejobs.CRONJOB}")[1]
    assert live["status"].get("lastScheduleTime"), live["status"]
    # the pools' Application: Degraded with our message, the pool's health
    health = setup.argo.wait("the pool Degraded", lambda: health_is(setup, "Degraded"), seconds=60)
    assert health["message"] == f"{A.BLOCKED}: {BLOCKED_MESSAGE}", health
    assert setup.status(POOLS)["sync"]["status"] == "Synced"
