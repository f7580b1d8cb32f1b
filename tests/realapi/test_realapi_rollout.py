"""`rollout: machineconfig` on the real kube-apiserver, as the reconciler's ServiceAccount with the
rollout Component installed (its ClusterRole and its ValidatingAdmissionPolicy decide every
MachineConfig write), the real docker-registry for reuse, and the MCO's own render and node controllers
(`mco`: ocl-mco-harness, tests/support/mcoreal.py) between runs, with the daemon played by the test and
judged by the daemon's own reboot rule. What is played, not run (the daemon, drain, reboot, a node's
pull) is said in docs/rollout.md. The two races at the end test our DELETE's preconditions, where no MCO
behaviour is involved: they keep the render imitation (tests/support/mcorender.py) to seed a pool."""

from __future__ import annotations

import json

import pytest

from reconcile.contract import annotations as A
from reconcile.contract import naming
from reconcile.core import rollout
from tests.support import factory as F
from tests.support import mcorender, realserver
from tests.unit.test_rollout import mco_pool, source_mc

pytestmark = pytest.mark.realapi
BUILDERS = sorted(F.BUILD_KINDS)


@pytest.fixture(scope="module")
def component(server):
    server.install_rollout()
    try:
        yield server
    finally:
        server.remove_rollout()


def seed(real, builder, repo, host, *pools, gate="none", mco=None):
    """The rollout gate off unless asked for: these scenarios are about the MachineConfig's handover
    (the gate's: tests/realapi/test_realapi_gate.py). With `mco` the real controllers render the pools
    and the played daemon boots their nodes; without, the render imitation renders them."""
    pools = pools or (mco_pool("worker", ("worker",)),)
    real.seed([F.build_config(imageBuilderType=builder, rollout="machineconfig", finalImagePullspec=f"{repo}:latest",
                              rolloutGate=gate),
               F.osimageurl(), F.secret("pull-secret"),
               F.secret("push-secret", payload={"auths": {host: {"auth": "dTpw"}}}), *pools,
               *(F.node(f"{p['metadata']['name']}-0", p["metadata"]["name"]) for p in pools),
               source_mc("00-worker", "worker", {"/etc/base": "base"}, generated=True)])
    if mco is not None:
        mco.settle()
    for pool in pools if mco is None else ():
        mcorender.sync_api(real.api, pool["metadata"]["name"], F.BASE)
    # the rollout policy's parameter agrees, as docs/admin.md has the administrator keep it
    real.api.write_rollout_params(repo, [p["metadata"]["name"] for p in pools])


def rendered(real, mco, pool="worker"):
    """The MCO settles (render, node updates); the pool's rendered MachineConfig."""
    mco.settle()
    return real.api.get("MachineConfig", "", real.pool(pool)["spec"]["configuration"]["name"])


def writes(real, mark):
    """The reconciler's writes since `mark` (the audit log), the Lease's aside."""
    return sorted((e["verb"], e["objectRef"]["resource"]) for e in real.api.audit(mark, realserver.RECONCILER)
                  if e["verb"] not in ("get", "list", "watch") and e["objectRef"]["resource"] != "leases")


def ours(real, pool="worker"):
    return real.api.get("MachineConfig", "", rollout.name(pool))


def build(real, R, reg, marker, pool="worker"):
    code, err = real.run()
    assert code == 0 and real.ann(pool)[A.STATE] == A.PENDING, err
    build_id = real.build_object(pool)["metadata"]["labels"][naming.BUILD_ID_LABEL]
    real.finish("Succeeded", pool, digest=R.push_image(reg, "ocl/os-image", marker, {naming.BUILD_ID_LABEL: build_id}))
    code, err = real.run()
    assert code == 0 and real.ann(pool)[A.STATE] == A.SUCCEEDED, err
    return real.ann(pool)[A.IMAGE]


