"""Pools of mixed architectures (issue 55): one build per architecture on a node of it, one OCI image
index over their images, partial failure, a change of the pool's architectures, pruning.

Expected values come from the specs and upstream code the modules cite: the OCI image index
(opencontainers/image-spec image-index.md: `schemaVersion` 2, `mediaType`
application/vnd.oci.image.index.v1+json, each entry's mediaType, digest, size and platform), the
digest of a manifest as the sha256 of its bytes (image-spec descriptor.md), cosign's `--recursive`
(sigstore/cosign cmd/cosign/cli/options/sign.go: "if a multi-arch image is specified, additionally
sign each discrete image"), the nodes' kubernetes.io/arch label (a GOARCH value). The real registry,
skopeo and containers/image hold the index in tests/realbuild/test_multiarch_real.py."""

from __future__ import annotations

import copy
import hashlib
import json
from dataclasses import replace

import kubelet
import pytest

from reconcile.contract import annotations as A
from reconcile.contract import naming, objects
from reconcile.core import desired, images
from reconcile.imagebuild import settings
from reconcile.imagebuild.platform import architecture, imageindex
from tests.support import factory as F

ARCH = architecture.ARCH_LABEL
MIXED_NODES = [F.node("w-amd", "worker", "amd64"), F.node("w-arm", "worker", "arm64")]


def world(nodes=MIXED_NODES, pool=None):
    items = F.cluster(pool or F.pool(), nodes=False) + list(nodes)
    return counted(items)


def counted(items):
    """The pool's status.machineCount as the MCO keeps it: its nodes."""
    F.the_pool(items)["status"]["machineCount"] = sum(
        1 for o in items if o["kind"] == "Node" and "node-role.kubernetes.io/worker" in o["metadata"]["labels"])
    return items


def ann(items):
    return F.the_pool(items)["metadata"].get("annotations") or {}


def builds(items):
    return sorted((o for o in F.owned(items, "worker") if o["kind"] in ("Pod", "Build")),
                  key=lambda o: o["metadata"]["name"])


def arch_of(obj):
    return (obj["spec"].get("nodeSelector") or {}).get(ARCH)


def by_arch(items):
    return {arch_of(o): o for o in builds(items)}


def single_arch_build_id(items, arch):
    """The build id a pool of this architecture alone gets from the same cluster: what each
    architecture's build of a mixed pool must reuse."""
    s = settings.read(F.NS, {"on-cluster-build-config": F.build_config(),
                             "machine-config-osimageurl": F.osimageurl()})
    pool = F.the_pool(items)
    inp = desired.inputs(s, pool, F.content(pool))
    return replace(inp, arch=arch).build_id


def finish(items, **phases):
    for arch, obj in by_arch(items).items():
        if arch in phases:
            kubelet.set_phase(obj, phases[arch])
    return items


# --- the index, by the image-spec -----------------------------------------------------------------

def instance(arch, n, media=imageindex.INSTANCE_TYPES[0], size=1234, **kw):
    return imageindex.Instance(arch, "sha256:" + str(n) * 64, media, size, kw.pop("architecture", arch), **kw)


def test_the_index_is_an_oci_image_index_naming_each_architecture_and_its_digest_is_its_bytes():
    index = imageindex.compose([instance("arm64", 2, variant="v8"), instance("amd64", 1)])
    doc = json.loads(index.body)
    assert doc["schemaVersion"] == 2 and doc["mediaType"] == "application/vnd.oci.image.index.v1+json"
    assert doc["manifests"] == [
        {"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": "sha256:" + "1" * 64, "size": 1234,
         "platform": {"architecture": "amd64", "os": "linux"}},
        {"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": "sha256:" + "2" * 64, "size": 1234,
         "platform": {"architecture": "arm64", "os": "linux", "variant": "v8"}}]
    assert index.digest == "sha256:" + hashlib.sha256(index.body).hexdigest()
    # the same instances in any order: the same bytes, so a rerun or a rollback pushes the same index
    assert imageindex.compose([instance("amd64", 1), instance("arm64", 2, variant="v8")]) == index


