"""Asking a registry whether it still has an image and which build labelled it (`GET` of its manifest
and of its config blob, before reusing it; `HEAD` for pruning's checks) and deleting images
(pruning), through the registry API (Docker Registry HTTP API v2), with the push secret's
credentials: basic auth, or the bearer-token dance when the registry asks for it. HTTPS is
verified against the system's CAs plus the service CA (or `--registry-ca`); a loopback registry
may answer in plain HTTP, as container tools treat 127.0.0.0/8 and localhost as insecure."""

from __future__ import annotations

import base64
import hashlib
import json
import re
import ssl
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from typing import Any

from reconcile.imagebuild import auth, imageref, signing
from reconcile.imagebuild.platform import imageindex
from reconcile.imagebuild.signing import signatures

ACCEPT = ", ".join(("application/vnd.oci.image.manifest.v1+json", "application/vnd.oci.image.index.v1+json",
                    "application/vnd.docker.distribution.manifest.v2+json",
                    "application/vnd.docker.distribution.manifest.list.v2+json"))


class RegistryError(Exception):
    """The registry refused or failed; the message says which image and why (never credentials)."""


def _schemes(host: str) -> tuple[str, ...]:
    """HTTPS, verified; a loopback registry may also speak plain HTTP (tried second), as container
    tools treat 127.0.0.0/8 and localhost as insecure registries. A certificate that does not
    verify is never a reason to fall back."""
    name = host.rsplit(":", 1)[0] if not host.startswith("[") else host
    loopback = name in ("localhost", "[::1]") or name.startswith("127.")
    return ("https", "http") if loopback else ("https",)


def context(ca_file: str | None = None) -> ssl.SSLContext:
    """The system's CAs, plus `ca_file` (the service CA that signs the internal registry's
    certificate, or a test's own CA)."""
    ctx = ssl.create_default_context()
    if ca_file:
        ctx.load_verify_locations(cafile=ca_file)
    return ctx


def _plain_http(err: BaseException) -> bool:
    """A TLS handshake answered in plain HTTP (not a certificate that failed to verify)."""
    reason = getattr(err, "reason", err)
    return isinstance(reason, ssl.SSLError) and not isinstance(reason, ssl.SSLCertVerificationError)




def _split(image: str) -> tuple[str, str, str]:
    ref = imageref.parse(image)
    if not ref.digest:
        raise RegistryError(f"{image}: not a digested image reference")
    return (*auth.host_and_path(ref.repo), ref.digest)


def _token(challenge: str, basic: str | None, timeout: float, ctx: ssl.SSLContext) -> str | None:
    params = dict(re.findall(r'(\w+)="([^"]*)"', challenge))
    if "realm" not in params:
        return None
    query = urllib.parse.urlencode({k: v for k, v in params.items() if k in ("service", "scope")})
    request = urllib.request.Request(f"{params['realm']}?{query}")
    if basic:
        request.add_header("Authorization", f"Basic {basic}")
    with urllib.request.urlopen(request, timeout=timeout, context=ctx) as resp:
        body = json.loads(resp.read() or b"{}")
    return body.get("token") or body.get("access_token")


def _send(method: str, image: str, auths: Mapping[str, Any], timeout: float,
          ctx: ssl.SSLContext | None = None) -> int:
    """The status of an authorised request for a digested image's manifest: 2xx, 404 or 405;
    anything else raises RegistryError."""
    host, path, digest = _split(image)
    return _call(method, host, f"/v2/{path}/manifests/{digest}", image, auths, timeout, ctx,
                 f"{host}/{path}")[0]


#: at most this much of a manifest or an image config is read (ours are a few KiB)
MAX_BODY = 4 << 20


