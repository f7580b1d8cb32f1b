"""`run --wait` (issue 40) on the in-memory cluster: one run follows a change from the build to the
release of the pool, from events made from successive states of the cluster (cluster/memory.py),
while tests/support/world.py plays the kubelet and the MCO's controllers (the imitations of
mcorender.py and mconode.py, each held to upstream's rules). Without waiting, the same change
takes three runs (issue 40: start the build; record it and write ocl-osimageurl-<pool>; release
once the rendered config carries the image): those counts are measured here too, not assumed."""

from __future__ import annotations

import copy

import pytest

from reconcile import cli
from reconcile.cli import steps as cli_steps
from reconcile.cli.commands import run as run_command
from reconcile.cluster import follow, lease
from reconcile.cluster.memory import MemoryCluster
from reconcile.contract import annotations as A
from reconcile.core import waits as W
from tests.support import factory as F
from tests.support import mconode
from tests.support.world import Killed, World
from tests.unit.test_gate import NODES, cluster, cycle, pool
from tests.unit.test_rollout import mco_pool, ours, source_mc

pytestmark = pytest.mark.usefixtures("builder")


class Runs:
    """`ocl-reconcile run` on one in-memory cluster that persists across runs (as a live one does)."""

    def __init__(self, items, world, monkeypatch, capsys, tmp_path):
        self.cluster = MemoryCluster(items, clock=lambda: F.NOW)
        self.cluster.world = world
        self.capsys, self.count = capsys, 0
        self.snapshot = tmp_path / "unused.yaml"
        self.snapshot.write_text("[]")
        monkeypatch.setattr(cli_steps, "cluster", lambda args, now: self.cluster)

    def __call__(self, *extra):
        self.count += 1
        self.capsys.readouterr()
        code = cli.main(["run", "--snapshot", str(self.snapshot), *extra])
        return code, self.capsys.readouterr().err

    @property
    def items(self):
        return self.cluster.items()


def changed(items):
    """A held, rolled-out worker pool, then a MachineConfig adds a file; the MCO renders it (the pool
    is held: no node moves)."""
    items = copy.deepcopy(items) + [source_mc("99-worker-motd", "worker", {"/etc/motd": "hello"})]
    items, _ = mconode.settle(items, F.BASE)
    return items


@pytest.fixture
def steady(run_cli):
    counter = mconode.Counter()
    return cycle(run_cli, cluster(), counter)


def desired(items):
    return {n["metadata"]["name"]: n["metadata"]["annotations"].get(mconode.DESIRED)
            for n in F.find(items, "Node")}


def test_a_change_reaches_its_nodes_in_one_waiting_run(steady, monkeypatch, capsys, tmp_path):
    before = ours(steady)[0]["spec"]["osImageURL"]
    world = World()
    runs = Runs(changed(steady), world, monkeypatch, capsys, tmp_path)
    code, err = runs("--wait", "600")
    assert code == 0, err
    assert world.counter.updates == []          # the run released the pool; the MCO acts after it
    world(runs.cluster)
    items = runs.items
    new = ours(items)[0]["spec"]["osImageURL"]
    assert new != before
    # the nodes were targeted once, at the config with the new files and the new image together
    assert world.counter.per_node() == dict.fromkeys(NODES, 1)
    target = pool(items)["spec"]["configuration"]["name"]
    assert set(desired(items).values()) == {target}
    assert all(u.to_image == new and u.to_config == target for u in world.counter.updates)
    assert "wait done: nothing more to wait for" in err
    lines = [ln for ln in err.splitlines() if "waiting: " in ln or "done: " in ln]
    assert any("build" in ln and "Running" in ln for ln in lines), lines       # one line per change of state
    assert any("render" in ln for ln in lines), lines
    assert runs.cluster.get("Lease", "ocl-reconciler", lease.NAME) is None    # released


def test_without_waiting_the_same_change_takes_three_runs(steady, monkeypatch, capsys, tmp_path):
    """Today's count, measured: runs until a node's desiredConfig moves (the world steps between runs
    as the CronJob's period would let it)."""
    world = World(build_steps=1)
    runs = Runs(changed(steady), world, monkeypatch, capsys, tmp_path)
    start = desired(runs.items)
    for _ in range(6):
        code, err = runs()
        assert code == 0, err
        world(runs.cluster)
        if desired(runs.items) != start:
            break
    assert runs.count == 3