@pytest.mark.parametrize("items, why", [
    ([instance("amd64", 1)], "two or more"),
    ([instance("amd64", 1), instance("amd64", 2)], "two or more"),
    ([instance("amd64", 1), instance("arm64", 2, architecture="amd64")], "says linux/amd64, not linux/arm64"),
    ([instance("amd64", 1), instance("arm64", 2, os="windows")], "not linux/arm64"),
    ([instance("amd64", 1), instance("arm64", 2, media=imageindex.MEDIA_TYPE)], "not an image manifest"),
    ([instance("amd64", 1), instance("arm64", 2, size=0)], "no size"),
])
def test_an_index_refuses_what_would_not_boot_its_nodes(items, why):
    with pytest.raises(imageindex.Unfit, match=why):
        imageindex.compose(items)


# --- a mixed pool, run after run ---------------------------------------------------------------------

def test_a_mixed_pool_builds_once_per_architecture_each_on_a_node_of_it(run_cli):
    code, items, err = run_cli.run(world())
    assert code == 0, err
    found = by_arch(items)
    assert sorted(found) == ["amd64", "arm64"]
    for arch, obj in found.items():
        bid = single_arch_build_id(items, arch)
        assert obj["metadata"]["labels"][naming.BUILD_ID_LABEL] == bid
        assert obj["metadata"]["name"] == naming.object_name("build", "worker", bid)
        if obj["kind"] == "Pod":               # an OpenShift Build's output names the same tag
            env = {e["name"]: e.get("value") for e in obj["spec"]["containers"][0]["env"]}
            assert env["TAG"] == f"{F.REPO}:{F.the_pool(items)['spec']['configuration']['name']}-{arch}"
    a = ann(items)
    assert a[A.STATE] == A.PENDING and a[A.ARCH] == "amd64,arm64"
    assert a[A.BUILD].startswith(f"ImageIndex/{F.NS}/ocl-index-worker-")
    assert "building for amd64, arm64" in a[A.MESSAGE]


def test_one_architecture_failing_fails_the_pool_naming_it_and_keeps_its_image(run_cli):
    _, items, _ = run_cli.run(world())
    finish(items, amd64="Succeeded", arm64="Failed")
    code, items, err = run_cli.run(items)
    assert code == 0, err
    a = ann(items)
    assert a[A.STATE] == A.FAILED and A.IMAGE not in a
    assert a[A.MESSAGE].startswith("no image index: arm64: build Pod/")
    assert "amd64" not in a[A.MESSAGE].split("no image index: ")[1].split(":")[0]
    assert len(builds(items)) == 2                 # kept for debugging; amd64's reused next time


def test_a_transient_failure_retries_that_architecture_alone(run_cli):
    _, items, _ = run_cli.run(world())
    arm = by_arch(items)["arm64"]
    finish(items, amd64="Succeeded", arm64="Evicted")
    code, items, err = run_cli.run(items)
    assert code == 0, err
    names = sorted(o["metadata"]["name"] for o in builds(items))
    bid = arm["metadata"]["labels"][naming.BUILD_ID_LABEL]
    assert naming.object_name("build2", "worker", bid) in names
    assert arm["metadata"]["name"] not in names                     # its failed attempt went
    assert by_arch(items)["amd64"].get("status", {}).get("phase") == "Succeeded"   # untouched
    assert "arm64: attempt 2 of 3" in ann(items)[A.MESSAGE]


def test_every_architecture_built_makes_one_index_the_pool_records_then_nothing_is_written(run_cli):
    _, items, _ = run_cli.run(world())
    digests = {arch: kubelet.digest_for(o["metadata"]["name"]) for arch, o in by_arch(items).items()}
    finish(items, amd64="Succeeded", arm64="Succeeded")
    code, items, err = run_cli.run(items)
    assert code == 0, err
    a = ann(items)
    index = imageindex.compose([imageindex.Instance(arch, d, imageindex.INSTANCE_TYPES[0], 1, arch)
                                for arch, d in digests.items()])      # a snapshot run reads no registry
    assert a[A.STATE] == A.SUCCEEDED and a[A.IMAGE] == f"{F.REPO}@{index.digest}"
    history = images.entries(F.the_pool(items))
    assert history[0] == (a[A.BUILD].rsplit("-", 1)[1], a[A.IMAGE])
    assert {(single_arch_build_id(items, arch), f"{F.REPO}@{d}") for arch, d in digests.items()} <= set(history)
    assert images.indexed(F.the_pool(items)) == {index.digest: tuple(digests[a] for a in sorted(digests))}
    assert not builds(items)
    code, again, err = run_cli.run(items)
    assert code == 0 and again == items, err           # converged: zero writes