def _call(method: str, host: str, path: str, what: str, auths: Mapping[str, Any], timeout: float,
          ctx: ssl.SSLContext | None, repo: str | None = None,
          data: tuple[bytes, str] | None = None) -> tuple[int, str, bytes]:
    """(status, URL, body: read for a GET only) of an authorised request; `what` names it in
    errors; `data`: the request's body and its media type (a PUT). The credentials are those a build
    uses for `repo` (default: the registry's own), found as containers/image finds them."""
    key = auth.key_for(auths, repo or host)
    entry = (auths[key] if key is not None else None) or {}
    basic = entry.get("auth")
    if not basic and entry.get("username"):
        basic = base64.b64encode(f"{entry['username']}:{entry.get('password', '')}".encode()).decode()
    ctx = ctx or context()
    schemes = list(_schemes(host))
    headers = {"Accept": ACCEPT, **({"Authorization": f"Basic {basic}"} if basic else {}),
               **({"Content-Type": data[1]} if data else {})}
    for _ in range(2 + len(schemes)):
        url = f"{schemes[0]}://{host}{path}"
        request = urllib.request.Request(url, method=method, headers=headers, data=data[0] if data else None)
        try:
            with urllib.request.urlopen(request, timeout=timeout, context=ctx) as resp:
                return resp.status, url, resp.read(MAX_BODY + 1) if method == "GET" else b""
        except urllib.error.HTTPError as err:
            if err.code in (404, 405):
                return err.code, url, b""
            challenge = err.headers.get("WWW-Authenticate", "")
            if err.code == 401 and challenge.lower().startswith("bearer") and "Bearer" not in headers.get(
                    "Authorization", ""):
                try:
                    token = _token(challenge, basic, timeout, ctx)
                except (urllib.error.URLError, OSError, ValueError) as token_err:
                    raise RegistryError(f"{what}: the registry's token service refused: "
                                        f"{getattr(token_err, 'code', '') or token_err}") from None
                if token:
                    headers["Authorization"] = f"Bearer {token}"
                    continue
            raise RegistryError(f"{what}: the registry answered {err.code} {err.reason}") from None
        except (urllib.error.URLError, OSError) as err:
            if len(schemes) > 1 and _plain_http(err):
                schemes.pop(0)                  # a loopback registry without TLS
                continue
            raise RegistryError(f"{what}: {getattr(err, 'reason', err)}") from None
    raise RegistryError(f"{what}: not authorised by the registry")


def delete(image: str, auths: Mapping[str, Any], timeout: float = 30.0,
           ctx: ssl.SSLContext | None = None) -> str:
    """Delete a digested image's manifest. Returns "deleted", "not found" or "deletion disabled"
    (neither of the last two is an error); raises RegistryError otherwise."""
    status = _send("DELETE", image, auths, timeout, ctx)
    return {404: "not found", 405: "deletion disabled"}.get(status, "deleted")


def _signature_tag(image: str, auths: Mapping[str, Any], timeout: float,
                   ctx: ssl.SSLContext | None) -> tuple[str, str, int, bytes]:
    """A GET of cosign's signature tag of a digested image (imagebuild/signing/ `sig_tag`):
    (the tag, its repository, the status, the manifest's bytes)."""
    tag = signing.sig_tag(image)
    if tag is None:
        raise RegistryError(f"{image}: not a sha256-digested image reference")
    repo, _, name = tag.rpartition(":")
    host, path = auth.host_and_path(repo)
    status, _, body = _call("GET", host, f"/v2/{path}/manifests/{name}", tag, auths, timeout, ctx,
                            f"{host}/{path}")
    return tag, repo, status, body


def delete_signature(image: str, auths: Mapping[str, Any], timeout: float = 30.0,
                     ctx: ssl.SSLContext | None = None) -> str:
    """Delete cosign's signature attachment of a digested image (`<repo>:sha256-<hex>.sig`,
    imagebuild/signing/): its manifest, by the digest of the bytes the tag serves, since a registry
    deletes a manifest by digest only (distribution's API: `DELETE /v2/<name>/manifests/<digest>`;
    docker-registry answers a tag with 400 DIGEST_INVALID). Returns "deleted", "no signature" or
    "deletion disabled"; raises RegistryError otherwise."""
    tag, repo, status, body = _signature_tag(image, auths, timeout, ctx)
    if status == 404:
        return "no signature"
    if status >= 300 or len(body) > MAX_BODY:
        raise RegistryError(f"{tag}: the registry answered {status}" if status >= 300
                            else f"{tag}: its manifest is too large")
    return delete(f"{repo}@sha256:{hashlib.sha256(body).hexdigest()}", auths, timeout, ctx)


