"""The product as shipped, run by the CronJob and Job controllers on a real node (issue 52):
kustomize/base with only its image replaced (tests/support/nodejobs.py), the image built from the
Containerfile (tests/support/productimage.py), its Pods started by the real kubelet with containerd
and runc, the run authenticated by the token the kubelet mounts.

What the tests change on the live objects, and why: the CronJob is suspended (its `*/5` tick would
start runs in the middle of other tests; `kubectl create job --from` runs its jobTemplate as it is),
except in the test of the controller itself, which ticks every minute (`* * * * *`, the finest a
schedule can say) so that two ticks fit in a test; and one Job's activeDeadlineSeconds, 720 as
shipped, is brought to a few seconds from now once its run waits, so that it is reached in a test. OpenShift's build controller cannot run here: the
test writes the Build's status, as it would."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import kubelet  # examples/kubelet.py
import pytest

from reconcile.contract import annotations as A
from tests.support import factory as F
from tests.support import nodejobs, realserver
from tests.support.nodejobs import build_of, finish, scenario

pytestmark = pytest.mark.realnode


def json_lines(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def test_a_run_from_the_cronjob_writes_the_pool_with_its_own_token_and_the_job_completes(d):
    d.seed(scenario())
    mark = d.api.audit_mark()
    job = d.job("run-1")
    pod = d.wait_running(job)
    build = d.wait_for("the run's Build", lambda: build_of(d))
    assert d.wait_for("the pool's state", lambda: d.ann().get(A.STATE)) == A.PENDING
    # the pool was patched by our ServiceAccount, from the Pod's address: the token the kubelet mounted
    patches = [e for e in d.api.audit(mark, realserver.RECONCILER)
               if e["verb"] == "patch" and e["objectRef"]["resource"] == "machineconfigpools"]
    assert patches and all(pod["status"]["podIP"] in e["sourceIPs"] for e in patches), patches
    finish(d, "Running")
    finish(d, "Succeeded")                  # the run --wait follows the Build to its end
    assert d.wait_job(job) == "Complete", d.logs(job)
    a = d.ann()
    assert a[A.STATE] == A.SUCCEEDED
    assert a[A.IMAGE] == f"{F.REPO}@{kubelet.digest_for(build['metadata']['name'])}"
    lines = json_lines(d.logs(job))          # --log-format json, as the CronJob says: one object a line
    assert lines and all("message" in line or "msg" in line for line in lines), lines[:3]
    assert d.terminated(job)["exitCode"] == 0


def test_a_failing_run_fails_its_job_with_the_reason_in_the_termination_message_and_the_logs(d):
    """RBAC is exactly enough: without `patch` on pools (kustomize/base/clusterrole.yaml's first
    rule), the run cannot record its outcome and says which permission it lacks."""
    d.seed(scenario())
    role = d.api.request("GET", "/apis/rbac.authorization.k8s.io/v1/clusterroles/ocl-reconciler")[1]
    (rule,) = [r for r in role["rules"] if r["resources"] == ["machineconfigpools"]]
    rule["verbs"].remove("patch")
    d.api.request("PUT", "/apis/rbac.authorization.k8s.io/v1/clusterroles/ocl-reconciler", role)
    job = d.job("no-patch")
    assert d.wait_job(job) == "Failed/BackoffLimitExceeded"
    terminated = d.terminated(job)
    assert terminated["exitCode"] == 2              # run --help: 2 a write failed
    for text in (terminated.get("message") or "", d.logs(job)):
        assert "forbidden" in text and "patch" in text and "machineconfigpools" in text, text


def test_the_cronjob_controller_starts_one_run_and_forbids_a_second_and_the_lease_refuses_one_by_hand(d):
    d.seed(scenario())
    d.kubectl("patch", "cronjob", nodejobs.CRONJOB, "-n", F.NS, "--type", "merge",
              "-p", json.dumps({"spec": {"suspend": False, "schedule": "* * * * *"}}))
    first = d.wait_for("a Job of the CronJob controller", lambda: d.scheduled_jobs(), seconds=75)[0]
    d.wait_running(first)
    d.wait_for("the run's Build", lambda: build_of(d))       # the first run waits for it
    # the Lease keeps a run by hand out (Forbid cannot: its Job is not the controller's):
    # docs/contract.md "another run holds the Lease": exit 0, no writes, and this line
    mark = d.api.audit_mark()
    second = d.job("by-hand")
    assert d.wait_job(second) == "Complete"
    assert "run skipped: another run holds the Lease" in d.logs(second)
    ip = d.pods(second)[0]["status"]["podIP"]
    writes = [(e["verb"], e["objectRef"]["resource"], e["responseStatus"]["code"])
              for e in d.api.audit(mark, realserver.RECONCILER)
              if ip in e["sourceIPs"] and e["verb"] not in ("get", "list", "watch")]
    assert writes == [("create", "leases", 409)], writes        # its try at the Lease, refused
    # the next tick finds the first run active: concurrencyPolicy Forbid starts none
    d.wait_for("the controller's JobAlreadyActive", lambda: d.cronjob_events("JobAlreadyActive"), seconds=75)
    assert d.scheduled_jobs() == [first]
    d.kubectl("patch", "cronjob", nodejobs.CRONJOB, "-n", F.NS, "--type", "merge",
              "-p", json.dumps({"spec": {"suspend": True}}))
    finish(d, "Succeeded")
    assert d.wait_job(first) == "Complete", d.logs(first)
    assert d.ann()[A.STATE] == A.SUCCEEDED


def test_active_deadline_seconds_ends_a_long_wait_and_the_next_run_converges_with_nothing_lost(d):
    d.seed(scenario())
    d.job("deadline")
    d.wait_for("the run's Build", lambda: build_of(d))
    finish(d, "Running")
    job = d.job_object("deadline")
    assert job["spec"]["activeDeadlineSeconds"] == 720          # as shipped; brought near to be reached here
    started = datetime.strptime(job["status"]["startTime"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    near = int((datetime.now(UTC) - started).total_seconds()) + 5     # the field is mutable on a Job
    d.api.request("PATCH", f"/apis/batch/v1/namespaces/{F.NS}/jobs/deadline",
                  {"spec": {"activeDeadlineSeconds": near}}, content_type="application/merge-patch+json")
    assert d.wait_job("deadline", seconds=90) == "Failed/DeadlineExceeded"
    assert d.ann()[A.STATE] == A.BUILDING
    # the kubelet's SIGTERM ends the wait as Ctrl-C does: the run's summary, and its Lease released
    d.wait_for("the Pod's end", lambda: not [p for p in d.pods("deadline") if p["status"].get("phase") == "Running"])
    assert d.wait_for("the Lease released", lambda: not d.api.list("Lease", F.NS), seconds=10)
    finish(d, "Succeeded")                  # while no run was there to see it
    again = d.job("after-deadline")
    assert d.wait_job(again) == "Complete", d.logs(again)
    assert d.ann()[A.STATE] == A.SUCCEEDED
    assert d.ann()[A.IMAGE] == nodejobs.recorded_image(d)
