"""`run --wait` on the real kube-apiserver (issue 50): what a waiting run does about its Lease, a build
object deleted under it, and a watch that expires.

- The Lease (coordination.k8s.io/v1) of the shipped CronJob's run (kustomize/base/cronjob.yaml's args,
  run as a Job's process on the real clock): it lasts `--timeout` + 60 s and a waiting run renews it
  every third of that (docs/rollout.md 3b; the CronJob's comment: 180 s, every 60 s). Its `renewTime`
  moves at the first renewal, before the Lease expires, and a second run started then finds it held
  and exits 0 without acting (docs/admin.md, the `run` exit codes).
- A build Pod deleted while the run waits (by an administrator, or evicted): the watch's DELETED event
  ends the wait for it, and the same run retries the build (docs/contract.md: RETRY, "its Pod or Build
  was deleted by someone"). tests/standin/test_follow_deleted.py holds it for both builders.
- A watch that expires: 410 Gone, reason Expired, for a watch from a resourceVersion etcd has
  compacted. A watch is served from the kube-apiserver's watch cache, which keeps its own window of
  events whatever etcd compacted, so the test has a server of its own without it (`--watch-cache=false`:
  every watch is etcd's) and compacts etcd (RealAPI.compact) past the run's watches. The run LISTs
  again and watches from there: a change after the expiry is acted on in the same run, with a bounded
  number of watch requests (the audit log), not a loop."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import kubelet  # examples/kubelet.py
import pytest

import reconcile
from reconcile.cluster import live, watch
from reconcile.contract import annotations as A
from reconcile.contract import naming, objects, yamlio
from tests.support import factory as F
from tests.support import realserver

pytestmark = pytest.mark.realapi

CRONJOB = F.ROOT / "kustomize/base/cronjob.yaml"
LEASE = "ocl-reconciler"        # docs/admin.md: the Lease `ocl-reconciler` in the namespace


def shipped_args() -> list[str]:
    """The CronJob's container args, as shipped."""
    cronjob = yamlio.load(CRONJOB.read_text())
    (container,) = cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"]
    return [str(a) for a in container["args"]]


def flag(args: list[str], name: str) -> float:
    return float(args[args.index(name) + 1])


def micro(text: str) -> datetime:
    """A Lease's MicroTime (RFC 3339 with microseconds)."""
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def until(what, seconds: float, every: float = 0.2):
    """`what()` once it is truthy, or None after `seconds`."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        found = what()
        if found:
            return found
        time.sleep(every)
    return None


def build_pods(api) -> list[dict[str, Any]]:
    """Our Pods (the build Pods: the build's other objects are ConfigMaps and Secrets)."""
    return api.list("Pod", F.NS, objects.selector_string(naming.SELECTOR))


def succeed(api, pod: dict[str, Any]) -> None:
    """The kubelet ends the build Pod: Succeeded, the image's digest in its termination message."""
    api.write_status(kubelet.set_phase(pod, "Succeeded"))


# --- the Lease of a waiting run (behaviours 9 and 10) ------------------------------------------------

def job(api, root: Path, name: str, args: list[str]) -> tuple[subprocess.Popen, Path]:
    """`ocl-reconcile ARGS` as a Job runs it: its own process, as the ServiceAccount, on the real clock
    (no OCL_RECONCILE_NOW), the package the tests import. Its log goes to a file."""
    env = {k: v for k, v in os.environ.items() if k != "OCL_RECONCILE_NOW"}
    env["PYTHONPATH"] = str(Path(reconcile.__file__).resolve().parent.parent)
    kubeconfig = api.kubeconfig(root / f"{name}.kubeconfig", api.sa_token, "ocl-reconciler")
    log = root / f"{name}.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "reconcile", *args, "--kubeconfig", kubeconfig],
                                stdout=out, stderr=subprocess.STDOUT, env=env)
    return proc, log


@dataclass
class Held:
    args: list[str]                     # the first run's: the CronJob's
    taken: dict[str, Any]               # the Lease as the first run took it
    renewed: dict[str, Any] | None      # ... at its first renewal (None: not within one interval + 10 s)
    second: int                         # the second run's exit code
    second_log: str
    second_requests: list[dict[str, Any]]
    after_second: dict[str, Any]        # the Lease once the second run ended
    first: int | None                   # the first run's exit code, once its build ended
    first_log: str


