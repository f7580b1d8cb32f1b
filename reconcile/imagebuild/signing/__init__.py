"""Image signing, one concept in one place (docs/signing.md). With `imageSigningKeySecretName` set,
every image a pool records or rolls out is signed by cosign with each key first, and an image found
only in the registry is reused only if a current key signed it already. Its parts:

- here: the vocabulary: the settings keys, the key Secrets and their fingerprints, cosign's
  signature tag, which ClusterImagePolicy covers our repository (below);
- `signer`: the signing Pod (manifests/pod-sign.yaml.j2), rendered and read;
- `signatures`: the check of the cosign signatures an image already has (reuse and rollback);
- the gate, in the state machine's tier: core/signgate.py (SIGN before an image is recorded or
  rolled out; a reuse candidate `verified`);
- the shell's reads: cluster/registry.py (`signatures`: the signature attachment), and preflight's
  checks of a live cluster: preflight/signing.py (the ClusterImagePolicy and policy.json).

The vocabulary, pure: the shell hands over the Secrets and policies it read; a key's value is
looked at, never put in a message.

The key pair lives in a Secret of ours in the form `cosign generate-key-pair k8s://<ns>/<name>`
writes it (sigstore/cosign pkg/cosign/kubernetes/secret.go, `KeyPairSecret`: `cosign.key`, the
encrypted private key; `cosign.pub`, the PEM public key; `cosign.password`, the key's password).
The signer gets the private key by volume and the password by secretKeyRef (cosign reads
COSIGN_PASSWORD: cmd/cosign/cli/generate/generate_key_pair.go, `GetPass`), never as a value.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from reconcile.contract import objects

#: on-cluster-build-config keys: the Secret(s) holding the key pair (one name; two, comma-separated,
#: while a key is rotated: every image is signed with both) and the image the signer runs
KEY_SECRETS = "imageSigningKeySecretName"
SIGNER_IMAGE = "imageSignerImage"
MAX_KEYS = 2
#: sigstore's own release image of cosign v2.4.1 (built by ko: the binary is /ko-app/cosign and the
#: entrypoint, no shell), the version tests/realtools/test_signing.py proves, pinned by digest. On
#: a disconnected cluster mirror it (`oc image mirror` by digest, and an ImageDigestMirrorSet for
#: gcr.io/projectsigstore) or set imageSignerImage to a copy in your registry, by digest.
DEFAULT_SIGNER_IMAGE = ("gcr.io/projectsigstore/cosign:v2.4.1"
                        "@sha256:b03690aa52bfe94054187142fba24dc54137650682810633901767d8a3e15b31")
PRIVATE_KEY, PUBLIC_KEY, PASSWORD = "cosign.key", "cosign.pub", "cosign.password"
SECRET_KEYS = (PRIVATE_KEY, PUBLIC_KEY, PASSWORD)
DIGEST = re.compile(r"sha256:[0-9a-f]{64}")
_PEM = re.compile(rb"-----BEGIN PUBLIC KEY-----\s*([A-Za-z0-9+/=\s]+?)\s*-----END PUBLIC KEY-----")


class SigningError(ValueError):
    """One line naming the key Secret (or settings key) that is wrong."""


@dataclass(frozen=True)
class Key:
    """A key pair's Secret and its public key's fingerprint (`sha256:<hex>` of its DER bytes), with
    those DER bytes (imagebuild/signing/signatures.py verifies with them; a public key, never printed)."""
    secret: str
    fingerprint: str
    der: bytes = field(default=b"", repr=False, compare=False)


def secret_names(value: str) -> tuple[str, ...]:
    """The key Secrets named by `imageSigningKeySecretName` ("" = signing off). Raises SigningError."""
    names = tuple(n.strip() for n in value.split(",")) if value.strip() else ()
    if any(not objects.valid_name(n) for n in names):
        raise SigningError(f"key {KEY_SECRETS!r}: {value!r} is not one Secret name of this namespace, or two "
                      "separated by a comma (lowercase RFC 1123)")
    if len(names) > MAX_KEYS or len(set(names)) != len(names):
        raise SigningError(f"key {KEY_SECRETS!r}: {value!r} names {len(names)} Secrets; name one, or two "
                      "different ones while a key is rotated (docs/signing.md)")
    return names


def public_der(pem: bytes) -> bytes | None:
    """The DER bytes of a PEM `PUBLIC KEY` block (what cosign writes to cosign.pub); None if none."""
    found = _PEM.search(pem)
    if not found:
        return None
    try:
        return base64.b64decode(b"".join(found.group(1).split()), validate=True)
    except binascii.Error:
        return None


def _fingerprint(der: bytes) -> str:
    return f"sha256:{hashlib.sha256(der).hexdigest()}"


def fingerprint(pem: bytes) -> str | None:
    der = public_der(pem)
    return _fingerprint(der) if der else None


def keys(namespace: str, names: Iterable[str],
         secrets: Mapping[str, Mapping[str, Any] | None]) -> tuple[Key, ...]:
    """Each named key Secret's fingerprint, in the order named. Raises SigningError."""
    out = []
    for name in names:
        secret = secrets.get(name)
        where = f"Secret {namespace}/{name} (from on-cluster-build-config key {KEY_SECRETS!r})"
        if secret is None:
            raise SigningError(f"{where} not found")
        data = secret.get("data") or {}
        missing = [k for k in SECRET_KEYS if k not in data]
        if missing:
            raise SigningError(f"{where} has no key {', '.join(missing)} (want {', '.join(SECRET_KEYS)}, as "
                          "cosign generate-key-pair k8s://NAMESPACE/NAME writes them)")
        try:
            pem = base64.b64decode(data[PUBLIC_KEY] or "", validate=True)
        except (binascii.Error, ValueError, TypeError):
            pem = b""
        der = public_der(pem)
        if not der:
            raise SigningError(f"{where}: key {PUBLIC_KEY} holds no PEM PUBLIC KEY block")
        out.append(Key(name, _fingerprint(der), der))
    return tuple(out)


