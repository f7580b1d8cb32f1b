"""Signing when something fails (issue 50), on the real registry and the real cosign.

4. A kept image keeps its signature. Pruning with signing on deletes an image's cosign signature tag
   (`sha256-<hex>.sig`) only after the image's own DELETE succeeded: an image the registry refuses
   to delete stays in the registry and in the pool's history, and so does its signature, which the
   nodes need to run it (docs/signing.md). The registry is `docker-registry` serving TLS on
   127.0.0.1; in front of it a proxy (tests/support/signing.Refusing) refuses one image's DELETE
   with distribution's DENIED, as a registry's access control would, and passes everything else.
5. A failed signing Pod says why. The signing Pod the reconciler renders is run with the real cosign
   v2.4.1 (its own args, its Secret volumes and env as the kubelet gives them, tests/support/realbuild
   `materialise`), against that registry, and fails: a wrong key password, a registry that refuses
   the push. Its outcome is played as the kubelet records it (FallbackToLogsOnError: the log's tail,
   2048 bytes, as the termination message; exit code 1). cosign's last line, as it printed it, must
   reach the pool's failure reason, its Event and `explain`.

Expected values: cosign's own output as it printed it, and the registry's own answers; the causes
named by upstream's text (the DENIED error of distribution's API spec; the `decryption failed` of
secure-systems-lab/go-securesystemslib encrypted/encrypted.go, which cosign's key loading returns).
"""

from __future__ import annotations

import base64
import copy
import json
import os
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import kubelet  # examples/kubelet.py
import pytest

from reconcile.cluster.memory import MemoryCluster
from reconcile.contract import annotations as A
from reconcile.contract import objects
from reconcile.core.transitions import Transition
from tests.conftest import ApiCli
from tests.support import factory as F
from tests.support import realbuild as R
from tests.support import signing as S
from tests.support.fakeregistry import key_pair
from tests.unit.test_signing_plan import key_secret, pods, run, set_sign_phase

#: the repository path the shipped settings name (examples/cluster.yaml, kustomize/overlays/argocd)
REPO = "ocl-reconciler/os-image"
KEY = "cosign-key"


@dataclass
class Faults:
    reg: R.Registry                 # the real registry, holding the images
    front: S.Refusing               # what the reconciler and cosign are given
    ca: R.TestCA
    root: Path
    refuse: set[tuple[str, str]] = field(default_factory=set)     # (method, path) the front refuses

    @property
    def repo(self) -> str:
        return f"{self.front.host}/{REPO}"

    def push(self, marker: str) -> str:
        """An image pushed to the real registry; its reference through the front."""
        return f"{self.repo}@{R.push_image(self.reg, REPO, marker)}"


@pytest.fixture(scope="module")
def faults(tmp_path_factory):
    R.require_registry()
    root = tmp_path_factory.mktemp("signing-faults")
    ca = R.TestCA(root / "ca")
    reg = R.Registry(root, tls=ca)
    refuse: set[tuple[str, str]] = set()
    front = S.Refusing(reg, lambda method, path: (method, path) in refuse or (method, "*") in refuse)
    try:
        yield Faults(reg, front, ca, root, refuse)
    finally:
        front.stop()
        reg.stop()


@pytest.fixture
def live(run_cli, tmp_path, capsys):
    """`ocl-reconcile run` against the stand-in API server (a live run: it asks the registry)."""
    return ApiCli(tmp_path, capsys)


def tags(reg: R.Registry) -> list[str]:
    with urllib.request.urlopen(f"{reg.url}/v2/{REPO}/tags/list", context=reg.context) as resp:
        return json.loads(resp.read())["tags"] or []


def signing_items(faults: Faults, key: dict, pool: dict | None = None, extra: tuple = ()) -> list[dict]:
    """Signing on with the key Secret `key`, images going to our repository behind the front."""
    return F.cluster(pool or F.pool(), settings=[
        F.build_config(finalImagePullspec=f"{faults.repo}:latest", imageSigningKeySecretName=objects.name(key)),
        F.osimageurl(), F.secret("pull-secret"), F.secret("push-secret"), key, *extra])


# -- the front itself ---------------------------------------------------------------------------

