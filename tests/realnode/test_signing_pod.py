"""The signing Pod runs cosign under the real kubelet (issue 53, items 2 and 3's signing half).

The product runs in-process on the host as its ServiceAccount against the node's server
(realserver.Real); the signing Pod it creates, rendered from manifests/pod-sign.yaml.j2 and not
changed by the test, is scheduled onto the real node and started by containerd and runc: cosign
v2.4.1 in an image laid out as sigstore's (tests/support/nodesigning.py), its key from the Secret
volume, its password by secretKeyRef, the registry's CA from the `openshift-service-ca.crt`
ConfigMap through SSL_CERT_DIR, its HOME and TMPDIR the Pod's emptyDir on a read-only root. It signs
an image in the TLS registry that the Pods reach at the node's gateway; containers/image
(policycheck) then decides under the policy.json the MCO's own code renders from our Component.

Still imitated: the build (the test pushes the image and writes the Build's status, as OpenShift's
build controller would) and SCC admission (none runs here; docs/signing.md says what it changes).

Expected failure reasons are upstream's words: distribution's DENIED (docs/spec/api.md, "Errors",
as go-containerregistry prints it), cosign's `unsupported pem type: %s` (pkg/cosign/keys.go,
LoadPrivateKey, v2.4.1)."""

from __future__ import annotations

import time

import kubelet  # examples/kubelet.py
import pytest

from reconcile.contract import annotations as A
from reconcile.imagebuild import signing
from tests.support import factory as F
from tests.support import nodesigning as N
from tests.support import realserver
from tests.support.nodejobs import build_of

pytestmark = pytest.mark.realnode


@pytest.fixture(scope="module")
def world(node, tmp_path_factory):
    started = N.start(node, tmp_path_factory.mktemp("node-signing"))
    try:
        if getattr(node.api, "sa_token", None) is None:
            node.api.sa_token = node.api.service_account_token(F.NS, "ocl-reconciler")
        yield started
    finally:
        started.front.stop()
        started.reg.stop()


@pytest.fixture
def real(world, tmp_path, capsys):
    world.refuse.clear()
    world.deployed.clear()
    return realserver.Real(world.node.api, tmp_path, capsys)


def run(world: N.World, real: realserver.Real) -> str:
    code, err = real.run("--registry-ca", str(world.ca.ca))
    assert code in (0, 1), err
    return err