@pytest.mark.parametrize("builder", BUILDERS)
def test_the_image_reaches_the_pool_through_one_machineconfig_and_nothing_loops(component, real, mco, builder,
                                                                                tmp_path):
    from tests.support import realbuild as R
    R.require_registry()
    reg = R.Registry(tmp_path)
    try:
        seed(real, builder, f"{reg.host}/ocl/os-image", reg.host, mco=mco)
        mark = real.api.audit_mark()
        image_a = build(real, R, reg, "a")
        assert writes(real, mark).count(("create", "machineconfigs")) == 1
        assert ours(real)["spec"] == {"osImageURL": image_a}

        # the MCO re-renders the pool with our osImageURL: recorded in one patch, then nothing
        config = rendered(real, mco)
        assert config["spec"]["osImageURL"] == image_a
        mark = real.api.audit_mark()
        assert real.run()[0] == 0
        assert writes(real, mark) == [("patch", "machineconfigpools")]
        assert real.ann()[A.RENDERED] == config["metadata"]["name"]
        mark = real.api.audit_mark()
        assert real.run()[0] == 0
        assert writes(real, mark) == []
        gets = [e["objectRef"].get("name") for e in real.api.audit(mark, realserver.RECONCILER)
                if e["verb"] == "get" and e["objectRef"]["resource"] == "machineconfigs"]
        assert gets == []                                 # the content digest is recorded: no read
        lists = sorted(e["objectRef"]["resource"] for e in real.api.audit(mark, realserver.RECONCILER)
                       if e["verb"] == "list")
        # the 6 LISTs of a steady run (docs/design.md, "Talking to the API server"), one of our
        # MachineConfigs and one of every MachineConfig's metadata (strays)
        assert lists == sorted(["configmaps", "configmaps", "secrets", "pods", "builds", "machineconfigpools",
                                "machineconfigs", "machineconfigs"])

        # a kernel argument: a new rendered config, nothing to build
        real.api.create(source_mc("99-worker-kargs", "worker", kernelArguments=["nosmt"]))
        rendered(real, mco)
        mark = real.api.audit_mark()
        assert real.run()[0] == 0
        assert writes(real, mark) == [("patch", "machineconfigpools")]

        # a real content change rebuilds and changes the MachineConfig once
        real.api.create(source_mc("99-worker-motd", "worker", {"/etc/motd": "hello"}))
        rendered(real, mco)
        mark = real.api.audit_mark()
        image_b = build(real, R, reg, "b")
        assert image_b != image_a
        assert writes(real, mark).count(("patch", "machineconfigs")) == 1
        assert ours(real)["spec"] == {"osImageURL": image_b}
        rendered(real, mco)
        assert real.run()[0] == 0

        # back to A's content: the registry still has A's image, reused, the MachineConfig points at it
        real.api.request("DELETE", real.api.path("MachineConfig", "", "99-worker-motd"))
        rendered(real, mco)
        mark = real.api.audit_mark()
        code, err = real.run()
        assert code == 0, err
        assert real.ann()[A.IMAGE] == image_a and real.ann()[A.MESSAGE].startswith(f"reused {image_a}")
        assert ours(real)["spec"] == {"osImageURL": image_a}
        assert ("create", "pods") not in writes(real, mark) and ("create", "builds") not in writes(real, mark)

        # opt-out deletes it: the MCO renders the pool without it, back to the release's image
        pool = real.pool()
        del pool["metadata"]["labels"][A.LAYERING_LABEL]
        real.api.request("PUT", real.api.path("MachineConfigPool", "", "worker"), pool)
        code, err = real.run()
        assert code == 0 and ours(real) is None, err
        assert "ImageRollback" in [e["reason"] for e in real.events()]
        assert rendered(real, mco)["spec"]["osImageURL"] == F.BASE
    finally:
        reg.stop()


