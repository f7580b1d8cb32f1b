"""Issue 41, proven with the real tools: a node runs from our repository only what our key signed.

Real parts, started here: `docker-registry` serving TLS on 127.0.0.1 with a CA made for the test;
sigstore's `cosign` v2.4.1 (a key pair of `cosign generate-key-pair`, `cosign sign --key ...
--tlog-upload=false`: its default sigstore attachment, the `sha256-<digest>.sig` tag); the MCO's own
container-runtime-config code (ocl-crc-render: getValidScopePolicies, registriesConfigIgnition with
the worker templates' policy.json, updatePolicyJSON, generateSigstoreRegistriesdConfig) rendering
the ClusterImagePolicy of kustomize/components/image-policy as an administrator's overlay patches it;
and containers/image v5.42.1 (policycheck) deciding under the files it wrote, fetching the
signatures from the registry as CRI-O and skopeo do.

Rotation's two facts too: two policies on one scope require both keys' signatures; one image
signed with both keys passes the old policy and the new.

Images are pushed through the registry API (tests/support/realbuild.push_image: one gzipped layer,
a config, a schema 2 manifest), each with its own content so each has its own digest.

Expected refusals are containers/image's own words (containers/container-libs,
image/signature/policy_eval_sigstore.go and image/signature/internal/sigstore_payload.go, v5.42.1).
What stays unproven here: rpm-ostree's own pull on a node (docs/signing.md)."""

from __future__ import annotations

import json
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from tests.support import realbuild as R
from tests.support import signing as S

REPO = "ocl/os-image"
RELEASE_REPO = "openshift-release-dev/ocp-release"     # the release's images: never in our scope


@dataclass
class World:
    reg: R.Registry
    cert_dir: Path                  # the registry's CA alone, as containers/image's DockerCertPath
    cosign: S.Cosign
    key: Path                       # our private key; pub is in the Component's keyData
    pub: Path
    other_key: Path                 # the next key, in a rotation; or an intruder's
    policycheck: Path
    ours: S.NodeFiles               # what the MCO wrote from the Component as shipped (MatchRepository)
    default_rule: S.NodeFiles       # the same ClusterImagePolicy without signedIdentity
    rotated: S.NodeFiles            # the Component with the other key's public key instead
    two_policies: S.NodeFiles       # ours and a second ClusterImagePolicy, the other key, same scope
    release: str                    # a release image on the same registry, another repository

    @property
    def scope(self) -> str:
        return f"{self.reg.host}/{REPO}"

    def push(self, marker: str, repo: str = REPO) -> str:
        return f"{self.reg.host}/{repo}@{R.push_image(self.reg, repo, marker)}"

    def verdict(self, image: str, files: S.NodeFiles | None = None) -> S.Verdict:
        return S.policycheck(self.policycheck, files or self.ours, image, self.cert_dir)


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    cosign_bin, policycheck, crc = S.tool("cosign"), S.tool("policycheck"), S.tool("crcrender")
    kustomize = S.tool("kustomize")
    R.require_registry()
    root = tmp_path_factory.mktemp("signing")
    ca = R.TestCA(root / "ca")
    cert_dir = root / "certs.d"
    cert_dir.mkdir()
    (cert_dir / "ca.crt").write_bytes(ca.ca.read_bytes())
    home = root / "cosign-home"
    home.mkdir()
    cosign = S.Cosign(cosign_bin, home, ca.ca)
    key, pub = cosign.key_pair("ours")
    other_key, other_pub = cosign.key_pair("other")
    reg = R.Registry(root, tls=ca)
    try:
        release = f"{reg.host}/{RELEASE_REPO}@{R.push_image(reg, RELEASE_REPO, 'release')}"
        scope = f"{reg.host}/{REPO}"
        ours = S.mco_render(crc, S.render_component(kustomize, root / "overlay", scope, pub), release,
                            root / "node-ours")
        default = S.mco_render(crc, S.render_component(
            kustomize, root / "overlay-default", scope, pub,
            [{"op": "remove", "path": "/spec/policy/signedIdentity"}]), release, root / "node-default")
        rotated_cips = S.render_component(kustomize, root / "overlay-rotated", scope, other_pub)
        rotated = S.mco_render(crc, rotated_cips, release, root / "node-rotated")
        both = root / "two-policies.yaml"
        (second,) = yaml.safe_load_all(rotated_cips.read_text())
        second["metadata"]["name"] += "-next"
        both.write_text(root.joinpath("overlay/policies.yaml").read_text() + "---\n" + yaml.safe_dump(second))
        two = S.mco_render(crc, both, release, root / "node-two")
        yield World(reg, cert_dir, cosign, key, pub, other_key, policycheck, ours, default, rotated, two, release)
    finally:
        reg.stop()


