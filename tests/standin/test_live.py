"""The live path: what a run asks of the API server, how it survives conflicts, throttling,
outages and a concurrent run, and how it says it cannot connect."""

from __future__ import annotations

import copy
from datetime import timedelta

import kubelet
import pytest

from reconcile import cli
from reconcile.cluster import lease
from reconcile.contract import annotations as A
from tests.support import factory as F
from tests.support.apiserver import APIServer, Fault


def run(server, tmp_path, *extra, timeout="20"):
    return cli.main(["run", "--kubeconfig", server.kubeconfig(tmp_path / "kc"), "--timeout", timeout, *extra])


def pools(n, default_storage=False):
    """`default_storage`: `buildStorage` unset (persistent), with a default StorageClass."""
    if not default_storage:
        return F.cluster(*(F.pool(f"pool{i}", rendered=f"rendered-pool{i}-1") for i in range(n)))
    from tests.unit.test_storage import GP3
    return F.cluster(*(F.pool(f"pool{i}", rendered=f"rendered-pool{i}-1") for i in range(n)),
                     settings=[F.build_config(buildStorage=None), F.osimageurl(), F.secret("pull-secret"),
                               F.secret("push-secret")], extra=[copy.deepcopy(GP3)])


def steady(n, tmp_path, default_storage=False):
    """A cluster where every pool's build is running: the next run has nothing to write."""
    with APIServer(pools(n, default_storage), clock=lambda: F.NOW) as server:
        assert run(server, tmp_path) == 0
        items = server.items()
    for obj in items:
        if obj["kind"] == "Pod":
            kubelet.set_phase(obj, "Running")
    with APIServer(items, clock=lambda: F.NOW) as server:
        assert run(server, tmp_path) == 0
        return server.items()


@pytest.fixture(autouse=True)
def pinned_clock(monkeypatch):
    monkeypatch.setenv("OCL_RECONCILE_NOW", "2026-11-29T12:00:00Z")


@pytest.mark.parametrize("default_storage", [False, True], ids=["emptyDir", "default-persistent"])
@pytest.mark.parametrize("n", [1, 50])
def test_steady_run_lists_once_per_kind_and_writes_nothing(tmp_path, n, default_storage):
    """docs/design.md: 11 requests; with `buildStorage: persistent`, the default, one more: the
    labelled LIST of our PersistentVolumeClaims."""
    items = steady(n, tmp_path, default_storage)
    assert len([o for o in items if o["kind"] == "PersistentVolumeClaim"]) == (n if default_storage else 0)
    with APIServer(items) as server:
        assert run(server, tmp_path) == 0
        reads = [(r.verb, r.resource, r.query.get("labelSelector"), r.metadata_only)
                 for r in server.log if r.resource != "leases"]
        guard = [(r.verb, r.resource) for r in server.log if r.resource == "leases"]
        ours = "app.kubernetes.io/managed-by=ocl-reconciler"
        assert sorted(reads, key=str) == sorted([
            ("list", "builds", ours, False), ("list", "pods", ours, False),
            ("list", "configmaps", "!app.kubernetes.io/managed-by", False),    # the settings, with data
            ("list", "configmaps", ours, True), ("list", "secrets", ours, True),  # ours: metadata only
            ("list", "machineconfigpools", None, False),
            # the OS streams singleton, once (issue 20: "one read of the singleton at most"); the
            # nodes are not listed: every pool's architecture is recorded
            ("get", "osimagestreams", None, False),
            # what the MCO publishes in its namespace, by name (issue 21: only named gets there)
            ("get", "configmaps", None, False), ("get", "configmaps", None, False),
            *[("list", "persistentvolumeclaims", ours, False)] * default_storage], key=str)
        assert guard == [("create", "leases"), ("delete", "leases")]
        assert sorted((r.namespace, r.name) for r in server.log if r.verb == "get" and r.resource == "configmaps") \
            == [(F.MCO_NS, "machine-config-operator-images"), (F.MCO_NS, "machine-config-osimageurl")]
        assert len(server.log) == 11 + default_storage
        assert server.items() == items


