"""The image a pool's nodes can boot (issue 20): the OS stream's base images, the nodes'
architecture, and the builder image, on snapshots and through the API, for both builders.

Expected values come from the upstream rules cited in the modules under test: which pool a node
belongs to (openshift/machine-config-operator pkg/helpers/helpers.go, GetPoolsForNode), which stream a
pool builds on (pkg/osimagestream/helpers.go, GetOSImageStreamSetByName), and the images ConfigMap
(install/0000_80_machine-config_02_images.configmap.yaml)."""

from __future__ import annotations

import copy
import json

import kubelet
import pytest

from reconcile.contract import annotations as A
from reconcile.imagebuild.platform import architecture, osstream
from tests.support import factory as F

ARCH = architecture.ARCH_LABEL


def pool_with(name="worker", stream="", selector=None):
    pool = F.pool(name)
    if stream:
        pool["spec"]["osImageStream"] = {"name": stream}
    if selector is not None:
        pool["spec"]["nodeSelector"] = selector
    return pool


def ann(items, pool="worker"):
    return F.the_pool(items, pool)["metadata"].get("annotations") or {}


def build_object(items, pool="worker"):
    (obj,) = [o for o in F.owned(items, pool) if o["kind"] in ("Pod", "Build")]
    return obj


def dockerfile(items, pool="worker"):
    (cm,) = [o for o in F.owned(items, pool) if o["kind"] == "ConfigMap" and "Dockerfile" in o.get("data", {})]
    return cm["data"]["Dockerfile"]


def node_selector(obj):
    return obj["spec"].get("nodeSelector") or {}


# --- which pool a node belongs to, as the MCO decides ------------------------------------------

ROLE = "node-role.kubernetes.io/"


def mco_pools():
    return [pool_with("master"), pool_with("worker"), pool_with("infra"), pool_with("gpu"),
            pool_with("empty", selector={}), pool_with("null", selector=None)]


@pytest.mark.parametrize("roles, expected", [
    (("worker",), "worker"),                  # "Otherwise, it's a worker with no custom roles."
    (("worker", "infra"), "infra"),           # one custom role: its pool
    (("master", "worker"), "master"),         # "have it live under the master pool"
    (("master", "infra"), "master"),          # "if we have a custom pool and master, defer to master"
    (("worker", "infra", "gpu"), None),       # "belongs to 2 custom roles, cannot proceed"
    ((), None),                               # selected by no pool
])
def test_a_node_belongs_to_the_pool_the_mco_gives_it(roles, expected):
    node = F.node("n", "none", **{ROLE + r: "" for r in roles})
    assert architecture.primary_pool(node, mco_pools()) == expected


def test_windows_nodes_and_empty_selectors_belong_to_no_pool():
    windows = F.node("win", "worker", **{"kubernetes.io/os": "windows"})
    assert architecture.primary_pool(windows, mco_pools()) is None
    # "If a pool with a nil or empty selector creeps in, it should match nothing, not everything."
    null = pool_with("odd")
    del null["spec"]["nodeSelector"]
    for pool in (pool_with("odd", selector={}), null):
        assert architecture.primary_pool(F.node("n", "worker"), [pool]) is None


def test_the_pools_architecture_is_that_of_its_nodes_only():
    pools = [pool_with("worker"), pool_with("infra")]
    nodes = [F.node("w1", "worker", "arm64"), F.node("w2", "worker", "arm64"),
             F.node("i1", "infra", "amd64", **{ROLE + "worker": ""})]     # infra's, though worker selects it
    assert architecture.of_pool(pools[0], pools, nodes) == architecture.Arch("arm64", 2)
    assert architecture.node_selector(architecture.of_pool(pools[1], pools, nodes).name) == {ARCH: "amd64"}


def test_mixed_nodes_name_every_architecture_and_unlabelled_ones_are_refused_naming_them():
    pools = [pool_with("worker")]
    mixed = architecture.of_pool(pools[0], pools, [F.node("w1", "worker"), F.node("w2", "worker", "arm64"),
                                                   F.node("w3", "worker", "amd64")])
    assert mixed == architecture.Arch("amd64,arm64", 3) and architecture.split(mixed.name) == ("amd64", "arm64")
    with pytest.raises(architecture.Mixed, match=f"no {ARCH} label: w2"):
        architecture.of_pool(pools[0], pools, [F.node("w1", "worker"), F.node("w2", "worker", "")])


