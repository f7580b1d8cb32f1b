"""A fake registry speaking the parts of the Docker Registry HTTP API v2 that pruning and reuse use:
`DELETE`, `HEAD` and `GET /v2/<name>/manifests/<digest>`, `GET /v2/<name>/blobs/<config digest>`
and `GET /v2/`, behind basic auth (FakeRegistry) or the bearer-token dance (BearerRegistry). An
image `push`ed to it is served content-addressed, as the real one serves it (its manifest hashes to
its digest, its config to the digest the manifest names); a digest only listed in `manifests` (for
HEAD and DELETE) is served a made-up manifest that does not hash to it, as a registry that lies
would. The real `docker-registry` is used by the realbuild and realapi suites; this one adds what
it cannot be made to do (405, a token service)."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

DIGESTS = ["sha256:" + c * 64 for c in "1234"]
USER = "pusher:s3cret"
MANIFEST = "application/vnd.oci.image.manifest.v1+json"
INDEX = "application/vnd.oci.image.index.v1+json"


def auths(host: str, user: str = USER) -> dict:
    return {host: {"auth": base64.b64encode(user.encode()).decode()}}


class FakeRegistry(BaseHTTPRequestHandler):
    """401 without the right basic auth; DELETE: 405 when deletion is disabled, 404 for unknown
    digests, else 202; HEAD: 200 for known digests, else 404. Requests are recorded."""
    manifests: set = set()
    deletion = True
    user = USER
    deleted: list = []
    heads: list = []
    gets: list = []
    #: digest -> (body, media type) of what `push` stored: manifests and config blobs
    stored: dict = {}
    #: tag -> digest: cosign's signature tags (`sign`)
    tags: dict = {}

    def log_message(self, *a):
        pass

    def _authorised(self) -> bool:
        if self.headers.get("Authorization") == "Basic " + base64.b64encode(self.user.encode()).decode():
            return True
        self.send_response(401)
        self.send_header("WWW-Authenticate", 'Basic realm="registry"')
        return False

    def _end(self) -> None:
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_DELETE(self):
        if self._authorised():
            digest = self.path.rsplit("/", 1)[1]
            if not type(self).deletion:
                self.send_response(405)
            elif digest in type(self).manifests:
                type(self).manifests.discard(digest)
                type(self).deleted.append(self.path)
                self.send_response(202)
            else:
                self.send_response(404)
        self._end()

    @staticmethod
    def config(labels: dict | None) -> bytes:
        return json.dumps({"architecture": "amd64", "os": "linux", "rootfs": {"type": "layers", "diff_ids": []},
                           "config": {"Labels": labels} if labels else {}}).encode()

    @staticmethod
    def manifest(config: bytes) -> bytes:
        return json.dumps({"schemaVersion": 2, "config": {
            "mediaType": "application/vnd.oci.image.config.v1+json",
            "digest": "sha256:" + hashlib.sha256(config).hexdigest(), "size": len(config)},
            "layers": []}).encode()

    @classmethod
    def push(cls, labels: dict | None = None, as_list: bool = False) -> str:
        """Store an image whose config has these labels (or, `as_list`, a manifest list); its digest."""
        if as_list:
            body, media = json.dumps({"schemaVersion": 2, "manifests": []}).encode(), INDEX
        else:
            config = cls.config(labels)
            cls.stored["sha256:" + hashlib.sha256(config).hexdigest()] = (config, "application/octet-stream")
            body, media = cls.manifest(config), MANIFEST
        digest = "sha256:" + hashlib.sha256(body).hexdigest()
        cls.stored[digest] = (body, media)
        cls.manifests.add(digest)
        return digest

    @classmethod
    def sign(cls, digest: str, *signed: tuple[bytes, str]) -> str:
        """Attach signatures as cosign 2.x does: a manifest tagged `sha256-<hex>.sig` (sigstore/cosign
        pkg/oci/remote/remote.go, SignatureTag) with a layer per signature, its payload the layer's
        blob, the signature its annotation. `signed`: (payload, base64 signature) pairs, each
        stored as a blob (`cosign_signature` makes them); none: one layer with a made-up signature
        (for pruning, which reads only the tag). The attachment's digest."""
        layers = []
        for payload, sig in signed or ((b"", "MEUCIQ=="),):
            blob = "sha256:" + hashlib.sha256(payload).hexdigest() if payload else digest
            if payload:
                cls.stored[blob] = (payload, "application/vnd.dev.cosign.simplesigning.v1+json")
            layers.append({"mediaType": "application/vnd.dev.cosign.simplesigning.v1+json", "digest": blob,
                           "size": len(payload) or 1, "annotations": {"dev.cosignproject.cosign/signature": sig}})
        body = json.dumps({"schemaVersion": 2, "mediaType": MANIFEST, "layers": layers}).encode()
        sig = "sha256:" + hashlib.sha256(body).hexdigest()
        cls.stored[sig] = (body, MANIFEST)
        cls.manifests.add(sig)
        cls.tags[digest.replace(":", "-") + ".sig"] = sig
        return sig

    def _body(self, body: bytes, media: str) -> None:
        self.send_response(200)
        self.send_header("Content-Type", media)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        """`/v2/`: the API version check (200 once authorised); a known manifest; its config blob."""
        if not self._authorised():
            return self._end()
        cls, last = type(self), self.path.rsplit("/", 1)[1]
        if self.path != "/v2/":
            cls.gets.append(self.path)
        if self.path == "/v2/":
            self.send_response(200)
        elif "/manifests/" in self.path and last in cls.manifests:
            return self._body(*cls.stored.get(last, (self.manifest(self.config(None)), MANIFEST)))
        elif "/manifests/" in self.path and cls.tags.get(last) in cls.manifests:
            return self._body(*cls.stored[cls.tags[last]])
        elif "/blobs/" in self.path and last in cls.stored:
            return self._body(*cls.stored[last])
        else:
            self.send_response(404)
        self._end()

    def do_HEAD(self):
        if self._authorised():
            type(self).heads.append(self.path)
            self.send_response(200 if self.path.rsplit("/", 1)[1] in type(self).manifests else 404)
        self._end()