def test_a_new_architecture_builds_only_itself_and_a_pool_back_to_one_architecture_reuses_its_image(run_cli):
    _, items, _ = run_cli.run(world(nodes=MIXED_NODES[:1]))
    (amd,) = builds(items)
    finish(items, amd64="Succeeded")
    _, items, _ = run_cli.run(items)
    single = ann(items)[A.IMAGE]
    code, again, err = run_cli.run(items)
    assert again == items, err                             # steady: nothing listed, nothing written
    items = counted(items + [MIXED_NODES[1]])              # an arm64 node joins the pool
    code, items, err = run_cli.run(items)
    assert code == 0, err
    assert [arch_of(o) for o in builds(items)] == ["arm64"]   # amd64's image is in the history
    assert f"amd64: reusing {single}" in ann(items)[A.MESSAGE]
    finish(items, arm64="Succeeded")
    _, items, _ = run_cli.run(items)
    assert ann(items)[A.STATE] == A.SUCCEEDED and ann(items)[A.IMAGE] != single
    items = counted([o for o in items if o["metadata"]["name"] != "w-arm"])   # the last arm64 node leaves
    code, items, err = run_cli.run(items)
    assert code == 0, err
    assert ann(items)[A.IMAGE] == single and ann(items)[A.ARCH] == "amd64" and not builds(items)


def test_pruning_never_deletes_an_instance_a_kept_index_names():
    index, inst = f"{F.REPO}@sha256:{'a' * 64}", f"{F.REPO}@sha256:{'b' * 64}"
    old = f"{F.REPO}@sha256:{'c' * 64}"
    pool = F.pool()
    pool["metadata"]["annotations"] = {
        A.IMAGES: f"idx={index} other={f'{F.REPO}@sha256:' + 'd' * 64} arm={inst} gone={old}",
        A.INDEX_INSTANCES: f"sha256:{'a' * 64}=sha256:{'b' * 64}"}
    (plan,) = images.plan([pool], [], keep=2, repo=F.REPO)
    assert plan.delete == (old,) and plan.shielded == (inst,) and plan.protected == ()


def test_the_signing_pod_of_an_index_signs_every_image_it_names():
    from reconcile.imagebuild.signing import signer
    common = dict(name="s", namespace=F.NS, labels={}, annotations={}, owner={}, image=f"{F.REPO}@sha256:{'a' * 64}",
                  keys=("k",), signer_image="cosign", push_secret="push")
    args = signer.render(**common, recursive=True)["spec"]["containers"][0]["args"]
    assert "--recursive" in args and args[-1] == common["image"]
    assert "--recursive" not in signer.render(**common)["spec"]["containers"][0]["args"]


def test_metrics_and_explain_show_each_architectures_build(run_cli, tmp_path):
    from prometheus_client.parser import text_string_to_metric_families
    metrics = tmp_path / "ocl.prom"
    _, items, _ = run_cli.run(world())
    finish(items, amd64="Succeeded", arm64="Failed")
    code, after, err = run_cli.run(items, "--metrics-file", str(metrics))
    assert code == 0, err
    got = {(s.name, tuple(sorted(s.labels.items()))): s.value
           for family in text_string_to_metric_families(metrics.read_text()) for s in family.samples}
    arch = "ocl_architecture_builds"
    assert got[(arch, (("architecture", "arm64"), ("pool", "worker"), ("state", "Failed")))] == 1
    assert got[(arch, (("architecture", "amd64"), ("pool", "worker"), ("state", "Succeeded")))] == 1
    assert got[(arch, (("architecture", "amd64"), ("pool", "worker"), ("state", "Failed")))] == 0
    code, out, err = run_cli.on(items, "explain", "worker", "-o", "json")
    report = json.loads(out)
    parts = {p["architecture"]: p for p in report["architectures"]}
    assert sorted(parts) == ["amd64", "arm64"] and parts["arm64"]["state"] == A.FAILED
    assert parts["amd64"]["buildId"] == single_arch_build_id(items, "amd64")
    code, out, err = run_cli.on(items, "explain", "worker")
    assert "  arm64" in out and "state Failed" in out


