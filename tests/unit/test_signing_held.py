"""Signing behaviours no test held before (issue 50), at the planning level (docs/signing.md).

1. A signature proves only its own image. The pool records `ocl-reconciler.io/signed:
   <image>=<fingerprint>` for the image it uses; its next build pushes another image, whose signing
   fails or never finishes. That image is not recorded signed, nor as the pool's image, nor written
   into our MachineConfig `ocl-osimageurl-<pool>`: the earlier image's record says nothing of it.
2. Only our signing Pod counts. A Pod of the signing Pod's name and labels that mounts another
   Secret as the key, runs another image, or runs as another ServiceAccount is not ours: it is
   reported (the pool's message) and deleted, and its Succeeded is never taken as a signature.

Expected values come from the spec (docs/signing.md, "What the pool records", "A failed signing is
a failed build") and the signing Pod as manifests/pod-sign.yaml.j2 renders it (`ocl-builder`, the
key Secret's `cosign.key`), not from our output.
"""

from __future__ import annotations

import copy

import pytest

from reconcile.contract import annotations as A
from reconcile.contract import objects
from reconcile.core.transitions import Transition
from reconcile.imagebuild import signing
from tests.support import factory as F
from tests.unit.test_signing_hostile import impostor as impostor_of
from tests.unit.test_signing_plan import (
    PUB_OLD,
    ann,
    built_and_pushed,
    pods,
    run,
    set_sign_phase,
    signed_and_recorded,
    signed_then,
    signing_cluster,
)

MC = "ocl-osimageurl-worker"


def machineconfig_cluster():
    """Signing on, `rollout: machineconfig`: the pool's image reaches the MCO through our
    MachineConfig `ocl-osimageurl-worker` (docs/rollout.md)."""
    cluster = signing_cluster()
    cluster.store[("ConfigMap", F.NS, "on-cluster-build-config")]["data"]["rollout"] = "machineconfig"
    return cluster


def handed_to_the_mco(cluster) -> list[str]:
    """The osImageURL of every MachineConfig we wrote for the pool."""
    return [m["spec"].get("osImageURL") for m in cluster.list("MachineConfig", "") if objects.name(m) == MC]


def first_image_signed_and_rolled_out(cluster) -> str:
    """The first build's image, signed, recorded and in our MachineConfig (as the spec says)."""
    first = signed_and_recorded(cluster)
    for _ in range(2):
        run(cluster)
    fingerprint = signing.fingerprint(PUB_OLD)
    assert ann(cluster)[A.SIGNED] == f"{first}={fingerprint}" and ann(cluster)[A.IMAGE] == first
    assert handed_to_the_mco(cluster) == [first]
    return first


def next_build_pushed(cluster) -> str:
    """A rebuild token: the pool builds again; its build Pod reports another digest."""
    pool = cluster.store[("MachineConfigPool", "", "worker")]
    pool["metadata"]["annotations"][A.REBUILD] = "2"
    return built_and_pushed(cluster)


def assert_not_taken(cluster, first: str, second: str) -> None:
    """`second` is not the pool's image, not recorded signed, not in our MachineConfig; the record
    of `first` is not rewritten to cover it."""
    got = ann(cluster)
    assert got.get(A.IMAGE) != second and second not in got.get(A.IMAGES, "")
    assert second not in got.get(A.SIGNED, "")
    assert got.get(A.SIGNED) in (None, f"{first}={signing.fingerprint(PUB_OLD)}")
    assert second not in handed_to_the_mco(cluster)


# -- 1. a signature proves only its own image --------------------------------------------------

def test_the_next_build_is_signed_not_taken_as_signed_by_the_earlier_images_record():
    cluster = machineconfig_cluster()
    first = first_image_signed_and_rolled_out(cluster)
    second = next_build_pushed(cluster)
    assert second != first
    (plan,) = run(cluster)
    assert plan.transition == Transition.SIGN.name and plan.state_after == A.BUILDING
    (sign_pod,) = pods(cluster, "ocl-sign-")
    assert sign_pod["spec"]["containers"][0]["args"][-1] == second
    assert_not_taken(cluster, first, second)
    signed_then(cluster, sign_pod, second, Transition.SUCCEED)       # once signed, it is taken
    run(cluster)
    assert ann(cluster)[A.IMAGE] == second and handed_to_the_mco(cluster) == [second]


def test_the_next_builds_failed_signing_leaves_it_unrecorded_and_unrolled():
    cluster = machineconfig_cluster()
    first = first_image_signed_and_rolled_out(cluster)
    second = next_build_pushed(cluster)
    (plan,) = run(cluster)
    assert plan.transition == Transition.SIGN.name, plan.message
    (sign_pod,) = pods(cluster, "ocl-sign-")
    set_sign_phase(cluster, sign_pod, "Failed", "Error: signing [x]: UNAUTHORIZED")
    for _ in range(3):
        run(cluster)
        assert_not_taken(cluster, first, second)
    assert ann(cluster)[A.STATE] == A.FAILED and second in ann(cluster)[A.MESSAGE]
    assert handed_to_the_mco(cluster) == [first]