class BearerRegistry(FakeRegistry):
    """Token auth as Docker Hub and Quay do it: a 401 challenge, a token for basic credentials."""

    def do_GET(self):
        if not self.path.startswith("/token?"):
            return super().do_GET()
        expected = "Basic " + base64.b64encode(self.user.encode()).decode()
        ok = self.path.startswith("/token?") and self.headers.get("Authorization") == expected
        body = b'{"token": "tok-123"}' if ok else b"{}"
        self.send_response(200 if ok else 401)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _authorised(self) -> bool:
        if self.headers.get("Authorization") == "Bearer tok-123":
            return True
        self.send_response(401)
        host = self.headers.get("Host")
        self.send_header("WWW-Authenticate", f'Bearer realm="http://{host}/token",service="reg",'
                                             'scope="repository:ocl/os-image:pull,delete"')
        return False


def key_pair():
    """A cosign-like key pair made here: an ECDSA P-256 private key (`cosign generate-key-pair`'s
    kind, sigstore/cosign pkg/cosign/keys.go) and its PEM `PUBLIC KEY` (what cosign.pub holds)."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    key = ec.generate_private_key(ec.SECP256R1())
    return key, key.public_key().public_bytes(serialization.Encoding.PEM,
                                              serialization.PublicFormat.SubjectPublicKeyInfo)


def cosign_signature(key, digest: str, reference: str) -> tuple[bytes, str]:
    """A signature of an image as cosign 2.x makes it, with an EC private key of `cryptography`:
    the simple-signing payload (sigstore/sigstore pkg/signature/payload/payload.go,
    `SimpleContainerImage`: critical.identity.docker-reference, critical.image.docker-manifest-digest,
    critical.type; `optional` null without annotations, as containers/image's
    signature/internal/sigstore_payload.go notes cosign writes it) and its ECDSA SHA-256 signature,
    base64 (the `dev.cosignproject.cosign/signature` annotation). tests/realtools/test_signature_check.py
    checks the same verifier against real cosign's signatures."""
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec
    payload = json.dumps({"critical": {"identity": {"docker-reference": reference},
                                       "image": {"docker-manifest-digest": digest},
                                       "type": "cosign container image signature"},
                          "optional": None}, separators=(",", ":")).encode()
    return payload, base64.b64encode(key.sign(payload, ec.ECDSA(hashes.SHA256()))).decode()


@contextlib.contextmanager
def serve(handler: type[FakeRegistry], manifests: set | None = None) -> Iterator[str]:
    """Start `handler` on 127.0.0.1 (fresh records); yields its host:port; stops it after."""
    handler.manifests = set(DIGESTS if manifests is None else manifests)
    handler.deleted, handler.heads, handler.gets, handler.deletion = [], [], [], True
    handler.stored, handler.tags = {}, {}
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
