"""`run --wait` through the official client to the stand-in API server (tests/support/apiserver.py),
which serves watches: the run LISTs as any run does, then watches our build Pods and Builds and the
MachineConfigPools from each LIST's resourceVersion (no LIST loop), while a thread plays the kubelet
and the MCO's controllers on the server's store (tests/support/world.py)."""

from __future__ import annotations

import threading

import pytest

from reconcile import cli
from tests.support import factory as F
from tests.support.apiserver import APIServer, builds_succeed
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


def test_a_waiting_run_whose_write_is_refused_ends_instead_of_building_again(tmp_path, capsys):
    """A refused write is the pool's error (Blocked) and would be refused again: the waiting ends
    there, exit 2, and the next run tries again. It used to plan again on the next event: a build
    Pod's success, cleanup refused (403), Blocked, a new build, and so on until the deadline (280
    builds in 20 s when the registry could not be asked about the image)."""
    from tests.unit.test_builders import dockercfg_secret

    def refuse_secret_deletes(req):
        if req.verb == "delete" and req.resource == "secrets":
            return f'secrets "{req.name}" is forbidden: cannot delete resource "secrets"'
        return None
    settings = [F.build_config(), F.osimageurl(), dockercfg_secret("pull-secret", {"quay.io": {"auth": "eDp5"}}),
                F.secret("push-secret")]
    with APIServer(F.cluster(settings=settings), authorize=refuse_secret_deletes, clock=lambda: F.NOW) as server:
        with builds_succeed(server):
            code = cli.main(["run", "--kubeconfig", server.kubeconfig(tmp_path / "kc"), "--timeout", "10",
                             "--wait", "20"])
        builds = [r for r in server.log if r.verb == "create" and r.resource in ("pods", "builds")]
    err = capsys.readouterr().err
    assert len(builds) == 1, err[-2000:]
    assert code == 2, err[-2000:]                   # EXIT_BLOCKED: a pool's error, as without --wait
    assert "wait ended: a write failed" in err
