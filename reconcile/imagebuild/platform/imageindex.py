"""The OCI image index of a mixed pool: one manifest naming each architecture's image.

The nodes boot it through containers/image, whose `ChooseInstance` picks the entry of their own
platform (containers/image `internal/manifest/oci_index.go`, `internal/pkg/platform/
platform_matcher.go`: linux, the GOARCH, and any variant or none), so one `osImageURL` by the
index's digest serves every architecture of the pool (../shared/reference/multiarch.md).

The index is made here, not by a build: its bytes are a pure function of its instances (each one's
manifest media type, size and digest, and the platform its image config says), serialized the one
way below, so its digest is known before it is pushed, a rerun pushes the same bytes (a PUT of them
is idempotent), and a plan names the image it will record. Its entries are sorted by architecture.
Spec: opencontainers/image-spec `image-index.md` (mediaType, manifests[].mediaType/digest/size/
platform.architecture/os/variant).

Pure."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass

MEDIA_TYPE = "application/vnd.oci.image.index.v1+json"
#: the manifests an index may name: an OCI image manifest or Docker's schema 2 (what buildah pushes)
INSTANCE_TYPES = ("application/vnd.oci.image.manifest.v1+json",
                  "application/vnd.docker.distribution.manifest.v2+json")
_DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")


class Unfit(ValueError):
    """An instance that cannot go into the index; the message says which and why."""


@dataclass(frozen=True)
class Instance:
    """One architecture's image as the registry serves it: its manifest's media type, digest and
    size, and the platform its config says (`architecture`, `os`, `variant`)."""
    arch: str                    # the architecture it was built for (the nodes' kubernetes.io/arch)
    digest: str
    media_type: str
    size: int
    architecture: str            # what its image config says
    os: str = "linux"
    variant: str = ""

    def check(self) -> None:
        """Raises Unfit unless the image is one the index may name for `arch`."""
        if not _DIGEST.match(self.digest):
            raise Unfit(f"{self.arch}: {self.digest!r} is not sha256:<64 hex digits>")
        if self.media_type not in INSTANCE_TYPES:
            what = self.media_type or "manifest without a media type"
            raise Unfit(f"{self.arch}: {self.digest} is a {what}, not an image manifest")
        if type(self.size) is not int or self.size <= 0:
            raise Unfit(f"{self.arch}: {self.digest}: no size")
        if (self.os, self.architecture) != ("linux", self.arch):
            raise Unfit(f"{self.arch}: {self.digest}: its image config says {self.os}/{self.architecture}, "
                        f"not linux/{self.arch}: it would not boot the {self.arch} nodes")


@dataclass(frozen=True)
class Index:
    body: bytes
    digest: str

    @property
    def media_type(self) -> str:
        return MEDIA_TYPE


def compose(instances: Iterable[Instance]) -> Index:
    """The index naming `instances`, one per architecture. Raises Unfit."""
    items = sorted(instances, key=lambda i: i.arch)
    archs = [i.arch for i in items]
    if len(items) < 2 or len(set(archs)) != len(archs):
        raise Unfit("an index names one image per architecture, of two or more: got "
                    f"{', '.join(archs) or 'none'}")
    for item in items:
        item.check()
    doc = {"schemaVersion": 2, "mediaType": MEDIA_TYPE, "manifests": [
        {"mediaType": i.media_type, "digest": i.digest, "size": i.size,
         "platform": {"architecture": i.architecture, "os": i.os,
                      **({"variant": i.variant} if i.variant else {})}}
        for i in items]}
    body = json.dumps(doc, separators=(",", ":"), sort_keys=True).encode()
    return Index(body, "sha256:" + hashlib.sha256(body).hexdigest())
