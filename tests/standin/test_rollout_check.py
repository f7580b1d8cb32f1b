"""The rollout checked (`rollout: machineconfig`), through the stand-in API server and on snapshots:
what the pool's rendered config holds is read once per rendered config, a MachineConfig that wins
over ours is named (once, as a Warning Event), and status, explain and -o json say the same.

Expected winners come from `MergeMachineConfigs` (openshift/machine-config-operator
`pkg/controller/common/helpers.go`: role-worker MachineConfigs first, each group by name, the last
osImageURL wins), played between runs by tests/support/mcorender.py."""

from __future__ import annotations

import copy
import json

import pytest

from reconcile import cli
from reconcile.contract import annotations as A
from reconcile.core import rollout
from reconcile.core.rollout import check as rolloutcheck
from tests.support import factory as F
from tests.support import mcorender
from tests.support.apiserver import APIServer
from tests.unit.test_rollout import DIGESTS, build_once, columns, finish, mco_pool, source_mc, world

OTHER = "registry.example.com/other/os@sha256:" + "2" * 64
OURS = f"{F.REPO}@{DIGESTS[0]}"
ROLE = mcorender.ROLE_LABEL


@pytest.fixture(autouse=True)
def pinned_clock(monkeypatch):
    monkeypatch.setenv("OCL_RECONCILE_NOW", "2026-11-29T12:00:00Z")


def run(server, tmp_path):
    return cli.main(["run", "--kubeconfig", server.kubeconfig(tmp_path / "kc"), "--timeout", "20"])


def zz_os(name="zz-os", role="worker"):
    mc = source_mc(name, role)
    mc["spec"] = {"osImageURL": OTHER}
    return mc


#: the LISTs of MachineConfigs every rollout run makes: ours by label, then every one's metadata (strays)
LISTS = [("list", "", "app.kubernetes.io/managed-by=ocl-reconciler"), ("list", "", None)]


def mc_requests(server):
    return [(r.verb, r.name, r.query.get("labelSelector")) for r in server.log if r.resource == "machineconfigs"]


def handed_over(run_cli, *extra):
    """Our image built and written into ocl-osimageurl-worker, then the MCO renders the pool with
    `extra` MachineConfigs too."""
    items = build_once(run_cli, world(), DIGESTS[0])
    return mcorender.sync([*items, *copy.deepcopy(extra)], base_image=F.BASE)


def test_a_steady_rollout_run_reads_no_machineconfig(run_cli, tmp_path):
    items = handed_over(run_cli)
    code, items, err = run_cli.run(items)          # the re-render: content and rollout recorded in one patch
    assert code == 0, err
    rendered = F.the_pool(items)["spec"]["configuration"]["name"]
    assert F.the_pool(items)["metadata"]["annotations"][A.ROLLOUT] == f"{rendered}={OURS}"
    assert A.OVERRIDDEN_BY not in F.the_pool(items)["metadata"]["annotations"]
    with APIServer(items) as server:
        assert run(server, tmp_path) == 0
        # only the LIST of our own MachineConfigs and the metadata-only one of every MachineConfig
        # (docs/design.md: "two more LISTs"), no GET
        assert mc_requests(server) == LISTS
        assert [r.metadata_only for r in server.log if r.resource == "machineconfigs"] == [False, True]
        # the steady run of docs/design.md (11 requests) plus the two LISTs; the nodes are listed
        # because this world's pool has no nodes, so no architecture is recorded
        assert sorted((r.verb, r.resource) for r in server.log) == sorted([
            ("create", "leases"), ("delete", "leases"), ("get", "configmaps"), ("get", "configmaps"),
            ("get", "osimagestreams"), ("list", "builds"), ("list", "configmaps"), ("list", "configmaps"),
            ("list", "machineconfigpools"), ("list", "machineconfigs"), ("list", "machineconfigs"),
            ("list", "nodes"), ("list", "pods"),
            ("list", "secrets")])
        assert server.items() == items