def test_the_next_builds_signing_that_never_runs_leaves_it_unrecorded_and_unrolled():
    """The signing Pod stays Pending (its image cannot be pulled, no node has room): run after run
    the pool says Building and the MCO keeps the signed image."""
    cluster = machineconfig_cluster()
    first = first_image_signed_and_rolled_out(cluster)
    second = next_build_pushed(cluster)
    for _ in range(3):
        (plan,) = run(cluster)
        assert plan.transition == Transition.SIGN.name and plan.state_after == A.BUILDING
        assert_not_taken(cluster, first, second)
    assert handed_to_the_mco(cluster) == [first]


# -- 2. only our signing Pod counts -----------------------------------------------------------

def _other_key(pod: dict) -> dict:
    """The key volume names another Secret (its cosign.key: a key the nodes do not trust)."""
    pod = copy.deepcopy(pod)
    (volume,) = [v for v in pod["spec"]["volumes"] if v["name"] == "key-1"]
    volume["secret"]["secretName"] = "cosign-new"
    return pod


def _other_image(pod: dict) -> dict:
    """The same command and volumes, another image (one that exits 0 whatever it is asked)."""
    return impostor_of(pod, args=pod["spec"]["containers"][0]["args"])


def _other_service_account(pod: dict) -> dict:
    """Everything as ours but the ServiceAccount it runs as (ours is ocl-builder, no API token)."""
    pod = copy.deepcopy(pod)
    pod["spec"]["serviceAccountName"] = "someone-else"
    return pod


@pytest.mark.parametrize("forge", [_other_key, _other_image, _other_service_account],
                         ids=["another-key-secret", "another-image", "another-service-account"])
def test_a_pod_of_the_signing_pods_name_and_labels_that_is_not_ours_never_counts(forge):
    cluster = signing_cluster()
    image = built_and_pushed(cluster)
    run(cluster)
    (ours,) = pods(cluster, "ocl-sign-")
    fake = forge(ours)
    assert objects.name(fake) == objects.name(ours) and objects.labels(fake) == objects.labels(ours)
    set_sign_phase(cluster, fake, "Succeeded")
    (plan,) = run(cluster)
    assert plan.transition == Transition.SIGN.name and plan.state_after == A.BUILDING
    assert A.IMAGE not in ann(cluster) and A.SIGNED not in ann(cluster)
    assert f"Pod {objects.name(ours)} is not the signing Pod" in plan.message          # reported
    assert f"Pod {objects.name(ours)} is not the signing Pod" in ann(cluster)[A.MESSAGE]
    assert not pods(cluster, "ocl-sign-")                                               # and deleted
    run(cluster)
    (again,) = pods(cluster, "ocl-sign-")
    assert again["spec"] == ours["spec"]                                                # ours again
    signed_then(cluster, again, image, Transition.SUCCEED)


# -- 5 (the other path): the signing of an image in use that fails says why ----------------------

#: cosign v2.4.1's last line when the registry refuses the signature's push (cmd/cosign/main.go logs
#: `error during command execution: %v`; the chain ends in distribution's DENIED error, docs/spec/api.md
#: "Errors", as go-containerregistry prints it), for an image of a long in-cluster repository
LONG_REPO = ("image-registry.openshift-image-registry.svc:5000/ocl-reconciler-infrastructure-team/"
             "layered-os-images-for-the-production-clusters")
DENIED = "DENIED: requested access to the resource is denied"


def test_the_failed_signing_of_an_image_in_use_keeps_cosigns_cause():
    """Turning signing on signs the image in use (no build); when that signing fails, the pool's
    message must still end with cosign's cause, however long the image's name makes the line."""
    cluster = signing_cluster()
    signing_keys = cluster.store[("ConfigMap", F.NS, "on-cluster-build-config")]["data"]
    signing_keys.pop("imageSigningKeySecretName")
    image = built_and_pushed(cluster)
    run(cluster)
    assert ann(cluster)[A.IMAGE] == image and A.SIGNED not in ann(cluster)
    signing_keys["imageSigningKeySecretName"] = "cosign-old"
    (plan,) = run(cluster)
    assert plan.transition == Transition.SIGN.name
    (pod,) = pods(cluster, "ocl-sign-")
    digest = image.split("@")[1]
    line = (f"main.go:74: error during command execution: signing [{LONG_REPO}@{digest}]: signing digest: "
            f"POST https://{LONG_REPO.split('/')[0]}/v2/{LONG_REPO.split('/', 1)[1]}/blobs/uploads/: {DENIED}")
    set_sign_phase(cluster, pod, "Failed", f"Error: signing [{LONG_REPO}@{digest}]: ...\n{line}\n")
    run(cluster)
    pool = ann(cluster)
    assert pool[A.STATE] == A.FAILED and pool[A.IMAGE] == image          # the image in use stays
    assert len(pool[A.MESSAGE]) <= 512 and DENIED in pool[A.MESSAGE], pool[A.MESSAGE]
