"""Checking the cosign signatures an image already has (docs/signing.md, "Reuse and rollback"): an
image found in the registry (the one a rollback would reuse) is taken only if a current key signed
that very image for our repository, as a node's containers/image checks it; it is never signed by
us on the strength of its build-id label, which anyone who may push can write. Pure: the shell
(cluster/registry.py `signatures`) hands over what the registry holds; the ECDSA check is the
`cryptography` package's, not ours.

What cosign 2.x writes and containers/image v5.42.1 reads:
- the attachment: an OCI manifest tagged `sha256-<hex>.sig` (signing.sig_tag), one layer a
  signature, of media type `application/vnd.dev.cosign.simplesigning.v1+json`, whose annotation
  `dev.cosignproject.cosign/signature` holds the base64 signature (sigstore/cosign
  pkg/oci/static/signature.go `SignatureAnnotationKey`; containers/image
  internal/signature/sigstore.go, docker/docker_image_src.go `appendSignaturesFromSigstoreAttachments`,
  which fetches each layer's blob and checks it against its digest);
- the signature: over the layer's blob as is, SHA-256 (containers/image
  signature/internal/sigstore_payload.go `verifySigstorePayloadBlobSignature`,
  `sigstoreHarcodedHashAlgorithm`), ECDSA for a key of `cosign generate-key-pair`;
- the blob, the simple-signing payload: `critical.type` "cosign container image signature",
  `critical.image.docker-manifest-digest` the signed manifest's digest,
  `critical.identity.docker-reference` the repository (sigstore/sigstore
  pkg/signature/payload/payload.go `SimpleContainerImage`; containers/image `strictUnmarshalJSON`).
  We accept the digest only if it is the image's, and the reference only if it is our repository
  (what our signer writes: cosign's default, no `--sign-container-identity`).
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec

from reconcile.imagebuild import signing

MEDIA_TYPE = "application/vnd.dev.cosign.simplesigning.v1+json"
ANNOTATION = "dev.cosignproject.cosign/signature"
PAYLOAD_TYPE = "cosign container image signature"
#: an attachment with more signature layers than this is not read (cosign appends one per key and
#: skips a key whose signature is there: ours hold one or two)
MAX_SIGNATURES = 16


class Unreadable(ValueError):
    """The attachment's manifest is not one cosign writes; the message says why."""


@dataclass(frozen=True)
class Layer:
    """A signature layer of the attachment: its blob's digest and the annotation's base64 signature."""
    digest: str
    signature: str


@dataclass(frozen=True)
class Signature:
    """One signature as the registry holds it: the payload (the layer's blob, checked against its
    digest by the shell) and the base64 signature over it."""
    payload: bytes
    signature: str


@dataclass(frozen=True)
class Verdict:
    """The current keys (fingerprints) with a valid signature on the image; `why` none has."""
    keys: tuple[str, ...] = ()
    why: str = ""


def layers(manifest: Mapping[str, Any]) -> list[Layer]:
    """The signature layers of an attachment manifest (other media types are skipped, as
    containers/image skips them). Raises Unreadable."""
    found = manifest.get("layers")
    if not isinstance(found, list):
        raise Unreadable("its signature manifest has no layers")
    out = []
    for layer in found:
        if not isinstance(layer, dict) or layer.get("mediaType") != MEDIA_TYPE:
            continue
        digest, note = layer.get("digest"), (layer.get("annotations") or {})
        sig = note.get(ANNOTATION) if isinstance(note, dict) else None
        if isinstance(digest, str) and signing.DIGEST.fullmatch(digest) and isinstance(sig, str):
            out.append(Layer(digest, sig))
    if len(out) > MAX_SIGNATURES:
        raise Unreadable(f"its signature manifest has {len(out)} signatures (at most {MAX_SIGNATURES} "
                         "are read)")
    return out


def _valid(key: signing.Key, sig: Signature) -> bool:
    """Does `key` verify `sig` over its payload (ECDSA, SHA-256)? A key of another type verifies nothing."""
    try:
        public = serialization.load_der_public_key(key.der)
        raw = base64.b64decode(sig.signature, validate=True)
    except (ValueError, TypeError, binascii.Error):
        return False
    if not isinstance(public, ec.EllipticCurvePublicKey):
        return False
    try:
        public.verify(raw, sig.payload, ec.ECDSA(hashes.SHA256()))
    except InvalidSignature:
        return False
    return True


def _claims(payload: bytes) -> tuple[str, str] | None:
    """(docker-manifest-digest, docker-reference) of a simple-signing payload; None if it is not one."""
    try:
        doc = json.loads(payload)
        critical = doc["critical"]
        if critical["type"] != PAYLOAD_TYPE:
            return None
        digest, ref = critical["image"]["docker-manifest-digest"], critical["identity"]["docker-reference"]
    except (ValueError, KeyError, TypeError):
        return None
    return (digest, ref) if isinstance(digest, str) and isinstance(ref, str) else None


def verify(found: Sequence[Signature] | None, image: str, repo: str, keys: Iterable[signing.Key]) -> Verdict:
    """Which current keys signed `image` (`<repo>@sha256:<hex>`) for `repo`; `found` is what the
    registry holds under its signature tag (None: no tag). A signature counts only if a key verifies
    it and its payload names this digest and this repository."""
    keys = tuple(keys)
    names = ", ".join(f"{k.secret} ({k.fingerprint[:19]})" for k in keys)
    if not found:
        return Verdict(why=f"it has no cosign signature ({signing.sig_tag(image)})")
    digest = image.partition("@")[2]
    good: list[str] = []
    why = f"none of its {len(found)} signature(s) verifies with {names}"
    for sig in found:
        by = [k for k in keys if _valid(k, sig)]
        if not by:
            continue
        claims = _claims(sig.payload)
        if claims is None:
            why = f"its signature by {by[0].secret} is not a cosign image signature payload"
        elif claims[0] != digest:
            why = f"its signature by {by[0].secret} signs another image ({claims[0][:80]})"
        elif claims[1] != repo:
            why = f"its signature by {by[0].secret} names {claims[1][:200]!r}, not {repo}"
        else:
            good += [k.fingerprint for k in by if k.fingerprint not in good]
    if good:
        return Verdict(tuple(k.fingerprint for k in keys if k.fingerprint in good))
    return Verdict(why=why)
