"""Harness for the realbuild suite: a local registry, a tiny base OS image, and the build Pod we
generate executed for real with the host's buildah (its volumes materialised under a temporary
root, its env taken from the pod spec with paths pointed at that root)."""

from __future__ import annotations

import base64
import contextlib
import io
import json
import os
import shutil
import socket
import ssl
import subprocess
import tarfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support import seccompprofile as SP

TOOLS = ("buildah", "skopeo", "docker-registry", "busybox", "jq", "openssl")
INSTALL = ("apt-get install buildah docker-registry skopeo busybox-static jq openssl libcap2-bin uidmap "
           "util-linux python3-seccomp golang-github-containers-common")
#: .ci/run sets this so that a missing tool fails the suite instead of skipping it.
REQUIRE = "OCL_REALBUILD"

IGNITION_STANDIN = """#!/bin/sh
# Stand-in for the ignition binary: records how it was called and the config it was given.
mkdir -p /var/lib/ocl-standins
echo "$(basename "$0") $*" >> /var/lib/ocl-standins/ignition.args
for last; do :; done
cp "$last" /var/lib/ocl-standins/ignition-config.json
"""
OSTREE_STANDIN = """#!/bin/sh
# Stand-in for ostree: records how it was called.
mkdir -p /var/lib/ocl-standins
echo "ostree $*" >> /var/lib/ocl-standins/ostree.args
"""
RPM_OSTREE_STANDIN = """#!/bin/sh
# Stand-in for rpm-ostree: records how it was called and what the repository it was given holds.
mkdir -p /var/lib/ocl-standins
echo "rpm-ostree $*" >> /var/lib/ocl-standins/rpm-ostree.args
baseurl=$(sed -n 's#^baseurl=file://##p' /etc/yum.repos.d/ocl-extensions.repo)
ls "$baseurl" "$baseurl/repodata" >> /var/lib/ocl-standins/rpm-ostree.repo
"""
BUSYBOX_APPLETS = ("sh", "ash", "base64", "gunzip", "mkdir", "cp", "rm", "ln", "cat", "echo", "ls",
                   "basename", "test", "[", "true", "env", "chmod", "mv", "sed", "grep", "printf")


def ensure_tools() -> None:
    missing = [t for t in TOOLS if shutil.which(t) is None]
    if os.geteuid() != 0:
        missing.append("root (buildah --isolation chroot needs it)")
    if missing:
        message = (f"realbuild needs {', '.join(missing)}: run as root with `{INSTALL}` "
                   f"(.ci/run does both), or set {REQUIRE}=require to make this a failure")
        if os.environ.get(REQUIRE) == "require":
            pytest.fail(message)
        pytest.skip(message)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Registry:
    """`docker-registry serve` on 127.0.0.1 with a free port, storage in a temporary folder;
    with `tls` (a TestCA), it serves HTTPS with a certificate that CA signed; with `htpasswd` (a
    file of bcrypt entries), it answers only basic auth of its users."""

    def __init__(self, root: Path, tls: TestCA | None = None, htpasswd: Path | None = None,
                 access_log: bool = False):
        self.port = free_port()
        self.host = f"127.0.0.1:{self.port}"
        self.tls = tls
        self.storage = root / f"registry-data-{self.port}"
        http: dict[str, Any] = {"addr": self.host}
        if tls is not None:
            http["tls"] = {"certificate": str(tls.cert), "key": str(tls.key)}
        config = root / f"registry-{self.port}.yml"
        config.write_text(json.dumps({
            "version": 0.1, "log": {"level": "info" if access_log else "error", "formatter": "json"},
            "storage": {"filesystem": {"rootdirectory": str(self.storage)},
                        "delete": {"enabled": True}},
            "http": http, **({"auth": {"htpasswd": {"realm": "ocl", "path": str(htpasswd)}}} if htpasswd else {})}))
        #: one line a request (method, path, status), as docker-registry logs them on stdout
        self.http_log = root / f"registry-{self.port}.access.log"
        #: with `access_log`, the registry's own log: one "response completed" line per request
        self.log = root / f"registry-{self.port}.log"
        with open(self.http_log, "wb") as out, open(self.log, "wb") as err:
            self.proc = subprocess.Popen(["docker-registry", "serve", str(config)], stdout=out,
                                         stderr=err if access_log else subprocess.DEVNULL)
        self.url = f"{'https' if tls else 'http'}://{self.host}"
        self.context = ssl.create_default_context(cafile=str(tls.ca)) if tls else None
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"{self.url}/v2/", timeout=1, context=self.context):
                    return
            except urllib.error.HTTPError as err:
                if err.code == 401:             # up, and asking for credentials
                    return
                time.sleep(0.1)
            except OSError:
                time.sleep(0.1)
        self.stop()
        raise RuntimeError("docker-registry did not start within 20 s")

    def requests(self) -> list[dict[str, Any]]:
        """The requests the registry answered so far, in order, from its log at level info
        (distribution's "response completed" entries): method, uri, status and bytes written."""
        out = []
        for line in self.log.read_text(errors="replace").splitlines():
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            if entry.get("msg") == "response completed":
                out.append({"method": entry["http.request.method"], "uri": entry["http.request.uri"],
                            "status": entry["http.response.status"],
                            "written": entry.get("http.response.written", 0)})
        return out

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