def test_the_run_after_the_render_reads_nothing_more_than_the_content_digest_needs(run_cli, tmp_path):
    items = handed_over(run_cli)
    with APIServer(items) as server:
        assert run(server, tmp_path) == 0
        rendered = F.the_pool(items)["spec"]["configuration"]["name"]
        assert mc_requests(server) == [*LISTS, ("get", rendered, None)]
        writes = [(r.verb, r.resource) for r in server.log if r.verb in ("create", "patch", "delete")
                  and r.resource != "leases"]
        assert writes == [("patch", "machineconfigpools")]


def test_a_zz_machineconfig_that_wins_is_named_once(run_cli, tmp_path):
    items = handed_over(run_cli, zz_os())
    rendered = F.the_pool(items)["spec"]["configuration"]["name"]
    # MergeMachineConfigs: ocl-osimageurl-worker < zz-os, both role worker: zz-os's osImageURL is last
    assert F.find(items, "MachineConfig", rendered)[0]["spec"]["osImageURL"] == OTHER
    with APIServer(items) as server:
        assert run(server, tmp_path) == 0              # overridden is not Blocked
        # the rendered config, then (its image not ours) one LIST of the pool's MachineConfigs
        assert mc_requests(server) == [*LISTS, ("get", rendered, None), ("list", "", ROLE)]
        after = server.items()
    pool = F.the_pool(after)
    assert pool["metadata"]["annotations"][A.ROLLOUT] == f"{rendered}={OTHER}"
    assert pool["metadata"]["annotations"][A.OVERRIDDEN_BY] == "zz-os"
    (event,) = [e for e in after if e["kind"] == "Event" and e.get("reason") == rolloutcheck.OVERRIDDEN]
    assert event["type"] == "Warning" and "rename zz-os to sort before ocl-osimageurl-worker" in event["message"]
    with APIServer(after) as server:
        assert run(server, tmp_path) == 0
        assert mc_requests(server) == LISTS
        assert server.items() == after                     # once per rendered config: no second Event

    rows = columns(run_cli("status", "--snapshot", str(run_cli.write(after)))[1])
    assert rows["worker"]["ROLLOUT"] == "overridden by zz-os" and rows["worker"]["STATE"] == "Succeeded"
    wide = columns(run_cli("status", "-o", "wide", "--snapshot", str(run_cli.write(after)))[1])
    assert wide["worker"]["ROLLOUT"] == "overridden by zz-os" and "ARCH" in wide["worker"]

    code, out, err = run_cli("explain", "worker", "--snapshot", str(run_cli.write(after)))
    assert code == 0, err
    assert "  rollout         overridden by zz-os\n" in out
    assert "MachineConfig zz-os sets osImageURL and comes after ocl-osimageurl-worker" in out
    code, out, _ = run_cli("explain", "worker", "-o", "json", "--snapshot", str(run_cli.write(after)))
    roll = json.loads(out)["rollout"]
    assert (roll["state"], roll["shown"], roll["overriddenBy"], roll["renderedImage"]) == \
        ("overridden", "overridden by zz-os", "zz-os", OTHER)


def test_explain_counts_the_check_this_run_would_make(run_cli):
    items = handed_over(run_cli, zz_os())
    code, out, _ = run_cli("explain", "worker", "-o", "json", "--snapshot", str(run_cli.write(items)))
    assert json.loads(out)["rollout"]["shown"] == "overridden by zz-os"
    # status reads the pools alone: nothing checked yet
    assert columns(run_cli("status", "--snapshot", str(run_cli.write(items)))[1])["worker"]["ROLLOUT"] == "unchecked"


def test_one_named_to_sort_before_ours_loses(run_cli):
    """99-zz-worker-os < ocl-osimageurl-worker by name (both role worker): ours is merged last."""
    items = run_cli.run(handed_over(run_cli, zz_os("99-zz-worker-os")))[1]
    pool = F.the_pool(items)
    assert pool["metadata"]["annotations"][A.ROLLOUT].endswith(f"={OURS}")
    # mco_pool's status: 2 machines, both updated, status.configuration not yet the new rendered config
    assert columns(run_cli("status", "--snapshot", str(run_cli.write(items)))[1])["worker"]["ROLLOUT"] == "2/2 nodes"