def ping(repo: str, auths: Mapping[str, Any], timeout: float = 30.0,
         ctx: ssl.SSLContext | None = None) -> str:
    """`GET /v2/` of the repository's registry with the credentials a build uses for `repo`: the
    API version check every client makes first, and the registry's answer to them. Returns the URL
    that answered 2xx; raises RegistryError."""
    host, path = auth.host_and_path(repo)
    status, url, _ = _call("GET", host, "/v2/", host, auths, timeout, ctx, f"{host}/{path}")
    if status >= 300:
        raise RegistryError(f"{host}: {url} answered {status}: not a registry API")
    return url


def exists(image: str, auths: Mapping[str, Any], timeout: float = 30.0,
           ctx: ssl.SSLContext | None = None) -> bool:
    """Does the registry still have a digested image's manifest (`HEAD`)? False only for a 404;
    raises RegistryError when it cannot say."""
    status = _send("HEAD", image, auths, timeout, ctx)
    if status == 405:
        raise RegistryError(f"{image}: the registry answered 405 to HEAD")
    return status != 404


def _served(body: bytes, image: str, kind: str, digest: str | None) -> dict[str, Any]:
    """The JSON object the registry served for `image` under `digest` (its manifest, or the config
    blob the manifest names). Content that does not hash to its digest is not trusted (a broken disk, a
    poisoned mirror, a registry that lies): the nodes pull by digest and would get other content,
    so its labels say nothing of the image. containers/image checks the same on every pull
    (`internal/image/unparsed.go` Manifest, `internal/image/docker_schema2.go` ConfigBlob).
    `digest` None: served under a tag, with nothing to check it against."""
    if len(body) > MAX_BODY:
        raise RegistryError(f"{image}: its {kind} is larger than {MAX_BODY} bytes")
    algorithm, _, encoded = (digest or "").partition(":")
    if digest is not None and (algorithm != "sha256" or hashlib.sha256(body).hexdigest() != encoded):
        raise RegistryError(f"{image}: the registry served a {kind} whose digest is not {digest}")
    try:
        doc = json.loads(body)
    except ValueError:
        raise RegistryError(f"{image}: its {kind} is not JSON") from None
    if not isinstance(doc, dict):
        raise RegistryError(f"{image}: its {kind} is not a JSON object")
    return doc


def _image(image: str, auths: Mapping[str, Any], timeout: float,
           ctx: ssl.SSLContext | None) -> tuple[dict[str, Any], int, dict[str, Any]] | None:
    """A digested image's manifest, its size in bytes, and its config (`{}` for a manifest list,
    or a manifest without a config): a GET of each, each checked against its digest. None when
    the registry does not have the manifest (404)."""
    host, path, digest = _split(image)
    status, _, body = _call("GET", host, f"/v2/{path}/manifests/{digest}", image, auths, timeout, ctx,
                            f"{host}/{path}")
    if status == 404:
        return None
    if status >= 300:
        raise RegistryError(f"{image}: the registry answered {status} to GET of the manifest")
    manifest = _served(body, image, "manifest", digest)
    return manifest, len(body), _config(image, host, path, manifest, auths, timeout, ctx, missing={})


def _config(image: str, host: str, path: str, manifest: Mapping[str, Any], auths: Mapping[str, Any],
            timeout: float, ctx: ssl.SSLContext | None,
            missing: dict[str, Any] | None = None) -> dict[str, Any]:
    """The image config a manifest names, checked against its digest; `missing` when it names none
    (a manifest list), else RegistryError."""
    config = manifest.get("config")
    blob = config.get("digest") if isinstance(config, dict) else None
    if not isinstance(blob, str) or not re.fullmatch(r"sha256:[0-9a-f]{64}", blob):
        if missing is None:
            raise RegistryError(f"{image}: its manifest names no image config")
        return missing
    status, _, raw = _call("GET", host, f"/v2/{path}/blobs/{blob}", image, auths, timeout, ctx,
                           f"{host}/{path}")
    if status >= 300:
        raise RegistryError(f"{image}: the registry answered {status} to GET of its config {blob}")
    return _served(raw, image, "config blob", blob)