class TestCA:
    """A CA made for the test (openssl), and a server certificate it signed for 127.0.0.1 and
    `ips` (a node's gateway, by which its Pods reach an exposed server)."""

    def __init__(self, root: Path, ips: tuple[str, ...] = ()):
        root.mkdir(parents=True, exist_ok=True)
        self.ca, self.ca_key = root / "ca.crt", root / "ca.key"
        self.cert, self.key = root / "server.crt", root / "server.key"

        def openssl(*args: str) -> None:
            subprocess.run(["openssl", *args], check=True, capture_output=True, cwd=root)
        # P-256 keys: an RSA key costs openssl about 0.2 s of CPU to make, and the suite makes dozens
        ec = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1")
        openssl("req", "-x509", *ec, "-nodes", "-days", "1", "-subj", "/CN=ocl test CA",
                "-keyout", str(self.ca_key), "-out", str(self.ca))
        openssl("req", *ec, "-nodes", "-subj", "/CN=127.0.0.1",
                "-keyout", str(self.key), "-out", str(root / "server.csr"))
        (root / "san.ext").write_text("subjectAltName=" + ",".join(f"IP:{ip}" for ip in ("127.0.0.1", *ips)) + "\n")
        openssl("x509", "-req", "-in", str(root / "server.csr"), "-CA", str(self.ca), "-CAkey",
                str(self.ca_key), "-CAcreateserial", "-days", "1", "-extfile", str(root / "san.ext"),
                "-out", str(self.cert))


def pool_after_failure(run_cli: Any, items: list[dict[str, Any]], reason: str, pool: str = "worker"
                       ) -> tuple[int, dict[str, str], list[dict[str, Any]]]:
    """The run after the kubelet reports the build Pod Failed with `reason` as its termination
    message (FallbackToLogsOnError: the log's tail where the script wrote none): (its exit code, the
    pool's annotations, the cluster after it)."""
    import copy

    import kubelet
    failed = copy.deepcopy(items)
    for obj in failed:
        if obj["kind"] == "Pod":
            kubelet.set_phase(obj, "Failed", log=reason)
    code, final, _ = run_cli.run(failed)
    found = next(o for o in final if o["kind"] == "MachineConfigPool" and o["metadata"]["name"] == pool)
    return code, found["metadata"].get("annotations") or {}, final


def require_registry() -> None:
    """The realapi suite's rollback needs only `docker-registry` (no root, no buildah)."""
    if shutil.which("docker-registry") is None:
        message = f"needs docker-registry: `{INSTALL}` (.ci/run does it)"
        if os.environ.get(REQUIRE) == "require" or os.environ.get("OCL_REALAPI") == "require":
            pytest.fail(message)
        pytest.skip(message)


def upload_blob(registry: Registry, repo: str, data: bytes) -> dict[str, Any]:
    """A blob pushed through the registry API (monolithic upload): its digest and size."""
    import hashlib
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    with urllib.request.urlopen(urllib.request.Request(
            f"{registry.url}/v2/{repo}/blobs/uploads/", method="POST", data=b""), context=registry.context) as resp:
        location = resp.headers["Location"]
    location = location if location.startswith("http") else f"{registry.url}{location}"
    sep = "&" if "?" in location else "?"
    urllib.request.urlopen(urllib.request.Request(
        f"{location}{sep}digest={digest}", method="PUT", data=data,
        headers={"Content-Type": "application/octet-stream"}), context=registry.context).close()
    return {"digest": digest, "size": len(data)}


def put_manifest(registry: Registry, repo: str, ref: str, manifest: dict[str, Any]) -> str:
    """PUT a manifest (or index) under a tag; the digest the registry answers with."""
    request = urllib.request.Request(
        f"{registry.url}/v2/{repo}/manifests/{ref}", method="PUT", data=json.dumps(manifest).encode(),
        headers={"Content-Type": manifest["mediaType"]})
    with urllib.request.urlopen(request, context=registry.context) as resp:
        return resp.headers["Docker-Content-Digest"]


