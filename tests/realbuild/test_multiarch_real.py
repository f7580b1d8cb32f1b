"""A mixed pool with the real parts (issue 55 item 7, its first two bullets): the build Pod's own
script builds the layered image for amd64 and for arm64 with the real buildah, the arm64 one under
qemu-user; both go to the real docker-registry (TLS, a test CA); our own code describes them
(cluster/registry.py `instance`), makes the OCI image index (imagebuild/platform/imageindex.py
`compose`) and pushes it (`put_index`); the real skopeo resolves each architecture from the index's
digest; cosign signs it as our signing Pod does (`--recursive`); containers/image decides, under the
shipped policy as the MCO's own code renders it, for each architecture.

What the harness does in place of a cluster (tests/support/multiarch.py): the base is a list of two
bases made alike from Debian's packages of each architecture; each build Pod's script runs as uid
1000 with the Pod's capabilities and a container's /dev (realbuild.run_build_pod_unprivileged); the
arm64 one runs with buildah's default platform made linux/arm64 (`multiarch.node_host`), the one
thing a node of arm64 has that this machine has not. Without it, and without `emulatedArchitectures`,
build-pod.sh names no platform, so buildah takes this machine's from the list (`FROM <list>` resolves
to linux/amd64 here) and labels the image so: test_the_arm64_pod_run_on_this_machine_alone_builds_amd64
shows it, and that our index refuses that image. With `emulatedArchitectures: arm64` the Pod itself
says the platform (BUILD_PLATFORM) and builds arm64 here, no wrapper:
test_an_emulated_arm64_build_runs_where_amd64_nodes_are_and_makes_an_arm64_image.

Expected values come from the specs and the tools, not from our output: a manifest's digest is the
sha256 of the bytes the registry serves (opencontainers/image-spec descriptor.md), an ELF header's
e_machine says its machine (System V ABI: EM_AARCH64 183, EM_X86_64 62), `uname -m` under qemu-user
says aarch64, cosign's signature of a digest is the tag `sha256-<hex>.sig` (sigstore/cosign
pkg/oci/remote, SignatureTag), and containers/image's words are its own.

**Signatures on a list: what containers/image requires** (go.podman.io/image/v5 v5.42.1, the
version policycheck links; containers/container-libs `image/`):

- copy.Image (`skopeo copy`, `podman pull`): from a list it takes the instance of the machine's
  platform (`image/copy/copy.go`, `Image`: CopySystemImage, ChooseInstanceByCompression) and
  evaluates the policy for that instance alone (`image/copy/single.go`, copySingleImage:
  IsRunningImageAllowed, "Source image rejected: ..."), with the signatures of the instance's digest
  (`image/docker/docker_image_src.go`, appendSignaturesFromSigstoreAttachments:
  manifestDigest(instanceDigest)), each accepted only when its signed digest is that manifest's
  (`image/signature/policy_eval_sigstore.go`, ValidateSignedDockerManifestDigest). A signed index
  whose instance is unsigned is refused.
- skopeo's image proxy, which rpm-ostree and bootc pull through (containers/skopeo
  `cmd/skopeo/proxy.go`, openImageImpl, protocol 0.2.6 "Policy Verification before pulling OCI"):
  evaluates the policy for the list and for the chosen instance, and refuses only when both fail.

So the index and each instance are signed (cosign `--recursive`), and each of the two callers
accepts every architecture. policycheck gives both halves: the policy for the index itself, and
copy.Image's verdict for each architecture. Debian's skopeo 1.9.3 cannot check sigstore signatures
(../shared/README.md), so the proxy itself is not run here.

Not proven here: an arm64 kernel or kubelet (emulation runs the RUN steps' binaries, nothing
else), the MCO's controllers on nodes of both architectures, the real node's Pending arm64 build
(issue 55 item 7's last two bullets).
"""

from __future__ import annotations

import copy
import hashlib
import json
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from reconcile.cluster import registry as registry_api
from reconcile.imagebuild import encoding
from reconcile.imagebuild.platform import imageindex
from reconcile.imagebuild.signing import signer
from tests.support import factory as F
from tests.support import multiarch as M
from tests.support import realbuild as R
from tests.support import requirement
from tests.support import signing as S