@pytest.mark.parametrize("point", [W.BUILD, W.RENDER])
@pytest.mark.parametrize("how", ["killed", "interrupted"])
def test_a_run_ended_at_any_waiting_point_converges_at_the_next(point, how, steady, monkeypatch, capsys,
                                                                tmp_path):
    world = World()
    runs = Runs(changed(steady), world, monkeypatch, capsys, tmp_path)
    real = follow.waiting_for
    seen = []

    def stop_at(cache, namespace):
        found = real(cache, namespace)
        seen.extend(w.what for w in found)
        if any(w.what == point and (point != W.BUILD or w.phase == "Running") for w in found):
            monkeypatch.setattr(follow, "waiting_for", real)
            raise Killed() if how == "killed" else KeyboardInterrupt()
        return found
    monkeypatch.setattr(follow, "waiting_for", stop_at)
    if how == "killed":
        with pytest.raises(Killed):
            runs("--wait", "600")
        # the killed run's Lease expires (180 s); here it is taken away as its expiry would
        runs.cluster.store.pop(("Lease", "ocl-reconciler", lease.NAME), None)
    else:
        code, err = runs("--wait", "600")
        assert code == 0, err
        assert "wait ended: interrupted" in err
        assert runs.cluster.get("Lease", "ocl-reconciler", lease.NAME) is None
    assert point in seen
    assert world.counter.updates == []                      # nothing reached a node yet
    code, err = runs("--wait", "600")
    assert code == 0, err
    world(runs.cluster)
    items = runs.items
    target = pool(items)["spec"]["configuration"]["name"]
    assert world.counter.per_node() == dict.fromkeys(NODES, 1)
    assert all(u.to_config == target and u.to_image == ours(items)[0]["spec"]["osImageURL"]
               for u in world.counter.updates)


def test_a_steady_waiting_run_makes_the_requests_of_a_run_without_waiting(steady, monkeypatch, capsys,
                                                                        tmp_path):
    runs = Runs(steady, World(), monkeypatch, capsys, tmp_path)
    runs()
    plain = runs.cluster.requests
    runs("--wait", "600")
    assert runs.cluster.requests - plain == plain


def test_the_settings_key_shortens_the_wait_never_lengthens_it():
    from reconcile.imagebuild.settings import Settings
    found = Settings(*("x",) * 10, wait_deadline=60)
    assert follow.deadline(600, found) == 60
    assert follow.deadline(30, found) == 30
    assert follow.deadline(600, Settings(*("x",) * 10)) == 600
    assert follow.deadline(600, Settings(*("x",) * 10, wait_deadline=0)) == 0


def test_a_pool_is_served_while_another_builds(monkeypatch, capsys, tmp_path):
    """worker and infra (which selects worker's MachineConfigs) rolled out; then worker's
    MachineConfigs change and infra's build takes longer: worker is recorded, written and released
    while infra still builds (no pool waits behind another's build), and infra follows in the same run."""
    monkeypatch.setenv("OCL_RECONCILE_NOW", "2026-11-29T12:00:00Z")
    items = cluster() + [mco_pool("infra", ("worker", "infra"))]
    runs = Runs(items, World(), monkeypatch, capsys, tmp_path)
    for _ in range(4):                               # opted in, built, rolled out, held again
        code, err = runs("--wait", "600")
        assert code == 0, err
        runs.cluster.world(runs.cluster)
    runs.cluster.become(changed(runs.items))
    runs.cluster.world = World(slower={"infra": 6})
    code, err = runs("--wait", "600")
    assert code == 0, err
    lines = err.splitlines()
    worker_rendered = [i for i, ln in enumerate(lines) if "done: worker: render" in ln]
    infra_built = [i for i, ln in enumerate(lines) if "done: infra: build" in ln]
    infra_rendered = [i for i, ln in enumerate(lines) if "done: infra: render" in ln]
    assert worker_rendered and infra_built and worker_rendered[0] < infra_built[0] < infra_rendered[0], err
    assert "wait done: nothing more to wait for" in err


