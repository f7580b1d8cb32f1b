"""The rollout gate on the real kube-apiserver (issue 30 item 5), as the reconciler's ServiceAccount with
the rollout Component and the pool policy installed, the real docker-registry, and the MCO's own render
and node controllers (`mco`: ocl-mco-harness, tests/support/mcoreal.py) with the daemon played by the test.
Between two runs the MCO settles first, as it does on a cluster. Every node update is counted, whether it
changed the OS image, and whether the real daemon's rule (pkg/daemon/update.go, through the harness's
verdict, with the MCO's built-in node disruption policies) reboots the node for it: the figures
docs/rollout.md gives (section 3) are these tests' assertions, gate on and off. Expected reboots follow
update.go: an osImageURL or kernel argument change reboots, and so does a file no policy names
(/etc/motd, /etc/release)."""

from __future__ import annotations

import re

import pytest

from reconcile.contract import annotations as A
from reconcile.core.rollout import hold
from tests.realapi.test_realapi_rollout import component as component  # noqa: F401 - the module fixture
from tests.realapi.test_realapi_rollout import ours, seed
from tests.support import factory as F
from tests.support import mcoreal as M
from tests.support import realbuild as R
from tests.support import realserver
from tests.unit.test_rollout import mco_pool, source_mc

pytestmark = pytest.mark.realapi
BUILD_ID, ARCH = "ocl-reconciler.io/build-id", "kubernetes.io/arch"
BUILDERS = sorted(F.BUILD_KINDS)
NODES = 2


@pytest.fixture
def registry(tmp_path):
    R.require_registry()
    reg = R.Registry(tmp_path)
    try:
        yield reg
    finally:
        reg.stop()


def start(real, mco, builder, reg, gate="hold", paused=None, nodes=NODES, arch="amd64"):
    """The pool `worker` and its nodes: worker-0 (seed makes it, amd64), the others of `arch`."""
    pool = mco_pool("worker", ("worker",))
    pool["spec"]["maxUnavailable"] = 1
    if paused is not None:
        pool["spec"]["paused"] = paused
    pool["status"] = {}
    for i in range(1, nodes):                               # seed makes worker-0
        real.api.create(F.node(f"worker-{i}", "worker", arch=arch))
    seed(real, builder, f"{reg.host}/ocl/os-image", reg.host, pool, gate=gate, mco=mco)


def cycle(real, mco, reg, counter, outcome="Succeeded", runs=8):
    """Runs with the MCO settling first; each build object a run made ends as `outcome` (for a
    success, a real image pushed for the architecture its nodeSelector names, labelled with its
    build id as our Dockerfile labels it). Returns once a run writes nothing and the MCO has nothing
    to do."""
    import kubelet  # examples/kubelet.py, on the path by conftest
    for _ in range(runs):
        mco.settle(counter)
        code, err = real.run()
        assert code in (0, 2), err
        live = [o for o in real.owned() if o["kind"] in ("Pod", "Build")
                and (o.get("status") or {}).get("phase") not in ("Succeeded", "Failed", "Complete")]
        for obj in live:
            labels = obj["metadata"]["labels"]
            digest = R.push_image(reg, "ocl/os-image", f"gate-{obj['metadata']['name']}",
                                  {BUILD_ID: labels[BUILD_ID]}, arch=obj["spec"]["nodeSelector"][ARCH]) \
                if outcome == "Succeeded" else None
            real.api.write_status(kubelet.set_phase(obj, outcome, **({"digest": digest} if digest else {})))
        if not live and "0 created, 0 patched, 0 deleted" in err.splitlines()[-1]:
            before = len(counter)
            mco.settle(counter)
            if len(counter) == before:
                return
    raise AssertionError(f"not converged after {runs} runs: {err.splitlines()[-1]}; {real.ann()}")


def rendered(real):
    return real.api.get("MachineConfig", "", real.pool()["spec"]["configuration"]["name"])


def files(mc):
    return {f["path"] for f in mc["spec"]["config"].get("storage", {}).get("files", [])}


def nodes(n):
    return {f"worker-{i}": n for i in range(NODES)}