def tags(world: World, repo: str = REPO) -> list[str]:
    with urllib.request.urlopen(f"{world.reg.url}/v2/{repo}/tags/list", context=world.reg.context) as resp:
        return json.loads(resp.read())["tags"] or []


def sig_tag(image: str) -> str:
    """cosign's attachment tag for a digest (sigstore/cosign pkg/oci/remote: `sha256-<hex>.sig`)."""
    return image.split("@")[1].replace(":", "-") + ".sig"


def test_the_mco_renders_the_component_into_our_repository_alone_with_our_key(world):
    """The files the nodes get: one sigstoreSigned requirement, for our repository's scope alone,
    with our key and MatchRepository; every other image keeps the template's default; registries.d
    turns sigstore attachments on for that scope only."""
    import base64
    policy = world.ours.policy_json()
    assert policy["default"] == [{"type": "insecureAcceptAnything"}]
    assert list(policy["transports"]["docker"]) == [world.scope]
    (requirement,) = policy["transports"]["docker"][world.scope]
    assert requirement["type"] == "sigstoreSigned"
    assert base64.b64decode(requirement["keyData"]) == world.pub.read_bytes()
    assert requirement["signedIdentity"] == {"type": "matchRepository"}
    registries_d = (world.ours.registries_d / "sigstore-registries.yaml").read_text()
    assert registries_d.split() == ["docker:", f"{world.scope}:", "use-sigstore-attachments:", "true"]
    # what the MCO writes when signedIdentity is omitted (policyItemFromSpec)
    (default,) = world.default_rule.policy_json()["transports"]["docker"][world.scope]
    assert default["signedIdentity"] == {"type": "matchRepoDigestOrExact"}


def test_our_image_signed_with_our_key_is_allowed(world):
    image = world.push("signed")
    assert not world.verdict(image).allowed          # before it is signed
    world.cosign.sign(world.key, image)
    assert sig_tag(image) in tags(world)             # the sigstore attachment containers/image reads
    assert world.verdict(image) == S.Verdict(True, "", "")


def test_cosigns_default_signature_is_refused_under_the_apis_default_identity_rule(world):
    """cosign 2.x records the repository alone as the signed identity; MatchRepoDigestOrExact (the
    API's default) wants it with the digest: an administrator who writes their own policy without
    signedIdentity refuses our images (docs/signing.md warns)."""
    image = world.push("signed-default-rule")
    world.cosign.sign(world.key, image)
    assert world.verdict(image).allowed              # the same signature, under our Component's rule
    verdict = world.verdict(image, world.default_rule)
    assert verdict == S.Verdict(False, f'Signature for identity "{world.scope}" is not accepted',
                                "PolicyRequirementError")


def test_signing_the_digest_as_the_identity_satisfies_the_apis_default_rule(world):
    """The other way out (issue 41): `--sign-container-identity <repository>@<digest>` writes what
    MatchRepoDigestOrExact wants; our Component's MatchRepository accepts it too."""
    image = world.push("signed-with-identity")
    world.cosign.sign(world.key, image, "--sign-container-identity", image)
    assert world.verdict(image, world.default_rule) == S.Verdict(True, "", "")
    assert world.verdict(image) == S.Verdict(True, "", "")


def test_an_unsigned_image_of_our_repository_is_refused(world):
    image = world.push("unsigned")
    assert world.verdict(image) == S.Verdict(False, "A signature was required, but no signature exists",
                                             "PolicyRequirementError")