def push_image(registry: Registry, repo: str, marker: str, labels: dict[str, str] | None = None,
               layers: tuple[bytes, ...] = (), arch: str = "amd64") -> str:
    """Push an image (a gzipped layer holding a file `/marker`, then `layers` as they are; its
    config's labels `marker` and `labels`, e.g. our build-id label, as the build's Dockerfile sets
    it) through the registry API alone; returns the manifest digest the registry answers with
    (Docker-Content-Digest)."""
    import io

    layer = io.BytesIO()
    with tarfile.open(fileobj=layer, mode="w:gz") as tar:
        content = marker.encode()
        info = tarfile.TarInfo("marker")
        info.size = len(content)
        tar.addfile(info, io.BytesIO(content))
    refs = [upload_blob(registry, repo, data) for data in (layer.getvalue(), *layers)]
    config = upload_blob(registry, repo, json.dumps({"architecture": arch, "os": "linux", "rootfs": {
        "type": "layers", "diff_ids": []}, "config": {"Labels": {"marker": marker, **(labels or {})}}}).encode())
    return put_manifest(registry, repo, marker, {
        "schemaVersion": 2, "mediaType": "application/vnd.docker.distribution.manifest.v2+json",
        "config": dict(config, mediaType="application/vnd.docker.container.image.v1+json"),
        "layers": [dict(r, mediaType="application/vnd.docker.image.rootfs.diff.tar.gzip") for r in refs]})


#: the media types push_image and push_index write (an OCI index over Docker schema 2 instances, as
#: opencontainers/image-spec image-index.md allows: each descriptor names its own mediaType)
DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"
OCI_INDEX = "application/vnd.oci.image.index.v1+json"


def get_manifest(registry: Registry, repo: str, ref: str) -> tuple[str, bytes]:
    """(its media type, its bytes) as the registry serves `repo@ref` to a client that accepts an
    index and an image manifest alike."""
    request = urllib.request.Request(f"{registry.url}/v2/{repo}/manifests/{ref}", headers={
        "Accept": f"{OCI_INDEX}, {DOCKER_MANIFEST}"})
    with urllib.request.urlopen(request, context=registry.context) as resp:
        return resp.headers["Content-Type"], resp.read()


def push_index(registry: Registry, repo: str, marker: str, labels: dict[str, str] | None = None,
               archs: tuple[str, ...] = ("amd64", "arm64"),
               layers: dict[str, tuple[bytes, ...]] | None = None) -> str:
    """Push one image per architecture (push_image, marker `<marker>-<arch>`, `layers[arch]`), then an
    OCI image index over them with each one's platform, tagged `marker`, as `buildah manifest push
    --all` pushes one (../shared/reference/multiarch.md); returns the index's digest."""
    instances = {arch: push_image(registry, repo, f"{marker}-{arch}", labels, (layers or {}).get(arch, ()), arch)
                 for arch in archs}
    return put_manifest(registry, repo, marker, {"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": [
        {"mediaType": DOCKER_MANIFEST, "digest": digest, "size": len(get_manifest(registry, repo, digest)[1]),
         "platform": {"architecture": arch, "os": "linux"}} for arch, digest in instances.items()]})


def platforms(registry: Registry, repo: str, digest: str) -> dict[str, str]:
    """What `repo@digest` is, read back from the registry: {architecture: instance digest} of an
    index, or {its config's architecture: digest} of one image."""
    kind, raw = get_manifest(registry, repo, digest)
    doc = json.loads(raw)
    if kind == OCI_INDEX:
        return {m["platform"]["architecture"]: m["digest"] for m in doc["manifests"]}
    with urllib.request.urlopen(f"{registry.url}/v2/{repo}/blobs/{doc['config']['digest']}",
                                context=registry.context) as resp:
        return {json.load(resp)["architecture"]: digest}


def delete_manifest(registry: Registry, repo: str, digest: str) -> None:
    urllib.request.urlopen(urllib.request.Request(
        f"{registry.url}/v2/{repo}/manifests/{digest}", method="DELETE"), context=registry.context).close()


def has_manifest(registry: Registry, repo: str, digest: str) -> bool:
    """Does the registry still serve `repo@digest` (HEAD of the manifest: 200, or 404)?"""
    request = urllib.request.Request(f"{registry.url}/v2/{repo}/manifests/{digest}", method="HEAD", headers={
        "Accept": "application/vnd.docker.distribution.manifest.v2+json"})
    try:
        urllib.request.urlopen(request, context=registry.context).close()
    except urllib.error.HTTPError as err:
        if err.code == 404:
            return False
        raise
    return True