def _labels_of(config: Mapping[str, Any]) -> dict[str, str]:
    inner = config.get("config")
    found = (inner.get("Labels") if isinstance(inner, dict) else None) or {}
    return {str(k): str(v) for k, v in found.items()} if isinstance(found, dict) else {}


def labels(image: str, auths: Mapping[str, Any], timeout: float = 30.0,
           ctx: ssl.SSLContext | None = None) -> dict[str, str] | None:
    """The labels of a digested image's config (`config.Labels`): a GET of its manifest, then of
    the config blob it names. None when the registry does not have the manifest (404); {} for an
    image without labels, or a manifest list (our builds push one image, never a list); raises
    RegistryError when it cannot say, or when the manifest or config served does not hash to its
    digest."""
    found = _image(image, auths, timeout, ctx)
    return None if found is None else _labels_of(found[2])


def instance(image: str, arch: str, auths: Mapping[str, Any], timeout: float = 30.0,
             ctx: ssl.SSLContext | None = None) -> tuple[imageindex.Instance, dict[str, str]]:
    """One architecture's image as an image index names it (its manifest's media type and size,
    the platform its config says) and its labels. Raises RegistryError, also when it is gone."""
    found = _image(image, auths, timeout, ctx)
    if found is None:
        raise RegistryError(f"{image}: the registry does not have it")
    manifest, size, config = found
    media = manifest.get("mediaType")
    if media is None and manifest.get("schemaVersion") == 2 and "config" in manifest:
        media = imageindex.INSTANCE_TYPES[0]        # an OCI manifest may leave its media type out
    return imageindex.Instance(
        arch=arch, digest=_split(image)[2], media_type=str(media or ""), size=size,
        architecture=str(config.get("architecture") or ""), os=str(config.get("os") or ""),
        variant=str(config.get("variant") or "")), _labels_of(config)


def put_index(tag: str, index: imageindex.Index, auths: Mapping[str, Any], timeout: float = 30.0,
              ctx: ssl.SSLContext | None = None) -> str:
    """PUT an image index under `tag` (`<repo>:<tag>`; distribution's API: `PUT
    /v2/<name>/manifests/<reference>`, the registry answers 201 with the digest it computed).
    Returns that digest; raises RegistryError when it is refused or is not the index's."""
    repo, _, name = tag.rpartition(":")
    host, path = auth.host_and_path(repo)
    status, url, _ = _call("PUT", host, f"/v2/{path}/manifests/{name}", tag, auths, timeout, ctx,
                           f"{host}/{path}", data=(index.body, index.media_type))
    if status >= 300:
        raise RegistryError(f"{tag}: the registry answered {status} to PUT of the image index")
    status, _, body = _call("GET", host, f"/v2/{path}/manifests/{index.digest}", tag, auths, timeout, ctx,
                            f"{host}/{path}")
    if status >= 300 or body != index.body:
        raise RegistryError(f"{repo}@{index.digest}: the registry does not serve the index pushed")
    return index.digest


def signatures_of(image: str, auths: Mapping[str, Any], timeout: float = 30.0,
                  ctx: ssl.SSLContext | None = None) -> list[signatures.Signature] | None:
    """cosign's signatures of a digested image as the registry holds them, fetched as
    containers/image fetches them (docker/docker_image_src.go, `appendSignaturesFromSigstoreAttachments`):
    a GET of the `sha256-<hex>.sig` tag's manifest, then of each signature layer's blob, whose
    content must hash to its digest. None when there is no such tag (404); raises RegistryError when
    the registry cannot say or serves what cosign does not write. imagebuild/signing/signatures.py decides."""
    tag, repo, status, body = _signature_tag(image, auths, timeout, ctx)
    if status == 404:
        return None
    host, path = auth.host_and_path(repo)
    if status >= 300:
        raise RegistryError(f"{tag}: the registry answered {status} to GET of the signature manifest")
    try:
        found = signatures.layers(_served(body, tag, "signature manifest", None))
    except signatures.Unreadable as err:
        raise RegistryError(f"{tag}: {err}") from None
    out = []
    for layer in found:
        status, _, blob = _call("GET", host, f"/v2/{path}/blobs/{layer.digest}", tag, auths, timeout, ctx,
                                f"{host}/{path}")
        if status >= 300:
            raise RegistryError(f"{tag}: the registry answered {status} to GET of its blob {layer.digest}")
        if len(blob) > MAX_BODY or f"sha256:{hashlib.sha256(blob).hexdigest()}" != layer.digest:
            raise RegistryError(f"{tag}: the registry served a blob whose digest is not {layer.digest}")
        out.append(signatures.Signature(blob, layer.signature))
    return out