def test_the_front_hands_on_a_chunked_blob_upload_whole(faults):
    """A PATCH whose body comes chunked (Go's net/http streams buildah's blob upload so, with no
    Content-Length) reaches the registry whole: distribution checks the finished upload against
    the digest the PUT names (docs/spec/api.md, "Completed Upload": 400 DIGEST_INVALID otherwise)."""
    import hashlib
    import http.client
    data = os.urandom(70000)
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    conn = http.client.HTTPSConnection(faults.front.host, context=faults.reg.context, timeout=30)
    try:
        conn.request("POST", f"/v2/{REPO}/blobs/uploads/", body=b"")
        started = conn.getresponse()
        started.read()
        assert started.status == 202, started.status
        location = started.getheader("Location").split(faults.reg.host, 1)[-1]
        conn.request("PATCH", location, body=iter([data[:30000], data[30000:]]), encode_chunked=True,
                     headers={"Content-Type": "application/octet-stream"})
        patched = conn.getresponse()
        patched.read()
        assert patched.status == 202, patched.status
        location = patched.getheader("Location").split(faults.reg.host, 1)[-1]
        conn.request("PUT", f"{location}{'&' if '?' in location else '?'}digest={digest}", body=b"")
        done = conn.getresponse()
        assert done.status == 201, (done.status, done.read())
    finally:
        conn.close()
    with urllib.request.urlopen(f"{faults.reg.url}/v2/{REPO}/blobs/{digest}", context=faults.reg.context) as resp:
        assert resp.read() == data


# -- 4. a kept image keeps its signature -------------------------------------------------------

def test_an_image_the_registry_refuses_to_delete_keeps_its_signature_tag(faults, live):
    """Three signed images in the history, one kept (`--keep-images 1`): the registry deletes one
    superseded image, and with it its signature tag; it refuses the other's DELETE, and that image
    stays, in the registry and in the history, with its signature tag."""
    signer, _ = key_pair()
    new, refused, deleted = (faults.push(f"prune-{m}") for m in ("new", "refused", "deleted"))
    sigs = {image: S.push_signature(faults.reg, REPO, image.split("@")[1], signer) for image in (new, refused, deleted)}
    assert set(sigs.values()) <= set(tags(faults.reg))
    refused_path = f"/v2/{REPO}/manifests/{refused.split('@')[1]}"
    faults.refuse.add(("DELETE", refused_path))
    pool = F.pool(annotations={A.IMAGES: f"new={new} refused={refused} deleted={deleted}", A.IMAGE: new})
    items = signing_items(faults, key_secret(KEY), pool)
    mark = len(faults.front.refused)
    try:
        code, after, err = live.run(items, "--registry-ca", str(faults.ca.ca), "--keep-images", "1")
    finally:
        faults.refuse.clear()
    assert code == 0, err
    assert faults.front.refused[mark:] == [("DELETE", refused_path)]
    # the deleted image took its signature with it: pruning ran, with signing on
    assert not R.has_manifest(faults.reg, REPO, deleted.split("@")[1])
    assert sigs[deleted] not in tags(faults.reg)
    # the refused one stays, and so does its signature
    assert R.has_manifest(faults.reg, REPO, refused.split("@")[1])
    assert sigs[refused] in tags(faults.reg) and sigs[new] in tags(faults.reg)
    ann = F.the_pool(after)["metadata"]["annotations"]
    assert ann[A.IMAGES] == f"new={new} refused={refused}"
    assert refused in ann[A.PRUNE_ERROR] and "403" in ann[A.PRUNE_ERROR]
    assert f"deleted image {deleted}" in err and f"deleted image {refused}" not in err
    assert f"signature of image {deleted} (pool worker): deleted" in err and f"of image {refused}" not in err


# -- 5. a failed signing Pod says why ----------------------------------------------------------

@dataclass
class Signer:
    cosign: S.Cosign
    key: Path                       # cosign's encrypted private key (generate-key-pair)
    pub: Path


@pytest.fixture(scope="module")
def signer(faults):
    home = faults.root / "cosign-home"
    home.mkdir()
    cosign = S.Cosign(S.tool("cosign"), home, faults.ca.ca)
    return Signer(cosign, *cosign.key_pair("ours"))


def real_key_secret(signer: Signer, password: str) -> dict:
    """The key Secret as `cosign generate-key-pair k8s://` writes it, of the real key pair;
    `password`: its cosign.password."""
    secret = key_secret(KEY, signer.pub.read_bytes())
    secret["data"].update({"cosign.key": base64.b64encode(signer.key.read_bytes()).decode(),
                           "cosign.password": base64.b64encode(password.encode()).decode()})
    return secret