class Host:
    """Environment for buildah and skopeo on this machine, isolated under `root`."""

    def __init__(self, root: Path, registry: Registry):
        self.root = root
        registries = root / "registries.conf"
        registries.write_text(f'[[registry]]\nlocation = "{registry.host}"\ninsecure = true\n')
        storage = root / "storage.conf"
        storage.write_text(f'[storage]\ndriver = "vfs"\nrunroot = "{root}/run"\n'
                           f'graphroot = "{root}/graph"\n')
        self.env = dict(os.environ, CONTAINERS_REGISTRIES_CONF=str(registries),
                        CONTAINERS_STORAGE_CONF=str(storage), BUILDAH_ISOLATION="chroot")

    def run(self, *cmd: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(list(cmd), env=self.env, capture_output=True, text=True, timeout=300)
        if check and result.returncode != 0:
            raise AssertionError(f"{' '.join(cmd)} failed: {result.stderr[-2000:]}")
        return result


def auth_file(registry: Registry, user: str) -> dict[str, Any]:
    return auth_for(registry.host, user)


def auth_for(host: str, user: str) -> dict[str, Any]:
    """A docker config.json for `host` (the registry as its client reaches it)."""
    token = base64.b64encode(f"{user}:not-checked".encode()).decode()
    return {"auths": {host: {"auth": token}}}


def write_standins(rootfs: Path) -> None:
    """Into a root filesystem that has /bin/busybox (or will, from a layer under it): busybox's
    applets as links to it, the folders the Dockerfile writes to, and stand-ins at the paths the
    Dockerfile calls for ignition, ostree and rpm-ostree (shell scripts: they run on the image's
    own /bin/sh, of whatever architecture it is)."""
    (rootfs / "bin").mkdir(parents=True, exist_ok=True)
    for applet in BUSYBOX_APPLETS:
        (rootfs / "bin" / applet).symlink_to("busybox")
    for sub in ("usr/bin", "tmp", "etc", "var/lib"):
        (rootfs / sub).mkdir(parents=True, exist_ok=True)
    ignition = rootfs / "usr/lib/dracut/modules.d/30ignition/ignition"
    ignition.parent.mkdir(parents=True)
    ignition.write_text(IGNITION_STANDIN)
    (rootfs / "usr/bin/ostree").write_text(OSTREE_STANDIN)
    (rootfs / "usr/bin/rpm-ostree").write_text(RPM_OSTREE_STANDIN)
    for script in (ignition, rootfs / "usr/bin/ostree", rootfs / "usr/bin/rpm-ostree"):
        script.chmod(0o755)


def build_base_image(host: Host, ref: str) -> None:
    """FROM scratch: busybox for a shell and base64/gunzip, the real jq with its libraries, and
    stand-ins at the paths the Dockerfile calls for ignition and ostree."""
    rootfs = host.root / "base-rootfs"
    (rootfs / "bin").mkdir(parents=True)
    shutil.copy2(shutil.which("busybox"), rootfs / "bin/busybox")
    write_standins(rootfs)
    jq = shutil.which("jq")
    shutil.copy2(jq, rootfs / "usr/bin/jq")
    libs = subprocess.run(["ldd", jq], capture_output=True, text=True, check=True).stdout
    for line in libs.splitlines():
        path = next((p for p in line.split() if p.startswith("/")), None)
        if path:
            target = rootfs / path.lstrip("/")
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(os.path.realpath(path), target)
    # a file owned by another uid, as an OS image has many: unpacking it as uid 1000 needs a user
    # namespace that maps more than one uid (see run_build_pod_unprivileged)
    other = host.root / "owned-by-uid-2.tar"
    with tarfile.open(other, "w") as tar:
        info = tarfile.TarInfo("etc/owned-by-uid-2")
        info.size, info.uid, info.gid = 3, 2, 2
        tar.addfile(info, io.BytesIO(b"ok\n"))
    ctr = host.run("buildah", "--storage-driver", "vfs", "from", "scratch").stdout.strip()
    host.run("buildah", "--storage-driver", "vfs", "copy", ctr, str(rootfs), "/")
    host.run("buildah", "--storage-driver", "vfs", "add", ctr, str(other), "/")
    host.run("buildah", "--storage-driver", "vfs", "config", "--env", "PATH=/usr/bin:/bin", ctr)
    host.run("buildah", "--storage-driver", "vfs", "commit", ctr, ref)
    host.run("buildah", "--storage-driver", "vfs", "push", ref, f"docker://{ref}")


def build_extensions_image(host: Host, ref: str) -> None:
    """A stand-in extensions image: a tiny repository where the real one keeps it."""
    repo = host.root / "extensions-rootfs/usr/share/rpm-ostree/extensions"
    (repo / "repodata").mkdir(parents=True)
    (repo / "repodata/repomd.xml").write_text("<repomd/>\n")
    (repo / "usbguard-1.0-1.x86_64.rpm").write_bytes(b"not really an rpm\n")
    ctr = host.run("buildah", "--storage-driver", "vfs", "from", "scratch").stdout.strip()
    host.run("buildah", "--storage-driver", "vfs", "copy", ctr, str(host.root / "extensions-rootfs"), "/")
    host.run("buildah", "--storage-driver", "vfs", "commit", ctr, ref)
    host.run("buildah", "--storage-driver", "vfs", "push", ref, f"docker://{ref}")


def materialise(pod: dict[str, Any], items: list[dict[str, Any]], root: Path) -> dict[str, str]:
    """Write the Pod's ConfigMap and Secret volumes as files at their mount paths under `root`,
    and return the container's env from the pod spec with those paths pointed under `root`."""
    (container,) = pod["spec"]["containers"]
    by_name = {(o["kind"], o["metadata"]["name"]): o for o in items}
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    for volume in pod["spec"]["volumes"]:
        target = root / mounts[volume["name"]].lstrip("/")
        target.mkdir(parents=True, exist_ok=True)
        sources = [s["configMap"] for s in volume.get("projected", {}).get("sources", [])]
        if "configMap" in volume:
            sources.append(volume["configMap"])
        for source in sources:                  # as the kubelet does: `items`, and `optional`
            cm = by_name.get(("ConfigMap", source["name"]))
            if cm is None and source.get("optional"):
                continue
            data = cm["data"]
            for item in source.get("items") or [{"key": k, "path": k} for k in data]:
                if item["key"] in data:
                    (target / item["path"]).write_text(data[item["key"]])
        if "secret" in volume:
            data = by_name[("Secret", volume["secret"]["secretName"])]["data"]
            items_ = volume["secret"].get("items") or [{"key": k, "path": k} for k in data]
            for item in items_:
                (target / item["path"]).write_bytes(base64.b64decode(data[item["key"]]))
    termination = container.get("terminationMessagePath", "/dev/termination-log")
    (root / termination.lstrip("/")).parent.mkdir(parents=True, exist_ok=True)
    prefixes = sorted(set(mounts.values()) | {termination}, key=len, reverse=True)
    env = {}
    for var in container["env"]:
        value = var.get("value", "")
        if any(value == p or value.startswith(p.rstrip("/") + "/") for p in prefixes):
            value = str(root) + value
        env[var["name"]] = value
    env["VOLUME_ROOT"] = str(root)
    return env


def run_build_pod(pod: dict[str, Any], items: list[dict[str, Any]], host: Host,
                  root: Path) -> tuple[int, str, str]:
    """Run the container's own command; (exit code, termination message, log tail) as a kubelet
    would report them with FallbackToLogsOnError."""
    env = dict(host.env, **materialise(pod, items, root))
    (container,) = pod["spec"]["containers"]
    result = subprocess.run(container["command"], env=env, capture_output=True, text=True, timeout=600)
    termination = root / container["terminationMessagePath"].lstrip("/")
    message = termination.read_text() if termination.exists() else ""
    logs = (result.stdout + result.stderr)[-2048:]
    return result.returncode, message, logs


#: The capabilities a container runtime gives a container by default (moby's default set, used by
#: containerd; CRI-O's default is a subset of it); the pod spec's `drop`/`add` apply to these.
RUNTIME_DEFAULT_CAPS = ("AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD",
                        "NET_BIND_SERVICE", "NET_RAW", "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT")
#: What quay.io/buildah/stable gives its `build` user (uid 1000): subordinate ids, and
#: newuidmap/newgidmap with file capabilities, not setuid (Fedora's shadow-utils packaging).
BUILD_USER_SUBIDS = "1000:100000:65536\n"
FILE_CAPS = {"newuidmap": "cap_setuid=ep", "newgidmap": "cap_setgid=ep"}


#: What the build Pod's script (manifests/build-pod.sh) and its securityContext need of the image it
#: runs in: (need, how this harness gives it, where quay.io/buildah/stable has it, where the MCO's
#: image of the release has it). docs/builder-image.md holds the same table for readers; the
#: harness drops `subids` and `filecaps` one at a time to show each is needed (test_realbuild).
IMAGE_NEEDS = (
    ("binaries", "/bin/sh, cp, mkdir; buildah",
     "the host's buildah and busybox",
     "containers/image_build buildah/Containerfile: dnf install buildah (Fedora base)",
     "openshift/machine-config-operator Dockerfile: dnf install buildah fuse-overlayfs cpp; rhel9 base"),
    ("user", "uid 1000 with a writable $HOME (the Pod sets HOME=/home/build on an emptyDir)",
     "setpriv --reuid=1000, HOME on a directory it owns",
     "useradd build (the first user: uid 1000)",
     "Dockerfile: useradd --uid 1000 build"),
    ("subids", "subordinate uid and gid ranges for uid 1000 (/etc/subuid, /etc/subgid)",
     "BUILD_USER_SUBIDS bind-mounted over /etc/subuid and /etc/subgid",
     "echo build:1:999 build:1001:64535 > /etc/subuid and /etc/subgid",
     "not written by the Dockerfile: its own build runs buildah as `build` (buildah-build.sh: su -m "
     "build) and so needs them as ours does"),
    ("filecaps", "newuidmap with cap_setuid, newgidmap with cap_setgid (file capabilities)",
     "copies of the host's tools given FILE_CAPS with setcap",
     "rpm --setcaps shadow-utils",
     "not set by the Dockerfile: shadow-utils of the base image; needed by its own build as above"),
    ("policy", "/etc/containers/policy.json unless the cluster's is mounted (SIGNATURE_POLICY)",
     "the host's containers-common",
     "containers-common, a dependency of buildah",
     "containers-common, a dependency of buildah"),
)


def unprivileged_tools() -> str | None:
    """Why the unprivileged run cannot happen here, or None."""
    missing = [t for t in ("setpriv", "unshare", "setcap", "newuidmap", "newgidmap") if shutil.which(t) is None]
    missing += [f for f in ("/etc/subuid", "/etc/subgid") if not os.path.exists(f)]
    return f"needs {', '.join(missing)} (util-linux, libcap2-bin, uidmap)" if missing else None


def run_build_pod_unprivileged(pod: dict[str, Any], items: list[dict[str, Any]], host: Host,
                               root: Path, lacks: frozenset[str] = frozenset(),
                               profile: dict[str, Any] | None = None,
                               volumes: dict[str, Path] | None = None,
                               pod_devices: bool = False,
                               system_storage_conf: str | None = None,
                               user_storage_conf: str | None = None,
                               chown_volumes: bool = True) -> tuple[int, str, str]:
    """Run the container's command as its securityContext says, not as root (exit code,
    termination message, the tail of its log: stdout and stderr in one stream): uid and gid from
    runAsUser/runAsGroup, no supplementary groups, no inheritable or ambient capabilities, the
    bounding set of the runtime defaults minus `drop` plus `add`, no_new_privs unless
    allowPrivilegeEscalation, in a mount namespace that shows the buildah image's /etc/subuid and
    /etc/subgid. Files are materialised as the kubelet would: volumes readable, the emptyDir and
    the termination message writable by that user. `lacks`: IMAGE_NEEDS this image does not give
    (`subids`: empty /etc/subuid and /etc/subgid; `filecaps`: newuidmap/newgidmap without them).
    `volumes`: host directories mounted at these container paths, as a volume that outlives the Pod
    (a PersistentVolumeClaim) or a sized filesystem would be; made the build user's, as the
    kubelet's fsGroup makes a volume writable; with `chown_volumes` false their sources keep their
    owner and mode, as a CSI driver that does not apply fsGroup leaves a volume. `pod_devices`: the container's /dev as a runtime
    makes it (pod_dev_commands), without the host's other devices such as /dev/fuse.
    `system_storage_conf`: the text of the image's /etc/containers/storage.conf (a builder image's
    own, such as quay.io/buildah/stable's); the host's /etc/containers is shown with it in that
    mount namespace alone. `user_storage_conf`: the text of $HOME/.config/containers/storage.conf,
    the file a rootless user's buildah reads (in the Pod, $HOME is an emptyDir that hides the
    image's). The env has no CONTAINERS_STORAGE_CONF (the script's own choice), so containers/storage
    finds its files where it would in the Pod. Under the seccomp filter the spec
    asks for (seccomp_filter), or `profile` in its place."""
    (container,) = pod["spec"]["containers"]
    ctx = container.get("securityContext") or {}
    uid, gid = ctx["runAsUser"], ctx.get("runAsGroup", ctx["runAsUser"])
    caps = ctx.get("capabilities") or {}
    bounding = (set(RUNTIME_DEFAULT_CAPS) - set(caps.get("drop") or ())) | set(caps.get("add") or ())
    if "ALL" in (caps.get("drop") or ()):
        bounding = set(caps.get("add") or ())
    root.mkdir(parents=True)
    root.chmod(0o755)
    env = dict(host.env, **materialise(pod, items, root))
    for path in [root, *root.rglob("*")]:
        if path.is_dir():
            path.chmod(0o755)
    home = Path(env["HOME"] if env["HOME"].startswith(str(root)) else str(root) + env["HOME"])
    for writable in (home, root / "run"):
        writable.mkdir(parents=True, exist_ok=True)
        os.chown(writable, uid, gid)
    termination = root / container["terminationMessagePath"].lstrip("/")
    termination.touch()
    os.chown(termination, uid, gid)
    if user_storage_conf is not None:
        for sub in (".config", ".config/containers", ".config/containers/storage.conf"):
            if sub.endswith(".conf"):
                (home / sub).write_text(user_storage_conf)
            else:
                (home / sub).mkdir(exist_ok=True)
            os.chown(home / sub, uid, gid)
    tools = root / "tools"
    tools.mkdir()
    for name, cap in FILE_CAPS.items():
        shutil.copy(shutil.which(name), tools / name)
        (tools / name).chmod(0o755)
        if "filecaps" not in lacks:
            subprocess.run(["setcap", cap, str(tools / name)], check=True)
    (root / "subuid").write_text("" if "subids" in lacks else BUILD_USER_SUBIDS)
    (root / "subgid").write_text("" if "subids" in lacks else BUILD_USER_SUBIDS)
    registries = root / "registries.conf"
    shutil.copy(host.env["CONTAINERS_REGISTRIES_CONF"], registries)
    env = {k: v for k, v in env.items() if k != "CONTAINERS_STORAGE_CONF"}     # the user's own storage
    env.update(HOME=str(home), XDG_RUNTIME_DIR=str(root / "run"), PATH=f"{tools}:{env['PATH']}")
    env.setdefault("CONTAINERS_REGISTRIES_CONF", str(registries))
    if env["CONTAINERS_REGISTRIES_CONF"] == host.env["CONTAINERS_REGISTRIES_CONF"]:
        env["CONTAINERS_REGISTRIES_CONF"] = str(registries)
    setpriv = ["setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups", "--inh-caps=-all",
               "--bounding-set=" + ",".join(["-all"] + [f"+{c.lower()}" for c in sorted(bounding)])]
    if ctx.get("allowPrivilegeEscalation") is False:
        setpriv.append("--no-new-privs")
    command = seccomp_filter(pod, bounding, root / "seccomp.json", profile, setpriv + list(container["command"][:2]))
    inner = " ".join([f"mount --bind {root / 'subuid'} /etc/subuid && mount --bind {root / 'subgid'} /etc/subgid",
                      "&& exec", *(f"'{a}'" for a in command), '"$0"'])
    for path, source in (volumes or {}).items():
        (root / path.lstrip("/")).mkdir(parents=True, exist_ok=True)
        if chown_volumes:
            os.chown(source, uid, gid)
        inner = f"mount --bind '{source}' '{root / path.lstrip('/')}' && {inner}"
    if pod_devices:
        inner = f"{pod_dev_commands(root / 'pod-dev')} && {inner}"
    if system_storage_conf is not None:
        # a copy of the directory, bound over it: the host may have no storage.conf to bind a file
        # over, and making one would change the host's buildah
        etc = root / "etc-containers"
        if os.path.isdir("/etc/containers"):
            shutil.copytree("/etc/containers", etc, symlinks=True)
        etc.mkdir(exist_ok=True)
        etc.chmod(0o755)
        (etc / "storage.conf").write_text(system_storage_conf)
        (etc / "storage.conf").chmod(0o644)
        inner = f"mount --bind '{etc}' /etc/containers && {inner}"
    # one stream in the order it was written, as the kubelet logs a container's stdout and stderr:
    # with FallbackToLogsOnError its tail is the termination message of a failed build
    result = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c", inner,
                             container["command"][2]], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, timeout=600)
    message = termination.read_text() if termination.exists() else ""
    (root / "pod.log").write_text(result.stdout)                # the whole log, for a test to read
    return result.returncode, message, result.stdout[-3000:]