def fingerprints(found: Iterable[Key]) -> str:
    return ",".join(k.fingerprint for k in found)


def record(image: str, found: Iterable[Key]) -> str:
    """`ocl-reconciler.io/signed`: `<image>=<fingerprint>[,<fingerprint>]`, the keys whose
    signatures the signer put on the image."""
    return f"{image}={fingerprints(found)}"


def signed_with(value: str | None, image: str, found: Iterable[Key]) -> bool:
    """Does the pool's record say `image` was signed with every one of these keys?"""
    recorded, sep, prints = (value or "").rpartition("=")
    return bool(sep) and recorded == image and set(fingerprints(found).split(",")) <= set(prints.split(","))


def digest_of(image: str, repo: str) -> bool:
    """Is `image` `<repo>@sha256:<hex>`, the only form the signer signs?"""
    name, sep, digest = image.partition("@")
    return bool(sep) and name == repo and bool(DIGEST.fullmatch(digest))


def sig_tag(image: str) -> str | None:
    """cosign's signature attachment of `<repo>@sha256:<hex>`: `<repo>:sha256-<hex>.sig`
    (sigstore/cosign pkg/oci/remote/remote.go, `SignatureTag`: the digest's `:` made `-`, suffix
    `.sig`), which containers/image reads (`use-sigstore-attachments`)."""
    repo, sep, digest = image.partition("@")
    if not sep or not DIGEST.fullmatch(digest):
        return None
    return f"{repo}:{digest.replace(':', '-')}.sig"


def covers(scope: str, repo: str) -> bool:
    """Does a ClusterImagePolicy scope cover images of `repo`? containers/image's scopes
    (containers-policy.json(5); docker/policyconfiguration/naming.go, `DockerReferenceNamespaces`):
    the repository, each of its namespaces and its host (a path prefix at a `/`), and `*.<domain>`
    for the host's parent domains, its port stripped first; a scope with a tag or digest covers
    that image alone."""
    if scope.startswith("*."):
        host = repo.split("/", 1)[0].split(":", 1)[0]
        return host.endswith(scope[1:])
    return repo == scope or repo.startswith(scope.rstrip("/") + "/")


def covering(policies: Iterable[Mapping[str, Any]], repo: str) -> list[str]:
    """The names of the ClusterImagePolicies with a scope that covers our repository."""
    return sorted(objects.name(p) for p in policies
                  if any(isinstance(s, str) and covers(s, repo)
                         for s in (objects.spec(p).get("scopes") or [])))


def policy_key(policy: Mapping[str, Any]) -> bytes | None:
    """The public key (PEM bytes) of a `PublicKey` ClusterImagePolicy (openshift/api config/v1
    types_image_policy.go: `policy.rootOfTrust.publicKey.keyData`, base64); None otherwise."""
    root = ((objects.spec(policy).get("policy") or {}).get("rootOfTrust") or {})
    data = (root.get("publicKey") or {}).get("keyData") if isinstance(root, Mapping) else None
    try:
        return base64.b64decode(data, validate=True) if isinstance(data, str) and data else None
    except binascii.Error:
        return None