def test_creating_run_reads_one_machineconfig_per_pool(tmp_path):
    with APIServer(pools(3)) as server:
        assert run(server, tmp_path) == 0
        gets = sorted((r.resource, r.name) for r in server.log if r.verb == "get")
        assert gets == [("configmaps", "machine-config-operator-images"), ("configmaps", "machine-config-osimageurl")] + [
            ("machineconfigs", f"rendered-pool{i}-1") for i in range(3)] + [
            ("osimagestreams", "cluster"), ("proxies", "cluster"), ("secrets", "pull-secret"),
            ("secrets", "push-secret")]
        # the pools' architecture: the nodes, once, metadata only
        assert [(r.resource, r.metadata_only) for r in server.log if r.resource == "nodes"] == [("nodes", True)]
        input_lists = [r.query.get("labelSelector") for r in server.log if r.verb == "list" and r.resource == "secrets"]
        assert input_lists == ["app.kubernetes.io/managed-by=ocl-reconciler", "ocl-reconciler.io/build-input",
                               "coreos-assembler.coreos.com/secret"]
        creates = [r.resource for r in server.log if r.verb == "create"]
        assert creates.count("pods") == 3 and creates.count("configmaps") == 6


def test_pagination_is_followed(tmp_path, monkeypatch):
    from reconcile.cluster import live
    monkeypatch.setattr(live, "PAGE", 2)
    items = steady(5, tmp_path)
    with APIServer(items) as server:
        assert run(server, tmp_path) == 0
        pool_lists = [r for r in server.log if r.resource == "machineconfigpools"]
        assert len(pool_lists) == 3 and all(r.query["limit"] == "2" for r in pool_lists)
        assert server.items() == items


def test_an_expired_continue_token_restarts_the_list(tmp_path, monkeypatch):
    """410 Gone (reason Expired) on a continue request: the LIST starts again, the run goes on."""
    from reconcile.cluster import live
    monkeypatch.setattr(live, "PAGE", 2)
    items = steady(5, tmp_path)
    with APIServer(items) as server:
        seen = []

        def second_pool_page(verb, resource, ns, name):
            if verb == "list" and resource == "machineconfigpools":
                seen.append(1)
                return len(seen) == 2
            return False
        server.faults.append(Fault("status", code=410, match=second_pool_page, times=1))
        assert run(server, tmp_path) == 0
        pool_lists = [r for r in server.log if r.resource == "machineconfigpools"]
        assert ["continue" in r.query for r in pool_lists] == [False, True, False, True, True]
        assert server.items() == items


def test_foreign_annotation_written_between_read_and_write_survives(tmp_path):
    with APIServer(F.cluster()) as server:
        def meddle(verb, resource, ns, name):
            if verb == "patch" and resource == "machineconfigpools":
                pool = server.store.store[("MachineConfigPool", "", "worker")]
                pool["metadata"]["annotations"]["other.io/late"] = "kept"
                pool["metadata"]["annotations"][A.MESSAGE] = "foreign"
            return False
        server.faults.append(Fault("status", match=meddle, times=0))
        assert run(server, tmp_path) == 0
        a = server.store.get("MachineConfigPool", "", "worker")["metadata"]["annotations"]
        assert a["other.io/late"] == "kept" and a["example.com/keep"] == "theirs"
        assert a[A.STATE] == A.PENDING