def test_an_inheriting_pool_is_announced_and_one_with_an_os_stream_blocks(component, real, mco, tmp_path):
    from tests.support import realbuild as R
    R.require_registry()
    reg = R.Registry(tmp_path)
    try:
        infra = mco_pool("infra", ("worker", "infra"), opted_in=False)
        seed(real, F.BUILDER, f"{reg.host}/ocl/os-image", reg.host, mco_pool("worker", ("worker",)), infra, mco=mco)
        image = build(real, R, reg, "a")
        (told,) = [e for e in real.events() if e["reason"] == "ImageRollout"]
        assert "pool(s) worker, infra" in told["message"] and "infra inherit" in told["message"]
        assert rendered(real, mco, "infra")["spec"]["osImageURL"] == image

        # infra picks an OS stream: the MCO would refuse to render it, so worker is Blocked first
        # (the MCO's stream policy admits only a stream the singleton lists)
        real.api.create(F.osimagestream("rhel-9", "rhel-10"))
        pool = real.pool("infra")
        pool["spec"]["osImageStream"] = {"name": "rhel-10"}
        real.api.request("PUT", real.api.path("MachineConfigPool", "", "infra"), pool)
        real.api.request("DELETE", real.api.path("MachineConfig", "", rollout.name("worker")))
        real.api.create(source_mc("99-worker-motd", "worker", {"/etc/motd": "x"}))
        rendered(real, mco)
        code, err = real.run()
        assert code == 2, err
        assert real.ann()[A.STATE] == A.BLOCKED and "MachineConfigPool infra selects" in real.ann()[A.MESSAGE]
        assert ours(real) is None
    finally:
        reg.stop()


def test_a_zz_machineconfig_that_overrides_our_image_is_named(component, real, mco, tmp_path):
    """zz-os (role worker, osImageURL set) sorts after ocl-osimageurl-worker: `MergeMachineConfigs`
    (openshift/machine-config-operator pkg/controller/common/helpers.go) merges worker-role
    MachineConfigs by name and keeps the last osImageURL, so the pool's rendered config holds zz-os's
    image. The run names it (one LIST of the pool's MachineConfigs, RBAC of the rollout Component),
    once, and status says `overridden by zz-os`."""
    from tests.standin.test_rollout_check import OTHER, zz_os
    from tests.support import realbuild as R
    from tests.unit.test_rollout import columns
    R.require_registry()
    reg = R.Registry(tmp_path)
    try:
        seed(real, F.BUILDER, f"{reg.host}/ocl/os-image", reg.host, mco=mco)
        image = build(real, R, reg, "a")
        real.api.create(zz_os())
        config = rendered(real, mco)
        assert config["spec"]["osImageURL"] == OTHER != image
        mark = real.api.audit_mark()
        code, err = real.run()
        assert code == 0, err
        lists = [e["objectRef"]["resource"] for e in real.api.audit(mark, realserver.RECONCILER)
                 if e["verb"] == "list" and e["objectRef"]["resource"] == "machineconfigs"]
        assert lists == ["machineconfigs"] * 3          # ours, every one's metadata (strays), the pool's
        assert real.ann()[A.OVERRIDDEN_BY] == "zz-os"
        assert real.ann()[A.ROLLOUT] == f"{config['metadata']['name']}={OTHER}"
        (told,) = [e for e in real.events() if e["reason"] == "ImageOverridden"]
        assert told["type"] == "Warning" and "rename zz-os to sort before ocl-osimageurl-worker" in told["message"]
        code, out, err = real.cli("status")
        assert code == 0, err
        assert columns(out)["worker"]["ROLLOUT"] == "overridden by zz-os"
        mark = real.api.audit_mark()
        assert real.run()[0] == 0
        assert writes(real, mark) == []                                # told once, then nothing

        # renamed to sort before ours (99-zz-os < ocl-osimageurl-worker): ours wins again
        real.api.request("DELETE", real.api.path("MachineConfig", "", "zz-os"))
        real.api.create(zz_os("99-zz-os"))
        assert rendered(real, mco)["spec"]["osImageURL"] == image
        assert real.run()[0] == 0
        assert A.OVERRIDDEN_BY not in real.ann()
        code, out, _ = real.cli("status")
        # our image again, and the node controller and the played daemon rolled it out to the node
        assert real.ann()[A.ROLLOUT].endswith(f"={image}") and columns(out)["worker"]["ROLLOUT"] == "rolled out"
    finally:
        reg.stop()