def test_an_emulated_architecture_builds_on_a_node_of_another_for_its_platform(run_cli):
    """emulatedArchitectures (off by default): the arm64 build runs where amd64 nodes are, with
    buildah's --platform linux/arm64 (build-pod.sh BUILD_PLATFORM)."""
    items = world()
    (cm,) = [o for o in items if o["kind"] == "ConfigMap" and o["metadata"]["name"] == "on-cluster-build-config"]
    cm["data"]["emulatedArchitectures"] = "arm64"
    code, items, err = run_cli.run(items)
    assert code == 0, err
    pods = {o["metadata"]["labels"][naming.BUILD_ID_LABEL]: o for o in builds(items)}
    arm = pods[single_arch_build_id(items, "arm64")]
    amd = pods[single_arch_build_id(items, "amd64")]
    env = {e["name"]: e.get("value") for e in arm["spec"]["containers"][0]["env"]}
    assert arch_of(arm) == "amd64" and env["BUILD_PLATFORM"] == "linux/arm64"
    assert "BUILD_PLATFORM" not in {e["name"] for e in amd["spec"]["containers"][0]["env"]}
    script = arm["spec"]["containers"][0]["command"][2]
    assert '${BUILD_PLATFORM:+--platform "$BUILD_PLATFORM"}' in script


@pytest.mark.parametrize("value, builder, why", [
    ("arm 64", "custom-pod-builder", "is not an architecture"),
    ("arm64", "openshift-image-builder", "needs imageBuilderType custom-pod-builder"),
])
def test_a_bad_emulated_architectures_setting_blocks_naming_the_key(run_cli, monkeypatch, value, builder, why):
    monkeypatch.setattr(F, "BUILDER", builder)
    items = world()
    (cm,) = [o for o in items if o["kind"] == "ConfigMap" and o["metadata"]["name"] == "on-cluster-build-config"]
    cm["data"]["emulatedArchitectures"] = value
    code, items, _ = run_cli.run(items)
    assert code == 2 and ann(items)[A.STATE] == A.BLOCKED
    assert "emulatedArchitectures" in ann(items)[A.MESSAGE] and why in ann(items)[A.MESSAGE]


# --- preflight ---------------------------------------------------------------------------------

def ready(node, **spec):
    node = dict(node, spec=spec, status={"conditions": [{"type": "Ready", "status": "True"}]})
    return node


