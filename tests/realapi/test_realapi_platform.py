"""Issue 20 on the real kube-apiserver, as the reconciler's ServiceAccount, both builders: the
OSImageStream singleton served by openshift/api's CRD (the fixture installs
../shared/schemas/osimagestreams.crd.yaml, whose CEL rules the real server enforces), the nodes'
architecture, the MCO's images ConfigMap; the audit log counts the reads."""

from __future__ import annotations

import copy
import json

import pytest

from reconcile.contract import annotations as A
from tests.support import factory as F
from tests.support import realserver
from tests.unit.test_platform import MCO_IMAGE, mco_images, pool_with

pytestmark = pytest.mark.realapi
BUILDERS = sorted(F.BUILD_KINDS)
ARCH = "kubernetes.io/arch"


def seed(real, builder, *pools, nodes=None, extra=()):
    pools = pools or (pool_with(),)
    items = F.cluster(*pools, nodes=nodes is None, extra=list(extra), settings=[
        F.build_config(imageBuilderType=builder), F.osimageurl(), F.secret("pull-secret"),
        F.secret("push-secret")])
    real.seed(items + list(nodes or []))


def dockerfile(real):
    (cm,) = [o for o in real.owned() if o["kind"] == "ConfigMap" and "Dockerfile" in o.get("data", {})]
    return cm["data"]["Dockerfile"]


def reads(real, mark, resource):
    return [(e["verb"], e["objectRef"].get("name"), e["responseStatus"]["code"])
            for e in real.api.audit(mark, realserver.RECONCILER)
            if e.get("objectRef", {}).get("resource") == resource]


def test_the_factorys_osimagestream_is_one_the_real_crd_accepts(real):
    """The singleton as tests shape it passes the CRD's validation (digested images, the default
    among the listed streams); one that breaks the CRD's rules is refused, so the check bites."""
    made = real.api.create(F.osimagestream("rhel-9", "rhel-10"))
    assert [s["name"] for s in made["status"]["availableStreams"]] == ["rhel-9", "rhel-10"]
    bad = copy.deepcopy(F.osimagestream("rhel-9"))
    bad["metadata"]["name"] = "other"            # "osimagestream is a singleton, .metadata.name must be 'cluster'"
    with pytest.raises(realserver.APIError, match="singleton"):
        real.api.create(bad)


@pytest.mark.parametrize("builder", BUILDERS)
def test_a_pool_builds_on_its_streams_images_read_once_by_name(real, builder):
    seed(real, builder, pool_with(stream="rhel-10"), extra=[F.osimagestream("rhel-9", "rhel-10")])
    mark = real.api.audit_mark()
    code, err = real.run()
    assert code == 0 and real.ann()[A.STATE] == A.PENDING, err
    assert f"FROM {F.stream_images('rhel-10')[0]}" in dockerfile(real)
    assert reads(real, mark, "osimagestreams") == [("get", "cluster", 200)]     # resourceNames: [cluster]
    # the pool leaves its stream: the default stream's images, a new build
    first = real.build_object()["metadata"]["name"]
    pool = real.pool()
    del pool["spec"]["osImageStream"]
    real.api.request("PUT", real.api.path("MachineConfigPool", "", "worker"), pool)
    code, err = real.run()
    assert code == 0, err
    assert real.build_object()["metadata"]["name"] != first
    assert f"FROM {F.stream_images('rhel-9')[0]}" in dockerfile(real)


@pytest.mark.parametrize("builder", BUILDERS)
def test_a_stream_the_cluster_no_longer_lists_is_the_pools_error(real, builder):
    """The MCO's stream policy admits a pool only with a listed stream: one whose stream left the
    list (its end of life) can record nothing, not even Blocked. The run says so, once, builds
    nothing and sends the denied write once (tests/unit/test_platform.py has the Blocked message)."""
    seed(real, builder, pool_with(stream="rhel-11"), extra=[F.osimagestream("rhel-9", "rhel-11")])
    real.api.create(F.osimagestream("rhel-9"))
    probe = real.api.probe_pool(pool_with(stream="rhel-11"))
    real.api.wait_admission(probe, f"ValidatingAdmissionPolicy '{realserver.STREAM_POLICY}'")
    mark = real.api.audit_mark()
    code, err = real.run()
    assert code == 2 and A.STATE not in real.ann() and not real.owned(), err
    (line,) = [x for x in err.splitlines() if x.startswith("ERROR")]
    assert line.startswith("ERROR pool worker: patch MachineConfigPool/worker: ValidatingAdmissionPolicy "
                           f"{realserver.STREAM_POLICY} denied it"), line
    assert "must reference a valid stream" in line and "oc get osimagestream cluster" in line, line
    assert [e["responseStatus"]["code"] for e in real.api.audit(mark, realserver.RECONCILER)
            if e["verb"] == "patch"] == [422]