@pytest.mark.parametrize("builder", BUILDERS)
def test_a_machineconfig_change_and_an_upgrade_reach_each_node_once(component, real, mco, registry, builder):
    start(real, mco, builder, registry)
    cycle(real, mco, registry, M.Moves())
    assert real.pool()["spec"]["paused"] is True and real.ann()[A.GATE] == hold.HELD
    # a MachineConfig change: one update per node, to a config with the new file and the new image
    counter = M.Moves()
    real.api.create(source_mc("99-worker-motd", "worker", {"/etc/motd": "hello"}))
    cycle(real, mco, registry, counter)
    final = rendered(real)
    assert counter.per_node() == nodes(1) and counter.reboots == NODES and counter.os_changes == NODES
    assert "/etc/motd" in files(final) and final["spec"]["osImageURL"] == ours(real)["spec"]["osImageURL"]
    assert {u.to_config for u in counter} == {final["metadata"]["name"]}
    # an upgrade: a new base image and changed MCO MachineConfigs together, one update per node
    counter = M.Moves()
    upgrade(real, mco)
    cycle(real, mco, registry, counter)
    assert counter.per_node() == nodes(1) and counter.reboots == NODES and counter.os_changes == NODES
    assert "/etc/release" in files(rendered(real))


#: the pool's nodes' architectures (worker-0, worker-1): one image for a pool of amd64 nodes; an OCI
#: image index made by the reconciler over an amd64 and an arm64 build for a pool of both
ARCHS = {"digest": ("amd64", "amd64"), "index": ("amd64", "arm64")}


@pytest.mark.parametrize("image", sorted(ARCHS))
def test_an_image_index_is_rendered_and_released_for_nodes_of_both_architectures(component, real, mco, registry,
                                                                                   image):
    """Issue 55 items 2 and 7: our MachineConfig's osImageURL is `<repo>@sha256:<digest of an OCI index>`
    (one the reconciler made, in the real registry, over an amd64 and an arm64 build) and the pool has
    a Node of each architecture; beside it, a one-image digest on a pool of amd64 nodes. Expected
    values read in openshift/machine-config-operator at 7ff337a4 (../shared/mco), every one the same
    for both:
    - MachineConfig spec.osImageURL is `type: string` with no pattern (vendored openshift/api
      machineconfiguration/v1/zz_generated.crd-manifests/0000_80_machine-config_01_machineconfigs.crd.yaml,
      as the real server serves it). The API's one digest format, `ImageDigestFormat` (`@sha256:` and
      64 lowercase hex, machineconfiguration/v1/types_machineosconfig.go), is for MachineOSBuild and
      MachineConfigNode fields, not this one; ours meets it all the same (asserted).
    - pkg/controller/render/render_controller.go `generateRenderedMachineConfig`: osImageURL not the
      stream's base image -> annotation `os-image-url-overridden: "true"`; a warning "is set using a tag
      instead of a digest" only when it lacks "sha256:" (none here); an error only with the pool's
      spec.osImageStream.name (unset). The render controller reads the image only in
      `validateNoRuncOnRHEL10FromOSImageURL`, when a MachineConfig sets runc and an inspector is wired
      (the harness wires none): containers/image's `FromUnparsedImage` would then pick the
      controller's own platform out of the index (vendored internal/image/oci_index.go ChooseInstance).
    - pkg/controller/node/node_controller.go: a pool's nodes are those its nodeSelector selects whose
      primary pool it is (`getNodesForPool`); candidates by `CheckNodeCandidacyForUpdate` and readiness
      (`getAllCandidateMachines`); no architecture check anywhere in pkg/controller/node or
      pkg/controller/render (the GOARCH checks are the daemon's: 64k-pages only on arm64, update.go; and
      bootupd.go). A pool without a MachineOSConfig is not layered: `updateCandidateNode` ->
      `SetDesiredStateFromPool` (pkg/controller/common/layered_node_state.go) sets desiredConfig to the
      pool's rendered config and deletes desiredImage, so the image reaches each node only through the
      rendered config's osImageURL, and both nodes get the same desiredConfig."""
    archs = ARCHS[image]
    start(real, mco, F.BUILDER, registry, nodes=2, arch=archs[1])
    mark = real.api.audit_mark()
    code, err = real.run()                                  # a build per architecture starts
    assert code == 0 and real.ann()[A.ARCH] == ",".join(sorted(set(archs))), err
    assert real.pool()["spec"]["paused"] is True
    counter = M.Moves()
    cycle(real, mco, registry, counter)
    final, theirs = rendered(real), ours(real)["spec"]["osImageURL"]
    repo, _, digest = theirs.partition("@")
    # the image is one per architecture of the nodes: an index over them for the mixed pool
    assert repo == f"{registry.host}/ocl/os-image" and re.fullmatch(r"sha256:[a-f0-9]{64}", digest)
    assert sorted(R.platforms(registry, "ocl/os-image", digest)) == sorted(set(archs))
    assert (R.get_manifest(registry, "ocl/os-image", digest)[0] == R.OCI_INDEX) == (image == "index")
    # rendered into the pool's config, ours and overridden, no tag warning
    assert final["spec"]["osImageURL"] == theirs == real.ann()[A.IMAGE]
    assert final["metadata"]["annotations"][f"{F.MCO}/os-image-url-overridden"] == "true"
    assert "instead of a digest" not in mco.controllers.text()
    # the node controller targeted both nodes, of both architectures, at it: the same desiredConfig, no image
    for node, arch in zip(("worker-0", "worker-1"), archs, strict=True):
        got = real.api.get("Node", "", node)["metadata"]
        assert got["labels"]["kubernetes.io/arch"] == arch
        assert (got["annotations"][M.DESIRED], got["annotations"][M.CURRENT]) == (final["metadata"]["name"],) * 2
        assert f"{F.MCO}/desiredImage" not in got["annotations"]
    status = real.pool()["status"]
    assert (status["machineCount"], status["updatedMachineCount"], status["configuration"]["name"]) == \
        (2, 2, final["metadata"]["name"])
    # the gate released the pool once on it (one update, an OS change and a reboot per node), then held it
    assert counter.per_node() == nodes(1) and counter.os_changes == NODES and counter.reboots == NODES
    assert {(u.to_config, u.to_image) for u in counter} == {(final["metadata"]["name"], theirs)}
    assert [e["reason"] for e in real.events() if e["reason"] == hold.ROLL_EVENT] == [hold.ROLL_EVENT]
    assert real.pool()["spec"]["paused"] is True and real.ann()[A.GATE] == hold.HELD
    # one build per architecture, then the pool's success
    builds = [e for e in real.api.audit(mark, realserver.RECONCILER)
              if e["verb"] == "create" and e["objectRef"]["resource"] in ("pods", "builds")]
    assert len(builds) == len(set(archs)) and real.ann()[A.STATE] == A.SUCCEEDED


