"""The pure check of a reuse candidate's cosign signatures (reconcile/imagebuild/signatures.py) on
what real cosign does not write: the attachment manifest's other layers, too many signatures, a
signature that is not base64, a payload of another type, a key that is not ECDSA. The format is
sigstore/cosign pkg/oci/static/signature.go (`SignatureAnnotationKey`) and containers/image
signature/internal/sigstore_payload.go (`critical.type`, SHA-256); real cosign's signatures are
checked in tests/realtools/test_signature_check.py."""

from __future__ import annotations

import base64
import json

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from reconcile.imagebuild import signing
from reconcile.imagebuild.signing import signatures
from tests.support import factory as F
from tests.support.fakeregistry import cosign_signature, key_pair
from tests.unit.test_signing_plan import key_secret

DIGEST = "sha256:" + "9" * 64
IMAGE = f"{F.REPO}@{DIGEST}"


def key_of(pem: bytes, name: str = "k") -> signing.Key:
    (key,) = signing.keys(F.NS, [name], {name: key_secret(name, pem)})
    return key


def layer(media: str = signatures.MEDIA_TYPE, sig: str | None = "MEUC") -> dict:
    return {"mediaType": media, "digest": DIGEST, "size": 1,
            **({"annotations": {signatures.ANNOTATION: sig}} if sig is not None else {})}


def test_only_signature_layers_with_the_annotation_are_read():
    manifest = {"layers": [layer(), layer(media="application/vnd.in-toto+json"), layer(sig=None)]}
    assert signatures.layers(manifest) == [signatures.Layer(DIGEST, "MEUC")]
    with pytest.raises(signatures.Unreadable, match="no layers"):
        signatures.layers({})
    with pytest.raises(signatures.Unreadable, match="17 signatures"):
        signatures.layers({"layers": [layer()] * 17})


def test_a_valid_signature_counts_once_per_key_in_the_order_keys_are_named():
    key, pem = key_pair()
    other, other_pem = key_pair()
    found = [signatures.Signature(*cosign_signature(k, DIGEST, F.REPO)) for k in (other, key, key)]
    keys = (key_of(pem, "a"), key_of(other_pem, "b"))
    assert signatures.verify(found, IMAGE, F.REPO, keys).keys == tuple(k.fingerprint for k in keys)


def test_a_signature_that_is_not_base64_or_a_payload_of_another_type_is_refused():
    key, pem = key_pair()
    payload, sig = cosign_signature(key, DIGEST, F.REPO)
    assert signatures.verify([signatures.Signature(payload, "not base64!")], IMAGE, F.REPO, [key_of(pem)]).keys == ()
    doc = json.loads(payload)
    doc["critical"]["type"] = "atomic container signature"
    other = json.dumps(doc).encode()
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec
    signed = base64.b64encode(key.sign(other, ec.ECDSA(hashes.SHA256()))).decode()
    verdict = signatures.verify([signatures.Signature(other, signed)], IMAGE, F.REPO, [key_of(pem)])
    assert verdict == signatures.Verdict(why="its signature by k is not a cosign image signature payload")


def test_a_key_that_is_not_ecdsa_verifies_nothing():
    rsa_pem = rsa.generate_private_key(public_exponent=65537, key_size=2048).public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    key, _ = key_pair()
    found = [signatures.Signature(*cosign_signature(key, DIGEST, F.REPO))]
    assert signatures.verify(found, IMAGE, F.REPO, [key_of(rsa_pem)]).why.startswith("none of its 1 signature(s)")
