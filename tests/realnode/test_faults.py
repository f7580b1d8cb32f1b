"""Faults under a run of the shipped CronJob on the real node (issue 52), each while the run waits
(`run --wait 540`, as kustomize/base/cronjob.yaml says) for the pool's Build: the kube-apiserver
restarted, etcd compacted past the run's watches (410 Gone), the kubelet restarted, the run's
container killed. After each, nothing is lost: the Build the run started is the one recorded, and
the pool ends Succeeded with its image, in that run or the next."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from reconcile.contract import annotations as A
from tests.support import factory as F
from tests.support import nodejobs, realserver
from tests.support.nodejobs import build_of, finish, scenario

pytestmark = pytest.mark.realnode


def waiting(d: nodejobs.Deployed, job: str) -> tuple[dict, str]:
    """A run started and waiting for its Build, which runs: (its Pod, the Build's name)."""
    d.seed(scenario())
    d.job(job)
    pod = d.wait_running(job)
    build = d.wait_for("the run's Build", lambda: build_of(d))
    finish(d, "Running")
    d.wait_for("the pool's Building", lambda: d.ann().get(A.STATE) == A.BUILDING)
    return pod, build["metadata"]["name"]


def reads_from(d: nodejobs.Deployed, mark: int, pod: dict, verb: str) -> list[str]:
    ip = pod["status"]["podIP"]
    return [e["objectRef"]["resource"] for e in d.api.audit(mark, realserver.RECONCILER)
            if ip in e["sourceIPs"] and e["verb"] == verb]


def converged_on(d: nodejobs.Deployed, build: str) -> None:
    a = d.ann()
    assert a[A.STATE] == A.SUCCEEDED
    assert a[A.BUILD] == f"Build/{F.NS}/{build}"             # the build it started, not another
    assert a[A.IMAGE] == nodejobs.recorded_image(d)
    assert d.api.list("Build", F.NS) == []                   # recorded, then deleted


def test_the_kube_apiserver_restarted_mid_wait(d):
    pod, build = waiting(d, "apiserver")
    away = d.node.restart_apiserver()
    assert away > 0
    finish(d, "Succeeded")
    assert d.wait_job("apiserver") == "Complete", d.logs("apiserver")
    converged_on(d, build)


def test_etcd_compacted_past_the_runs_watches_makes_it_list_again(d):
    pod, build = waiting(d, "compacted")
    d.api.request("PATCH", d.api.path("MachineConfigPool", "", "worker"), {"metadata": {"labels": {"x": "y"}}},
                  content_type="application/merge-patch+json")
    d.api.compact()                         # every revision the run's watches started from is gone...
    mark = d.api.audit_mark()
    d.node.restart_apiserver()              # ...and its watch cache with it: each watch is 410 Gone
    finish(d, "Succeeded")
    assert d.wait_job("compacted") == "Complete", d.logs("compacted")
    converged_on(d, build)
    assert "builds" in reads_from(d, mark, pod, "list")       # it listed again, and so saw the end


def test_the_kubelet_restarted_while_the_run_waits(d):
    pod, build = waiting(d, "kubelet")
    d.node.restart_kubelet()
    (again,) = d.pods("kubelet")
    assert again["metadata"]["uid"] == pod["metadata"]["uid"] and again["status"]["phase"] == "Running"
    finish(d, "Succeeded")
    assert d.wait_job("kubelet") == "Complete", d.logs("kubelet")
    assert d.terminated("kubelet")["exitCode"] == 0
    converged_on(d, build)


def test_the_runs_container_killed_mid_run_and_the_next_run_converges(d):
    pod, build = waiting(d, "killed")
    d.node.kill_container(pod)
    assert d.wait_job("killed") == "Failed/BackoffLimitExceeded"
    assert d.terminated("killed")["exitCode"] == 137                # SIGKILL: no handler, no release
    assert d.ann()[A.STATE] == A.BUILDING and build_of(d)["metadata"]["name"] == build
    # its Lease outlives it: what the next tick finds once the Lease's time (--timeout + 60 s) is over
    (lease,) = d.api.list("Lease", F.NS)
    long_ago = (datetime.now(UTC) - timedelta(seconds=lease["spec"]["leaseDurationSeconds"] + 1))
    lease["spec"]["renewTime"] = long_ago.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    d.api.request("PUT", d.api.path("Lease", F.NS, lease["metadata"]["name"]), lease)
    finish(d, "Succeeded")
    d.job("next")
    assert d.wait_job("next") == "Complete", d.logs("next")
    assert "took over expired Lease" in d.logs("next")
    converged_on(d, build)