def run_signing_pod(signer: Signer, pod: dict, items: list[dict], root: Path) -> tuple[int, str, str]:
    """The signing Pod's one container run with the real cosign, as the kubelet runs it: its args
    (the image's entrypoint is cosign), its Secret and ConfigMap volumes as files
    (realbuild.materialise), its env, COSIGN_PASSWORD from the Secret its secretKeyRef names.
    Returns (exit code, cosign's stderr, the termination message as the kubelet makes it:
    kubernetes pkg/kubelet/kuberuntime/kuberuntime_container.go, the terminationMessagePath file if
    the container wrote one, else with FallbackToLogsOnError and a failure the log's last 80 lines
    and at most 2048 bytes, else nothing)."""
    (container,) = pod["spec"]["containers"]
    env = R.materialise(pod, items, root)
    (ref,) = [e["valueFrom"]["secretKeyRef"] for e in container["env"] if e["name"] == "COSIGN_PASSWORD"]
    (secret,) = [o for o in items if o["kind"] == "Secret" and objects.name(o) == ref["name"]]
    env.update(COSIGN_PASSWORD=base64.b64decode(secret["data"][ref["key"]]).decode(),
               PATH=os.environ.get("PATH", "/usr/bin:/bin"))
    for path in ("HOME", "TMPDIR"):
        Path(env[path]).mkdir(parents=True, exist_ok=True)
    args = [str(root) + a if a.startswith("/etc/ocl/") else a for a in container["args"]]
    result = signer.cosign.run(*args, check=False, env=env)
    written = root / container.get("terminationMessagePath", "/dev/termination-log").lstrip("/")
    message = written.read_text() if written.is_file() else ""
    if not message and result.returncode != 0 and container.get("terminationMessagePolicy") == "FallbackToLogsOnError":
        message = "".join((result.stdout + result.stderr).splitlines(keepends=True)[-80:])[-2048:]
    return result.returncode, result.stderr, message


def _wrong_password(faults: Faults) -> str:
    return "not-the-keys-password"


def _push_refused(faults: Faults) -> str:
    faults.refuse.update({("POST", "*"), ("PUT", "*"), ("PATCH", "*")})
    return S.KEY_PASSWORD


@pytest.mark.parametrize(("fault", "cause"), [
    # secure-systems-lab/go-securesystemslib encrypted/encrypted.go: errors.New("encrypted: decryption failed")
    (_wrong_password, "decryption failed"),
    # distribution docs/spec/api.md, "Errors": DENIED, as go-containerregistry prints it (CODE: message)
    (_push_refused, "DENIED: requested access to the resource is denied"),
], ids=["wrong-key-password", "registry-refuses-the-push"])
def test_a_failed_signing_pod_says_why_in_the_pool_the_event_and_explain(faults, signer, run_cli, tmp_path,
                                                                         fault, cause):
    image = faults.push(f"sign-{fault.__name__}")
    try:
        items = signing_items(faults, real_key_secret(signer, fault(faults)), extra=(
            F.configmap("openshift-service-ca.crt", {"service-ca.crt": faults.ca.ca.read_text()}),))
        cluster = MemoryCluster(items, clock=lambda: F.NOW)
        run(cluster)
        (build,) = pods(cluster, "ocl-build-")
        cluster.store[("Pod", F.NS, objects.name(build))] = kubelet.set_phase(
            copy.deepcopy(build), "Succeeded", digest=image.split("@")[1])
        (plan,) = run(cluster)
        assert plan.transition == Transition.SIGN.name, plan.message
        (pod,) = pods(cluster, "ocl-sign-")
        assert pod["spec"]["containers"][0]["args"][-1] == image
        code, stderr, log = run_signing_pod(signer, pod, cluster.items(), tmp_path / "pod")
    finally:
        faults.refuse.clear()
    said = [line.strip() for line in stderr.splitlines() if line.strip()][-1]       # cosign's last line
    _, named, why = said.partition(f"[{image}]: ")           # the error chain about the image it signs
    assert code != 0 and named and cause in why, stderr
    set_sign_phase(cluster, pod, "Failed", log)
    run(cluster)
    pool = objects.annotations(cluster.get("MachineConfigPool", "", "worker"))
    assert pool[A.STATE] == A.FAILED and A.IMAGE not in pool
    assert why in pool[A.MESSAGE], (why, pool[A.MESSAGE])
    (event,) = [e for e in cluster.list("Event", "default") if e["reason"] == "BuildFailed"]
    assert why in event["message"], event["message"]
    _, out, _ = run_cli.on(cluster.items(), "explain", "worker")
    assert why in out, out
