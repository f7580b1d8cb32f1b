"""Pruning with signing on (issue 41): an image deleted from the registry takes its cosign signature
tag with it (`<repo>:sha256-<hex>.sig`, sigstore/cosign pkg/oci/remote/remote.go `SignatureTag`),
deleted by the digest of the manifest the tag serves, as the registry API deletes manifests
(distribution docs/spec/api.md: `DELETE /v2/<name>/manifests/<reference>`, reference a digest)."""

from __future__ import annotations

import hashlib

import pytest

from reconcile.cluster import registry
from reconcile.contract import annotations as A
from reconcile.core import images
from reconcile.core.actions import PoolPlan
from tests.standin.test_pruning import fake_registry as fake_registry  # noqa: F401 - the fixture
from tests.support import factory as F
from tests.support.fakeregistry import DIGESTS, FakeRegistry, auths


def test_a_signature_is_deleted_by_the_digest_its_tag_serves(fake_registry):
    image = f"{fake_registry}/ocl/os-image@{DIGESTS[0]}"
    sig = FakeRegistry.sign(DIGESTS[0])
    body, _ = FakeRegistry.stored[sig]
    assert sig == "sha256:" + hashlib.sha256(body).hexdigest()
    assert registry.delete_signature(image, auths(fake_registry)) == "deleted"
    assert FakeRegistry.deleted == [f"/v2/ocl/os-image/manifests/{sig}"]
    assert f"/v2/ocl/os-image/manifests/sha256-{DIGESTS[0][7:]}.sig" in FakeRegistry.gets
    assert registry.delete_signature(image, auths(fake_registry)) == "no signature"
    assert registry.delete_signature(f"{fake_registry}/ocl/os-image@{DIGESTS[1]}", auths(fake_registry)) == \
        "no signature"


def test_a_prune_with_signing_on_deletes_the_signatures_of_what_it_deletes():
    refs = [f"r.example.com/ocl/os-image@{d}" for d in DIGESTS]
    pool = F.pool("worker", annotations={A.IMAGES: " ".join(refs), A.IMAGE: refs[0], A.STATE: A.SUCCEEDED})
    for signatures in (True, False):
        plans = [PoolPlan("worker", A.SUCCEEDED)]
        images.add_to(plans, [pool], [], keep=2, signatures=signatures)
        (prune,) = [a for a in plans[0].actions if a.verb == "prune"]
        assert prune.images == tuple(refs[2:]) and prune.signatures is signatures


class _Deleter:
    """A registry client that records what it is asked; a signature it cannot delete raises."""

    def __init__(self, fail_signature: bool = False):
        self.calls, self.fail = [], fail_signature

    def delete(self, image):
        self.calls.append(("image", image))
        return "deleted"

    def delete_signature(self, image):
        self.calls.append(("signature", image))
        if self.fail:
            raise registry.RegistryError(f"{image}: the registry answered 500 Internal Server Error")
        return "deleted"


@pytest.mark.parametrize("fail", [False, True])
def test_the_executor_deletes_each_image_then_its_signature(fail):
    from reconcile.cluster import apply
    from reconcile.cluster.memory import MemoryCluster
    refs = [f"r.example.com/ocl/os-image@{d}" for d in DIGESTS]
    pool = F.pool("worker", annotations={A.IMAGES: " ".join(refs), A.IMAGE: refs[0], A.STATE: A.SUCCEEDED})
    cluster = MemoryCluster([pool], clock=lambda: F.NOW)
    plans = [PoolPlan("worker", A.SUCCEEDED)]
    images.add_to(plans, [pool], [], keep=2, signatures=True)
    (prune,) = plans[0].actions
    deleter, outcome = _Deleter(fail), apply.Outcome(plans[0])
    apply._prune(cluster, prune, deleter, outcome)
    assert deleter.calls == [(what, r) for r in refs[2:] for what in ("image", "signature")]
    # the images leave the history either way: a signature left behind signs an image that is gone
    assert cluster.get("MachineConfigPool", "", "worker")["metadata"]["annotations"][A.IMAGES] == " ".join(refs[:2])
    assert outcome.registry_failures == (2 if fail else 0) and outcome.images_deleted == 2