def test_a_pool_without_nodes_has_no_architecture_and_says_so():
    arch = architecture.of_pool(pool_with("worker"), [], [F.node("m", "master")])
    assert arch == architecture.Arch("", 0) and architecture.node_selector(arch.name) == {}
    assert "no nodes yet" in architecture.note(arch.name)


# --- which stream a pool builds on --------------------------------------------------------------

def test_the_stream_the_pool_names_else_the_default_stream():
    singleton = F.osimagestream("rhel-9", "rhel-10")
    named = osstream.of_pool(pool_with(stream="rhel-10"), singleton)
    assert (named.name, named.os_image, named.extensions_image) == ("rhel-10", *F.stream_images("rhel-10"))
    # "if name == "" { name = osImageStream.Status.DefaultStream }"
    assert osstream.of_pool(pool_with(), singleton).os_image == F.stream_images("rhel-9")[0]
    assert osstream.of_pool(pool_with(), None) is None               # no streams: the ConfigMap's images


@pytest.mark.parametrize("singleton, message", [
    (F.osimagestream("rhel-9"), "which OSImageStream cluster does not list (status.availableStreams: rhel-9)"),
    (None, "this cluster has no OSImageStream 'cluster'"),
])
def test_a_stream_the_cluster_does_not_list_is_refused_naming_it(singleton, message):
    with pytest.raises(osstream.Unlisted, match="names OS stream 'rhel-10'") as err:
        osstream.of_pool(pool_with(stream="rhel-10"), singleton)
    assert message in str(err.value)


# --- scenarios: snapshot and API, both builders --------------------------------------------------

def world(*pools, nodes=None, extra=()):
    pools = pools or (pool_with(),)
    items = F.cluster(*pools, nodes=nodes is None, extra=list(extra))
    return items + list(nodes or [])


@pytest.fixture
def both(any_cli, builder):
    return any_cli


def with_extensions(items, *extensions):
    """The rendered config asks for extensions: the Dockerfile then mounts the extensions image."""
    for mc in F.find(items, "MachineConfig"):
        mc["spec"]["extensions"] = list(extensions)
    return items


def test_a_pool_builds_on_its_streams_images_and_a_stream_change_rebuilds(both):
    streams = F.osimagestream("rhel-9", "rhel-10")
    os_image, extensions = F.stream_images("rhel-10")
    items = world(pool_with(stream="rhel-10"), extra=[streams])
    items[1] = F.osimageurl(baseOSExtensionsContainerImage="quay.io/ocp/configmap-extensions@sha256:" + "f" * 64)
    code, items, err = both.run(with_extensions(items, "usbguard"))
    assert code == 0 and ann(items)[A.STATE] == A.PENDING, err
    text = dockerfile(items)
    assert f"FROM {os_image}" in text and F.BASE not in text
    assert f"from={extensions}," in text and "configmap-extensions" not in text   # the stream's, not the ConfigMap's
    assert 'LABEL "ocl-reconciler.io/os-stream"="rhel-10"' in text
    first = build_object(items)["metadata"]["name"]
    # the pool moves to the default stream: another base, another build
    items = copy.deepcopy(items)
    del F.the_pool(items)["spec"]["osImageStream"]
    code, items, err = both.run(items)
    assert code == 0, err
    assert build_object(items)["metadata"]["name"] != first
    assert f"FROM {F.stream_images('rhel-9')[0]}" in dockerfile(items)
    assert f"from={F.stream_images('rhel-9')[1]}," in dockerfile(items) and extensions not in dockerfile(items)


def test_a_custom_pool_builds_on_workers_stream_as_the_render_controller_renders_it(both, run_cli):
    """A custom pool naming no stream inherits worker's (GetEffectiveOSImageStreamName,
    pkg/controller/common/helpers.go): its image is built FROM worker's stream, not the default's;
    status -o wide and explain say which stream and why."""
    streams = F.osimagestream("rhel-9", "rhel-10")                 # rhel-9 the default
    items = world(pool_with("worker", stream="rhel-10", selector=None), pool_with("infra"), extra=[streams])
    code, items, err = both.run(items)
    assert code == 0 and ann(items, "infra")[A.STATE] == A.PENDING, err
    os_image, extensions = F.stream_images("rhel-10")
    assert f"FROM {os_image}" in dockerfile(items, "infra")
    assert F.stream_images("rhel-9")[0] not in dockerfile(items, "infra")
    assert ann(items, "infra")[A.OS_STREAM] == "rhel-10"
    code, out, _ = run_cli("status", "-o", "wide", "--snapshot", str(run_cli.write(items)))
    header, *rows = out.splitlines()
    infra = next(r.split() for r in rows if r.startswith("infra "))
    assert infra[header.split().index("STREAM")] == "rhel-10"
    code, out, _ = run_cli("explain", "infra", "-o", "json", "--snapshot", str(run_cli.write(items)))
    build = json.loads(out)["build"]
    assert build["osStream"]["name"] == "rhel-10" and "inherited from worker" in build["osStream"]["from"]
    assert build["baseImage"] == os_image


