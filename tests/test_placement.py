"""Moving an install out of the MCO's namespace (issue 21, item 4): a pool an install there built
keeps its image, the run says once that the old objects are left for the admin to delete, and it
never touches them (it has no rights there). Snapshots and the stand-in API, both builders."""

from __future__ import annotations

import copy

import pytest

from reconcile.build import clusterfacts, settings
from reconcile.contract import annotations as A
from reconcile.core import desired
from tests import factory as F

IMAGE = f"{F.REPO}@sha256:{'e' * 64}"


def moved_world():
    """A pool the earlier install in the MCO's namespace built, and its leftover build object there."""
    items = F.cluster()
    pool = F.the_pool(items)
    s = settings.read(F.NS, {"on-cluster-build-config": F.build_config(),
                             "machine-config-osimageurl": F.osimageurl()})
    inp = desired.inputs(s, pool, F.content(pool), clusterfacts.ClusterFacts(nodes=tuple(F.find(items, "Node"))))
    kind = F.BUILD_KINDS[F.BUILDER]
    old_ref = f"{kind}/{F.MCO_NS}/ocl-build-worker-{inp.build_id}"
    pool["metadata"]["annotations"].update({
        A.STATE: A.SUCCEEDED, A.IMAGE: IMAGE, A.RENDERED: "rendered-worker-1", A.BUILT_CONFIG: "rendered-worker-1",
        A.CONTENT: A.content("rendered-worker-1", F.content(pool)), A.ARCH: "amd64",
        A.BUILD: old_ref, A.ATTEMPT: "1"})
    leftover = {"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": f"ocl-dockerfile-worker-{inp.build_id}", "namespace": F.MCO_NS,
                             "labels": {"app.kubernetes.io/managed-by": "ocl-reconciler"}},
                "data": {"Dockerfile": "FROM scratch"}}
    return items + [leftover], leftover


@pytest.fixture
def both(any_cli, builder):
    return any_cli


def test_a_pool_built_in_the_mcos_namespace_keeps_its_image_and_the_leftovers_are_named(both):
    items, leftover = moved_world()
    code, after, err = both.run(items)
    assert code == 0, err
    a = F.the_pool(after)["metadata"]["annotations"]
    assert a[A.IMAGE] == IMAGE and a[A.STATE] == A.SUCCEEDED
    assert a[A.BUILD].split("/")[1] == F.NS                     # recorded in our namespace from now on
    assert f"an install of ocl-reconciler in {F.MCO_NS} built it" in a[A.MESSAGE]
    warnings = [line for line in err.splitlines() if "were built by an install of ocl-reconciler" in line]
    assert len(warnings) == 1 and f"-n {F.MCO_NS} -l app.kubernetes.io/managed-by=ocl-reconciler" in warnings[0]
    (kept,) = F.find(after, "ConfigMap", leftover["metadata"]["name"])
    assert kept["metadata"]["namespace"] == F.MCO_NS and kept["data"] == leftover["data"]   # left alone
    assert not [o for o in F.owned(after, "worker") if o["kind"] in ("Pod", "Build")]   # nothing rebuilt
    code, _, err = both.run(copy.deepcopy(after))
    assert code == 0 and "were built by an install" not in err                         # said once


def test_the_apiserver_sees_no_request_to_the_mcos_namespace_but_the_named_gets(tmp_path, run_cli):
    from reconcile import cli
    from tests.apiserver import APIServer
    items, leftover = moved_world()
    with APIServer(items, clock=lambda: F.NOW) as server:
        run_cli.capsys.readouterr()
        assert cli.main(["run", "--kubeconfig", server.kubeconfig(tmp_path / "kc")]) == 0
        there = sorted({(r.verb, r.resource, r.name) for r in server.log if r.namespace == F.MCO_NS})
        kept = server.store.get("ConfigMap", F.MCO_NS, leftover["metadata"]["name"])
    assert there == [("get", "configmaps", "machine-config-operator-images"),
                     ("get", "configmaps", "machine-config-osimageurl")]
    assert kept is not None