@pytest.mark.parametrize("nodes, emulated, platforms, want", [
    ([ready(MIXED_NODES[0]), ready(MIXED_NODES[1])], "", ("amd64", "arm64"),
     {("ok", "amd64: 1 schedulable node(s)"), ("ok", "arm64: 1 schedulable node(s)")}),
    # cordoned, or tainted NoSchedule: the build Pod tolerates no taint (kubernetes scheduler's
    # NodeUnschedulable and TaintToleration plugins)
    ([ready(MIXED_NODES[0]), ready(MIXED_NODES[1], unschedulable=True)], "", ("amd64", "arm64"),
     {("ok", "amd64: 1 schedulable node(s)"), ("fail", "arm64: no schedulable arm64 node")}),
    ([ready(MIXED_NODES[0]), ready(MIXED_NODES[1], taints=[{"key": "k", "effect": "NoSchedule"}])], "",
     ("amd64", "arm64"), {("ok", "amd64: 1 schedulable node(s)"), ("fail", "arm64: no schedulable arm64 node")}),
    ([ready(MIXED_NODES[0])], "arm64", ("amd64", "arm64"),
     {("ok", "amd64: 1 schedulable node(s)"), ("warn", "arm64: built under emulation on 1 schedulable amd64")}),
    ([ready(MIXED_NODES[0]), ready(MIXED_NODES[1])], "", ("amd64",),
     {("ok", "amd64: 1 schedulable node(s)"), ("ok", "arm64: 1 schedulable node(s)"),
      ("fail", "arm64: the base image")}),
])
def test_preflight_checks_each_architecture_of_a_mixed_pool(nodes, emulated, platforms, want):
    from tests.unit.test_preflight import good, lines, read_settings
    found = read_settings(emulatedArchitectures=emulated) if emulated else read_settings()
    facts = good(settings=found, architectures={"worker": (("amd64", "arm64"), F.BASE)}, nodes=nodes,
                 platforms={F.BASE: platforms, found.buildah_image: ("amd64", "arm64")})
    got = {(r.result, r.message.split("MachineConfigPool worker: ", 1)[1]) for r in lines(facts, "architectures")}
    assert {level for level, _ in got} == {level for level, _ in want}
    for level, start in want:
        assert any(lv == level and text.startswith(start) for lv, text in got), (level, start, got)
    assert [r.result for r in lines(good(), "architectures")] == ["ok"]


# --- reuse of an architecture's image, asked of a registry ----------------------------------------

class Registry:
    """What the registry answers about images (a live run's `registry.Client`): each image's labels
    and description, no signature at all."""

    def __init__(self, described):
        self.described, self.asked = described, []

    def labels(self, image):
        self.asked.append(("labels", image))
        return self.described[image][1] if image in self.described else None

    def signatures(self, image):
        return None

    def instance(self, image, arch):
        self.asked.append(("instance", image))
        return self.described[image]


def history_world(signing=False):
    """worker, mixed, whose history says amd64's build id produced an image (a rollback's)."""
    from tests.unit.test_signing_plan import key_secret
    settings_ = [F.build_config(**({"imageSigningKeySecretName": "cosign-old"} if signing else {})),
                 F.osimageurl(), F.secret("pull-secret"), F.secret("push-secret"), key_secret("cosign-old")]
    items = counted(F.cluster(F.pool(), settings=settings_, nodes=False) + list(MIXED_NODES))
    amd = single_arch_build_id(items, "amd64")
    image = f"{F.REPO}@sha256:{'a' * 64}"
    F.the_pool(items)["metadata"]["annotations"][A.IMAGES] = f"{amd}={image}"
    found = instance("amd64", "a")
    return items, image, Registry({image: (found, {naming.BUILD_ID_LABEL: amd})})


@pytest.mark.parametrize("signing, reused", [(False, True), (True, False)])
def test_an_architectures_image_in_the_history_is_reused_only_as_any_reuse_is(signing, reused):
    """Labelled by its build id, it is reused; with signing on, only if a current key signed it
    (docs/signing.md: an image found only in the registry is never signed by us), else it builds."""
    from reconcile.cluster import observe
    from reconcile.cluster.memory import MemoryCluster
    from reconcile.cluster.planner import Planner, RegistryAccess
    items, image, reg = history_world(signing)
    cluster = MemoryCluster(items, clock=lambda: F.NOW)
    planner = Planner(cluster, observe.observe(cluster, F.NS), F.NOW, registry_access=RegistryAccess())
    planner.registry_client = reg
    (plan,) = planner.plan()
    made = sorted(arch_of(a.obj) for a in plan.actions if a.verb == "create" and a.obj["kind"] == "Pod")
    assert made == (["arm64"] if reused else ["amd64", "arm64"])
    assert (f"amd64: reusing {image}" in plan.message) is reused
    assert ("instance", image) in reg.asked if reused else ("instance", image) not in reg.asked