def test_a_stream_the_cluster_does_not_list_blocks_the_pool(both):
    code, items, _ = both.run(world(pool_with(stream="rhel-11"), extra=[F.osimagestream("rhel-9")]))
    assert code == 2 and ann(items)[A.STATE] == A.BLOCKED
    assert "names OS stream 'rhel-11'" in ann(items)[A.MESSAGE]
    assert not F.owned(items, "worker")


def test_our_own_image_in_the_rendered_config_is_never_the_base(both):
    """With our MachineConfig merged the rendered config's osImageURL is our image and the render
    controller marks it overridden (render_controller.go); the base stays the release's."""
    items = world()
    mc = F.find(items, "MachineConfig")[0]
    mc["spec"]["osImageURL"] = f"{F.REPO}@sha256:{'c' * 64}"
    mc["metadata"].setdefault("annotations", {})["machineconfiguration.openshift.io/os-image-url-overridden"] = "true"
    code, items, err = both.run(items)
    assert code == 0, err
    assert f"FROM {F.BASE}" in dockerfile(items) and F.REPO not in dockerfile(items).split("LABEL")[0]


def test_the_build_runs_on_a_node_of_the_pools_architecture(both):
    nodes = [F.node("w1", "worker", "arm64"), F.node("m1", "master", "amd64"),
             F.node("m2", "master", "amd64", **{ROLE + "worker": ""})]     # master's, not worker's
    code, items, err = both.run(world(pool_with(), F.pool("master", opted_in=False), nodes=nodes))
    assert code == 0, err
    assert node_selector(build_object(items)) == {ARCH: "arm64"}
    assert ann(items)[A.ARCH] == "arm64"


def test_a_pool_whose_nodes_mix_architectures_builds_once_on_a_node_of_each(both):
    """Once Blocked (one image boots one architecture); now one build per architecture, then one
    image index (issue 55, tests/unit/test_multiarch.py)."""
    nodes = [F.node("w1", "worker", "arm64"), F.node("w2", "worker", "amd64")]
    code, items, err = both.run(world(nodes=nodes))
    assert code == 0 and ann(items)[A.STATE] == A.PENDING, err
    assert sorted(node_selector(o)[ARCH] for o in F.owned(items, "worker") if o["kind"] in ("Pod", "Build")) \
        == ["amd64", "arm64"]
    assert ann(items)[A.ARCH] == "amd64,arm64"


def test_a_pool_whose_nodes_all_lack_the_arch_label_is_blocked_not_built_anywhere(both):
    """Nodes without kubernetes.io/arch are not a pool without nodes: the image would be built on
    any node, of any architecture, for nodes whose own is unknown (architecture.py)."""
    nodes = [F.node("w1", "worker", ""), F.node("w2", "worker", "")]
    code, items, _ = both.run(world(nodes=nodes))
    assert code == 2 and ann(items)[A.STATE] == A.BLOCKED
    assert ann(items)[A.MESSAGE] == (
        f"MachineConfigPool worker: none of its nodes has the label {ARCH} (w1, w2), which the "
        "kubelet sets: the architecture to build for is not known; label them, or check their kubelet")
    assert not [o for o in F.owned(items, "worker") if o["kind"] in ("Pod", "Build")]


def test_a_pool_without_nodes_builds_anywhere_then_rebuilds_for_its_first_nodes(both):
    code, items, err = both.run(world(nodes=[F.node("m1", "master")]))
    assert code == 0, err
    first = build_object(items)
    assert node_selector(first) == {} and ann(items)[A.ARCH] == ""
    assert "no nodes yet" in ann(items)[A.MESSAGE]
    items = copy.deepcopy(items)
    for obj in items:
        if obj is not None and obj["kind"] in ("Pod", "Build") and obj["metadata"]["name"] == first["metadata"]["name"]:
            kubelet.set_phase(obj, "Running")
    code, items, err = both.run(items + [F.node("w1", "worker", "s390x")])
    assert code == 0, err
    assert node_selector(build_object(items)) == {ARCH: "s390x"}
    assert build_object(items)["metadata"]["name"] != first["metadata"]["name"]