pytestmark = pytest.mark.realbuild
REPO = "ocl/os-image"
RENDERED = "rendered-worker-1"
#: custom content after the rendered stages: what the machine running the RUN steps says it is
CUSTOM = "FROM configs AS final\nRUN busybox uname -m > /etc/ocl-uname-m\n"


@dataclass
class World:
    registry: R.Registry
    host: R.Host
    root: Path
    cert_dir: Path                          # the registry's CA alone (containers/image's DockerCertPath)
    ca: Path
    bases: dict[str, str]                   # arch -> the base of that architecture, by digest
    base: str                               # the list of both, by digest: the pool's base
    items: list[dict]                       # the cluster after the reconciler's first run
    pods: dict[str, dict]                   # arch -> its build Pod
    built: dict[str, str]                   # arch -> the image its Pod pushed, by digest
    mc: dict = field(default_factory=dict)

    @property
    def repo(self) -> str:
        return f"{self.registry.host}/{REPO}"

    @property
    def auths(self) -> dict:
        return R.auth_file(self.registry, "pusher")

    def skopeo(self, *args: str) -> str:
        return self.host.run("skopeo", *args).stdout

    def raw(self, image: str) -> bytes:
        """The manifest's bytes as the registry serves them (`skopeo inspect --raw`)."""
        out = subprocess.run(["skopeo", "inspect", "--raw", "--tls-verify=false", f"docker://{image}"],
                             env=self.host.env, capture_output=True, timeout=120)
        assert out.returncode == 0, out.stderr.decode()
        return out.stdout


def tag_of(pod: dict) -> str:
    (container,) = pod["spec"]["containers"]
    return next(e["value"] for e in container["env"] if e["name"] == "TAG")


@pytest.fixture(scope="module")
def world():
    R.ensure_tools()
    M.qemu()
    why = R.unprivileged_tools()
    if why:
        requirement.missing(R.REQUIRE, why)
    root = Path(tempfile.mkdtemp(prefix="ocl-multiarch-"))
    root.chmod(0o755)                      # the build Pod's uid 1000 reaches its files under it
    ca = R.TestCA(root / "ca")
    cert_dir = root / "certs.d"
    cert_dir.mkdir()
    shutil.copy(ca.ca, cert_dir / "ca.crt")
    registry = R.Registry(root, tls=ca)
    try:
        host = R.Host(root, registry)
        bases, base = M.bases(host, registry)
        mc = F.machineconfig(RENDERED)
        items, pods = M.render(registry, base, mc, REPO, root / "run", CUSTOM)
        built = {arch: f"{registry.host}/{REPO}@{M.build(pod, items, host, arch, root / f'pod-{arch}')[0]}"
                 for arch, pod in sorted(pods.items())}
        yield World(registry, host, root, cert_dir, ca.ca, bases, base, items, pods, built, mc)
    finally:
        registry.stop()
        shutil.rmtree(root, ignore_errors=True)


@dataclass
class Pushed:
    """Our index over the two images, pushed by our registry client under the pool's tag."""
    instances: dict[str, imageindex.Instance]
    labels: dict[str, dict[str, str]]
    index: imageindex.Index
    answered: str                           # what put_index returned

    def image(self, world: World) -> str:
        return f"{world.repo}@{self.index.digest}"


def push_index(world: World, images: dict[str, str], tag: str) -> Pushed:
    """registry.instance of each image, imageindex.compose, registry.put_index: what a live run does
    (cluster/planner.py, cluster/apply.py)."""
    described = {arch: registry_api.instance(image, arch, world.auths, ctx=world.registry.context)
                 for arch, image in images.items()}
    index = imageindex.compose(inst for inst, _ in described.values())
    answered = registry_api.put_index(f"{world.repo}:{tag}", index, world.auths, ctx=world.registry.context)
    return Pushed({a: d[0] for a, d in described.items()}, {a: d[1] for a, d in described.items()}, index, answered)


@pytest.fixture(scope="module")
def pushed(world):
    return push_index(world, world.built, RENDERED)


# --- the builds ----------------------------------------------------------------------------------

