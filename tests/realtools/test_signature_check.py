"""Issue 41: before a rollback reuses an image found in the registry, the reconciler checks its cosign
signature itself (reconcile/cluster/registry.py `signatures_of` reads it, imagebuild/signatures.py
verifies it) instead of signing it. Proven here on signatures made by the real tools: sigstore's
`cosign` v2.4.1 (`generate-key-pair`, `sign --key ... --tlog-upload=false`) against the real
`docker-registry` serving TLS with a CA made for the test; every signature is made in the test.

The refusals mirror what containers/image refuses on a node (tests/realtools/test_signing.py): an
unsigned image, a signature by another key, a genuine signature copied onto another digest; and
one it would accept under our Component's MatchRepository but we do not: a payload naming another
repository (`--sign-container-identity`), since our signer never writes one."""

from __future__ import annotations

import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest

from reconcile.cluster import registry
from reconcile.imagebuild import signing
from reconcile.imagebuild.signing import signatures
from tests.support import realbuild as R
from tests.support import signing as S
from tests.unit.test_signing_plan import key_secret

REPO = "ocl/os-image"


@dataclass
class Reg:
    reg: R.Registry
    ca: Path
    cosign: S.Cosign
    key: Path
    ours: signing.Key
    other_key: Path
    other: signing.Key

    @property
    def repo(self) -> str:
        return f"{self.reg.host}/{REPO}"

    def push(self, marker: str) -> str:
        return f"{self.repo}@{R.push_image(self.reg, REPO, marker)}"

    def check(self, image: str, *keys: signing.Key) -> signatures.Verdict:
        """What the reconciler reads (as the planner does, the CA trusted) and decides."""
        found = registry.signatures_of(image, {}, 30.0, registry.context(str(self.ca)))
        return signatures.verify(found, image, self.repo, keys or (self.ours,))


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    binary = S.tool("cosign")
    R.require_registry()
    root = tmp_path_factory.mktemp("sigcheck")
    ca = R.TestCA(root / "ca")
    (root / "home").mkdir()
    cosign = S.Cosign(binary, root / "home", ca.ca)
    key, pub = cosign.key_pair("ours")
    other_key, other_pub = cosign.key_pair("other")
    ours, other = signing.keys("ns", ["ours", "other"], {"ours": key_secret("ours", pub.read_bytes()),
                                                          "other": key_secret("other", other_pub.read_bytes())})
    reg = R.Registry(root, tls=ca)
    try:
        yield Reg(reg, ca.ca, cosign, key, ours, other_key, other)
    finally:
        reg.stop()


def test_real_cosigns_signature_is_accepted_and_names_the_repository_alone(world):
    image = world.push("signed")
    world.cosign.sign(world.key, image)
    assert world.check(image) == signatures.Verdict((world.ours.fingerprint,))
    (sig,) = registry.signatures_of(image, {}, 30.0, registry.context(str(world.ca)))
    # what cosign 2.x writes (sigstore/sigstore payload.go): the repository alone, the manifest digest
    assert signatures._claims(sig.payload) == (image.split("@")[1], world.repo)


def test_an_unsigned_image_is_refused(world):
    image = world.push("unsigned")
    assert registry.signatures_of(image, {}, 30.0, registry.context(str(world.ca))) is None
    assert world.check(image) == signatures.Verdict(why=f"it has no cosign signature ({signing.sig_tag(image)})")


def test_a_signature_by_another_key_is_refused(world):
    image = world.push("other-key")
    world.cosign.sign(world.other_key, image)
    assert world.check(image) == signatures.Verdict(
        why=f"none of its 1 signature(s) verifies with ours ({world.ours.fingerprint[:19]})")
    assert world.check(image, world.ours, world.other).keys == (world.other.fingerprint,)


def test_a_genuine_signature_copied_onto_another_digest_is_refused(world):
    """Someone who may push copies our signature attachment onto their image's tag: it verifies
    with our key, but it signs the other manifest."""
    genuine, forged = world.push("genuine"), world.push("forged")
    world.cosign.sign(world.key, genuine)
    accept = "application/vnd.oci.image.manifest.v1+json"
    tag = signing.sig_tag(genuine).rpartition(":")[2]
    with urllib.request.urlopen(urllib.request.Request(f"{world.reg.url}/v2/{REPO}/manifests/{tag}",
                                                       headers={"Accept": accept}), context=world.reg.context) as resp:
        body, media = resp.read(), resp.headers["Content-Type"]
    forged_tag = signing.sig_tag(forged).rpartition(":")[2]
    urllib.request.urlopen(urllib.request.Request(f"{world.reg.url}/v2/{REPO}/manifests/{forged_tag}", data=body,
                                                  method="PUT", headers={"Content-Type": media}),
                           context=world.reg.context).close()
    assert world.check(forged) == signatures.Verdict(
        why=f"its signature by ours signs another image ({genuine.split('@')[1]})")
    assert world.check(genuine).keys == (world.ours.fingerprint,)


def test_a_signature_naming_another_repository_is_refused(world):
    image = world.push("other-identity")
    world.cosign.sign(world.key, image, "--sign-container-identity", f"{world.reg.host}/someone/else")
    assert world.check(image) == signatures.Verdict(
        why=f"its signature by ours names '{world.reg.host}/someone/else', not {world.repo}")


def test_an_image_signed_with_both_keys_is_signed_by_each(world):
    """A rotation's step 1: cosign appends the second key's signature to the attachment."""
    image = world.push("both")
    world.cosign.sign(world.key, image)
    world.cosign.sign(world.other_key, image)
    assert len(registry.signatures_of(image, {}, 30.0, registry.context(str(world.ca)))) == 2
    assert world.check(image, world.ours, world.other).keys == (world.ours.fingerprint, world.other.fingerprint)
