"""`run --wait` when its build object is deleted while it waits (issue 50, behaviour 8), through the
official client to the stand-in API server (tests/support/apiserver.py), whose watches say DELETED when
an object they selected is gone. A build Pod (or Build) deleted by an administrator or evicted is a
build that will never end: the DELETED event ends the wait for it, and the same run acts on it as any
run does (docs/contract.md's lifecycle: RETRY, "its Pod or Build was deleted by someone": another
attempt, `ocl-reconciler.io/attempt` counts). It must not wait on it until the deadline.
tests/realapi/test_realapi_wait_held.py holds the same on the real kube-apiserver."""

from __future__ import annotations

import threading
import time

from reconcile import cli
from reconcile.contract import annotations as A
from tests.support import factory as F
from tests.support.apiserver import APIServer

#: --wait: the run must end long before it (nothing is waited for once the retry succeeded)
WAIT = 40


def builds(server) -> list[dict]:
    return [o for o in server.store.store.values() if o["kind"] in F.BUILD_KINDS.values()
            and o["metadata"].get("namespace") == F.NS]


def delete_the_first_build_then_succeed(server, stop: threading.Event, deleted: list[float]) -> None:
    """The first build object, once the run waits on it, is deleted (as `oc delete pod` does); every
    later one ends Succeeded at once (the kubelet, or OpenShift's build controller)."""
    import kubelet  # examples/kubelet.py, on the path by conftest

    first = None
    while not stop.wait(0.05):
        with server.lock:
            for obj in builds(server):
                if first is None:
                    first = (obj["kind"], obj["metadata"]["name"], time.monotonic())
                elif obj["metadata"]["name"] != first[1] and (obj.get("status") or {}).get("phase") in (
                        None, "Pending", "New"):
                    kubelet.set_phase(obj, "Succeeded")
                    server.store._stamp(obj)
            if first is not None and not deleted and time.monotonic() - first[2] >= 1.0:
                server.store.delete(first[0], F.NS, first[1])
                deleted.append(time.monotonic())


def test_a_build_deleted_while_the_run_waits_is_retried_in_the_same_run(builder, tmp_path, capsys):
    with APIServer(F.cluster(), clock=lambda: F.NOW) as server:
        stop, deleted = threading.Event(), []
        player = threading.Thread(target=delete_the_first_build_then_succeed, args=(server, stop, deleted),
                                  daemon=True)
        player.start()
        started = time.monotonic()
        try:
            code = cli.main(["run", "--kubeconfig", server.kubeconfig(tmp_path / "kc"), "--timeout", "10",
                             "--wait", str(WAIT)])
        finally:
            stop.set()
            player.join()
        seconds = time.monotonic() - started
        with server.lock:
            pool = F.the_pool(server.items())
            created = [r for r in server.log if r.verb == "create" and r.resource in ("pods", "builds")]
    err = capsys.readouterr().err
    assert deleted, err[-2000:]
    assert code == 0, err[-2000:]
    ann = pool["metadata"]["annotations"]
    # the deleted build was retried (attempt 2) and that attempt recorded, all in this one run
    assert [r.resource for r in created] == [builder.lower() + "s"] * 2, err[-2000:]
    assert ann[A.STATE] == A.SUCCEEDED and ann[A.ATTEMPT] == "2", ann
    assert "wait done: nothing more to wait for" in err
    assert seconds < WAIT / 2, (seconds, err[-2000:])