def test_each_architecture_gets_its_build_pod_pushing_to_its_own_tag(world):
    assert sorted(world.pods) == list(M.ARCHS)
    for arch, pod in world.pods.items():
        assert pod["spec"]["nodeSelector"] == {"kubernetes.io/arch": arch}
        assert tag_of(pod) == f"{world.repo}:{RENDERED}-{arch}"
        inspected = json.loads(world.skopeo("inspect", "--tls-verify=false", f"docker://{tag_of(pod)}"))
        assert f"{world.repo}@{inspected['Digest']}" == world.built[arch]     # the termination message is the push


@pytest.mark.parametrize("arch", M.ARCHS)
def test_each_image_is_of_its_architecture_built_from_that_instance_of_the_list(world, arch, tmp_path):
    """The image's config says linux/<arch>; its base layer is the one of the list's <arch> instance;
    its binaries are that architecture's ELF; the RUN steps ran there (`uname -m`, and the rendered
    MachineConfig decoded by that architecture's base64, gunzip and jq, applied by the stand-ins)."""
    image = world.built[arch]
    inspected = json.loads(world.skopeo("inspect", "--tls-verify=false", f"docker://{image}"))
    assert (inspected["Os"], inspected["Architecture"]) == ("linux", arch)
    base = json.loads(world.skopeo("inspect", "--tls-verify=false", f"docker://{world.bases[arch]}"))
    assert inspected["Layers"][:len(base["Layers"])] == base["Layers"]
    assert inspected["Labels"]["machineconfig"] == RENDERED and inspected["Labels"]["baseOSContainerImage"] == world.base

    busybox = R.image_file(world.host, image, "/bin/busybox", tmp_path / "busybox")
    assert M.elf_arch(busybox) == arch
    if shutil.which("file"):
        (tmp_path / "busybox.bin").write_bytes(busybox)
        said = subprocess.run(["file", "-b", str(tmp_path / "busybox.bin")], capture_output=True, text=True).stdout
        assert {"amd64": "x86-64", "arm64": "ARM aarch64"}[arch] in said, said
    assert R.image_file(world.host, image, "/etc/ocl-uname-m", tmp_path / "uname") == f"{M.UNAME[arch]}\n".encode()
    current = R.image_file(world.host, image, "/etc/machine-config-daemon/currentconfig", tmp_path / "current")
    assert json.loads(current) == encoding.build_view(world.mc)
    applied = R.image_file(world.host, image, "/var/lib/ocl-standins/ignition-config.json", tmp_path / "ign")
    assert json.loads(applied) == world.mc["spec"]["config"]


def test_the_arm64_pod_run_on_this_machine_alone_builds_amd64_and_our_index_refuses_it(world):
    """Why the harness gives the arm64 build buildah's default of an arm64 node: the same Pod's
    script run as this machine runs it takes the list's amd64 instance, and its image says amd64.
    Our index refuses to name it for arm64 (imageindex.Instance.check): such an image, pushed by a
    build that ran on a node of another architecture, would not boot the pool's arm64 nodes."""
    if M.native() != "amd64":
        pytest.skip("shown on an amd64 machine, where arm64 is the emulated architecture")
    pod = copy.deepcopy(world.pods["arm64"])
    (container,) = pod["spec"]["containers"]
    for env in container["env"]:
        if env["name"] == "TAG":
            env["value"] += "-on-this-machine"
    code, message, logs = R.run_build_pod_unprivileged(pod, world.items, world.host, world.root / "pod-arm64-plain",
                                                       pod_devices=True)
    assert code == 0, logs
    image = f"{world.repo}@{message.strip()}"
    inspected = json.loads(world.skopeo("inspect", "--tls-verify=false", f"docker://{image}"))
    assert inspected["Architecture"] == "amd64"
    described, _ = registry_api.instance(image, "arm64", world.auths, ctx=world.registry.context)
    assert described.architecture == "amd64"
    amd64, _ = registry_api.instance(world.built["amd64"], "amd64", world.auths, ctx=world.registry.context)
    with pytest.raises(imageindex.Unfit, match="its image config says linux/amd64, not linux/arm64"):
        imageindex.compose([amd64, described])