def mco_images(image):
    """The MCO's ConfigMap of the release's images, as install/0000_80_machine-config_02_images.configmap.yaml
    ships it (images.json, field machineConfigOperator), filled in by the release payload."""
    return F.configmap("machine-config-operator-images", {"images.json": json.dumps(
        {"releaseVersion": "4.21.0", "machineConfigOperator": image,
         "infraImage": "quay.io/openshift-release-dev/ocp-v4.0-art-dev@sha256:" + "1" * 64})}, F.MCO_NS)


MCO_IMAGE = "quay.io/openshift-release-dev/ocp-v4.0-art-dev@sha256:" + "b" * 64


def test_the_build_pod_runs_in_the_releases_mco_image_where_the_cluster_has_one(any_cli):
    code, items, err = any_cli.run(world(extra=[mco_images(MCO_IMAGE)]))
    assert code == 0, err
    pod = build_object(items)
    assert pod["kind"] == "Pod" and pod["spec"]["containers"][0]["image"] == MCO_IMAGE
    assert pod["metadata"]["annotations"][A.BUILDER_IMAGE] == MCO_IMAGE
    assert f'LABEL "ocl-reconciler.io/builder-image"="{MCO_IMAGE}"' in dockerfile(items)


BUILDAH = "registry.example.com/buildah@sha256:" + "d" * 64


def in_namespace(items, namespace):
    """The install's ConfigMaps and Secrets in `namespace` (one running in the MCO's: there the
    images ConfigMap is among those listed, so both builder images are known live too)."""
    for obj in items:
        if obj["kind"] in ("ConfigMap", "Secret") and obj["metadata"].get("namespace") == F.NS:
            obj["metadata"]["namespace"] = namespace
    return items


@pytest.mark.parametrize("namespace", [F.NS, F.MCO_NS])
def test_buildah_image_in_the_settings_wins_wherever_the_builder_image_shows(any_cli, namespace):
    """docs/builder-image.md section 3: `buildahImage` set -> "that image", whatever the MCO's
    images ConfigMap says; and it shows as the Pod's image and annotation, the image's label, the
    pool's ocl-reconciler.io/builder-image, status -o wide's BUILDER and explain's record."""
    items = in_namespace(world(extra=[mco_images(MCO_IMAGE)]), namespace)
    items[0] = in_namespace([F.build_config(buildahImage=BUILDAH)], namespace)[0]
    code, out, err = any_cli.run(items, "-n", namespace)
    assert code == 0, err
    pod = build_object(out)
    assert pod["spec"]["containers"][0]["image"] == BUILDAH
    assert pod["metadata"]["annotations"][A.BUILDER_IMAGE] == BUILDAH
    assert f'LABEL "ocl-reconciler.io/builder-image"="{BUILDAH}"' in dockerfile(out)
    assert ann(out)[A.BUILDER_IMAGE] == BUILDAH
    assert MCO_IMAGE not in json.dumps([o for o in out if o["kind"] != "ConfigMap"
                                        or o["metadata"]["name"] != "machine-config-operator-images"])
    code, table, _ = any_cli.on(out, "status", "-o", "wide")
    header, row = table.splitlines()
    assert row.split()[header.split().index("BUILDER")] == BUILDAH
    code, explained, _ = any_cli.on(out, "explain", "worker", "-o", "json", "-n", namespace)
    assert json.loads(explained)["recorded"]["builderImage"] == BUILDAH


def test_no_buildah_image_and_no_images_configmap_keeps_the_default(any_cli):
    code, out, err = any_cli.run(world())
    assert code == 0, err
    assert build_object(out)["spec"]["containers"][0]["image"] == "quay.io/buildah/stable:latest"


def test_an_images_configmap_without_the_operator_image_blocks_naming_it(any_cli):
    broken = F.configmap("machine-config-operator-images", {"images.json": '{"releaseVersion": "4.21.0"}'}, F.MCO_NS)
    code, items, _ = any_cli.run(world(extra=[broken]))
    assert code == 2 and ann(items)[A.STATE] == A.BLOCKED
    assert "machine-config-operator-images: key 'images.json' has no field 'machineConfigOperator'" \
        in ann(items)[A.MESSAGE]