def admins_strays(real):
    """Row 5 of issue 31 as an administrator now must (the policy refuses our ServiceAccount both,
    tests/realapi/test_realapi_rollout_policy.py): ocl-osimageurl-master and ocl-osimageurl-ghost
    labelled as ours, and ocl-osimageurl-unrendered without our label, that no pool renders."""
    image = f"{F.REPO}@sha256:" + "1" * 64
    for pool in ("master", "ghost"):
        real.api.create({"apiVersion": f"{F.MCO}/v1", "kind": "MachineConfig",
                         "metadata": {"name": rollout.name(pool), "labels": rollout.labels(pool)},
                         "spec": {"osImageURL": image}})
    real.api.create({"apiVersion": f"{F.MCO}/v1", "kind": "MachineConfig",
                     "metadata": {"name": "ocl-osimageurl-unrendered", "labels": {rollout.ROLE_LABEL: "unrendered"}},
                     "spec": {"osImageURL": image}})


STRAYS = ["stray MachineConfig ocl-osimageurl-ghost: no MachineConfigPool ghost exists; the reconciler did not write it",
          "stray MachineConfig ocl-osimageurl-master: pool master is not opted in and was never built; the "
          "reconciler did not write it",
          "stray MachineConfig ocl-osimageurl-unrendered: it lacks our label app.kubernetes.io/managed-by="
          "ocl-reconciler; the reconciler did not write it"]


def said(err, mark):
    return [line[len(mark):] for line in err.splitlines() if line.startswith(mark + "stray MachineConfig ")]


def test_strays_an_administrator_made_are_said_by_run_diff_status_and_preflight(component, real, mco):
    """As our ServiceAccount with the rollout Component (its `list machineconfigs` covers the
    metadata-only LIST of every MachineConfig): each command names each stray; run tells master in
    a Warning Event and deletes the two that are ours by label and name (opt-out, pool gone), and
    keeps the one without our label."""
    seed(real, F.BUILDER, F.REPO, "registry.example.com:5000", mco=mco)
    real.api.create(F.pool("master", opted_in=False))
    real.api.create(source_mc("00-master", "master", {"/etc/base": "master"}, generated=True))
    admins_strays(real)
    rendered(real, mco, "master")                           # the MCO renders master with the stray
    mark = real.api.audit_mark()
    code, out, err = real.cli("diff")
    assert code == 1 and said(err, "WARNING ") == STRAYS and "stray" not in out, err
    code, out, err = real.cli("status")
    assert code == 0 and said(err, "warning: ") == STRAYS and "stray" not in out, err
    code, out, err = real.cli("preflight", "-o", "json")
    found = [line["message"] for line in json.loads(out) if line["check"] == "stray-machineconfigs"]
    assert code == 2 and found == STRAYS, out
    lists = [(e["responseStatus"]["code"], e["objectRef"]["resource"]) for e in real.api.audit(mark, realserver.RECONCILER)
             if e["verb"] == "list" and e["objectRef"]["resource"] == "machineconfigs"]
    assert lists == [(200, "machineconfigs")] * 6           # two each: ours, every one's metadata

    code, err = real.run()
    assert code == 0 and said(err, "WARNING ") == STRAYS, err
    (told,) = [e for e in real.events("master") if e["reason"] == "StrayMachineConfig"]
    assert told["type"] == "Warning" and told["message"] == STRAYS[1]
    left = {o["metadata"]["name"] for o in real.api.list("MachineConfig") if o["metadata"]["name"].startswith(rollout.PREFIX)}
    assert left == {"ocl-osimageurl-unrendered"}
    code, err = real.run()
    assert code == 0 and said(err, "WARNING ") == STRAYS[2:], err