def seccomp_filter(pod: dict[str, Any], bounding: set[str], path: Path, profile: dict[str, Any] | None,
                   command: list[str]) -> list[str]:
    """`command` under the seccomp filter a runtime would load for this Pod (tests/support/
    seccompprofile.py): `profile` if given, else CRI-O's default for RuntimeDefault, none for
    Unconfined or no profile. Skips (fails under OCL_REALBUILD=require) where no filter can be
    loaded."""
    kind = SP.pod_profile(pod)
    if profile is None and kind != "RuntimeDefault":
        assert kind in (None, "Unconfined"), f"seccompProfile {kind}: pass its profile"
        return command
    why = SP.loader_missing()
    if why:
        message = f"realbuild's seccomp filter {why}: `{INSTALL}`"
        pytest.fail(message) if os.environ.get(REQUIRE) == "require" else pytest.skip(message)
    return SP.wrap(SP.resolve(profile or SP.runtime_default(), bounding), path, command)


#: Where with_storage mounts a build storage that outlives the Pod (BUILD_STORAGE_DIR of build-pod.sh).
KEPT_STORAGE = "/var/lib/ocl-build-storage"


def with_storage(pod: dict[str, Any], driver: str | None = None, kept: bool = False) -> dict[str, Any]:
    """The build Pod with STORAGE_DRIVER set to `driver`, and with `kept` a volume at KEPT_STORAGE
    named by BUILD_STORAGE_DIR (the env build-pod.sh reads; a PersistentVolumeClaim in a cluster,
    given to run_build_pod_unprivileged as one of its `volumes`)."""
    import copy
    pod = copy.deepcopy(pod)
    (container,) = pod["spec"]["containers"]
    env = [v for v in container["env"] if v["name"] not in ("STORAGE_DRIVER", "BUILD_STORAGE_DIR")]
    current = next(v["value"] for v in container["env"] if v["name"] == "STORAGE_DRIVER")
    env.append({"name": "STORAGE_DRIVER", "value": driver or current})
    if kept:
        env.append({"name": "BUILD_STORAGE_DIR", "value": KEPT_STORAGE})
        container["volumeMounts"].append({"name": "build-storage", "mountPath": KEPT_STORAGE})
        pod["spec"]["volumes"].append({"name": "build-storage",
                                       "persistentVolumeClaim": {"claimName": "ocl-build-storage"}})
    container["env"] = env
    return pod


