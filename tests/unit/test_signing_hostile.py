"""Signing against a hostile user (issue 41, docs/signing.md "Trust boundary"): what another user
can write (a Pod of the signing Pod's name and our labels, the pool's image record) must not make
a pool record an image as signed that no signing Pod of ours signed, nor make ours sign an image
that is not a digest of our repository; a converged signed cluster makes no write; the signing
Pod's container is locked down (Kubernetes' Pod Security Standards, "restricted": non-root, no
privilege escalation, every capability dropped; a read-only root filesystem where the program
writes only under its HOME).
"""

from __future__ import annotations

import copy

import pytest

from reconcile.contract import annotations as A
from reconcile.contract import objects
from reconcile.core.transitions import Transition
from reconcile.imagebuild import signing
from reconcile.imagebuild.signing import signer
from tests.support import factory as F
from tests.unit.test_signing_plan import (
    ann,
    built_and_pushed,
    pods,
    run,
    set_keys,
    set_sign_phase,
    signed_then,
    signing_cluster,
)


def impostor(pod: dict, **container: object) -> dict:
    """A Pod another user made with the signing Pod's name and labels, which signs nothing."""
    pod = copy.deepcopy(pod)
    for c in pod["spec"].get("initContainers", []) + pod["spec"]["containers"]:
        c.update({"image": "registry.example.com/busybox@sha256:" + "e" * 64, "args": ["true"], **container})
    return pod


@pytest.mark.parametrize("change", [
    {},                                                                   # runs `true`
    {"image": signing.DEFAULT_SIGNER_IMAGE, "args": ["version"]},         # our signer, signing nothing
])
def test_a_pod_of_the_signing_pods_name_that_signs_nothing_does_not_count(change):
    cluster = signing_cluster()
    image = built_and_pushed(cluster)
    run(cluster)
    (ours,) = pods(cluster, "ocl-sign-")
    fake = impostor(ours, **change)
    set_sign_phase(cluster, fake, "Succeeded")
    (plan,) = run(cluster)
    assert plan.transition == Transition.SIGN.name and plan.state_after == A.BUILDING
    assert A.IMAGE not in ann(cluster) and A.SIGNED not in ann(cluster)
    assert not pods(cluster, "ocl-sign-")                  # it goes; ours is made again by the next run
    assert "not the signing Pod" in plan.message
    run(cluster)
    (again,) = pods(cluster, "ocl-sign-")
    assert again["spec"]["containers"][0]["args"][-1] == image
    signed_then(cluster, again, image, Transition.SUCCEED)


def test_a_pod_of_the_signing_pods_name_made_before_ours_does_not_count():
    """Its name is deterministic (the image and the keys): another user can make it first."""
    cluster = signing_cluster()
    set_keys(cluster, None)
    image = built_and_pushed(cluster)
    run(cluster)
    set_keys(cluster, "cosign-old")
    plans = run(cluster)                                   # makes ours; the impostor replaces it
    (ours,) = pods(cluster, "ocl-sign-")
    set_sign_phase(cluster, impostor(ours), "Succeeded")
    (plan,) = run(cluster)
    assert plans[0].transition == plan.transition == Transition.SIGN.name
    assert A.SIGNED not in ann(cluster) and ann(cluster)[A.IMAGE] == image
    assert not pods(cluster, "ocl-sign-")


@pytest.mark.parametrize("recorded", [
    "--output-signature=/tmp/x",
    "evil.example.com/os@sha256:" + "a" * 64,
    f"{F.REPO}:latest",
    f"{F.REPO}-other@sha256:" + "a" * 64,
])
def test_an_image_record_that_is_not_a_digest_of_our_repository_is_never_signed(recorded):
    """The pool's image record is an annotation anyone who may patch the pool can write: turning
    signing on signs the image a pool uses only if it is `<repository>@sha256:<hex>` (else cosign
    would take it as a flag, or sign and push for another repository with our key)."""
    cluster = signing_cluster()
    set_keys(cluster, None)
    built_and_pushed(cluster)
    run(cluster)
    pool = cluster.store[("MachineConfigPool", "", "worker")]
    pool["metadata"]["annotations"][A.IMAGE] = recorded
    set_keys(cluster, "cosign-old")
    (plan,) = run(cluster)
    assert not pods(cluster, "ocl-sign-")
    assert A.SIGNED not in ann(cluster)
    assert plan.state_after == A.BLOCKED and recorded in plan.message and F.REPO in plan.message


def test_a_converged_signed_cluster_makes_no_write():
    cluster = signing_cluster()
    built_and_pushed(cluster)
    run(cluster)
    set_sign_phase(cluster, pods(cluster, "ocl-sign-")[0], "Succeeded")
    run(cluster)
    assert A.SIGNED in ann(cluster)
    cluster.writes.clear()
    for _ in range(2):
        (plan,) = run(cluster)
        assert plan.transition == Transition.BUILT.name and cluster.writes == []


def test_the_signing_container_is_locked_down():
    pod = signer.render(name="ocl-sign-worker-x", namespace=F.NS, labels={}, annotations={}, owner={},
                        image=f"{F.REPO}@sha256:" + "c" * 64, keys=("a", "b"),
                        signer_image=signing.DEFAULT_SIGNER_IMAGE, push_secret="push-secret")
    for c in pod["spec"]["initContainers"] + pod["spec"]["containers"]:
        sc = c["securityContext"]
        assert sc["runAsNonRoot"] is True and sc["allowPrivilegeEscalation"] is False
        assert sc["capabilities"] == {"drop": ["ALL"]} and sc.get("privileged") in (None, False)
        assert sc.get("readOnlyRootFilesystem") is True
        writable = {m["mountPath"] for m in c["volumeMounts"] if not m.get("readOnly")}
        env = {e["name"]: e.get("value") for e in c["env"]}
        assert writable == {env["HOME"]} and env["TMPDIR"] == env["HOME"]
        assert c["resources"]["limits"]["memory"]
    assert objects.name(pod) == "ocl-sign-worker-x"


def test_the_machineconfig_rollout_waits_for_the_signature_and_then_makes_no_write():
    """Our MachineConfig never points at the image before it is signed; converged, no write."""
    cluster = signing_cluster()
    cluster.store[("ConfigMap", F.NS, "on-cluster-build-config")]["data"]["rollout"] = "machineconfig"
    image = built_and_pushed(cluster)
    run(cluster)
    assert not [m for m in cluster.list("MachineConfig", "") if m["spec"].get("osImageURL") == image]
    set_sign_phase(cluster, pods(cluster, "ocl-sign-")[0], "Succeeded")
    for _ in range(3):
        run(cluster)
    assert ann(cluster)[A.SIGNED].startswith(image + "=")
    (mc,) = [m for m in cluster.list("MachineConfig", "") if m["spec"].get("osImageURL")]
    assert mc["spec"]["osImageURL"] == image
    cluster.writes.clear()
    (plan,) = run(cluster)
    assert plan.transition == Transition.BUILT.name and cluster.writes == []