def test_each_architectures_build_starts_from_its_instance_of_the_base_by_digest():
    """FROM names the architecture's instance of the release's list, as the registry resolves it (a
    real list in tests/realbuild/test_multiarch_real.py); the build id and the image's labels still
    name the list, which fixes every instance."""
    from reconcile.cluster import observe
    from reconcile.cluster.memory import MemoryCluster
    from reconcile.cluster.planner import Planner, RegistryAccess

    class Bases:
        def image_size(self, image, arch=""):
            from reconcile.cluster import registry
            raise registry.RegistryError("not asked here")

        def resolve(self, image, arch):
            return f"{image.partition('@')[0]}@sha256:{hashlib.sha256(arch.encode()).hexdigest()}"
    items = world()
    cluster = MemoryCluster(items, clock=lambda: F.NOW)
    planner = Planner(cluster, observe.observe(cluster, F.NS), F.NOW, registry_access=RegistryAccess())
    planner.registry_client, planner.base_client = Registry({}), Bases()
    (plan,) = planner.plan()
    files = {a.obj["metadata"]["labels"][naming.BUILD_ID_LABEL]: a.obj["data"]["Dockerfile"]
             for a in plan.actions if a.verb == "create" and "Dockerfile" in a.obj.get("data", {})}
    for arch in ("amd64", "arm64"):
        text = files[single_arch_build_id(items, arch)]
        assert f"FROM {Bases().resolve(F.BASE, arch)} AS extract" in text
        assert f"FROM {F.BASE} " not in text


def test_one_waiting_run_follows_every_architectures_build_and_records_the_index(monkeypatch, capsys, tmp_path):
    """`run --wait` (docs/rollout.md, 3b): both builds are followed, each architecture's end is
    said, and the index is recorded in the same run."""
    from tests.support.world import World
    from tests.unit.test_follow import Runs
    monkeypatch.setenv("OCL_RECONCILE_NOW", "2026-11-29T12:00:00Z")
    runs = Runs(world(), World(), monkeypatch, capsys, tmp_path)
    code, err = runs("--wait", "600")
    assert code == 0, err
    a = ann(runs.items)
    assert a[A.STATE] == A.SUCCEEDED and a[A.IMAGE] in a[A.IMAGES]
    assert a[A.MESSAGE].startswith("image index of amd64: built ") and "; arm64: built " in a[A.MESSAGE]
    done = [ln for ln in err.splitlines() if "done: worker: build" in ln]
    assert len(done) == 2, err                     # one line each architecture's build ends
    assert "wait done: nothing more to wait for" in err and runs.count == 1


# --- the upgrade from the last release ------------------------------------------------------------

def test_a_mixed_pool_the_last_release_blocked_builds_and_one_architecture_pools_write_nothing(run_cli):
    """The last release (66edff2) recorded a mixed pool Blocked ("its nodes are not all of one
    architecture", no ocl-reconciler.io/arch), and a pool of one architecture with its arch but no
    arch-nodes. After the upgrade: the mixed pool builds per architecture; the other, converged, is
    not written (its node count is recorded with its next build)."""
    items = world(pool=F.pool("worker", annotations={
        A.STATE: A.BLOCKED, A.RENDERED: "rendered-worker-1",
        A.MESSAGE: "MachineConfigPool worker: its nodes are not all of one architecture (amd64: w-amd; "
                   "arm64: w-arm); one image boots only one: move the nodes of each architecture into a "
                   "pool of their own"}))
    items += [F.pool("infra"), F.machineconfig("rendered-infra-1"), F.node("i-0", "infra", "amd64")]
    _, items, _ = run_cli.run(items)
    for obj in F.owned(items, "infra"):
        if obj["kind"] == "Pod":
            kubelet.set_phase(obj, "Succeeded")
    _, items, _ = run_cli.run(items)
    infra = F.the_pool(items, "infra")["metadata"]["annotations"]
    infra.pop(A.ARCH_NODES)                        # as the last release left it: no arch-nodes
    code, again, err = run_cli.run(items)
    assert code == 0, err
    assert F.the_pool(again, "infra") == F.the_pool(items, "infra")          # no write
    assert ann(again)[A.ARCH] == "amd64,arm64" and sorted(by_arch(again)) == ["amd64", "arm64"]