_INDEXES = ("application/vnd.oci.image.index.v1+json",
            "application/vnd.docker.distribution.manifest.list.v2+json")


def _where(image: str) -> tuple[str, str, str, str]:
    """(repository, registry host, path, digest or tag) of an image reference. Raises RegistryError."""
    try:
        ref = imageref.parse(image)
    except imageref.InvalidReference as err:
        raise RegistryError(str(err)) from None
    return (ref.repo, *auth.host_and_path(ref.repo), ref.digest or ref.tag or "latest")


def _fetch(image: str, host: str, path: str, wanted: str, auths: Mapping[str, Any], timeout: float,
           ctx: ssl.SSLContext | None) -> dict[str, Any]:
    """The manifest `wanted` (a digest, checked, or a tag) of `image`'s repository. Raises RegistryError."""
    status, _, body = _call("GET", host, f"/v2/{path}/manifests/{wanted}", image, auths, timeout, ctx,
                            f"{host}/{path}")
    if status >= 300:
        raise RegistryError(f"{image}: the registry answered {status} to GET of the manifest {wanted}")
    return _served(body, image, f"manifest {wanted}", wanted if wanted.startswith("sha256:") else None)


def _manifest_for(image: str, arch: str, auths: Mapping[str, Any], timeout: float,
                  ctx: ssl.SSLContext | None) -> tuple[str, str, dict[str, Any]]:
    """(repository, digest or tag, manifest) of an image's manifest for `arch` (a GOARCH name, on
    linux): the image's own, or of a manifest list or index the entry for `arch` ("" takes the only
    entry), a second GET. Raises RegistryError."""
    repo, host, path, wanted = _where(image)
    for _ in range(2):
        doc = _fetch(image, host, path, wanted, auths, timeout, ctx)
        if doc.get("mediaType") not in _INDEXES and "manifests" not in doc:
            return repo, wanted, doc
        listed = doc.get("manifests")
        if not isinstance(listed, list):
            raise RegistryError(f"{image}: its manifest list {wanted}: its manifests are not an array")
        if any(isinstance(m, dict) and m.get("platform") is not None and not isinstance(m["platform"], dict)
               for m in listed):
            raise RegistryError(f"{image}: its manifest list {wanted}: an entry's platform is not an object")
        entries = [m for m in listed if isinstance(m, dict)
                   and (m.get("platform") or {}).get("os", "linux") == "linux"
                   and (not arch or (m.get("platform") or {}).get("architecture") == arch)]
        if len(entries) != 1:
            raise RegistryError(f"{image}: its manifest list has {len(entries)} entries for "
                                f"linux/{arch or 'any'}")
        digest = entries[0].get("digest")
        if not isinstance(digest, str) or not re.fullmatch(r"sha256:[0-9a-f]{64}", digest):
            raise RegistryError(f"{image}: its manifest list {wanted}: the entry for linux/{arch or 'any'}: "
                                "its digest is not sha256:<64 hex digits>")
        wanted = digest
    raise RegistryError(f"{image}: a manifest list inside a manifest list")


def image_size(image: str, auths: Mapping[str, Any], arch: str = "", timeout: float = 30.0,
               ctx: ssl.SSLContext | None = None) -> int:
    """An image's compressed size: the sum of its manifest's layer sizes (a GET of the manifest; of
    a manifest list or index, a second GET of the entry for `arch`, a GOARCH name as the nodes'
    kubernetes.io/arch label has it, on linux; "" takes the only entry). By tag or digest. Raises
    RegistryError."""
    _, wanted, doc = _manifest_for(image, arch, auths, timeout, ctx)
    layers = doc.get("layers")
    sizes = [layer.get("size") for layer in layers if isinstance(layer, dict)] \
        if isinstance(layers, list) else []
    if not sizes or not all(type(n) is int and n >= 0 for n in sizes):   # JSON true is no size
        raise RegistryError(f"{image}: the manifest {wanted} lists no layer sizes")
    return sum(sizes)