@pytest.fixture(scope="module")
def held(server, tmp_path_factory) -> Held:
    """The CronJob's run on one pool whose build Pod has not ended: the Lease as it was taken, then
    as it was once `renewTime` moved (polled until one renewal interval + 10 s); then, mid-wait, a
    second run; then the build Pod ends and the first run with it. One scenario for the two tests:
    it takes a renewal interval (60 s)."""
    root = tmp_path_factory.mktemp("held")
    server.reset()
    server.load(F.cluster())
    args = shipped_args()
    every = (flag(args, "--timeout") + 60) / 3          # docs/rollout.md 3b, the CronJob's comment
    first, first_log = job(server, root, "first", args)
    try:
        pod = until(lambda: build_pods(server), 60)
        assert pod, first_log.read_text()
        taken = server.get("Lease", F.NS, LEASE)
        assert taken is not None

        def moved() -> dict[str, Any] | None:
            lease = server.get("Lease", F.NS, LEASE)
            return lease if lease and lease["spec"].get("renewTime") != taken["spec"]["renewTime"] else None
        renewed = until(moved, every + 10 - (time.time() - micro(taken["spec"]["renewTime"]).timestamp()), 0.5)
        mark = server.audit_mark()
        second, second_log = job(server, root, "second", args)
        try:
            second.wait(timeout=60)
        finally:
            if second.poll() is None:
                second.kill()
                second.wait()
        second_requests = server.audit(mark, realserver.RECONCILER)
        after_second = server.get("Lease", F.NS, LEASE)
        succeed(server, build_pods(server)[0])
        try:
            code = first.wait(timeout=60)
        except subprocess.TimeoutExpired:
            code = None
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()
    return Held(args, taken, renewed, second.returncode, second_log.read_text(), second_requests,
                after_second, code, first_log.read_text())


def test_a_waiting_runs_lease_renewal_moves_renew_time(held):
    """Read before and after one renewal interval: the same holder's Lease, its `renewTime` later."""
    taken, renewed = held.taken["spec"], held.renewed
    assert taken["renewTime"] == taken["acquireTime"]           # as taken
    assert renewed is not None, f"renewTime never moved from {taken['renewTime']}: {held.first_log[-3000:]}"
    spec = renewed["spec"]
    assert spec["holderIdentity"] == taken["holderIdentity"]
    assert spec["acquireTime"] == taken["acquireTime"]
    assert micro(spec["renewTime"]) > micro(taken["renewTime"])
    assert held.first == 0, held.first_log[-3000:]
    assert "wait done: nothing more to wait for" in held.first_log


def test_the_lease_is_renewed_before_it_expires_and_a_second_run_finds_it_held(held):
    """The shipped CronJob's values: the Lease lasts --timeout + 60 s, renewed every third of that,
    well before it expires; a second run then exits 0 having written nothing (its only write, the
    Lease's create, refused 409 AlreadyExists)."""
    duration = flag(held.args, "--timeout") + 60
    assert held.taken["spec"]["leaseDurationSeconds"] == duration == 180      # the CronJob's comment
    assert held.renewed is not None, held.first_log[-3000:]
    moved = (micro(held.renewed["spec"]["renewTime"]) - micro(held.taken["spec"]["renewTime"])).total_seconds()
    # every third of its duration (60 s): not sooner, and at most a few seconds later (the run checks
    # between waits of one second); far from the 180 s at which another run could take it over
    assert duration / 3 <= moved <= duration / 3 + 5, moved
    assert held.second == 0, held.second_log
    assert "run skipped: another run holds the Lease" in held.second_log
    writes = [(e["verb"], e["objectRef"]["resource"], e["responseStatus"]["code"]) for e in held.second_requests
              if e["verb"] not in ("get", "list", "watch")]
    assert writes == [("create", "leases", 409)], writes
    assert held.after_second["spec"]["holderIdentity"] == held.taken["spec"]["holderIdentity"]


# --- a build Pod deleted while the run waits (behaviour 8) ---------------------------------------------

def test_a_build_pod_deleted_while_the_run_waits_is_retried_in_the_same_run(real):
    """As an administrator's `oc delete pod`: the run retries (attempt 2) at once, and once that
    build ends records it; it does not wait on the deleted Pod until its deadline."""
    wait = 40
    real.seed(F.cluster())
    api, stop, deleted = real.api, threading.Event(), []

    def administrator_then_kubelet() -> None:
        first = until(lambda: build_pods(api), 30)
        if not first or stop.wait(1.0):
            return
        api.request("DELETE", api.path("Pod", F.NS, first[0]["metadata"]["name"]), {"gracePeriodSeconds": 0})
        deleted.append(first[0]["metadata"]["name"])
        retry = until(lambda: [p for p in build_pods(api) if p["metadata"]["name"] not in deleted], wait)
        if retry:
            succeed(api, retry[0])
    player = threading.Thread(target=administrator_then_kubelet, daemon=True)
    player.start()
    started = time.monotonic()
    try:
        code, err = real.run("--wait", str(wait))
    finally:
        stop.set()
        player.join()
    seconds = time.monotonic() - started
    assert deleted, err[-3000:]
    assert code == 0, err[-3000:]
    ann = real.ann()
    assert ann[A.STATE] == A.SUCCEEDED and ann[A.ATTEMPT] == "2", ann
    assert "wait done: nothing more to wait for" in err
    assert seconds < wait / 2, (seconds, err[-3000:])