@pytest.mark.parametrize("builder", BUILDERS)
def test_without_the_gate_the_same_change_reaches_each_node_twice(component, real, mco, registry, builder):
    start(real, mco, builder, registry, gate="none")
    cycle(real, mco, registry, M.Moves())
    counter = M.Moves()
    real.api.create(source_mc("99-worker-motd", "worker", {"/etc/motd": "hello"}))
    cycle(real, mco, registry, counter)
    assert counter.per_node() == nodes(2) and counter.reboots == 2 * NODES and counter.os_changes == NODES
    counter = M.Moves()
    upgrade(real, mco)
    cycle(real, mco, registry, counter)
    assert counter.per_node() == nodes(2) and counter.reboots == 2 * NODES and counter.os_changes == NODES


def upgrade(real, mco):
    """A cluster upgrade as the MCO makes it: a new base image in machine-config-osimageurl and the
    OSImageStream's default stream (the render controller's base), and a changed MachineConfig of its
    own (00-worker), together."""
    base = "quay.io/ocp/base@sha256:" + "b" * 64
    cm = real.api.get("ConfigMap", F.MCO_NS, "machine-config-osimageurl")
    cm["data"].update(baseOSContainerImage=base, releaseVersion="4.16.1")
    real.api.request("PUT", real.api.path("ConfigMap", F.MCO_NS, "machine-config-osimageurl"), cm)
    mco.daemon.installed.streams(base)
    mco = real.api.get("MachineConfig", "", "00-worker")
    mco["spec"]["config"]["storage"]["files"].append({"path": "/etc/release", "mode": 420,
                                                      "contents": {"source": "data:,4.16.1"}})
    real.api.request("PUT", real.api.path("MachineConfig", "", "00-worker"), mco)