def test_the_openshift_build_records_no_builder_image_of_ours(any_cli, monkeypatch):
    monkeypatch.setattr(F, "BUILDER", "openshift-image-builder")
    code, items, err = any_cli.run(world(extra=[mco_images(MCO_IMAGE)]))
    assert code == 0, err
    build = build_object(items)
    assert build["kind"] == "Build" and A.BUILDER_IMAGE not in build["metadata"]["annotations"]
    assert "ocl-reconciler.io/builder-image" not in dockerfile(items)      # an empty label is left out


def test_an_upgrade_keeps_the_image_the_version_before_the_platform_built(run_cli):
    """The previous version's id hashed no architecture, stream or builder image: a pool it built
    keeps its image (EQUIVALENT), and the architecture is recorded from then on."""
    from reconcile.core import desired
    from reconcile.imagebuild import settings
    from reconcile.imagebuild.platform import clusterfacts
    items = world()
    pool = F.the_pool(items)
    s = settings.read(F.NS, {"on-cluster-build-config": F.build_config(),
                             "machine-config-osimageurl": F.osimageurl()})
    streams = F.osimagestream("rhel-9")                  # now the default stream gives the base
    items.append(streams)
    inp = desired.inputs(s, pool, F.content(pool), clusterfacts.ClusterFacts(
        streams=streams, nodes=tuple(F.find(items, "Node"))))
    assert inp.base_image == F.stream_images("rhel-9")[0]
    # the version before took the ConfigMap's base and extensions images
    old = F.build_id_before_platform(inp, base_image=F.BASE, extensions_image="")
    image = f"{F.REPO}@sha256:{'e' * 64}"
    pool["metadata"]["annotations"].update({
        A.STATE: A.SUCCEEDED, A.IMAGE: image, A.RENDERED: "rendered-worker-1", A.BUILT_CONFIG: "rendered-worker-1",
        A.CONTENT: A.content("rendered-worker-1", F.content(pool)),
        A.BUILD: f"Pod/{F.NS}/ocl-build-worker-{old}", A.ATTEMPT: "1"})
    code, out, err = run_cli.run(items)
    assert code == 0, err
    a = ann(out)
    assert a[A.IMAGE] == image and a[A.STATE] == A.SUCCEEDED and a[A.ARCH] == "amd64"
    assert "an earlier version of ocl-reconciler built it" in a[A.MESSAGE]
    assert not F.owned(out, "worker")


def test_status_wide_shows_the_architecture_and_builder_image_of_the_last_build(run_cli):
    code, items, err = run_cli.run(world(extra=[mco_images(MCO_IMAGE)]))
    assert code == 0, err
    code, out, _ = run_cli("status", "-o", "wide", "--snapshot", str(run_cli.write(items)))
    header, row = out.splitlines()
    assert header.split() == ["POOL", "RENDERED", "STATE", "ROLLOUT", "IMAGE", "AGE", "ARCH", "STREAM", "BUILDER", "MESSAGE"]
    assert row.split()[:9] == ["worker", "rendered-worker-1", "Pending", "-", "<none>", "0s", "amd64", "-", MCO_IMAGE]
    code, out, _ = run_cli("status", "--snapshot", str(run_cli.write(items)))
    assert "ARCH" not in out and MCO_IMAGE not in out


def test_another_pools_build_does_not_change_this_pools_architecture(any_cli):
    """The nodes are listed because infra's build is due and gpu, new, has no architecture yet;
    worker's nodes changed architecture since its build, but its recorded architecture stands
    until its own next build (docs/builder-image.md; imagebuild/clusterfacts.py: only the pools
    whose architecture is due take it from the nodes). With gpu new the nodes are listed before
    any pool is decided, so worker is decided with them at hand, and must still not use them."""
    items = world(pool_with("worker"), pool_with("infra"), nodes=[F.node("w1", "worker", "arm64"),
                                                                 F.node("i1", "infra", "amd64")])
    code, items, err = any_cli.run(items)
    assert code == 0 and ann(items)[A.ARCH] == "arm64", err
    worker_build = build_object(items)["metadata"]["name"]
    items = [o for o in items if o["kind"] != "Node"] + [F.node("w2", "worker", "amd64"), F.node("i1", "infra"),
                                                         F.node("g1", "gpu", "s390x")]
    items = copy.deepcopy(items)
    F.the_pool(items, "infra")["spec"]["configuration"]["name"] = "rendered-infra-2"
    items += [F.machineconfig("rendered-infra-2"), pool_with("gpu"), F.machineconfig("rendered-gpu-1")]
    code, items, err = any_cli.run(items)
    assert code == 0, err
    assert ann(items, "infra")[A.RENDERED] == "rendered-infra-2" and ann(items, "infra")[A.STATE] == A.PENDING
    assert ann(items, "gpu")[A.ARCH] == "s390x" and node_selector(build_object(items, "gpu")) == {ARCH: "s390x"}
    assert build_object(items)["metadata"]["name"] == worker_build and ann(items)[A.ARCH] == "arm64"
    assert node_selector(build_object(items)) == {ARCH: "arm64"}


