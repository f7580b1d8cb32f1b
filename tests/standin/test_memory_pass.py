"""A creating pass in constant memory (issue 23): `run` plans a pool, carries its plan out and drops
what it needed before it reads the next pool's MachineConfig; it reads each rendered MachineConfig
once and asks for no echo of what it creates. The figures (peak RSS, bytes read) are
bench/api_scale.py's; these tests hold the behaviour that gives them."""

from __future__ import annotations

import base64
import gc
import random
import weakref
from collections import Counter

import pytest

from reconcile import cli
from reconcile.cli import steps as cli_steps
from reconcile.cluster import apply, live, observe
from reconcile.cluster.memory import MemoryCluster
from reconcile.cluster.planner import Planner
from tests.support import factory as F
from tests.support.apiserver import APIServer

#: an encoded MachineConfig is about its size: random bytes do not compress
BIG = 300_000


def big_cluster(n: int, shared: bool = False) -> list[dict]:
    """n pools, each with an incompressible rendered MachineConfig of ~BIG bytes (with `shared`, the
    first two pools render the same one)."""
    names = [f"rendered-pool{i}-1" for i in range(n)]
    if shared:
        names[1] = names[0]
    pools = [F.pool(f"pool{i}", rendered=name) for i, name in enumerate(names)]
    items = [o for o in F.cluster(*pools) if o["kind"] != "MachineConfig"]
    noise = random.Random(23)
    return items + [F.machineconfig(name, content=base64.b64encode(noise.randbytes(BIG * 3 // 4)).decode())
                    for name in dict.fromkeys(names)]


def run(server: APIServer, tmp_path) -> int:
    return cli.main(["run", "--kubeconfig", server.kubeconfig(tmp_path / "kc"), "--timeout", "60"])


@pytest.fixture(autouse=True)
def pinned_clock(monkeypatch):
    monkeypatch.setenv("OCL_RECONCILE_NOW", "2026-11-29T12:00:00Z")


def test_each_pool_is_carried_out_before_the_next_machineconfig_is_read(tmp_path):
    with APIServer(big_cluster(3)) as server:
        assert run(server, tmp_path) == 0
        steps = [(r.verb, r.resource, r.name) for r in server.log
                 if r.resource in ("machineconfigs", "pods", "machineconfigpools") and r.verb != "list"]
    # the pool's MachineConfig, its build Pod, its record; then the next pool's
    assert [(verb, resource) for verb, resource, _ in steps] == [
        ("get", "machineconfigs"), ("create", "pods"), ("patch", "machineconfigpools")] * 3
    assert [name for verb, _, name in steps if verb == "get"] == [f"rendered-pool{i}-1" for i in range(3)]


def test_creates_ask_for_metadata_only_and_the_echo_is_not_the_body(tmp_path, monkeypatch):
    """kube-apiserver answers any write with Accept ...;as=PartialObjectMetadata with the object's
    metadata alone: a created ConfigMap's MiB of encoded MachineConfig does not come back."""
    answers: list[tuple[str, str, int]] = []
    send = live.LiveCluster._send

    def counted(self, method, path, *rest, **kw):
        answer = send(self, method, path, *rest, **kw)
        answers.append((method, path, len(answer[2])))
        return answer
    monkeypatch.setattr(live.LiveCluster, "_send", counted)
    with APIServer(big_cluster(3)) as server:
        assert run(server, tmp_path) == 0
        creates = [r for r in server.log if r.verb == "create"]
        sent = sum(len(v) for o in server.items() if o["kind"] == "ConfigMap" for v in (o.get("data") or {}).values())
    assert creates and all(r.metadata_only for r in creates)
    echoes = [size for method, _, size in answers if method == "POST"]
    machineconfigs = sum(size for method, path, size in answers if method == "GET" and "/machineconfigs/" in path)
    assert len(echoes) == len(creates) and max(echoes) < 4096 and sent > 3 * BIG
    # the goal: a creating pass reads at most 1.2x the MachineConfigs it reads
    assert sum(size for _, _, size in answers) <= 1.2 * machineconfigs


def test_each_rendered_machineconfig_is_read_once(tmp_path):
    """Two pools rendering the same config: it is kept until the second is planned, not read again."""
    with APIServer(big_cluster(4, shared=True)) as server:
        assert run(server, tmp_path) == 0
        gets = Counter(r.name for r in server.log if r.resource == "machineconfigs" and r.verb == "get")
        pods = [r for r in server.log if r.verb == "create" and r.resource == "pods"]
    assert gets == {"rendered-pool0-1": 1, "rendered-pool2-1": 1, "rendered-pool3-1": 1} and len(pods) == 4


class Tracked(dict):
    """A MachineConfig as read, that a weak reference can watch."""


class Watching(MemoryCluster):
    """Records, at each read of a MachineConfig, which of those read before are still held."""

    def __init__(self, items):
        super().__init__(items, clock=lambda: F.NOW)
        self.read: dict[str, weakref.ref] = {}
        self.held_at_read: list[tuple[str, list[str]]] = []

    def get(self, kind, namespace, name):
        obj = super().get(kind, namespace, name)
        if kind != "MachineConfig" or obj is None:
            return obj
        gc.collect()
        self.held_at_read.append((name, sorted(n for n, ref in self.read.items() if ref() is not None)))
        obj = Tracked(obj)
        self.read[name] = weakref.ref(obj)
        return obj


def test_a_carried_out_pools_machineconfig_and_bodies_are_dropped(monkeypatch):
    cluster = Watching(big_cluster(4))
    monkeypatch.setattr(cli_steps, "cluster", lambda args, now: cluster)
    assert cli.main(["run", "--snapshot", "unused.yaml"]) == 0
    assert cluster.held_at_read == [(f"rendered-pool{i}-1", []) for i in range(4)]
    gc.collect()
    assert [n for n, ref in cluster.read.items() if ref() is not None] == []


def test_run_keeps_its_plans_as_carried_out_diff_keeps_them_whole():
    cluster = MemoryCluster(big_cluster(2), clock=lambda: F.NOW)
    seen = observe.observe(cluster, F.NS)
    whole = Planner(cluster, seen, F.NOW).plan()        # diff, render, explain
    assert [len(a.obj["data"]["machineconfig.json.gz"]) > BIG for p in whole for a in p.actions
            if a.verb == "create" and "machineconfig.json.gz" in (a.obj.get("data") or {})] == [True, True]
    planner = Planner(cluster, seen, F.NOW)
    result = apply.execute(cluster, planner.each(), F.NOW, planner, None, planner.prune)
    created = [a.obj for o in result.outcomes for a in o.plan.actions if a.verb == "create"]
    assert created and all(set(obj) <= {"apiVersion", "kind", "metadata"} for obj in created)
    assert sorted(o.plan.pool for o in result.outcomes) == ["pool0", "pool1"]
    assert [o.plan.count("create") for o in result.outcomes] == [p.count("create") for p in whole]
    assert sum(len(v) for o in cluster.items() if o["kind"] == "ConfigMap"
               for v in (o.get("data") or {}).values()) > 2 * BIG


def test_a_read_that_fails_mid_run_ends_it_after_the_summary_and_the_metrics(tmp_path, capsys):
    """Pool 0 is carried out before pool 1's MachineConfig is read; when that read fails, the run
    says what it did (summary line, metrics) before it exits 3 with one line."""
    from tests.support.apiserver import Fault
    failing = Fault("status", code=403, times=0,
                    match=lambda verb, resource, ns, name: resource == "machineconfigs"
                    and name == "rendered-pool1-1")
    metrics = tmp_path / "metrics.prom"
    with APIServer(big_cluster(2)) as server:
        server.faults.append(failing)
        code = cli.main(["run", "--kubeconfig", server.kubeconfig(tmp_path / "kc"), "--timeout", "20",
                         "--metrics-file", str(metrics)])
        pools = {p["metadata"]["name"]: p for p in server.items() if p["kind"] == "MachineConfigPool"}
    assert code == 3
    assert pools["pool0"]["metadata"]["annotations"]["ocl-reconciler.io/state"] == "Pending"
    assert "ocl-reconciler.io/state" not in pools["pool1"]["metadata"]["annotations"]
    err = capsys.readouterr().err
    summary = [line for line in err.splitlines() if "run done:" in line]
    assert len(summary) == 1 and "pools 1 Pending" in summary[0], summary
    last = err.strip().splitlines()[-1]
    assert last.startswith("error: cannot read the cluster: ") and "rendered-pool1-1" in last, last
    assert 'ocl_errors_total{reason="read"} 1.0' in metrics.read_text()


def test_an_outage_after_the_first_pool_still_ends_with_the_summary_and_the_metrics(tmp_path, capsys):
    """Every request (but the Lease's) fails once pool1's MachineConfig is asked for. What run
    reads after the pools' writes (here the discovery GET of the stranded-image notice) must not
    lose the summary and metrics of what was done."""
    from reconcile.contract import annotations as A
    from tests.support.apiserver import Fault
    items = big_cluster(2)
    pool0 = next(o for o in items if o["metadata"]["name"] == "pool0")
    pool0["metadata"]["annotations"][A.IMAGE] = f"{F.REPO}@sha256:{'a' * 64}"   # the notice asks
    down = {"on": False}

    def failing(verb, resource, ns, name):
        down["on"] = down["on"] or (resource == "machineconfigs" and name == "rendered-pool1-1")
        return down["on"] and resource != "leases"
    metrics = tmp_path / "metrics.prom"
    with APIServer(items) as server:
        server.faults.append(Fault("status", code=403, times=0, match=failing))
        code = cli.main(["run", "--kubeconfig", server.kubeconfig(tmp_path / "kc"), "--timeout", "20",
                         "--metrics-file", str(metrics)])
    err = capsys.readouterr().err
    assert code == 3
    assert [line for line in err.splitlines() if "run done:" in line], err[-2000:]
    assert 'ocl_errors_total{reason="read"} 1.0' in metrics.read_text()
    assert err.strip().splitlines()[-1].startswith("error: cannot read the cluster: ")


def test_a_failed_node_list_for_pruning_after_the_writes_keeps_what_was_done(run_cli, monkeypatch):
    """Pools go Building -> Succeeded (no node read while planning: the architecture is recorded);
    pruning then needs the nodes, and that LIST fails: the writes made are still in the
    --write-snapshot, the summary and the metrics, and the run exits 3."""
    import copy

    from reconcile.cluster import ClusterError
    from reconcile.contract import annotations as A
    from tests.standin.test_lifecycle_cli import finish
    code, items, _ = run_cli.run(F.cluster(F.pool()))
    assert code == 0
    done = finish(copy.deepcopy(items), "worker", "Succeeded")
    F.the_pool(done)["metadata"]["annotations"][A.IMAGES] = " ".join(
        f"{F.REPO}@sha256:{c * 64}" for c in "abcd")
    listed = MemoryCluster.list

    def nodes_down(self, kind, *args, **kwargs):
        if kind == "Node":
            raise ClusterError("503: nodes down")
        return listed(self, kind, *args, **kwargs)
    monkeypatch.setattr(MemoryCluster, "list", nodes_down)
    metrics = run_cli.tmp / "metrics.prom"
    code, after, err = run_cli.run(done, "--keep-images", "1", "--metrics-file", str(metrics))
    assert code == 3
    assert F.the_pool(after)["metadata"]["annotations"][A.STATE] == A.SUCCEEDED    # the write is kept
    assert [line for line in err.splitlines() if "run done:" in line and "1 Succeeded" in line], err
    assert 'ocl_errors_total{reason="read"} 1.0' in metrics.read_text()
    assert err.strip().splitlines()[-1] == "error: cannot read the cluster: 503: nodes down"