def test_a_change_the_nodes_take_live_builds_no_architecture(run_cli):
    """liveChanges: apply (issue 39) holds for a mixed pool: an SSH key builds nothing, for neither
    architecture, and the index stays the pool's image; a file the daemon reboots for builds both.
    On snapshots: a live run reads each image from the registry (the real one in
    tests/realapi/test_realapi_gate.py)."""
    any_cli = run_cli
    from tests.support import mconode
    from tests.unit.test_gate import cycle, pool
    from tests.unit.test_live_change import change, ssh_mc
    from tests.unit.test_live_change import world as live_world
    from tests.unit.test_rollout import ours, source_mc
    items = live_world()
    (w2,) = [o for o in items if o["kind"] == "Node" and o["metadata"]["name"] == "w2"]
    w2["metadata"]["labels"][ARCH] = "arm64"
    items = cycle(any_cli, items, mconode.Counter())
    a = pool(items)["metadata"]["annotations"]
    image = a[A.IMAGE]
    assert a[A.ARCH] == "amd64,arm64" and image in dict(images.entries(pool(items))).values()
    assert ours(items)[0]["spec"]["osImageURL"] == image
    items, counter, started = change(any_cli, items, ssh_mc())
    assert started == [] and pool(items)["metadata"]["annotations"][A.IMAGE] == image
    assert pool(items)["metadata"]["annotations"][A.LIVE] == "none" and counter.os_changes == 0
    items, counter, started = change(any_cli, items, source_mc("99-worker-motd", "worker", {"/etc/motd": "hi"}))
    assert len(started) == 1 and pool(items)["metadata"]["annotations"][A.IMAGE] != image
    assert counter.os_changes == 2                          # each node, once, onto the new index


def test_each_architecture_keeps_a_build_storage_volume_of_its_own(run_cli):
    """buildStorage: persistent (the default): one volume per architecture, since each build runs on
    a node of its own architecture and keeps that architecture's base; each Pod mounts its own, the
    pool records both, and they outlive the builds (core/storage/)."""
    from reconcile.core import storage
    from tests.unit.test_storage import storage_class
    items = world() + [storage_class("gp3-csi", default=True)]
    F.find(items, "ConfigMap", "on-cluster-build-config")[0]["data"]["buildStorage"] = "persistent"
    _, items, err = run_cli.run(items)
    volumes = {o["metadata"]["annotations"][A.ARCH]: o["metadata"]["name"]
               for o in F.owned(items, "worker") if o["kind"] == "PersistentVolumeClaim"}
    assert sorted(volumes) == ["amd64", "arm64"] and len(set(volumes.values())) == 2, err
    for arch, pod in by_arch(items).items():
        assert storage.claim_of(pod) == volumes[arch]
    assert storage.recorded_claims(ann(items)) == volumes
    finish(items, amd64="Succeeded", arm64="Succeeded")
    _, items, _ = run_cli.run(items)
    assert ann(items)[A.STATE] == A.SUCCEEDED and not builds(items)
    kept = {o["metadata"]["name"] for o in F.owned(items, "worker") if o["kind"] == "PersistentVolumeClaim"}
    assert kept == set(volumes.values()) and storage.recorded_claims(ann(items)) == volumes
    # a rebuild: each architecture's build mounts its own volume again, none is made
    F.the_pool(items)["metadata"]["annotations"][A.REBUILD] = "1"
    _, items, _ = run_cli.run(items)
    assert {arch: storage.claim_of(pod) for arch, pod in by_arch(items).items()} == volumes
    assert {o["metadata"]["name"] for o in F.owned(items, "worker") if o["kind"] == "PersistentVolumeClaim"} == kept


def test_an_architecture_that_fails_for_a_transient_reason_three_times_fails_the_pool(run_cli):
    """At most 3 attempts (docs/contract.md, "Transient failures"), counted for that architecture."""
    _, items, _ = run_cli.run(world())
    for _ in range(3):
        finish(items, amd64="Succeeded", arm64="Evicted")
        _, items, _ = run_cli.run(items)
    a = ann(items)
    assert a[A.STATE] == A.FAILED and a[A.MESSAGE].startswith("no image index: arm64: failed after 3 attempts: ")
    arm = by_arch(items)["arm64"]
    assert arm["metadata"]["name"].startswith("ocl-build3-worker-")