def test_a_pool_scaled_to_zero_keeps_its_architecture_when_it_builds(run_cli):
    code, items, err = run_cli.run(world(nodes=[F.node("w1", "worker", "arm64")]))
    assert code == 0, err
    items = [o for o in copy.deepcopy(items) if o["kind"] != "Node"]      # the pool scaled to zero
    F.the_pool(items)["spec"]["configuration"]["name"] = "rendered-worker-2"
    items.append(F.machineconfig("rendered-worker-2"))
    code, items, err = run_cli.run(items)
    assert code == 0, err
    assert node_selector(build_object(items)) == {ARCH: "arm64"} and ann(items)[A.ARCH] == "arm64"


def test_outside_the_mcos_namespace_what_it_publishes_is_read_by_name(tmp_path, run_cli):
    from reconcile import cli
    from tests.support.apiserver import APIServer
    with APIServer(world(extra=[mco_images(MCO_IMAGE)]), clock=lambda: F.NOW) as server:
        run_cli.capsys.readouterr()
        assert cli.main(["run", "--kubeconfig", server.kubeconfig(tmp_path / "kc")]) == 0
        gets = sorted((r.namespace, r.name) for r in server.log if r.verb == "get" and r.resource == "configmaps")
        (pod,) = server.store.list("Pod", F.NS)
    assert gets == [(F.MCO_NS, "machine-config-operator-images"), (F.MCO_NS, "machine-config-osimageurl")]
    assert pod["spec"]["containers"][0]["image"] == MCO_IMAGE


@pytest.mark.parametrize("name, blocked", [
    ("machine-config-osimageurl", "cannot read ConfigMap openshift-machine-config-operator/machine-config-osimageurl "
                                  "(the release's OS images)"),
    ("machine-config-operator-images", "cannot read ConfigMap openshift-machine-config-operator/"
                                       "machine-config-operator-images (the build Pod's default image"),
    ("cluster", "cannot read OSImageStream cluster (the pool's OS stream)"),
])
def test_a_403_on_what_the_build_needs_blocks_the_pools_saying_so(tmp_path, run_cli, name, blocked):
    """An install whose RBAC predates these reads: the pools are Blocked naming what to grant; the
    run itself goes on (exit 2, not 3)."""
    from reconcile import cli
    from tests.support.apiserver import APIServer, Fault
    with APIServer(world(extra=[mco_images(MCO_IMAGE)]), clock=lambda: F.NOW) as server:
        server.faults.append(Fault("status", code=403, times=0,
                                   match=lambda verb, res, ns, n: verb == "get" and n == name))
        run_cli.capsys.readouterr()
        code = cli.main(["run", "--kubeconfig", server.kubeconfig(tmp_path / "kc")])
        pool = server.store.get("MachineConfigPool", "", "worker")
    a = pool["metadata"]["annotations"]
    assert code == 2 and a[A.STATE] == A.BLOCKED and a[A.MESSAGE].startswith(blocked), a[A.MESSAGE]
    assert "403" in a[A.MESSAGE]


def test_an_openshift_build_install_never_reads_the_mcos_images(tmp_path, run_cli):
    from reconcile import cli
    from tests.support.apiserver import APIServer
    items = world(extra=[mco_images(MCO_IMAGE)])
    items[0] = F.build_config(imageBuilderType="openshift-image-builder")
    with APIServer(items, clock=lambda: F.NOW) as server:
        run_cli.capsys.readouterr()
        assert cli.main(["run", "--kubeconfig", server.kubeconfig(tmp_path / "kc")]) == 0
        gets = [r.name for r in server.log if r.verb == "get" and r.resource == "configmaps"]
    assert gets == ["machine-config-osimageurl"]