def test_an_emulated_arm64_build_runs_where_amd64_nodes_are_and_makes_an_arm64_image(world, tmp_path):
    """emulatedArchitectures: arm64 (off by default): the arm64 build Pod as the reconciler renders it
    (the nodeSelector of the pool's other architecture, env BUILD_PLATFORM=linux/arm64), run here as
    it is, no buildah wrapper: build-pod.sh passes `--platform linux/arm64`, buildah takes the list's
    arm64 instance and runs the RUN steps under qemu-user, and the image is arm64 (its config, its
    ELF, `uname -m`), one our index takes for arm64."""
    if M.native() != "amd64":
        pytest.skip("shown on an amd64 machine, where arm64 is the emulated architecture")
    from tests.support import osimage
    cluster = M.mixed_pool(world.registry, world.base, world.mc, REPO)
    cluster.append(F.configmap("on-cluster-build-custom-dockerfile", {"worker": CUSTOM}))
    F.find(cluster, "ConfigMap", "on-cluster-build-config")[0]["data"]["emulatedArchitectures"] = "arm64"
    items = osimage.run(cluster, tmp_path / "run")
    (pod,) = [o for o in items if o["kind"] == "Pod" and "BUILD_PLATFORM" in
              {e["name"] for e in o["spec"]["containers"][0]["env"]}]
    env = {e["name"]: e.get("value") for e in pod["spec"]["containers"][0]["env"]}
    assert pod["spec"]["nodeSelector"] == {"kubernetes.io/arch": "amd64"} and env["BUILD_PLATFORM"] == "linux/arm64"
    assert env["TAG"] == f"{world.repo}:{RENDERED}-arm64"
    for e in pod["spec"]["containers"][0]["env"]:       # not over the native arm64 build's tag
        if e["name"] == "TAG":
            e["value"] += "-emulated"
    code, message, logs = R.run_build_pod_unprivileged(pod, items, world.host, world.root / "pod-arm64-emulated",
                                                       pod_devices=True)
    assert code == 0, logs
    image = f"{world.repo}@{message.strip()}"
    inspected = json.loads(world.skopeo("inspect", "--tls-verify=false", f"docker://{image}"))
    assert (inspected["Os"], inspected["Architecture"]) == ("linux", "arm64")
    assert M.elf_arch(R.image_file(world.host, image, "/bin/busybox", tmp_path / "busybox")) == "arm64"
    assert R.image_file(world.host, image, "/etc/ocl-uname-m", tmp_path / "uname") == f"{M.UNAME['arm64']}\n".encode()
    described, _ = registry_api.instance(image, "arm64", world.auths, ctx=world.registry.context)
    amd64, _ = registry_api.instance(world.built["amd64"], "amd64", world.auths, ctx=world.registry.context)
    assert json.loads(imageindex.compose([amd64, described]).body)["manifests"][1]["digest"] == described.digest


# --- the index -----------------------------------------------------------------------------------

def test_our_description_of_each_image_is_what_the_registry_serves(world, pushed):
    for arch, image in world.built.items():
        raw = world.raw(image)
        inst = pushed.instances[arch]
        assert inst.digest == "sha256:" + hashlib.sha256(raw).hexdigest() == image.split("@")[1]
        assert inst.size == len(raw) and inst.media_type == json.loads(raw)["mediaType"]
        assert (inst.arch, inst.architecture, inst.os, inst.variant) == (arch, arch, "linux", "")
        assert pushed.labels[arch]["machineconfig"] == RENDERED


def test_the_registry_serves_our_index_byte_for_byte_under_its_digest_and_the_pools_tag(world, pushed):
    assert pushed.answered == pushed.index.digest == "sha256:" + hashlib.sha256(pushed.index.body).hexdigest()
    assert world.raw(pushed.image(world)) == pushed.index.body
    assert world.raw(f"{world.repo}:{RENDERED}") == pushed.index.body
    doc = json.loads(world.raw(pushed.image(world)))
    assert doc["mediaType"] == "application/vnd.oci.image.index.v1+json" and doc["schemaVersion"] == 2
    assert [(m["platform"]["architecture"], m["digest"]) for m in doc["manifests"]] == \
        [(arch, world.built[arch].split("@")[1]) for arch in sorted(M.ARCHS)]