def test_a_configmap_recreated_under_our_delete_is_replanned_once(tmp_path):
    from reconcile.contract import naming
    items = F.cluster()
    with APIServer(items, clock=lambda: F.NOW) as server:
        assert run(server, tmp_path) == 0
        items = server.items()
    # a killed run left no Pod, and someone recreated the Dockerfile ConfigMap with other content
    items = [o for o in items if o["kind"] != "Pod"]
    pool = F.the_pool(items)
    pool["metadata"]["annotations"] = {"example.com/keep": "theirs"}
    cm = next(o for o in items if "Dockerfile" in o.get("data", {}))
    cm["data"]["Dockerfile"] = "FROM drifted"
    cm["metadata"]["annotations"][naming.CONTENT_HASH] = naming.content_hash(cm)
    with APIServer(items, clock=lambda: F.NOW) as server:
        def race(verb, resource, ns, name):
            if verb == "delete" and resource == "configmaps" and not race.done:
                race.done = True                       # recreated again: a new uid
                server.store.store[("ConfigMap", ns, name)]["metadata"]["uid"] = "recreated"
            return False
        race.done = False
        server.faults.append(Fault("status", match=race, times=0))
        assert run(server, tmp_path) == 0
        deletes = [r for r in server.log if r.verb == "delete" and r.resource == "configmaps"]
        assert len(deletes) == 2                               # uid precondition failed, re-planned
        fixed = server.store.get("ConfigMap", F.NS, cm["metadata"]["name"])
        assert fixed["data"]["Dockerfile"].startswith("# Generated by ocl-reconciler")
        assert server.store.get("MachineConfigPool", "", "worker")["metadata"]["annotations"][A.STATE] == A.PENDING


def test_429_with_retry_after_is_honoured(tmp_path, monkeypatch):
    slept = []
    monkeypatch.setattr("reconcile.cluster.live.time.sleep", slept.append)
    with APIServer(F.cluster()) as server:
        server.faults.append(Fault("status", code=429, retry_after=2,
                                   match=lambda v, r, ns, n: r == "machineconfigpools", times=2))
        assert run(server, tmp_path) == 0
        assert slept[:2] == [2.0, 2.0]
        assert [(r.verb, r.resource) for r in server.log].count(("list", "machineconfigpools")) == 3


def test_connection_resets_and_5xx_are_retried(tmp_path, monkeypatch):
    monkeypatch.setattr("reconcile.cluster.live.time.sleep", lambda s: None)
    with APIServer(F.cluster()) as server:
        server.faults += [Fault("reset", match=lambda v, r, ns, n: r == "configmaps", times=1),
                          Fault("status", code=503, match=lambda v, r, ns, n: r == "pods", times=2),
                          Fault("drop-response", match=lambda v, r, ns, n: v == "create" and r == "pods")]
        assert run(server, tmp_path) == 0                             # the Pod create is adopted
        assert server.store.get("MachineConfigPool", "", "worker")["metadata"]["annotations"][A.STATE] == A.PENDING
        assert len([o for o in server.items() if o["kind"] == "Pod"]) == 1


def test_lost_delete_response_and_latency(tmp_path, monkeypatch):
    monkeypatch.setattr("reconcile.cluster.live.time.sleep", lambda s: None)
    with APIServer(F.cluster(), clock=lambda: F.NOW) as server:
        assert run(server, tmp_path) == 0
        items = server.items()
    for obj in items:
        if obj["kind"] == "Pod":
            kubelet.set_phase(obj, "Succeeded")
    with APIServer(items) as server:
        server.faults += [Fault("drop-response", match=lambda v, r, ns, n: v == "delete" and r == "pods"),
                          Fault("latency", seconds=0.3, match=lambda v, r, ns, n: r == "machineconfigpools")]
        assert run(server, tmp_path) == 0
        deletes = [r for r in server.log if r.verb == "delete" and r.resource == "pods"]
        assert len(deletes) == 2                          # retried; the 404 counts as done
        assert [o for o in server.items() if o["kind"] in ("Pod", "ConfigMap")
                and o["metadata"].get("labels", {}).get("app.kubernetes.io/managed-by")] == []
        a = server.store.get("MachineConfigPool", "", "worker")["metadata"]["annotations"]
        assert a[A.STATE] == A.SUCCEEDED


def test_503_storm_ends_at_the_deadline_with_a_clear_error(tmp_path, capsys):
    with APIServer(F.cluster()) as server:
        server.faults.append(Fault("status", code=503, match=lambda *a: True, times=0))
        code = run(server, tmp_path, timeout="1.5")
        err = capsys.readouterr().err
        assert code == 3
        assert "gave up at the run's deadline" in err and "HTTP 503" in err
        assert err.count("\n") == 1
        assert server.writes() and all(r.verb == "create" and r.resource == "leases" for r in server.writes())


