"""The signing Pod on the real node (issue 53, tests/realnode/test_signing_pod.py): the parts that
the product's own signing Pod (manifests/pod-sign.yaml.j2) meets under the real kubelet.

- **The signer's image.** What sigstore's release image of cosign is (ko's build on
  `gcr.io/distroless/static-debian12:nonroot`, sigstore/cosign `.ko.yaml`): `/ko-app/cosign` as the
  entrypoint, no shell, user 65532 by number, ko's and distroless's environment. Made byte for byte
  (imagearchive.docker_archive) around the cosign v2.4.1 that `make cosign` builds. One difference: that
  build links libc (cgo), ko's is static (`CGO_ENABLED=0`), so the image carries the two files the
  binary's interpreter needs. Imported into the node's containerd and named by digest, as
  `imageSignerImage` must be.
- **The registry.** `docker-registry` serving TLS with a test CA whose certificate names the node's
  gateway, behind a front (signing.Refusing) that refuses what a test asks; the front is exposed to
  the Pods at gateway:port (Node.expose), and the host reaches it by the same name.
- **The nodes' verdict.** The Component as an administrator's overlay renders it, turned by the MCO's
  own code into policy.json and registries.d (signing.render_component, mco_render), and
  containers/image's policycheck deciding under them.
"""

from __future__ import annotations

import base64
import json
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.support import factory as F
from tests.support import imagearchive, nodejobs, realnode
from tests.support import realbuild as R
from tests.support import signing as S

SIGNER = "localhost/ocl-cosign:v2.4.1"
#: distroless's `nonroot` (its /etc/passwd), the user sigstore's image runs as
NONROOT = 65532
REPO = "ocl-reconciler/os-image"
KEY = "cosign-key"


def _needed_libraries(binary: Path) -> dict[str, Path]:
    """The shared objects `binary` loads (ldd), as path-in-image -> the host's file."""
    out = subprocess.run(["ldd", str(binary)], capture_output=True, text=True, check=False).stdout
    found = {}
    for line in out.splitlines():
        parts = line.split()
        path = parts[2] if "=>" in parts and len(parts) > 2 else parts[0] if parts and parts[0].startswith("/") else ""
        if path.startswith("/"):
            found[path.lstrip("/")] = Path(path).resolve()
    return found


def signer_archive(path: Path, cosign: Path) -> Path:
    """The signer's image as sigstore's release image is laid out (module docstring)."""
    files = {"ko-app/cosign": (cosign.read_bytes(), 0o755),
             "etc/passwd": (f"root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:{NONROOT}:{NONROOT}:nonroot:"
                            "/home/nonroot:/sbin/nologin\n".encode(), 0o644)}
    files |= {inside: (host.read_bytes(), 0o755) for inside, host in _needed_libraries(cosign).items()}
    return imagearchive.docker_archive(path, SIGNER, files, {
        "Entrypoint": ["/ko-app/cosign"], "User": str(NONROOT), "WorkingDir": "/home/nonroot",
        "Env": ["PATH=/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:/ko-app",
                "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt", "KO_DATA_PATH=/var/run/ko"]})


def by_digest(node: realnode.Node, name: str) -> str:
    """An imported image's name by digest (`<repository>@<manifest digest>`), which the kubelet can
    find: `ctr images import` records the tag alone, where a pull by the CRI also records the
    repository's digest name, and containerd's CRI resolves a digest reference only by that record."""
    for line in node.ctr("images", "ls").stdout.splitlines()[1:]:
        parts = line.split()
        if parts and parts[0] == name:
            ref = f"{name.rsplit(':', 1)[0]}@{next(p for p in parts if p.startswith('sha256:'))}"
            node.ctr("images", "tag", "--force", name, ref)
            return ref
    raise AssertionError(f"{name} is not in the node's containerd")


