"""`registry.image_size`: the base image's compressed size, read from the manifest (or the index
entry for the node's architecture) that a fake registry serves content-addressed. A malformed
answer is a RegistryError (which cluster/observe.py `_with_base` turns into "sized by the
defaults"), never another exception: the registry is not ours to trust.

The shapes are those of the OCI image spec (opencontainers/image-spec): image-index.md says
`manifests` is a REQUIRED "array of objects", each with the descriptor properties, and `platform`
an OPTIONAL *object* (`architecture`, `os`: strings); descriptor.md says a descriptor has
`mediaType` (string), `digest` (string, `algorithm ":" encoded`; sha256 "will only use hex encoded
digests") and `size` (*int64*, the size in bytes), and manifest.md that `layers` are descriptors."""

from __future__ import annotations

import hashlib
import json

import pytest

from reconcile.cluster import registry
from tests.support.fakeregistry import INDEX, MANIFEST, FakeRegistry, auths, serve

LAYER = "application/vnd.oci.image.layer.v1.tar+gzip"


def put(doc: dict, media: str) -> str:
    """Serve `doc` under its own digest, as a registry stores a pushed manifest; that digest."""
    body = json.dumps(doc).encode()
    digest = "sha256:" + hashlib.sha256(body).hexdigest()
    FakeRegistry.stored[digest] = (body, media)
    FakeRegistry.manifests.add(digest)
    return digest


def manifest(*sizes) -> dict:
    return {"schemaVersion": 2, "mediaType": MANIFEST,
            "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": "sha256:" + "c" * 64,
                       "size": 2},
            "layers": [{"mediaType": LAYER, "digest": "sha256:" + f"{i:x}" * 64, "size": n}
                       for i, n in enumerate(sizes)]}


def index(*entries: dict) -> dict:
    return {"schemaVersion": 2, "mediaType": INDEX, "manifests": list(entries)}


def entry(digest: str, platform) -> dict:
    return {"mediaType": MANIFEST, "digest": digest, "size": 100, "platform": platform}


def size(host: str, digest: str, arch: str = "amd64") -> int:
    return registry.image_size(f"{host}/ocp/base@{digest}", auths(host), arch)


def test_the_size_is_the_sum_of_the_layers_of_the_entry_for_the_nodes_architecture():
    with serve(FakeRegistry, manifests=set()) as host:
        amd, arm = put(manifest(3_000_000, 1_500_000), MANIFEST), put(manifest(9_000_000), MANIFEST)
        listed = put(index(entry(arm, {"architecture": "arm64", "os": "linux"}),
                           entry(amd, {"architecture": "amd64", "os": "linux"})), INDEX)
        assert size(host, listed) == 4_500_000
        assert size(host, amd, "") == 4_500_000


@pytest.mark.parametrize("doc, malformed", [
    ({"schemaVersion": 2, "mediaType": INDEX, "manifests": 3}, "its manifests are not an array"),
    ({"schemaVersion": 2, "mediaType": INDEX, "manifests": {"digest": "sha256:" + "a" * 64}},
     "its manifests are not an array"),
    (index(entry("sha256:" + "a" * 64, "linux/amd64")), "an entry's platform is not an object"),
    (index(entry("sha256:" + "a" * 64, ["linux", "amd64"])), "an entry's platform is not an object"),
])
def test_a_malformed_manifest_list_is_a_registry_error_naming_the_image(doc, malformed):
    with serve(FakeRegistry, manifests=set()) as host:
        digest = put(doc, INDEX)
        with pytest.raises(registry.RegistryError) as err:
            size(host, digest)
    message = str(err.value)
    assert message.startswith(f"{host}/ocp/base@{digest}: ") and malformed in message and "\n" not in message


@pytest.mark.parametrize("bad", ["../../blobs/sha256:" + "a" * 64, "sha256:" + "A" * 64, "sha256:" + "a" * 63,
                                 "sha512:" + "a" * 128, "sha256:" + "a" * 64 + "?x=1", "sha256:" + "a" * 64 + "\n"])
def test_an_index_entrys_digest_is_checked_before_it_goes_into_a_url(bad):
    """As `labels()` checks a config digest: only `sha256:` and 64 lowercase hex digits is asked for."""
    with serve(FakeRegistry, manifests=set()) as host:
        digest = put(index(entry(bad, {"architecture": "amd64", "os": "linux"})), INDEX)
        with pytest.raises(registry.RegistryError) as err:
            size(host, digest)
        asked = list(FakeRegistry.gets)
    assert "digest is not sha256:" in str(err.value) and "\n" not in str(err.value)
    assert asked == [f"/v2/ocp/base/manifests/{digest}"]            # no second GET


@pytest.mark.parametrize("sizes", [(True,), (10, False), (-1,), (5, -5), (1.5,), ("10",), (None,)])
def test_a_layer_size_that_is_not_an_int64_byte_count_is_a_registry_error(sizes):
    """descriptor.md: `size` is an int64 count of bytes; JSON `true` is not 1 (a bool is an int in
    Python), and a count of bytes is never negative."""
    with serve(FakeRegistry, manifests=set()) as host:
        digest = put(manifest(*sizes), MANIFEST)
        with pytest.raises(registry.RegistryError, match="lists no layer sizes"):
            size(host, digest)
        listed = put(index(entry(digest, {"architecture": "amd64", "os": "linux"})), INDEX)
        with pytest.raises(registry.RegistryError, match="lists no layer sizes"):
            size(host, listed)


def test_the_clients_ready_is_annotated_with_what_it_returns():
    """`Client._ready` hands every call its (auths, timeout, SSL context): three values, as its
    annotation must say for a type checker to check the callers' unpacking."""
    import ssl
    import typing
    hint = typing.get_type_hints(registry.Client._ready)["return"]
    got = registry.Client(lambda: {})._ready("quay.io/x/y:latest")
    assert typing.get_origin(hint) is tuple and len(typing.get_args(hint)) == len(got) == 3
    assert isinstance(got[1], float) and isinstance(got[2], ssl.SSLContext)