def test_503_storm_on_writes_is_recorded_per_pool(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr("reconcile.cluster.live.time.sleep", lambda s: None)
    with APIServer(F.cluster()) as server:
        server.faults.append(Fault("status", code=503, match=lambda v, r, ns, n: v == "create" and r == "pods",
                                   times=0))
        code = run(server, tmp_path, timeout="2")
        err = capsys.readouterr().err
        assert code == 2
        assert "pool worker: create Pod/" in err and "gave up at the run's deadline" in err


def a_lease(holder, duration, age):
    return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": lease.NAME, "namespace": F.NS, "uid": holder, "resourceVersion": "5"},
            "spec": {"holderIdentity": holder, "leaseDurationSeconds": duration,
                     "renewTime": (F.NOW - age).strftime("%Y-%m-%dT%H:%M:%S.%fZ")}}


def test_live_lease_makes_a_second_run_skip(tmp_path, capsys):
    held = a_lease("someone-else", 300, timedelta(seconds=10))
    with APIServer(F.cluster(extra=[held])) as server:
        assert run(server, tmp_path) == 0
        assert [(r.verb, r.resource) for r in server.log] == [("create", "leases"), ("get", "leases")]
        assert "another run holds Lease" in capsys.readouterr().err
        assert server.store.get("Lease", F.NS, lease.NAME)["spec"]["holderIdentity"] == "someone-else"


def test_expired_lease_is_taken_over_and_released(tmp_path):
    stale = a_lease("crashed-run", 60, timedelta(hours=1))
    with APIServer(F.cluster(extra=[stale])) as server:
        assert run(server, tmp_path) == 0
        verbs = [(r.verb, r.resource) for r in server.log if r.resource == "leases"]
        assert verbs == [("create", "leases"), ("get", "leases"), ("update", "leases"), ("delete", "leases")]
        assert server.store.get("Lease", F.NS, lease.NAME) is None
        assert server.store.get("MachineConfigPool", "", "worker")["metadata"]["annotations"][A.STATE] == A.PENDING


def test_diff_status_render_take_no_lease_and_write_nothing(tmp_path, capsys):
    with APIServer(F.cluster()) as server:
        kc = server.kubeconfig(tmp_path / "kc")
        assert cli.main(["diff", "--kubeconfig", kc]) == 1
        assert cli.main(["status", "--kubeconfig", kc]) == 0
        assert cli.main(["render", "--kubeconfig", kc]) == 0
        assert server.writes() == []
        assert "3 to create, 1 to patch" in capsys.readouterr().out


def test_unreachable_server_is_fatal_within_the_deadline(tmp_path, capsys):
    with APIServer() as server:
        kc = server.kubeconfig(tmp_path / "kc")
    code = cli.main(["status", "--kubeconfig", kc, "--timeout", "1"])
    err = capsys.readouterr().err
    assert code == 3 and err.startswith("error: cannot read the cluster: GET /apis/machineconfiguration")
    assert "connection error" in err and err.count("\n") == 1