def test_an_image_signed_with_another_key_is_refused(world):
    image = world.push("other-key")
    world.cosign.sign(world.other_key, image)
    assert sig_tag(image) in tags(world)
    verdict = world.verdict(image)
    assert not verdict.allowed
    assert verdict.error.startswith("cryptographic signature verification failed: "), verdict


def test_a_signature_copied_onto_another_digest_is_refused(world):
    """Someone with push rights copies a genuine signature's attachment onto their own image: the
    signature verifies with our key, but names the other manifest's digest."""
    genuine, forged = world.push("genuine"), world.push("forged")
    world.cosign.sign(world.key, genuine)
    assert world.verdict(genuine).allowed
    accept = "application/vnd.oci.image.manifest.v1+json"
    src = urllib.request.Request(f"{world.reg.url}/v2/{REPO}/manifests/{sig_tag(genuine)}", headers={"Accept": accept})
    with urllib.request.urlopen(src, context=world.reg.context) as resp:
        body, media_type = resp.read(), resp.headers["Content-Type"]
    urllib.request.urlopen(urllib.request.Request(
        f"{world.reg.url}/v2/{REPO}/manifests/{sig_tag(forged)}", data=body, method="PUT",
        headers={"Content-Type": media_type}), context=world.reg.context).close()
    verdict = world.verdict(forged)
    assert verdict == S.Verdict(False, f"Signature for digest {genuine.split('@')[1]} does not match",
                                "PolicyRequirementError")


def test_the_release_image_on_the_same_registry_is_allowed_unsigned(world):
    """Another repository of the same registry host (as the release's are to the policy): the
    Component's scope does not cover it, so the cluster's default applies."""
    assert sig_tag(world.release) not in tags(world, RELEASE_REPO)
    assert world.verdict(world.release) == S.Verdict(True, "", "")
    assert world.verdict(world.release, world.default_rule).allowed


# --- rotation (docs/signing.md, "Rotating the key") ---

def test_two_policies_on_our_scope_require_both_signatures(world):
    """Why rotation cannot add a second policy: the MCO appends both requirements to the scope
    (getValidScopePolicies), and containers/image requires every requirement of a scope."""
    assert len(world.two_policies.policy_json()["transports"]["docker"][world.scope]) == 2
    image = world.push("one-key-of-two")
    world.cosign.sign(world.key, image)
    verdict = world.verdict(image, world.two_policies)
    assert not verdict.allowed and verdict.error.startswith("cryptographic signature verification failed: "), verdict
    world.cosign.sign(world.other_key, image)
    assert world.verdict(image, world.two_policies) == S.Verdict(True, "", "")


def test_an_image_signed_with_both_keys_passes_the_old_policy_and_the_new(world):
    """Rotation's step 1: one attachment holds both signatures (cosign appends), and one accepted
    signature is enough, so the nodes accept it before and after keyData changes."""
    image = world.push("signed-with-both")
    world.cosign.sign(world.key, image)
    world.cosign.sign(world.other_key, image)
    assert world.verdict(image) == S.Verdict(True, "", "")
    assert world.verdict(image, world.rotated) == S.Verdict(True, "", "")
    old_only = world.push("signed-with-the-old-key")
    world.cosign.sign(world.key, old_only)
    assert not world.verdict(old_only, world.rotated).allowed    # step 3 only once all are re-signed


#: the system calls that write a path (strace's names); a path opened with any of these flags
WRITES = "open,openat,creat,mkdir,mkdirat,rename,renameat,renameat2,link,linkat,symlink,symlinkat"
_WRITE_FLAGS = ("O_WRONLY", "O_RDWR", "O_CREAT", "O_TRUNC", "O_APPEND")


def written(trace: Path) -> list[str]:
    """The paths a traced program created or opened for writing (successful calls only): what a
    read-only root filesystem would refuse outside the Pod's writable volumes."""
    import re
    out = []
    for line in trace.read_text().splitlines():
        call = re.search(r"\b(\w+)\((.*)\) = (-?\d+)", line)
        if not call or call.group(3).startswith("-"):
            continue
        name, args = call.group(1), call.group(2)
        path = re.findall(r'"([^"]*)"', args)
        if path and (not name.startswith("open") or any(f in args for f in _WRITE_FLAGS)):
            out.append(path[-1])
    return out