def test_a_built_mixed_pool_asks_the_registry_nothing(run_cli):
    """Zero writes when converged, and no registry request either (docs/design.md: a steady run's
    requests): the parts' images are asked about only while the pool builds."""
    from reconcile.cluster import observe
    from reconcile.cluster.memory import MemoryCluster
    from reconcile.cluster.planner import Planner, RegistryAccess
    _, items, _ = run_cli.run(world())
    finish(items, amd64="Succeeded", arm64="Succeeded")
    _, items, _ = run_cli.run(items)
    assert ann(items)[A.STATE] == A.SUCCEEDED
    cluster = MemoryCluster(items, clock=lambda: F.NOW)
    planner = Planner(cluster, observe.observe(cluster, F.NS), F.NOW, registry_access=RegistryAccess())
    planner.registry_client = reg = Registry({})
    (plan,) = planner.plan()
    assert plan.transition == "BUILT" and not plan.actions and reg.asked == []


def test_with_signing_on_the_index_is_pushed_then_signed_recursively_then_recorded():
    """docs/signing.md: a new image is recorded only once signed; an index is pushed first (the
    signing Pod signs what the registry holds), and cosign signs it and each image it names."""
    from reconcile.core.transitions import Transition
    from reconcile.imagebuild import signing
    from tests.unit.test_signing_plan import PUB_OLD, pods, run, set_sign_phase, signing_cluster
    cluster = signing_cluster(pool=F.pool(), extra=[MIXED_NODES[1]])
    cluster.store[("MachineConfigPool", "", "worker")]["status"]["machineCount"] = 2
    run(cluster)
    assert len(pods(cluster, "ocl-build-")) == 2
    for pod in pods(cluster, "ocl-build-"):
        cluster.store[("Pod", F.NS, pod["metadata"]["name"])] = kubelet.set_phase(copy.deepcopy(pod), "Succeeded")
    (plan,) = run(cluster)
    assert plan.transition == Transition.SIGN.name and plan.state_after == A.BUILDING
    verbs = [(a.verb, a.obj["kind"]) for a in plan.actions]
    assert verbs.index(("push", "ImageIndex")) < verbs.index(("create", "Pod"))
    (sign_pod,) = pods(cluster, "ocl-sign-")
    args = sign_pod["spec"]["containers"][0]["args"]
    image = next(a.obj["image"] for a in plan.actions if a.verb == "push")
    assert "--recursive" in args and args[-1] == image and A.IMAGE not in objects.annotations(
        cluster.get("MachineConfigPool", "", "worker"))
    set_sign_phase(cluster, sign_pod, "Succeeded")
    (plan,) = run(cluster)
    got = objects.annotations(cluster.get("MachineConfigPool", "", "worker"))
    assert plan.transition == Transition.SUCCEED.name and got[A.IMAGE] == image
    assert got[A.SIGNED] == f"{image}={signing.fingerprint(PUB_OLD)}"
    (plan,) = run(cluster)
    assert plan.transition == Transition.BUILT.name and not plan.actions


def test_the_pools_message_names_every_failed_architecture_in_512_characters(run_cli):
    """The pool's message is one line of at most 512 characters (docs/contract.md); one
    architecture's long reason does not push another's out of it: each gets its share, cut in the
    middle, so the end of each (the build's last line) stays."""
    _, items, _ = run_cli.run(world())
    finish(items, amd64="Failed", arm64="Failed")
    for arch, pod in by_arch(items).items():
        pod["status"]["containerStatuses"][0]["state"]["terminated"]["message"] = \
            f"Error: building at STEP 4: {'x' * 300} {arch} cause"
    _, items, _ = run_cli.run(items)
    message = ann(items)[A.MESSAGE]
    assert len(message) <= 512 and message.startswith("no image index: amd64: build Pod/")
    amd, arm = message[len("no image index: "):].split("; arm64: ")
    assert amd.endswith("amd64 cause") and arm.endswith("arm64 cause")