def test_a_render_failure_is_shown_from_the_pool_condition(run_cli):
    items = run_cli.run(handed_over(run_cli))[1]
    pool = F.the_pool(items)
    mcorender.set_condition(pool.setdefault("status", {}), "RenderDegraded", "True",
                            message="Failed to render configuration for pool worker: boom")
    rows = columns(run_cli("status", "--snapshot", str(run_cli.write(items)))[1])
    assert rows["worker"]["ROLLOUT"] == "render failed"
    code, out, _ = run_cli("explain", "worker", "-o", "json", "--snapshot", str(run_cli.write(items)))
    assert json.loads(out)["rollout"]["renderMessage"] == "Failed to render configuration for pool worker: boom"


def test_annotation_mode_shows_a_dash(run_cli):
    items = build_once(run_cli, world(rollout_mode="annotation"), DIGESTS[0])
    rows = columns(run_cli("status", "--snapshot", str(run_cli.write(items)))[1])
    assert rows["worker"]["ROLLOUT"] == "-"
    code, out, _ = run_cli("explain", "worker", "-o", "json", "--snapshot", str(run_cli.write(items)))
    assert json.loads(out)["rollout"] is None


def test_a_custom_pools_own_machineconfig_wins_over_a_later_worker_one(run_cli):
    """On infra (selecting roles worker and infra), every worker-role MachineConfig merges before the
    infra-role ones: zz-worker-os does not override ocl-osimageurl-infra."""
    infra = mco_pool("infra", ("worker", "infra"))
    items = run_cli.run(world(mco_pool("worker", ("worker",)), infra))[1]
    items = run_cli.run(finish(finish(items, "worker", "Succeeded", DIGESTS[0]), "infra", "Succeeded",
                               DIGESTS[1]))[1]
    items = run_cli.run(items)[1]           # worker's write waited for infra's own MachineConfig
    assert {rollout.name("infra"), rollout.name("worker")} <= {o["metadata"]["name"] for o in items
                                                               if o["kind"] == "MachineConfig"}
    code, items, err = run_cli.run(mcorender.sync([*items, zz_os("zz-worker-os")], base_image=F.BASE))
    assert code == 0, err
    anns = {p: F.the_pool(items, p)["metadata"]["annotations"] for p in ("worker", "infra")}
    assert anns["infra"][A.ROLLOUT].endswith(f"={F.REPO}@{DIGESTS[1]}")          # ours, on infra
    assert A.OVERRIDDEN_BY not in anns["infra"]
    assert anns["worker"][A.ROLLOUT].endswith(f"={OTHER}")                       # overridden, on worker
    assert anns["worker"][A.OVERRIDDEN_BY] == "zz-worker-os"


def test_metrics_count_the_nodes_running_our_image_and_name_the_overrider(run_cli, tmp_path):
    from tests.unit.test_metrics import samples
    metrics = tmp_path / "ocl.prom"
    items = handed_over(run_cli)
    worker = F.the_pool(items)
    worker["status"].update(machineCount=5, updatedMachineCount=3, degradedMachineCount=1)
    code, items, err = run_cli.run(items, "--metrics-file", str(metrics))
    assert code == 0, err
    got = samples(metrics.read_text())
    assert {state: got[("ocl_rollout_nodes", (("pool", "worker"), ("state", state)))]
            for state in ("updated", "total", "degraded")} == {"updated": 3, "total": 5, "degraded": 1}
    assert not [k for k in got if k[0] == "ocl_rollout_overridden"]

    items = mcorender.sync([*items, zz_os()], base_image=F.BASE)
    code, items, err = run_cli.run(items, "--metrics-file", str(metrics))
    got = samples(metrics.read_text())
    assert got[("ocl_rollout_overridden", (("machineconfig", "zz-os"), ("pool", "worker")))] == 1
    assert not [k for k in got if k[0] == "ocl_rollout_nodes"]      # its nodes do not run our image
