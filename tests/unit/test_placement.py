"""Moving an install out of the MCO's namespace (issue 21, item 4): a pool an install there built
keeps its image, the run says once that the old objects are left for the admin to delete, and it
never touches them (it has no rights there). Snapshots and the stand-in API, both builders."""

from __future__ import annotations

import copy

import pytest

from reconcile.contract import annotations as A
from reconcile.core import desired
from reconcile.imagebuild import settings
from reconcile.imagebuild.platform import clusterfacts
from tests.support import factory as F

IMAGE = f"{F.REPO}@sha256:{'e' * 64}"


def moved_world(state=A.SUCCEEDED):
    """A pool the earlier install in the MCO's namespace recorded (as that install computed the id:
    its settings read in that namespace), and its leftover build object there."""
    items = F.cluster()
    pool = F.the_pool(items)
    there = settings.read(F.MCO_NS, {"on-cluster-build-config": F.build_config(),
                                     "machine-config-osimageurl": F.osimageurl()})
    inp = desired.inputs(there, pool, F.content(pool),
                         clusterfacts.ClusterFacts(nodes=tuple(F.find(items, "Node"))))
    kind = F.BUILD_KINDS[F.BUILDER]
    old_ref = f"{kind}/{F.MCO_NS}/ocl-build-worker-{inp.build_id}"
    record = {A.STATE: state, A.RENDERED: "rendered-worker-1", A.ATTEMPT: "1", A.ARCH: "amd64",
              A.CONTENT: A.content("rendered-worker-1", F.content(pool)), A.BUILD: old_ref,
              A.MESSAGE: "build failed: exit 1" if state == A.FAILED else ""}
    if state == A.SUCCEEDED:
        record.update({A.IMAGE: IMAGE, A.BUILT_CONFIG: "rendered-worker-1", A.IMAGES: f"{inp.build_id}={IMAGE}"})
    pool["metadata"]["annotations"].update(record)
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
    warnings = [line for line in err.splitlines() if "record builds of an install of ocl-reconciler" in line]
    assert len(warnings) == 1 and f"-n {F.MCO_NS} -l app.kubernetes.io/managed-by=ocl-reconciler" in warnings[0]
    (kept,) = F.find(after, "ConfigMap", leftover["metadata"]["name"])
    assert kept["metadata"]["namespace"] == F.MCO_NS and kept["data"] == leftover["data"]   # left alone
    assert not [o for o in F.owned(after, "worker") if o["kind"] in ("Pod", "Build")]   # nothing rebuilt
    code, _, err = both.run(copy.deepcopy(after))
    assert code == 0 and "record builds of an install" not in err                      # said once


def test_the_apiserver_sees_no_request_to_the_mcos_namespace_but_the_named_gets(tmp_path, run_cli):
    from reconcile import cli
    from tests.support.apiserver import APIServer
    items, leftover = moved_world()
    with APIServer(items, clock=lambda: F.NOW) as server:
        run_cli.capsys.readouterr()
        assert cli.main(["run", "--kubeconfig", server.kubeconfig(tmp_path / "kc")]) == 0
        there = sorted({(r.verb, r.resource, r.name) for r in server.log if r.namespace == F.MCO_NS})
        kept = server.store.get("ConfigMap", F.MCO_NS, leftover["metadata"]["name"])
    assert there == [("get", "configmaps", "machine-config-operator-images"),
                     ("get", "configmaps", "machine-config-osimageurl")]
    assert kept is not None


def test_a_failure_recorded_there_stays_a_failure_until_a_rebuild_token(both):
    items, _ = moved_world(A.FAILED)
    code, after, err = both.run(items)
    assert code == 0, err
    a = F.the_pool(after)["metadata"]["annotations"]
    assert a[A.STATE] == A.FAILED and a[A.MESSAGE] == "build failed: exit 1"       # STAY_FAILED
    assert not [o for o in F.owned(after, "worker") if o["kind"] in ("Pod", "Build")]
    assert "record builds of an install of ocl-reconciler in namespace openshift-machine-config-operator" in err


def test_a_build_running_there_is_not_followed_and_is_built_again_here_saying_so(both):
    items, _ = moved_world(A.BUILDING)
    code, after, err = both.run(items)
    assert code == 0, err
    a = F.the_pool(after)["metadata"]["annotations"]
    assert a[A.STATE] == A.PENDING and a[A.BUILD].split("/")[1] == F.NS
    assert f"of the install in {F.MCO_NS}, is not followed from here: built again in {F.NS}" in a[A.MESSAGE]
    assert "interrupted" not in a[A.MESSAGE]


@pytest.mark.parametrize("kind, name, says", [
    ("configmaps", "custom-bundle", "cannot read ConfigMap openshift-config/custom-bundle (Proxy cluster, "
                                    "spec.trustedCA)"),
    ("secrets", "pull-secret", "cannot read Secret openshift-config/pull-secret (the global pull secret: "
                               "on-cluster-build-config sets no 'baseImagePullSecretName')"),
])
def test_a_403_outside_our_namespace_blocks_the_pools_naming_the_grant(tmp_path, run_cli, kind, name, says):
    """kustomize/base names the objects it may read in openshift-config: one it does not name (a Proxy
    whose trustedCA is not user-ca-bundle) blocks the pools saying what to grant; the run goes on."""
    from reconcile import cli
    from tests.support.apiserver import APIServer, Fault
    from tests.unit.test_proxy import proxy_objects
    pull = {"baseImagePullSecretName": None} if kind == "secrets" else {}      # the global pull secret
    items = F.cluster(settings=[F.build_config(**pull), F.osimageurl(), F.secret("pull-secret"),
                                F.secret("push-secret")], extra=proxy_objects(trusted_ca="custom-bundle"))
    with APIServer(items, clock=lambda: F.NOW) as server:
        server.faults.append(Fault("status", code=403, times=0,
                                   match=lambda verb, res, ns, n: verb == "get" and res == kind and n == name))
        run_cli.capsys.readouterr()
        code = cli.main(["run", "--kubeconfig", server.kubeconfig(tmp_path / "kc")])
        a = server.store.get("MachineConfigPool", "", "worker")["metadata"]["annotations"]
    assert code == 2 and a[A.STATE] == A.BLOCKED and a[A.MESSAGE].startswith(says), a[A.MESSAGE]