def resolve(image: str, arch: str, auths: Mapping[str, Any], timeout: float = 30.0,
            ctx: ssl.SSLContext | None = None) -> str:
    """`<repository>@<digest>` of an image's instance for `arch`: a list's entry, or the image
    itself by digest. Raises RegistryError (also for an image by tag that is no list: its digest
    is not checked here)."""
    repo, wanted, _ = _manifest_for(image, arch, auths, timeout, ctx)
    if not wanted.startswith("sha256:"):
        raise RegistryError(f"{image}: named by tag, and no manifest list")
    return f"{repo}@{wanted}"


def platforms(image: str, auths: Mapping[str, Any], timeout: float = 30.0,
              ctx: ssl.SSLContext | None = None) -> tuple[str, ...]:
    """The architectures (GOARCH names, linux only) an image offers: its manifest list's or index's
    entries, or the one its config says. By tag or digest. Raises RegistryError."""
    _, host, path, wanted = _where(image)
    doc = _fetch(image, host, path, wanted, auths, timeout, ctx)
    listed = doc.get("manifests")
    if isinstance(listed, list):
        return tuple(sorted({str(m["platform"].get("architecture")) for m in listed if isinstance(m, dict)
                             and isinstance(m.get("platform"), dict) and m["platform"].get("os") == "linux"}))
    arch = _config(image, host, path, doc, auths, timeout, ctx).get("architecture")
    return (str(arch),) if arch else ()


class Client:
    """What a run talks to the registry with: credentials read once, when first needed, and
    every request bounded by the run's deadline (monotonic clock)."""

    def __init__(self, auths: Callable[[], Mapping[str, Any]], deadline: float | None = None,
                 clock: Callable[[], float] = time.monotonic, ca_file: str | None = None):
        self._auths, self._cached, self.deadline, self.clock = auths, None, deadline, clock
        self.ca_file, self._ctx = ca_file, None

    def _ready(self, image: str) -> tuple[Mapping[str, Any], float, ssl.SSLContext]:
        timeout = 30.0
        if self.deadline is not None:
            timeout = min(timeout, self.deadline - self.clock())
            if timeout <= 0:
                raise RegistryError(f"{image}: not attempted: the run's deadline has passed")
        if self._cached is None:
            try:
                self._cached = dict(self._auths())
            except ValueError as err:            # auth.AuthError: a bad or missing push secret
                raise RegistryError(f"no registry credentials: {err}") from None
        if self._ctx is None:
            try:
                self._ctx = context(self.ca_file)
            except (OSError, ssl.SSLError) as err:
                raise RegistryError(f"cannot load the registry CA {self.ca_file}: {err}") from None
        return self._cached, timeout, self._ctx

    def delete(self, image: str) -> str:
        return delete(image, *self._ready(image))

    def delete_signature(self, image: str) -> str:
        return delete_signature(image, *self._ready(image))

    def exists(self, image: str) -> bool:
        return exists(image, *self._ready(image))

    def labels(self, image: str) -> dict[str, str] | None:
        return labels(image, *self._ready(image))

    def instance(self, image: str, arch: str) -> tuple[imageindex.Instance, dict[str, str]]:
        auths, timeout, ctx = self._ready(image)
        return instance(image, arch, auths, timeout, ctx)

    def put_index(self, tag: str, index: imageindex.Index) -> str:
        return put_index(tag, index, *self._ready(tag))

    def signatures(self, image: str) -> list[signatures.Signature] | None:
        return signatures_of(image, *self._ready(image))

    def platforms(self, image: str) -> tuple[str, ...]:
        return platforms(image, *self._ready(image))

    def ping(self, repo: str) -> str:
        return ping(repo, *self._ready(repo))

    def resolve(self, image: str, arch: str) -> str:
        auths, timeout, ctx = self._ready(image)
        return resolve(image, arch, auths, timeout, ctx)

    def image_size(self, image: str, arch: str = "") -> int:
        auths, timeout, ctx = self._ready(image)
        return image_size(image, auths, arch, timeout, ctx)
