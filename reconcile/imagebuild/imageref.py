"""Container image references, parsed by the grammar of distribution/reference (what registries accept)."""

from __future__ import annotations

import re
from dataclasses import dataclass

_ALNUM = r"[a-z0-9]+"
_SEP = r"(?:[._]|__|[-]+)"
_COMPONENT = rf"{_ALNUM}(?:{_SEP}{_ALNUM})*"
_DOMAIN_PART = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_DOMAIN = rf"(?:{_DOMAIN_PART}(?:\.{_DOMAIN_PART})*|\[[0-9a-fA-F:]+\])(?::[0-9]+)?"
_TAG = r"[\w][\w.-]{0,127}"
_DIGEST = r"[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}"
_REFERENCE = re.compile(
    rf"^(?P<repo>(?:(?P<domain>{_DOMAIN})/)?{_COMPONENT}(?:/{_COMPONENT})*)"
    rf"(?::(?P<tag>{_TAG}))?(?:@(?P<digest>{_DIGEST}))?$"
)
SHA256_DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")


class InvalidReference(ValueError):
    """The text is not an image reference a registry would accept."""


@dataclass(frozen=True)
class ImageRef:
    repo: str
    tag: str | None
    digest: str | None


def parse(text: str) -> ImageRef:
    if not isinstance(text, str) or not text:
        raise InvalidReference("empty image reference")
    if text != text.strip() or any(c.isspace() for c in text):
        raise InvalidReference(f"image reference {text!r} contains whitespace")
    m = _REFERENCE.match(text)
    if not m:
        raise InvalidReference(f"{text!r} is not a valid image reference")
    if len(m.group("repo")) > 255:
        raise InvalidReference(f"repository name of {text!r} is longer than 255 characters")
    return ImageRef(m.group("repo"), m.group("tag"), m.group("digest"))