def run_signing_pod(world: World, pod: dict, keys: dict[str, Path], root: Path) -> None:
    """Run each container of the reconciler's signing Pod (manifests/pod-sign.yaml.j2) in turn, as
    the kubelet would: its own args and env, each volume a folder here, the password's
    secretKeyRef resolved. The registry's CA reaches cosign only as the service CA volume through
    the Pod's SSL_CERT_DIR (no SSL_CERT_FILE). Each runs under strace: it writes only under its
    writable mounts, so its read-only root filesystem holds."""
    import os
    import shutil
    import subprocess
    if shutil.which("strace") is None:
        S.missing("strace is not installed (it checks that the signing Pod writes only under its HOME)")
    service_ca = root / "service-ca"
    service_ca.mkdir(exist_ok=True)
    (service_ca / "service-ca.crt").write_bytes((world.cert_dir / "ca.crt").read_bytes())
    docker_config = root / "push-creds"
    docker_config.mkdir(exist_ok=True)
    (docker_config / "config.json").write_text("{}")
    mounts = {"/etc/ocl/service-ca": str(service_ca), "/etc/ocl/final-image-push-creds": str(docker_config),
              "/home/sign": str(root / "home")}
    volumes = {v["name"]: v for v in pod["spec"]["volumes"]}
    for c in pod["spec"].get("initContainers", []) + pod["spec"]["containers"]:
        paths = dict(mounts)
        for m in c["volumeMounts"]:
            secret = (volumes[m["name"]].get("secret") or {}).get("secretName")
            if secret in keys:
                paths[m["mountPath"]] = str(keys[secret].parent)       # a folder holding cosign.key

        def local(value: str, paths: dict = paths) -> str:
            for inside, outside in sorted(paths.items(), key=lambda p: -len(p[0])):
                value = value.replace(inside, outside)
            return value
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
        for e in c["env"]:
            env[e["name"]] = S.KEY_PASSWORD if "valueFrom" in e else local(e["value"])
        trace = root / f"{c['name']}.strace"
        result = subprocess.run(["strace", "-f", "-qq", "-o", str(trace), "-e", f"trace={WRITES}",
                                 str(world.cosign.binary), *map(local, c["args"])], env=env, capture_output=True,
                                text=True, timeout=300)
        assert result.returncode == 0, result.stderr[-2000:]
        assert c["securityContext"]["readOnlyRootFilesystem"] is True
        writable = [paths[m["mountPath"]] for m in c["volumeMounts"] if not m.get("readOnly")]
        assert "cosign.key" in trace.read_text()                   # the trace saw cosign's own opens
        assert all(any(path.startswith(w + "/") for w in writable) for path in written(trace)), \
            f"cosign wrote outside its writable mounts {writable}: {written(trace)}"


def test_the_reconcilers_signing_pod_signs_with_both_keys_that_both_policies_accept(world, tmp_path):
    """The signing Pod as the reconciler renders it (imagebuild/signer.py), two keys (a rotation's
    step 1): what it signs is allowed under the Component with the old key and with the new one."""
    from reconcile.imagebuild import signing
    from reconcile.imagebuild.signing import signer
    image = world.push("signed-by-the-pod")
    pod = signer.render(name="ocl-sign-worker-x", namespace="ocl-reconciler", labels={}, annotations={}, owner={},
                        image=image, keys=("old", "new"), signer_image=signing.DEFAULT_SIGNER_IMAGE,
                        push_secret="push")
    keys = {}
    for name, key in (("old", world.key), ("new", world.other_key)):
        (tmp_path / name).mkdir()
        keys[name] = tmp_path / name / "cosign.key"
        keys[name].write_bytes(key.read_bytes())
    run_signing_pod(world, pod, keys, tmp_path)
    assert sig_tag(image) in tags(world)
    assert world.verdict(image).allowed and world.verdict(image, world.rotated).allowed