#: The device nodes an OCI runtime creates in a container (runtime-spec config-linux.md, "Default
#: Devices"): no /dev/fuse, which fuse-overlayfs would need.
POD_DEVICES = ("null", "zero", "full", "random", "urandom", "tty")


def pod_dev_commands(staging: Path) -> str:
    """Shell commands (run as root in the harness's mount namespace) that replace /dev with a
    container's: a tmpfs with POD_DEVICES bound from the host, /dev/pts, /dev/shm and the
    standard links."""
    steps = [f"mkdir -p '{staging}'", f"mount -t tmpfs -o mode=755 tmpfs '{staging}'"]
    for dev in POD_DEVICES:
        steps += [f"touch '{staging}/{dev}'", f"mount --bind /dev/{dev} '{staging}/{dev}'"]
    steps += [f"mkdir '{staging}/pts' '{staging}/shm'", f"mount --bind /dev/pts '{staging}/pts'",
              f"mount --bind /dev/shm '{staging}/shm'", f"ln -s pts/ptmx '{staging}/ptmx'",
              f"ln -s /proc/self/fd '{staging}/fd'"]
    steps += [f"ln -s /proc/self/fd/{n} '{staging}/{name}'" for n, name in enumerate(("stdin", "stdout", "stderr"))]
    steps.append(f"mount --move '{staging}' /dev")
    return " && ".join(steps)