@pytest.mark.parametrize("arch", M.ARCHS)
def test_skopeo_resolves_each_architecture_from_the_index_digest(world, pushed, arch, tmp_path):
    """containers/image's choice of an instance (skopeo --override-os/--override-arch) from the
    index by digest: that architecture's image. `skopeo inspect` says the platform and the layers
    it resolved (its Digest is the index's); `skopeo copy` copies that instance's manifest, whose
    sha256 is the instance's digest."""
    image = pushed.image(world)
    platform = ("--override-os", "linux", "--override-arch", arch)
    inspected = json.loads(world.skopeo(*platform, "inspect", "--tls-verify=false", f"docker://{image}"))
    direct = json.loads(world.skopeo("inspect", "--tls-verify=false", f"docker://{world.built[arch]}"))
    assert (inspected["Os"], inspected["Architecture"]) == ("linux", arch)
    assert inspected["Layers"] == direct["Layers"]
    world.skopeo(*platform, "copy", "--src-tls-verify=false", f"docker://{image}", f"dir:{tmp_path / 'copy'}")
    copied = (tmp_path / "copy/manifest.json").read_bytes()
    assert "sha256:" + hashlib.sha256(copied).hexdigest() == world.built[arch].split("@")[1]


# --- signing -------------------------------------------------------------------------------------

@dataclass
class Signing:
    cosign: S.Cosign
    key: Path
    policycheck: Path
    files: S.NodeFiles                      # the nodes' policy.json and registries.d, shipped Component

    def sign_as_our_pod(self, image: str, recursive: bool) -> list[str]:
        """cosign with the args our signing Pod renders (manifests/pod-sign.yaml.j2), the key's
        path in the Pod replaced by this key's."""
        from reconcile.imagebuild import signing
        pod = signer.render(name="ocl-sign-worker-x", namespace=F.NS, labels={}, annotations={}, owner={},
                            image=image, keys=("k",), signer_image=signing.DEFAULT_SIGNER_IMAGE,
                            push_secret="push", recursive=recursive)
        (container,) = pod["spec"]["containers"]
        args = [str(self.key) if a.endswith("/cosign.key") else a for a in container["args"]]
        self.cosign.run(*args)
        return container["args"]


@pytest.fixture(scope="module")
def signing(world):
    cosign_bin, policycheck = S.tool("cosign"), S.tool("policycheck")
    home = world.root / "cosign-home"
    home.mkdir()
    cosign = S.Cosign(cosign_bin, home, world.ca)
    key, pub = cosign.key_pair("ours")
    release_repo = "openshift-release-dev/ocp-release"
    release = f"{world.registry.host}/{release_repo}@{R.push_image(world.registry, release_repo, 'release')}"
    files = S.shipped_policy(world.root / "policy", world.repo, pub, release)
    return Signing(cosign, key, policycheck, files)


def verdict(world: World, signing: Signing, image: str, arch: str = "") -> S.Verdict:
    return S.policycheck(signing.policycheck, signing.files, image, world.cert_dir, arch)


def sig_tags(world: World) -> set[str]:
    import urllib.request
    with urllib.request.urlopen(f"{world.registry.url}/v2/{REPO}/tags/list", context=world.registry.context) as resp:
        return set(json.loads(resp.read())["tags"] or ())


def sig_tag(digest: str) -> str:
    return digest.replace(":", "-") + ".sig"


def test_our_signing_pods_recursive_cosign_signs_the_index_and_each_image(world, pushed, signing):
    """The signing Pod's args for an index (`--recursive`), run with the real cosign: a signature for
    the index's digest and one for each instance's; containers/image accepts the index itself (the
    image proxy's first check) and each architecture as copy.Image pulls it, the instance it copies
    being that architecture's image."""
    image = pushed.image(world)
    assert "--recursive" in signing.sign_as_our_pod(image, recursive=True)
    wanted = {sig_tag(pushed.index.digest)} | {sig_tag(i.digest) for i in pushed.instances.values()}
    assert wanted <= sig_tags(world)
    assert verdict(world, signing, image) == S.Verdict(True, "", "")
    for arch in M.ARCHS:
        assert verdict(world, signing, image, arch) == S.Verdict(True, "", "", pushed.instances[arch].digest)