def test_kubeconfig_selection(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("KUBECONFIG", raising=False)
    assert cli.main(["status"]) == 3
    assert "no kubeconfig" in capsys.readouterr().err
    with APIServer(F.cluster()) as server:
        monkeypatch.setenv("KUBECONFIG", f"{tmp_path / 'absent'}:{server.kubeconfig(tmp_path / 'kc')}")
        assert cli.main(["status"]) == 0                     # $KUBECONFIG is a list, as for kubectl
        assert cli.main(["status", "--context", "nope"]) == 3
        assert "invalid kubeconfig" in capsys.readouterr().err
        bad = tmp_path / "bad"
        bad.write_text("not: [a kubeconfig")
        assert cli.main(["status", "--kubeconfig", str(bad)]) == 3


def test_foreign_object_with_our_name_blocks_the_pool(tmp_path):
    with APIServer(F.cluster(), clock=lambda: F.NOW) as server:
        assert cli.main(["render", "--kubeconfig", server.kubeconfig(tmp_path / "kc")]) == 0
    from reconcile.cluster import observe
    from reconcile.core import desired
    seen = observe.observe(server.store, F.NS)
    from reconcile.imagebuild.platform import clusterfacts
    nodes = clusterfacts.ClusterFacts(nodes=tuple(F.find(server.items(), "Node")))
    inp = desired.inputs(seen.settings, F.the_pool(server.items()), F.content(F.the_pool(server.items())), nodes)
    squatter = F.configmap(desired.names(inp).build.replace("ocl-build", "ocl-dockerfile"), {"x": "y"})
    with APIServer(F.cluster(extra=[copy.deepcopy(squatter)])) as server:
        assert run(server, tmp_path) == 2
        a = server.store.get("MachineConfigPool", "", "worker")["metadata"]["annotations"]
        assert a[A.STATE] == A.BLOCKED
        assert a[A.MESSAGE].startswith(f"create ConfigMap/{F.NS}/{squatter['metadata']['name']}: ")
        assert "not made by ocl-reconciler" in a[A.MESSAGE]
        assert server.store.get("ConfigMap", F.NS, squatter["metadata"]["name"])["data"] == {"x": "y"}


def test_a_lease_time_that_cannot_be_read_is_not_taken_over(tmp_path, caplog):
    from reconcile.cluster import lease
    held = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": lease.NAME, "namespace": F.NS, "uid": "theirs", "resourceVersion": "5"},
            "spec": {"holderIdentity": "someone", "leaseDurationSeconds": 60, "renewTime": "yesterday-ish"}}
    with APIServer(F.cluster(extra=[held])) as server:
        assert run(server, tmp_path) == 0
        assert [r.verb for r in server.log if r.verb not in ("get", "list")] == ["create"]   # the 409, nothing else
        assert server.store.get("Lease", F.NS, lease.NAME)["spec"]["holderIdentity"] == "someone"


def test_lease_times_are_read_as_rfc3339_in_any_precision():
    from datetime import datetime

    from reconcile.cluster import lease
    for text in ("2026-11-29T12:00:00Z", "2026-11-29T12:00:00.000000Z", "2026-11-29T12:00:00.000Z",
                 "2026-11-29T13:00:00+01:00"):
        assert lease.expires({"spec": {"renewTime": text, "leaseDurationSeconds": 0}}) == datetime(2026, 11, 29, 12)


def test_a_401_is_reported_as_a_401():
    from reconcile.cluster import Unauthorized, live
    err = live._error(401, b'{"kind":"Status","reason":"Unauthorized","message":"Unauthorized"}', "GET", "/x")
    assert isinstance(err, Unauthorized) and err.status == 401 and "401 Unauthorized" in str(err)


def test_a_replan_after_a_conflict_forgives_a_role_from_before_build_storage_as_the_first_read(tmp_path):
    """The default `buildStorage` with a Role that predates it (403 on our PersistentVolumeClaims)
    and a 409 on the pool's patch: the re-plan reads the pool's objects again, and its 403 is what
    the first read's was, a reason to build on an emptyDir, not a failed run."""
    items = pools(1, default_storage=True)
    with APIServer(items, clock=lambda: F.NOW) as server:
        server.faults += [
            Fault("status", code=403, times=0,
                  match=lambda v, r, ns, n: v == "list" and r == "persistentvolumeclaims"),
            Fault("status", code=409, times=1, match=lambda v, r, ns, n: v == "patch" and r == "machineconfigpools")]
        assert run(server, tmp_path) == 0
        assert len([r for r in server.log if r.verb == "list" and r.resource == "persistentvolumeclaims"]) == 2
        a = server.store.get("MachineConfigPool", "", "pool0")["metadata"]["annotations"]
        assert a[A.STATE] == A.PENDING
        assert a[A.BUILD_STORAGE].startswith(f"emptyDir: cannot list PersistentVolumeClaims in {F.NS}: ")