def image_file(host: Host, ref: str, path: str, dest: Path) -> bytes | None:
    """A file's content in a pushed image (the last layer that has it wins)."""
    host.run("skopeo", "copy", "--src-tls-verify=false", f"docker://{ref}", f"dir:{dest}")
    manifest = json.loads((dest / "manifest.json").read_text())
    found = None
    for layer in manifest["layers"]:
        with tarfile.open(dest / layer["digest"].split(":", 1)[1], mode="r:*") as tar:
            for member in tar.getmembers():
                if member.name.lstrip("./") == path.lstrip("/") and member.isfile():
                    found = tar.extractfile(member).read()
    return found


# --- a registry with credentials, its access log and its storage (tests/realbuild/test_realbuild_trust.py) ---

def htpasswd(path: Path, user: str, password: str) -> Path:
    """An htpasswd file with a bcrypt entry for `user`, the only kind docker-registry accepts, at
    bcrypt's lowest cost (2^4 rounds): the registry checks it on every request."""
    import warnings
    try:                            # the standard library's crypt goes in Python 3.13
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            import crypt
        entry = crypt.crypt(password, crypt.mksalt(crypt.METHOD_BLOWFISH, rounds=16))
    except (ImportError, AttributeError):
        tool = shutil.which("htpasswd")           # Debian apache2-utils
        if tool is None:
            pytest.skip("a bcrypt htpasswd entry needs Python's crypt module (before 3.13) or htpasswd")
        entry = subprocess.run([tool, "-nbB", "-C", "4", user, password], check=True, capture_output=True,
                               text=True).stdout.strip().split(":", 1)[1]
    path.write_text(f"{user}:{entry}\n")
    return path


