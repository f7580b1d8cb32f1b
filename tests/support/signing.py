"""Harness for the signing tests (issue 41, tests/realtools/test_signing.py): the real parts that
decide whether a node may run an image, each built once into ~/.cache/ocl-reconciler by its
tests/tools/*/build.sh (`make cosign policycheck crcrender`):

- sigstore's `cosign` v2.4.1, which signs (tests/tools/cosign);
- `ocl-crc-render`, the MCO's own container-runtime-config code, which turns ClusterImagePolicies
  into the node's /etc/containers/policy.json and registries.d (tests/tools/crcrender);
- `policycheck`, containers/image v5.42.1's verdict on an image under those files, signatures
  fetched from the registry as CRI-O and skopeo fetch them (tests/tools/policycheck).

Where a part cannot be had (no Go, no ../shared/mco) the tests skip saying why; with
OCL_COSIGN=require (.ci/run) a missing tool fails them; ../shared absent always skips (its rule)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support import factory as F
from tests.support import requirement

REQUIRE = "OCL_COSIGN"
TOOLS = F.ROOT / "tests/tools"
MCO_SRC = F.SHARED / "mco/mco-src.tar.gz"
DOC = F.ROOT / "docs/signing.md"
#: cosign's key files are encrypted with this (cosign generate-key-pair reads COSIGN_PASSWORD)
KEY_PASSWORD = "test-only-key-password"


def missing(problem: str) -> None:
    requirement.missing(REQUIRE, problem)


def tool(name: str) -> Path:
    """The path a tests/tools/<name>/build.sh prints: at once when cached (make builds it before
    the tests), else it builds (needs go and the module proxy), else skip/fail saying why."""
    if name == "crcrender" and not MCO_SRC.is_file():
        pytest.skip(f"{MCO_SRC} is absent: the MCO's container-runtime-config code renders the policy")
    result = subprocess.run(["bash", str(TOOLS / name / "build.sh")], capture_output=True, text=True,
                            timeout=1800, env=dict(os.environ, OCL_MCO_SRC=str(MCO_SRC)))
    if result.returncode != 0:
        last = (result.stderr.strip().splitlines() or ["(no output)"])[-1]
        missing(f"`make {name}` could not build it: {last}")
    out = Path(result.stdout.strip().splitlines()[-1])
    return out / name if name in ("cosign", "kustomize") else out    # those print their folder


@dataclass
class Cosign:
    """cosign run with a CA it trusts for the registry (Go's SSL_CERT_FILE) and a HOME of its own."""
    binary: Path
    home: Path
    ca: Path

    def run(self, *args: str, cwd: Path | None = None, check: bool = True,
            env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        """cosign with `args`; `env`: its whole environment instead of this harness's (a signing
        Pod's, tests/realtools/test_signing_faults.py); `check`: a failure raises."""
        env = env or {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(self.home),
                      "COSIGN_PASSWORD": KEY_PASSWORD, "SSL_CERT_FILE": str(self.ca),
                      "DOCKER_CONFIG": str(self.home / ".docker"), "TUF_ROOT": str(self.home / ".sigstore")}
        result = subprocess.run([str(self.binary), *args], capture_output=True, text=True, env=env,
                                cwd=cwd or self.home, timeout=300)
        if check and result.returncode != 0:
            raise AssertionError(f"cosign {' '.join(args)} failed: {result.stderr[-2000:]}")
        return result

    def key_pair(self, prefix: str) -> tuple[Path, Path]:
        """`cosign generate-key-pair`: (the encrypted private key, the PEM public key)."""
        self.run("generate-key-pair", "--output-key-prefix", prefix)
        return self.home / f"{prefix}.key", self.home / f"{prefix}.pub"

    def sign(self, key: Path, image: str, *extra: str) -> None:
        """Sign a digested reference with a key and no transparency log (issue 41: no network)."""
        self.run("sign", "--key", str(key), "--tlog-upload=false", "--yes", *extra, image)


def doc_block() -> str:
    """docs/signing.md's one ```sh block: the administrator's overlay steps."""
    import re
    (block,) = re.findall(r"^```sh\n(.*?)^```", DOC.read_text(), re.S | re.M)
    return block


def render_component(kustomize: Path, root: Path, scope: str, public_key: Path,
                     extra_patch: list[dict[str, Any]] | None = None) -> Path:
    """The administrator's overlay as docs/signing.md makes it, run as written with the real
    kustomize: built on kustomize/overlays/openshift, the Component added, their repository and
    public key patched in (`extra_patch`: one more `kustomize edit add patch`). Returns a file of
    the ClusterImagePolicies it renders (the MCO's controller reads only those)."""
    root.mkdir(parents=True, exist_ok=True)
    shutil.copy(public_key, root / "cosign.pub")
    ocl = os.path.relpath(F.ROOT, root)
    env = {"PATH": f"{kustomize.parent}:{os.environ.get('PATH', '/usr/bin:/bin')}", "HOME": str(root),
           "OCL": ocl, "REPOSITORY": scope}

    def sh(script: str) -> str:
        out = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=root, env=env,
                             capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, f"{script}\n{out.stderr}"
        return out.stdout
    sh('kustomize create --resources "$OCL/kustomize/overlays/openshift"')
    if extra_patch:
        sh(f"kustomize edit add patch --group config.openshift.io --kind ClusterImagePolicy "
           f"--patch '{json.dumps(extra_patch)}'")
    sh(doc_block())
    docs = [d for d in yaml.safe_load_all((root / "rendered.yaml").read_text()) if d]
    policies = [d for d in docs if d["kind"] == "ClusterImagePolicy"]
    (root / "policies.yaml").write_text(yaml.safe_dump_all(policies))
    return root / "policies.yaml"


@dataclass
class NodeFiles:
    """What the MCO's controller wrote for the pool: the node's policy.json and registries.d."""
    root: Path

    @property
    def policy(self) -> Path:
        return self.root / "etc/containers/policy.json"

    @property
    def registries_d(self) -> Path:
        return self.root / "etc/containers/registries.d"

    def policy_json(self) -> dict[str, Any]:
        return json.loads(self.policy.read_text())


def mco_render(binary: Path, policies: Path, release_image: str, out: Path) -> NodeFiles:
    """ocl-crc-render: the controller's own code (registriesConfigIgnition) for the worker role."""
    tree = binary.parent.parent
    result = subprocess.run([str(binary), "--policies", str(policies), "--release-image", release_image,
                             "--out", str(out), "--templates", str(tree / "templates")],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    return NodeFiles(out)


def shipped_policy(root: Path, scope: str, public_key: Path, release_image: str) -> NodeFiles:
    """The nodes' policy.json and registries.d for our Component as shipped, patched as docs/signing.md
    says for `scope` and `public_key`, rendered by the real kustomize and the MCO's own code."""
    kustomize, crc = tool("kustomize"), tool("crcrender")
    return mco_render(crc, render_component(kustomize, root / "overlay", scope, public_key), release_image,
                      root / "node")


@dataclass
class Verdict:
    allowed: bool
    error: str
    error_type: str
    #: with `arch`, the digest of the manifest copy.Image copied (a list's chosen instance)
    digest: str = ""


def policycheck(binary: Path, files: NodeFiles, image: str, cert_dir: Path, arch: str = "") -> Verdict:
    """containers/image's decision for `docker://image` under the node's files: the policy for the
    image itself; with `arch`, copy.Image's as a linux/`arch` machine pulls it (a list: the instance
    for that architecture, alone; tests/tools/policycheck/main.go)."""
    result = subprocess.run([str(binary), "--policy", str(files.policy), "--registries-d",
                             str(files.registries_d), "--image", f"docker://{image}", "--cert-dir",
                             str(cert_dir), *(("--arch", arch) if arch else ())],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    return Verdict(out["allowed"], out["error"], out.get("errorType", ""), out.get("digest", ""))


#: distribution's answer to a request the registry's access control refuses (distribution
#: docs/spec/api.md, "Errors": DENIED, 403, "requested access to the resource is denied")
DENIED = {"errors": [{"code": "DENIED", "message": "requested access to the resource is denied", "detail": None}]}


class Refusing:
    """A front of a real `docker-registry` (tests/support/realbuild.Registry), TLS with the
    registry's own certificate where the registry serves TLS, plain HTTP where it does not: it
    answers the requests `refuse(method, path)` picks with distribution's DENIED and hands every
    other to the registry unchanged, the registry's answer back (`refuse` may also hold a request
    before it is handed on). `host` is what clients are given; `refused` lists what it refused."""

    def __init__(self, backend: Any, refuse: Any):
        import http.client
        import ssl
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
        front = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a: Any) -> None:
                pass

            def _body(self) -> bytes:
                """The request's body: by Content-Length, or de-chunked (RFC 9112 7.1) where it
                comes chunked (Go's client streams a blob's PATCH so), trailers read and dropped."""
                if "chunked" not in (self.headers.get("Transfer-Encoding") or "").lower():
                    return self.rfile.read(int(self.headers.get("Content-Length") or 0))
                parts = []
                while size := int(self.rfile.readline().split(b";")[0].strip() or b"0", 16):
                    parts.append(self.rfile.read(size))
                    self.rfile.readline()                               # the chunk's CRLF
                while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                    pass                                                # trailers, then the end
                return b"".join(parts)

            def _forward(self) -> None:
                body = self._body()
                if front.refuse(self.command, self.path):
                    front.refused.append((self.command, self.path))
                    data = json.dumps(DENIED).encode()
                    self.send_response(403)
                    self.send_header("Content-Type", "application/json; charset=utf-8")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                    return
                conn = (http.client.HTTPSConnection(backend.host, context=backend.context, timeout=30)
                        if backend.tls else http.client.HTTPConnection(backend.host, timeout=30))
                # a header sent on several lines (containers/image's Accept) is one list (RFC 9110
                # 5.3): a dict of the lines kept the last alone, and distribution answers 404 for an
                # OCI manifest (cosign's signature) to an Accept without its media type
                headers: dict[str, str] = {}
                for k, v in self.headers.items():
                    if k.lower() not in ("connection", "transfer-encoding", "content-length"):
                        headers[k] = f"{headers[k]}, {v}" if k in headers else v
                if body or self.command in ("POST", "PUT", "PATCH"):
                    headers["Content-Length"] = str(len(body))        # the body de-chunked, if it came so
                conn.request(self.command, self.path, body=body or None, headers=headers)
                resp = conn.getresponse()
                data = resp.read()
                self.send_response(resp.status, resp.reason)
                for k, v in resp.getheaders():
                    if k.lower() not in ("connection", "transfer-encoding", "content-length"):
                        self.send_header(k, v)
                self.send_header("Content-Length", resp.getheader("Content-Length") if self.command == "HEAD"
                                 else str(len(data)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)
                conn.close()

            do_GET = do_HEAD = do_PUT = do_POST = do_PATCH = do_DELETE = _forward

        self.refuse, self.refused = refuse, []
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        if backend.tls:
            tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            tls.load_cert_chain(str(backend.tls.cert), str(backend.tls.key))
            self.server.socket = tls.wrap_socket(self.server.socket, server_side=True)
        self.host = f"127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def push_signature(registry: Any, repo: str, digest: str, key: Any) -> str:
    """A cosign signature of `repo@digest` pushed as cosign 2.x attaches one: an OCI manifest
    under the tag `sha256-<hex>.sig` (pkg/oci/remote/remote.go, `SignatureTag`) whose layer is the
    simple-signing payload (`application/vnd.dev.cosign.simplesigning.v1+json`) with its signature
    in the `dev.cosignproject.cosign/signature` annotation. Returns the tag."""
    from tests.support import realbuild as R
    from tests.support.fakeregistry import cosign_signature
    payload, signature = cosign_signature(key, digest, f"{registry.host}/{repo}")
    layer = R.upload_blob(registry, repo, payload)
    config = R.upload_blob(registry, repo, json.dumps({
        "architecture": "", "os": "", "config": {}, "rootfs": {"type": "layers", "diff_ids": [
            layer["digest"]]}}).encode())
    tag = digest.replace(":", "-") + ".sig"
    R.put_manifest(registry, repo, tag, {
        "schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": dict(config, mediaType="application/vnd.oci.image.config.v1+json"),
        "layers": [dict(layer, mediaType="application/vnd.dev.cosign.simplesigning.v1+json",
                        annotations={"dev.cosignproject.cosign/signature": signature})]})
    return tag