def test_a_waiting_run_pushes_its_metrics_as_it_goes(steady, monkeypatch, capsys, tmp_path):
    """After its first pass, after each pass that wrote, and at the end: a long run never looks like
    one that stopped (OclReconcilerNotRunning, tests/realtools/test_alerts.py)."""
    pushed = []
    real = run_command.push_metrics
    monkeypatch.setattr(run_command, "push_metrics", lambda *a: (pushed.append(a[3].wrote), real(*a)))
    runs = Runs(changed(steady), World(), monkeypatch, capsys, tmp_path)
    code, err = runs("--wait", "600", "--metrics-file", str(tmp_path / "m.prom"))
    assert code == 0, err
    assert len(pushed) >= 3 and pushed[0] < pushed[-1], pushed
    assert "ocl_last_run_timestamp_seconds" in (tmp_path / "m.prom").read_text()


def test_a_waiting_run_that_loses_its_lease_stops_writing_and_leaves_it(steady, monkeypatch, capsys, tmp_path):
    """Renewed at every turn here (`every` 0); another run takes the Lease over while the build runs:
    the renewal's compare-and-swap fails, the run writes nothing more and does not delete the Lease."""
    monkeypatch.setattr(lease.Keeper, "every", property(lambda self: 0.0))
    world = World(build_steps=3)
    stolen = []

    def thief(cluster):
        world(cluster)
        if world.steps == 2:
            held = cluster.get("Lease", "ocl-reconciler", lease.NAME)
            held["spec"]["holderIdentity"] = "another-run"
            cluster.replace(held)
            stolen.append(len(cluster.writes))
    runs = Runs(changed(steady), thief, monkeypatch, capsys, tmp_path)
    code, err = runs("--wait", "600")
    assert code == 0, err
    assert "wait ended: the Lease could not be renewed" in err
    assert "is not ours any more" in err
    after = runs.cluster.writes[stolen[0]:]
    assert [w for w in after if not w[1].startswith("Lease/")] == [], after
    assert runs.cluster.get("Lease", "ocl-reconciler", lease.NAME)["spec"]["holderIdentity"] == "another-run"


def test_at_the_deadline_the_run_exits_as_a_run_does_saying_what_it_still_waits_for(steady, monkeypatch, capsys,
                                                                                    tmp_path):
    runs = Runs(changed(steady), World(build_steps=10**9, limit=10**9), monkeypatch, capsys, tmp_path)
    code, err = runs("--wait", "1")
    assert code == 0, err
    assert "wait ended: the wait deadline passed; still waiting for worker: build" in err
    assert "the next run resumes" in err
    assert pool(runs.items)["metadata"]["annotations"][A.STATE] in (A.PENDING, A.BUILDING)


def test_the_settings_key_zero_turns_the_wait_off(steady, monkeypatch, capsys, tmp_path):
    items = changed(steady)
    F.find(items, "ConfigMap", "on-cluster-build-config")[0]["data"]["waitDeadline"] = "0"
    runs = Runs(items, World(), monkeypatch, capsys, tmp_path)
    code, err = runs("--wait", "600")
    assert code == 0, err
    assert "wait ended: the wait deadline passed" in err and runs.cluster.world is not None


def test_a_terminal_shows_one_line_redrawn_with_what_is_waited_for():
    import io
    from datetime import datetime

    from reconcile.output.waiting import CLEAR, Shower
    screen = io.StringIO()
    shower = Shower(screen)
    build = W.Wait("worker", W.BUILD, "Pod/ns/b", "Running", "2026-11-29T12:00:00Z")
    shower.update([build])
    shower.tick(datetime(2026, 11, 29, 12, 1, 0, tzinfo=F.NOW.tzinfo), 30)
    assert screen.getvalue() == CLEAR + "waiting 0m30s more: worker: build Pod/ns/b Running, 1m00s"
    shower.close()
    assert screen.getvalue().endswith(CLEAR)


def test_the_settings_key_is_a_duration_or_zero():
    from reconcile.imagebuild import settings
    assert [settings._wait({"waitDeadline": v}) for v in ("", "0", "0s", "5m", "1h30m", "540s")] == \
        [None, 0, 0, 300, 5400, 540]
    with pytest.raises(settings.SettingsError, match="waitDeadline"):
        settings._wait({"waitDeadline": "soon"})