@pytest.mark.parametrize("builder", BUILDERS)
def test_a_kernel_argument_a_failure_an_administrator_and_opt_out(component, real, mco, registry, builder):
    start(real, mco, builder, registry)
    cycle(real, mco, registry, M.Moves())
    image = ours(real)["spec"]["osImageURL"]
    # a kernel argument: one update per node, no build
    counter, mark = M.Moves(), real.api.audit_mark()
    real.api.create(source_mc("98-worker-karg", "worker", kernelArguments=["nosmt"]))
    cycle(real, mco, registry, counter)
    assert counter.per_node() == nodes(1) and counter.reboots == NODES and counter.os_changes == 0, [
        (u.node, u.from_config, u.to_config, u.from_image, u.to_image, u.reboot) for u in counter]
    assert not [e for e in real.api.audit(mark) if e["verb"] == "create" and
                e["objectRef"]["resource"] in ("pods", "builds")]
    # a failed build: held, then released to the files on the last good image, with a Warning
    counter = M.Moves()
    real.api.create(source_mc("99-worker-motd", "worker", {"/etc/motd": "hello"}))
    cycle(real, mco, registry, counter, outcome="Failed")
    assert counter.per_node() == nodes(1) and counter.reboots == NODES and counter.os_changes == 0, [
        (u.node, u.from_config, u.to_config, u.from_image, u.to_image, u.reboot) for u in counter]
    assert rendered(real)["spec"]["osImageURL"] == image and "/etc/motd" in files(rendered(real))
    assert [e["type"] for e in real.events() if e["reason"] == hold.RELEASE_EVENT] == ["Warning"]
    # an administrator pauses it: never lifted, even once a fixed build is ready
    pool = real.pool()
    pool["spec"]["paused"] = True
    real.api.request("PUT", real.api.path("MachineConfigPool", "", "worker"), pool)
    real.api.request("DELETE", real.api.path("MachineConfig", "", "99-worker-motd"))
    cycle(real, mco, registry, M.Moves())
    assert real.pool()["spec"]["paused"] is True and real.ann().get(A.GATE) == hold.RELEASED
    # the administrator unpauses it: what waited rolls out, and the gate holds the pool again
    pool = real.pool()
    pool["spec"]["paused"] = False
    real.api.request("PUT", real.api.path("MachineConfigPool", "", "worker"), pool)
    cycle(real, mco, registry, M.Moves())
    assert real.pool()["spec"]["paused"] is True and real.ann()[A.GATE] == hold.HELD
    # opt-out: the hold released, our MachineConfig deleted, one update back to the release's image
    pool = real.pool()
    del pool["metadata"]["labels"][A.LAYERING_LABEL]
    real.api.request("PUT", real.api.path("MachineConfigPool", "", "worker"), pool)
    counter = M.Moves()
    cycle(real, mco, registry, counter)
    assert ours(real) is None and rendered(real)["spec"]["osImageURL"] == F.BASE
    assert real.pool()["spec"]["paused"] is False
    assert counter.per_node() == nodes(1) and counter.reboots == NODES and counter.os_changes == NODES
    assert not any(k in real.ann() for k in hold.KEYS)


def test_a_run_killed_anywhere_leaves_no_pool_paused_without_our_record(component, real, mco, registry):
    """SIGKILL of `ocl-reconcile run` (a process of its own, as the CronJob's) right after its k-th write
    (read off its log, line by line, as it goes), for k = 1, 2, ... at each stage of the gate's cycle:
    after each kill the pool is paused only with our record `held`, and the next runs go on from the
    record to the state a run never killed reaches (held, our image, rolled out)."""
    import os
    import signal
    import subprocess
    import sys

    from reconcile.cluster import lease
    start(real, mco, F.BUILDER, registry)
    env = dict(os.environ, OCL_RECONCILE_NOW="2026-11-29T12:00:00Z")
    args = [sys.executable, "-m", "reconcile", "run", "--kubeconfig", real.kubeconfig, "--timeout", "30"]
    kills = 0
    for _stage in range(6):
        k = 1
        while True:                                  # kill after write k; a run with fewer writes finishes
            proc = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            seen, done = 0, False
            for line in proc.stderr:
                done = done or "run done:" in line
                seen += any(w in line for w in ("INFO create ", "INFO patch ", "INFO delete "))
                if seen == k and not done:
                    proc.send_signal(signal.SIGKILL)
                    kills += 1
                    break
            proc.wait(timeout=30)
            proc.stderr.close()
            # the killed run's Lease outlives it by design (--timeout + 60 s): expired by the next tick
            real.api.request("DELETE", f"/apis/coordination.k8s.io/v1/namespaces/{F.NS}/leases/{lease.NAME}",
                             ok=(404,))
            pool = real.pool()
            if pool["spec"].get("paused"):
                assert (pool["metadata"].get("annotations") or {}).get(A.GATE) == hold.HELD, pool["metadata"]
            if done or seen < k:
                break
            k += 1
        mco.settle()
        live = [o for o in real.owned() if o["kind"] in ("Pod", "Build")
                and (o.get("status") or {}).get("phase") not in ("Succeeded", "Failed", "Complete")]
        if live:
            real.finish("Succeeded", digest=R.push_image(registry, "ocl/os-image", f"kill-{live[0]['metadata']['name']}"))
    assert kills >= 3, f"only {kills} runs were killed between their writes"
    cycle(real, mco, registry, M.Moves())
    assert real.pool()["spec"]["paused"] is True and real.ann()[A.GATE] == hold.HELD
    assert rendered(real)["spec"]["osImageURL"] == ours(real)["spec"]["osImageURL"] == real.ann()[A.IMAGE]