def wait_ended(world: N.World, seconds: float = 90) -> dict:
    """The signing Pod once the kubelet reports it Succeeded or Failed."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        pods = N.sign_pods(world)
        if pods and (pods[0].get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            return pods[0]
        time.sleep(0.3)
    raise AssertionError(f"no signing Pod ended in {seconds} s: {[N.pod_json(p) for p in N.sign_pods(world)]} "
                         f"kubelet: {world.node.tail('kubelet', 6)}")


def sign_on_the_node(world: N.World, real: realserver.Real, key: dict, marker: str) -> tuple[str, dict]:
    """The pool's Build reports `marker`'s image built; the next run makes the signing Pod, which the
    kubelet runs to its end; the run after reads it. Returns (the image, the ended Pod)."""
    world.deployed.seed(world.scenario(key))
    image = world.push(marker)
    run(world, real)
    build = world.deployed.wait_for("the run's Build", lambda: build_of(world.deployed))
    world.node.api.write_status(kubelet.set_phase(build, "Succeeded", digest=image.split("@")[1]))
    run(world, real)
    assert world.deployed.ann().get(A.STATE) == A.BUILDING, world.deployed.ann()
    pod = wait_ended(world)
    run(world, real)
    return image, pod


def test_the_signing_pod_signs_under_the_kubelet_and_containers_image_accepts_it(world, real):
    image = world.push("probe-unsigned")
    assert not world.verdict(image).allowed               # the policy wants a signature
    image, pod = sign_on_the_node(world, real, world.key_secret(), "signed-on-the-node")
    assert pod["status"]["phase"] == "Succeeded", N.pod_json(pod)
    assert pod["spec"]["nodeName"] == world.node.name
    (container,) = pod["spec"]["containers"]
    assert container["image"] == world.signer and container["args"][-1] == image
    ann = world.deployed.ann()
    assert ann[A.STATE] == A.SUCCEEDED and ann[A.IMAGE] == image, ann
    (key,) = signing.keys(F.NS, [N.KEY], {N.KEY: world.key_secret()})
    assert ann[A.SIGNED] == signing.record(image, (key,))
    verdict = world.verdict(image)
    assert verdict == N.S.Verdict(True, "", ""), verdict


def _explained(real: realserver.Real, why: str) -> None:
    for command in (("explain", "worker"), ("status", "-o", "wide")):     # wide: MESSAGE in full
        _, out, _ = real.cli(*command)
        assert why in out, (command, out)


def test_a_registry_refusing_the_signature_push_fails_the_pool_with_cosigns_reason(world, real):
    world.refuse.update({("PUT", "*"), ("POST", "*"), ("PATCH", "*")})
    image, pod = sign_on_the_node(world, real, world.key_secret(), "push-refused")
    assert pod["status"]["phase"] == "Failed", N.pod_json(pod)
    assert world.front.refused                           # cosign's push reached the registry
    why = "DENIED: requested access to the resource is denied"
    ann = world.deployed.ann()
    assert ann[A.STATE] == A.FAILED and A.IMAGE not in ann, ann
    assert why in ann[A.MESSAGE] and image in ann[A.MESSAGE], ann[A.MESSAGE]
    _explained(real, why)
    assert not world.verdict(image).allowed


def test_a_key_cosign_cannot_read_fails_the_pool_naming_the_reason(world, real):
    """The key Secret's cosign.key holds the public key (a wrong paste): cosign cannot load it."""
    secret = world.key_secret(private=world.pub.read_bytes())
    image, pod = sign_on_the_node(world, real, secret, "unreadable-key")
    assert pod["status"]["phase"] == "Failed", N.pod_json(pod)
    why = "unsupported pem type: PUBLIC KEY"
    ann = world.deployed.ann()
    assert ann[A.STATE] == A.FAILED and why in ann[A.MESSAGE], ann
    _explained(real, why)
    assert not world.verdict(image).allowed


#: what OpenShift's restricted-v2 SCC writes into a Pod it admits (openshift/apiserver-library-go
#: pkg/securitycontextconstraints: MustRunAsRange and MustRunAs take the first uid and group of the
#: namespace's range, its seccompProfiles `runtime/default` the first): the signing Pod runs under it
#: where ocl-builder may not use anyuid (docs/signing.md)
RESTRICTED_V2 = {"runAsUser": 1000680000, "fsGroup": 1000680000, "seccompProfile": {"type": "RuntimeDefault"}}


def test_the_signing_pod_as_restricted_v2_would_admit_it_still_signs(world, real):
    """Another uid than the image's, a group owning the volumes, the runtime's seccomp filter: the
    rendered Pod, with only what that SCC adds, signs what the nodes accept."""
    from reconcile.imagebuild.signing import signer
    world.deployed.seed(world.scenario(world.key_secret()))
    image = world.push("signed-under-restricted-v2")
    pod = signer.render(name="ocl-sign-restricted-v2", namespace=F.NS, labels={}, annotations={}, owner={},
                        image=image, keys=(N.KEY,), signer_image=world.signer, push_secret="push-secret")
    del pod["metadata"]["ownerReferences"]
    pod["spec"]["securityContext"] = RESTRICTED_V2
    world.node.api.create(pod)
    ended = wait_ended(world)
    assert ended["status"]["phase"] == "Succeeded", N.pod_json(ended)
    assert world.verdict(image) == N.S.Verdict(True, "", "")