@dataclass
class World:
    node: realnode.Node
    deployed: nodejobs.Deployed
    reg: R.Registry
    front: S.Refusing
    ca: R.TestCA
    cosign: S.Cosign
    key: Path
    pub: Path
    policycheck: Path
    files: S.NodeFiles              # what the MCO wrote for the pool from the Component
    signer: str                     # imageSignerImage: the signer's image by digest
    host: str                       # the front as the Pods (and the host) reach it
    refuse: set[tuple[str, str]] = field(default_factory=set)

    @property
    def repo(self) -> str:
        return f"{self.host}/{REPO}"

    def push(self, marker: str) -> str:
        """An image pushed to the registry; its reference as the pool will record it."""
        return f"{self.repo}@{R.push_image(self.reg, REPO, marker)}"

    def verdict(self, image: str) -> S.Verdict:
        cert_dir = self.ca.ca.parent / "certs.d"
        cert_dir.mkdir(exist_ok=True)
        (cert_dir / "ca.crt").write_bytes(self.ca.ca.read_bytes())
        return S.policycheck(self.policycheck, self.files, image, cert_dir)

    def key_secret(self, private: bytes | None = None, password: str = S.KEY_PASSWORD) -> dict[str, Any]:
        """The key Secret as `cosign generate-key-pair k8s://` writes it; `private`: another
        cosign.key in its place."""
        data = {"cosign.key": private if private is not None else self.key.read_bytes(),
                "cosign.pub": self.pub.read_bytes(), "cosign.password": password.encode()}
        return {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                "metadata": {"name": KEY, "namespace": F.NS},
                "data": {k: base64.b64encode(v).decode() for k, v in data.items()}}

    def scenario(self, key: dict[str, Any]) -> list[dict[str, Any]]:
        """One opted-in pool built by an OpenShift Build (its status written by the test), signing
        on with `key`, the registry's CA as OpenShift's service CA publishes it in each namespace."""
        push = F.secret("push-secret", {"auths": {}})
        return F.cluster(nodes=False, settings=[
            F.build_config(imageBuilderType=nodejobs.BUILDER, finalImagePullspec=f"{self.repo}:latest",
                           imageSigningKeySecretName=KEY, imageSignerImage=self.signer),
            F.osimageurl(), F.secret("pull-secret"), push, key,
            F.configmap("openshift-service-ca.crt", {"service-ca.crt": self.ca.ca.read_text()})])


def start(node: realnode.Node, root: Path) -> World:
    """The world of the module docstring; the caller stops `front` and `reg`."""
    cosign_bin, policycheck, crc = S.tool("cosign"), S.tool("policycheck"), S.tool("crcrender")
    kustomize = S.tool("kustomize")
    R.require_registry()
    node.import_image(signer_archive(root / "signer.tar", cosign_bin))
    signer = by_digest(node, SIGNER)
    ca = R.TestCA(root / "ca", ips=(node.gateway,))
    home = root / "cosign-home"
    home.mkdir()
    cosign = S.Cosign(cosign_bin, home, ca.ca)
    key, pub = cosign.key_pair("ours")
    reg = R.Registry(root, tls=ca)
    refuse: set[tuple[str, str]] = set()
    front = S.Refusing(reg, lambda method, path: (method, path) in refuse or (method, "*") in refuse)
    host = node.expose(int(front.host.rsplit(":", 1)[1]))
    release = f"{host}/openshift-release-dev/ocp-release@{R.push_image(reg, 'openshift-release-dev/ocp-release', 'r')}"
    files = S.mco_render(crc, S.render_component(kustomize, root / "overlay", f"{host}/{REPO}", pub), release,
                         root / "node-files")
    deployed = nodejobs.Deployed(node, "localhost/ocl-reconciler:not-run-here", root / "product")
    return World(node, deployed, reg, front, ca, cosign, key, pub, policycheck, files, signer, host, refuse)


def sign_pods(world: World) -> list[dict[str, Any]]:
    return [p for p in world.node.api.list("Pod", F.NS) if p["metadata"]["name"].startswith("ocl-sign-")]


def pod_json(pod: dict[str, Any]) -> str:
    return json.dumps({"name": pod["metadata"]["name"], "status": pod.get("status")})[:3000]