@contextlib.contextmanager
def basic_auth(user: str, password: str) -> Iterator[None]:
    """push_image, delete_manifest and delete_blob with the registry's basic auth (they call
    urllib.request.urlopen, which this wraps meanwhile)."""
    header = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()
    original = urllib.request.urlopen

    def with_auth(req: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(req, urllib.request.Request):
            req.add_header("Authorization", header)
        return original(req, *args, **kwargs)
    urllib.request.urlopen = with_auth
    try:
        yield
    finally:
        urllib.request.urlopen = original


def delete_blob(registry: Registry, repo: str, digest: str) -> None:
    urllib.request.urlopen(urllib.request.Request(
        f"{registry.url}/v2/{repo}/blobs/{digest}", method="DELETE"), context=registry.context).close()


def requests_seen(registry: Registry) -> list[tuple[str, str, int]]:
    """(method, path, status) of every request the registry answered so far, from its access log
    (the combined log format docker-registry writes on stdout)."""
    import re
    found = re.findall(r'"([A-Z]+) (\S+) HTTP/[\d.]+" (\d{3}) ', registry.http_log.read_text())
    return [(method, path, int(status)) for method, path, status in found]


def blob_file(registry: Registry, digest: str) -> Path:
    """Where the registry's filesystem storage keeps a blob (a manifest is one too): what a disk,
    a mirror or a registry that lies would serve under that digest can be written here."""
    algorithm, hexdigest = digest.split(":", 1)
    return registry.storage / "docker/registry/v2/blobs" / algorithm / hexdigest[:2] / hexdigest / "data"