def small_index(world: World, marker: str) -> Pushed:
    """An index of two small images of their own (realbuild.push_image: one layer, a config saying
    linux/<arch>), pushed as the real ones are: its signatures are this test's alone."""
    images = {arch: f"{world.repo}@{R.push_image(world.registry, REPO, f'{marker}-{arch}', arch=arch)}"
              for arch in M.ARCHS}
    return push_index(world, images, marker)


def test_an_index_signed_alone_is_refused_for_each_architecture_by_copy_image(world, signing):
    """Without --recursive: the index's own signature passes the policy for the index, but copy.Image
    checks the instance it pulls, whose digest nobody signed (image/copy/single.go). Signing one
    instance lets that architecture alone through."""
    pushed = small_index(world, "index-signed-alone")
    image = pushed.image(world)
    assert "--recursive" not in signing.sign_as_our_pod(image, recursive=False)
    assert verdict(world, signing, image) == S.Verdict(True, "", "")
    # copy/copy.go's wrapping (singleInstanceErrorWrapping), copy/single.go's, the requirement's own words
    refused = S.Verdict(False, "copying system image from manifest list: Source image rejected: "
                        "A signature was required, but no signature exists", "PolicyRequirementError")
    for arch in M.ARCHS:
        assert verdict(world, signing, image, arch) == refused
    arm64 = f"{world.repo}@{pushed.instances['arm64'].digest}"
    signing.cosign.sign(signing.key, arm64)
    assert verdict(world, signing, image, "arm64") == S.Verdict(True, "", "", pushed.instances["arm64"].digest)
    assert verdict(world, signing, image, "amd64") == refused


def test_instances_signed_without_the_index_pass_copy_image_but_not_the_policy_for_the_index(world, signing):
    """The other half: each instance signed, the index not. copy.Image accepts each architecture; the
    policy for the index itself refuses it (skopeo's proxy then accepts on the instance's signature:
    proxy.go refuses only when both fail)."""
    pushed = small_index(world, "instances-signed-alone")
    for inst in pushed.instances.values():
        signing.cosign.sign(signing.key, f"{world.repo}@{inst.digest}")
    image = pushed.image(world)
    assert verdict(world, signing, image) == S.Verdict(False, "A signature was required, but no signature exists",
                                                       "PolicyRequirementError")
    for arch in M.ARCHS:
        assert verdict(world, signing, image, arch) == S.Verdict(True, "", "", pushed.instances[arch].digest)


# --- the reconciler's own run ---------------------------------------------------------------------

def test_the_reconcilers_live_run_pushes_the_index_of_the_two_images_and_records_it(world, run_cli, tmp_path):
    """The kubelet reports each Pod's push (its termination message); the next run, live against an
    API server with the real registry, describes both images, pushes the index under the pool's tag
    (a PUT the registry's access log shows) and records the index's digest as the pool's image. The
    registry serves under it an OCI index naming each Pod's image for its architecture."""
    import kubelet

    from reconcile.contract import annotations as A
    from tests.conftest import ApiCli
    done = copy.deepcopy(world.items)
    for obj in done:
        if obj["kind"] == "Pod" and obj["metadata"]["name"] in {p["metadata"]["name"] for p in world.pods.values()}:
            arch = obj["spec"]["nodeSelector"]["kubernetes.io/arch"]
            kubelet.set_phase(obj, "Succeeded", digest=world.built[arch].split("@")[1])
    mark = len(R.requests_seen(world.registry))
    live = ApiCli(tmp_path, run_cli.capsys)
    code, after, err = live.run(done, "--registry-ca", str(world.ca))
    assert code == 0, err
    annotations = F.the_pool(after)["metadata"]["annotations"]
    assert annotations[A.STATE] == A.SUCCEEDED, annotations.get(A.MESSAGE)
    image = annotations[A.IMAGE]
    repo, _, digest = image.partition("@")
    assert repo == world.repo
    assert ("PUT", f"/v2/{REPO}/manifests/{RENDERED}", 201) in R.requests_seen(world.registry)[mark:]
    raw = world.raw(image)
    assert "sha256:" + hashlib.sha256(raw).hexdigest() == digest
    doc = json.loads(raw)
    assert doc["mediaType"] == "application/vnd.oci.image.index.v1+json"
    assert {m["platform"]["architecture"]: m["digest"] for m in doc["manifests"]} == \
        {arch: built.split("@")[1] for arch, built in world.built.items()}