@pytest.mark.parametrize("meddling", ["recreated", "relabelled"])
def test_a_delete_of_what_is_no_longer_ours_is_refused_and_the_machineconfig_kept(component, real, monkeypatch,
                                                                                   meddling):
    """Opt-out deletes our MachineConfig with the uid and resourceVersion it read as preconditions.
    In between, someone replaces it with their own (a new uid), or takes our label off it (the same
    uid, a new resourceVersion; without that precondition the policy would deny our delete and the
    pool end in Error): the real server refuses our DELETE (409), the run re-reads, finds nothing of
    ours and keeps theirs; the next run names it a stray."""
    worker = mco_pool("worker", ("worker",), opted_in=False)
    worker["metadata"]["annotations"][A.STATE] = A.SUCCEEDED
    seed(real, F.BUILDER, F.REPO, "registry.example.com:5000", worker)
    image = f"{F.REPO}@sha256:" + "1" * 64
    real.api.create({"apiVersion": f"{F.MCO}/v1", "kind": "MachineConfig",
                     "metadata": {"name": rollout.name("worker"), "labels": rollout.labels("worker")},
                     "spec": {"osImageURL": image}})
    theirs = {rollout.ROLE_LABEL: "worker"}
    if meddling == "recreated":
        raced = real.recreate_before_our_first_delete(
            "MachineConfig", monkeypatch, lambda obj: dict(obj, metadata=dict(obj["metadata"], labels=theirs)))
    else:
        def relabel(kind, namespace, name):
            real.api.request("PATCH", real.api.path(kind, namespace, name),
                             [{"op": "replace", "path": "/metadata/labels", "value": theirs}],
                             content_type="application/json-patch+json")
        raced = real.before_our_first_delete("MachineConfig", monkeypatch, relabel)
    before = ours(real)["metadata"]["uid"]
    mark = real.api.audit_mark()
    code, err = real.run()
    assert code == 0 and raced and "re-reading and re-planning" in err, err
    codes = [e["responseStatus"]["code"] for e in real.api.audit(mark, realserver.RECONCILER)
             if e["verb"] == "delete" and e["objectRef"]["resource"] == "machineconfigs"]
    assert codes == [409], codes
    kept = ours(real)
    assert kept["metadata"]["labels"] == theirs and kept["spec"]["osImageURL"] == image
    assert (kept["metadata"]["uid"] == before) == (meddling == "relabelled")
    assert A.STATE not in real.ann()                        # opted out all the same
    monkeypatch.undo()
    code, err = real.run()
    assert code == 0 and said(err, "WARNING ") == [
        "stray MachineConfig ocl-osimageurl-worker: it lacks our label app.kubernetes.io/managed-by=ocl-reconciler; "
        "the reconciler did not write it"], err
    assert ours(real)["metadata"]["uid"] == kept["metadata"]["uid"]


def test_the_rollout_check_reads_the_real_node_controllers_status(component, real, mco, tmp_path):
    """`status`'s ROLLOUT column from the pool status the real node controller writes: with
    maxUnavailable 1 and one daemon finishing while the next node it targets is still updating (the
    played daemon holds it), `1/3 nodes` (status.go `calculateStatus`: updatedMachineCount counts
    nodes done on the pool's target); then `rolled out` (status.configuration follows
    spec.configuration once all are updated); then `render failed` once a MachineConfig does not
    parse (RenderDegraded True, render_controller.go `syncFailingStatus`), also a preflight problem."""
    from tests.support import realbuild as R
    from tests.unit.test_rollout import columns
    R.require_registry()
    reg = R.Registry(tmp_path)
    try:
        for i in (1, 2):                                     # seed makes worker-0
            real.api.create(F.node(f"worker-{i}", "worker"))
        seed(real, F.BUILDER, f"{reg.host}/ocl/os-image", reg.host, mco=mco)
        mco.daemon.limit = 1
        build(real, R, reg, "a")
        mco.settle()
        assert real.run()[0] == 0
        code, out, err = real.cli("status")
        assert code == 0 and columns(out)["worker"]["ROLLOUT"] == "1/3 nodes", out + err
        mco.daemon.limit = None
        mco.settle()
        assert real.run()[0] == 0
        code, out, err = real.cli("status")
        assert code == 0 and columns(out)["worker"]["ROLLOUT"] == "rolled out", out + err

        bad = source_mc("99-worker-bad", "worker")
        bad["spec"]["config"] = {"ignition": {"version": "9.9.9"}}
        real.api.create(bad)
        mco.settle()
        real.run()
        code, out, err = real.cli("status")
        assert columns(out)["worker"]["ROLLOUT"] == "render failed", out + err
        code, out, err = real.cli("preflight", "-o", "json")
        found = [line["message"] for line in json.loads(out) if "RenderDegraded" in line["message"]]
        assert found and "parsing Ignition config failed: unknown version" in found[0], out
    finally:
        reg.stop()