# --- a watch that expires (behaviour 11) ------------------------------------------------------------------

@pytest.fixture(scope="module")
def uncached(tmp_path_factory):
    """A server of this module's own whose watches are etcd's (no watch cache)."""
    api = realserver.start_installed(tmp_path_factory.mktemp("uncached"), ("--watch-cache=false",))
    try:
        yield api
    finally:
        api.stop()


def test_a_watch_that_expires_lists_again_and_the_run_acts_on_a_later_change(uncached, tmp_path, capsys,
                                                                              monkeypatch):
    monkeypatch.setenv("OCL_RECONCILE_NOW", "2026-11-29T12:00:00Z")
    uncached.reset()
    real = realserver.Real(uncached, tmp_path, capsys)
    wait = 45
    real.seed(F.cluster())
    api, stop, when = real.api, threading.Event(), {}
    watch_lines = live.LiveCluster.watch_lines

    def expiring(cluster, stream, version, seconds):
        """Before the run's first watch: two writes of someone else's move etcd's revision past the
        LISTs' (a watch from X starts at X + 1), then etcd is compacted to its revision."""
        if "mark" not in when:
            when["mark"] = api.audit_mark()
            made = api.create({"apiVersion": "v1", "kind": "ConfigMap",
                               "metadata": {"name": "elsewhere", "namespace": "default"}})
            api.request("DELETE", api.path("ConfigMap", "default", made["metadata"]["name"]))
            when["compacted"] = (version, api.compact())
        return watch_lines(cluster, stream, version, seconds)
    monkeypatch.setattr(live.LiveCluster, "watch_lines", expiring)
    # every stream expired at once (their LISTs were of one pass): the run looks a moment late, as on a
    # loaded machine, so that it is told of them together (a RELIST per stream in one batch)
    first_look = watch.LiveWatcher.next

    def late(watcher, timeout):
        if "looked" not in when:
            when["looked"] = time.sleep(0.5)
        return first_look(watcher, timeout)
    monkeypatch.setattr(watch.LiveWatcher, "next", late)

    def kubelet_after_the_relist() -> None:
        # the run LISTs its Pods again (a pass reads them from what it keeps: only a 410 makes it ask)
        when["relisted"] = until(lambda: "mark" in when and [
            e for e in api.audit(when["mark"], realserver.RECONCILER)
            if e["verb"] == "list" and e["objectRef"]["resource"] == "pods"], 30, 0.5)
        if stop.wait(1.0) or not build_pods(api):
            return
        succeed(api, build_pods(api)[0])          # the change after the expiry
        when["changed"] = time.monotonic()
    player = threading.Thread(target=kubelet_after_the_relist, daemon=True)
    player.start()
    try:
        code, err = real.run("--wait", str(wait))
    finally:
        stop.set()
        player.join()
    ended = time.monotonic()
    assert "changed" in when, (when, err[-3000:])
    assert int(when["compacted"][0]) < when["compacted"][1] - 1, when      # that watch's start is gone
    assert code == 0, err[-3000:]
    assert real.ann()[A.STATE] == A.SUCCEEDED, err[-3000:]
    assert "wait done: nothing more to wait for" in err
    assert ended - when["changed"] < 10, err[-3000:]
    # each watch request once (a watch still open has only its ResponseStarted event)
    requests = api.audit(when["mark"], realserver.RECONCILER, ("ResponseStarted", "ResponseComplete"))
    watches: dict[str, set[str]] = {}
    for e in requests:
        if e["verb"] == "watch":
            watches.setdefault(e["objectRef"]["resource"], set()).add(e["auditID"])
    lists = sorted(e["objectRef"]["resource"] for e in requests
                   if e["verb"] == "list" and e["stage"] == "ResponseComplete" and e["objectRef"]["resource"] in watches)
    # Kubernetes' rule for a 410 Gone: LIST again, watch from that LIST's resourceVersion. Per stream,
    # one LIST, and two watches: the one that expired, the one from the new LIST (which saw the change)
    assert lists == sorted(watches) and "pods" in lists, (lists, sorted(watches))
    assert {r: len(ids) for r, ids in watches.items()} == dict.fromkeys(watches, 2), watches