@pytest.mark.parametrize("builder", BUILDERS)
def test_the_build_object_asks_for_the_pools_architecture_and_a_steady_run_lists_no_nodes(real, builder):
    seed(real, builder, nodes=[F.node("worker-0", "worker", "arm64"), F.node("worker-1", "worker", "arm64")])
    mark = real.api.audit_mark()
    code, err = real.run()
    assert code == 0, err
    assert real.build_object()["spec"]["nodeSelector"] == {ARCH: "arm64"}
    assert real.ann()[A.ARCH] == "arm64"
    assert [(v, c) for v, _, c in reads(real, mark, "nodes")] == [("list", 200)]
    real.finish("Running")
    code, err = real.run()
    assert code == 0 and real.ann()[A.STATE] == A.BUILDING, err
    mark = real.api.audit_mark()
    assert real.run()[0] == 0
    assert reads(real, mark, "nodes") == []            # recorded: the steady run reads no node


@pytest.mark.parametrize("builder", BUILDERS)
def test_a_pool_of_mixed_architectures_gets_a_build_on_a_node_of_each(real, builder):
    """Once Blocked; now one build object per architecture (issue 55), created on the real server."""
    seed(real, builder, nodes=[F.node("worker-0", "worker", "arm64"), F.node("worker-1", "worker", "amd64")])
    code, err = real.run()
    assert code == 0 and real.ann()[A.STATE] == A.PENDING, err
    made = [o for o in real.owned() if o["kind"] in ("Pod", "Build")]
    assert sorted(o["spec"]["nodeSelector"][ARCH] for o in made) == ["amd64", "arm64"]
    assert real.ann()[A.ARCH] == "amd64,arm64"


def test_a_mixed_pools_builds_start_from_their_architectures_instance_of_a_real_list(real, base_registry, tmp_path):
    """The release's base image is an index in the real docker-registry (amd64 and arm64): each
    architecture's Dockerfile names that architecture's instance by digest, the one the registry's
    index lists for it (image-spec image-index.md; read back with the harness's own GET, not ours)."""
    from tests.support import realbuild as R
    R.require_registry()
    reg = R.Registry(tmp_path)
    try:
        index = R.push_index(reg, "ocp/base", "multi")
        listed = R.platforms(reg, "ocp/base", index)
        real.seed(F.cluster(nodes=False, settings=[
            F.build_config(), F.osimageurl(baseOSContainerImage=f"{reg.host}/ocp/base@{index}"),
            F.secret("pull-secret", payload={"auths": {reg.host: {"auth": "dTpw"}}}), F.secret("push-secret")])
            + [F.node("worker-0", "worker", "amd64"), F.node("worker-1", "worker", "arm64")])
        code, err = real.run()
        assert code == 0 and real.ann()[A.ARCH] == "amd64,arm64", err
        froms = sorted(line.split()[1] for o in real.owned() if "Dockerfile" in o.get("data", {})
                       for line in o["data"]["Dockerfile"].splitlines() if line.endswith("AS extract"))
        assert froms == sorted(f"{reg.host}/ocp/base@{listed[a]}" for a in ("amd64", "arm64"))
    finally:
        reg.stop()


@pytest.mark.parametrize("builder", BUILDERS)
def test_the_build_pod_runs_in_the_mcos_image_of_the_release(real, builder):
    seed(real, builder, extra=[mco_images(MCO_IMAGE)])
    code, err = real.run()
    assert code == 0, err
    obj = real.build_object()
    if obj["kind"] == "Build":          # OpenShift's build controller picks its builder image: none of ours
        assert A.BUILDER_IMAGE not in obj["metadata"]["annotations"] and A.BUILDER_IMAGE not in real.ann()
        assert "ocl-reconciler.io/builder-image" not in dockerfile(real)
        return
    assert obj["spec"]["containers"][0]["image"] == MCO_IMAGE
    assert obj["metadata"]["annotations"][A.BUILDER_IMAGE] == MCO_IMAGE == real.ann()[A.BUILDER_IMAGE]
    assert f'LABEL "ocl-reconciler.io/builder-image"="{MCO_IMAGE}"' in dockerfile(real)
    assert json.loads(real.api.get("ConfigMap", F.MCO_NS, "machine-config-operator-images")["data"]["images.json"])[
        "machineConfigOperator"] == MCO_IMAGE
