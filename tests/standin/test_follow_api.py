"""`run --wait` through the official client to the stand-in API server (tests/support/apiserver.py),
which serves watches: the run LISTs as any run does, then watches our build Pods and Builds and the
MachineConfigPools from each LIST's resourceVersion (no LIST loop), while a thread plays the kubelet
and the MCO's controllers on the server's store (tests/support/world.py)."""

from __future__ import annotations

import threading

import pytest

from reconcile import cli
from tests.support import factory as F
from tests.support.apiserver import APIServer
from tests.support.world import World
from tests.unit.test_follow import changed, desired, steady  # noqa: F401 - a fixture
from tests.unit.test_gate import NODES, pool
from tests.unit.test_rollout import ours

pytestmark = pytest.mark.usefixtures("builder")


def playing(server, world, stop):
    def loop():
        while not stop.wait(0.1):
            with server.lock:
                world(server.store)
    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    return thread


def test_one_waiting_run_through_the_api_follows_the_change_from_watch_events(steady, tmp_path, capsys):  # noqa: F811
    world = World(limit=400)
    with APIServer(changed(steady), clock=lambda: F.NOW) as server:
        stop = threading.Event()
        playing(server, world, stop)
        try:
            code = cli.main(["run", "--kubeconfig", server.kubeconfig(tmp_path / "kc"), "--timeout", "20",
                             "--wait", "60"])
        finally:
            stop.set()
        err = capsys.readouterr().err
        assert code == 0, err
        assert "wait done: nothing more to wait for" in err
        with server.lock:
            world(server.store)
        items = server.items()
        lists = [r for r in server.log if r.verb == "list"]
        watches = [r for r in server.log if r.verb == "watch"]
    target = pool(items)["spec"]["configuration"]["name"]
    assert world.counter.per_node() == dict.fromkeys(NODES, 1)
    assert set(desired(items).values()) == {target}
    assert all(u.to_image == ours(items)[0]["spec"]["osImageURL"] for u in world.counter.updates)
    assert {r.resource for r in watches} == {"pods", "machineconfigpools"} or \
        {r.resource for r in watches} == {"builds", "pods", "machineconfigpools"}
    assert all(r.query.get("resourceVersion") for r in watches)
    # the LISTs of one read, and those a pass makes beyond it (a new build's labelled Secrets):
    # not one LIST per event
    assert len(lists) < 3 * len({(r.resource, r.namespace, r.query.get("labelSelector")) for r in lists})
