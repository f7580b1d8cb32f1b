"""A base image shaped like a chunked OS image, for measuring what a build costs.

rpm-ostree chunks an OS image into about 50 layers: a few large ones (the biggest RPMs) and many
small ones. This writes such layers as tarballs of many random files (incompressible, so a layer's
compressed and unpacked sizes are about equal), pushes them through the registry API, and puts the
small working base of realbuild.build_base_image (busybox, jq, the stand-ins) on top, so that the
build Pod's Dockerfile runs on it."""

from __future__ import annotations

import hashlib
import io
import json
import random
import tarfile
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

try:                                        # the project's fast gzip, when installed
    from zlib_ng import gzip_ng as gzip
except ImportError:                         # pragma: no cover
    import gzip  # type: ignore[no-redef]

from tests.support import factory as F
from tests.support import realbuild as R
from tests.support.realbuild import Registry

#: quay.io/coreos-assembler/fcos:stable as `oc image info` listed it in coreos/rpm-ostree issue 4012
#: ("container-encapsulate should be more intelligent"): 695.5 MB in 51 layers, the first eight
#: of them these (MB, in order); the other 43 share the rest and are small.
FCOS_HEAD_MB = (1.37, 141.3, 47.76, 41.02, 86.06, 20.03, 59.68, 51.32)
FCOS_TOTAL_MB, FCOS_LAYERS = 695.5, 51
#: each small layer is this fraction of the one before it (about 18 MB down to 1 MB at 695.5 MB)
TAIL_RATIO = 0.93


def layer_sizes(total: int, layers: int = FCOS_LAYERS) -> list[int]:
    """Bytes per layer, summing to about `total`: FCOS's first layers scaled, then the rest shared
    by the remaining layers, each TAIL_RATIO of the one before."""
    head = [mb / FCOS_TOTAL_MB for mb in FCOS_HEAD_MB[:layers]]
    rest = max(0.0, 1 - sum(head))
    tail_n = layers - len(head)
    weights = [TAIL_RATIO ** k for k in range(tail_n)]
    tail = [rest * w / sum(weights) for w in weights] if tail_n else []
    if not tail:                            # fewer layers than FCOS's head: scale the head to the total
        head = [f / sum(head) for f in head]
    return [max(4096, int(f * total)) for f in head + tail]


def _file_sizes(rng: random.Random, total: int) -> list[int]:
    """Files of varied sizes (log-uniform, 256 B to 4 MB), like a tree of binaries and data."""
    sizes, left = [], total
    while left > 0:
        size = min(left, int(2 ** rng.uniform(8, 22)))
        sizes.append(size)
        left -= size
    return sizes


def layer_tar(index: int, size: int, seed: int) -> bytes:
    """An uncompressed layer: `usr/lib/ocl-chunk-NN/DD/file-KKKK`, random content, some files of
    other owners, as an OS tree has."""
    rng = random.Random(seed * 1000 + index)
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        top = f"usr/lib/ocl-chunk-{index:02d}"
        dirs = set()
        for k, n in enumerate(_file_sizes(rng, size)):
            folder = f"{top}/{k // 64:02d}"
            for d in (top, folder):
                if d not in dirs:
                    dirs.add(d)
                    info = tarfile.TarInfo(d)
                    info.type, info.mode, info.mtime = tarfile.DIRTYPE, 0o755, 1_700_000_000
                    tar.addfile(info)
            info = tarfile.TarInfo(f"{folder}/file-{k:04d}")
            info.size, info.mode, info.mtime = n, 0o644, 1_700_000_000
            info.uid = info.gid = 0 if k % 10 else 2 + k % 7
            tar.addfile(info, io.BytesIO(rng.randbytes(n)))
    return buf.getvalue()


@dataclass(frozen=True)
class Image:
    ref: str
    digest: str
    layers: int
    compressed: int          # bytes in the registry: what a build that pulls everything downloads
    unpacked: int            # bytes of the layers' tarballs: what a full copy of the tree takes
    layer_digests: tuple[str, ...]


def _request(registry: Registry, method: str, path: str, data: bytes | None = None,
             headers: dict[str, str] | None = None) -> Any:
    url = path if path.startswith("http") else f"{registry.url}{path}"
    req = urllib.request.Request(url, method=method, data=data, headers=headers or {})
    return urllib.request.urlopen(req, context=registry.context)


def _upload(registry: Registry, repo: str, data: bytes) -> str:
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    with _request(registry, "POST", f"/v2/{repo}/blobs/uploads/", b"") as resp:
        location = resp.headers["Location"]
    sep = "&" if "?" in location else "?"
    _request(registry, "PUT", f"{location}{sep}digest={digest}", data,
             {"Content-Type": "application/octet-stream"}).close()
    return digest


def _mount(registry: Registry, repo: str, digest: str, source: str) -> None:
    with _request(registry, "POST", f"/v2/{repo}/blobs/uploads/?mount={digest}&from={source}", b"") as resp:
        if resp.status != 201:
            raise RuntimeError(f"cross-repository mount of {digest} from {source}: {resp.status}")


def push_chunked(registry: Registry, repo: str, tag: str, top: str, total: int,
                 layers: int = FCOS_LAYERS, seed: int = 1) -> Image:
    """Push `repo:tag`: `layers` generated layers of about `total` bytes, then the layers of the
    image `top` (a repository:tag of the same registry, e.g. the small working base), whose
    config (env, labels) the image keeps."""
    top_repo, top_tag = top.rsplit(":", 1)
    accept = ", ".join(("application/vnd.oci.image.manifest.v1+json",
                        "application/vnd.docker.distribution.manifest.v2+json"))
    with _request(registry, "GET", f"/v2/{top_repo}/manifests/{top_tag}", headers={"Accept": accept}) as resp:
        top_manifest = json.loads(resp.read())
    with _request(registry, "GET", f"/v2/{top_repo}/blobs/{top_manifest['config']['digest']}") as resp:
        config = json.loads(resp.read())
    oci = top_manifest["mediaType"] == "application/vnd.oci.image.manifest.v1+json"
    layer_type = ("application/vnd.oci.image.layer.v1.tar+gzip" if oci
                  else "application/vnd.docker.image.rootfs.diff.tar.gzip")
    entries, diff_ids, unpacked, compressed = [], [], 0, 0
    for i, size in enumerate(layer_sizes(total, layers)):
        raw = layer_tar(i, size, seed)
        blob = gzip.compress(raw, 1, mtime=0)
        entries.append({"mediaType": layer_type, "digest": _upload(registry, repo, blob), "size": len(blob)})
        diff_ids.append("sha256:" + hashlib.sha256(raw).hexdigest())
        unpacked, compressed = unpacked + len(raw), compressed + len(blob)
    for layer in top_manifest["layers"]:
        _mount(registry, repo, layer["digest"], top_repo)
        compressed += layer["size"]
        unpacked += layer["size"]           # the small top counted at its compressed size
    config["rootfs"]["diff_ids"] = diff_ids + config["rootfs"]["diff_ids"]
    config["history"] = ([{"created": "2023-11-14T22:13:20Z", "created_by": f"ocl chunk {i}"}
                          for i in range(len(diff_ids))] + config.get("history", []))
    raw_config = json.dumps(config).encode()
    manifest = dict(top_manifest, layers=entries + top_manifest["layers"],
                    config=dict(top_manifest["config"], digest=_upload(registry, repo, raw_config),
                                size=len(raw_config)))
    with _request(registry, "PUT", f"/v2/{repo}/manifests/{tag}", json.dumps(manifest).encode(),
                  {"Content-Type": manifest["mediaType"]}) as resp:
        digest = resp.headers["Docker-Content-Digest"]
    return Image(f"{registry.host}/{repo}:{tag}", digest, len(manifest["layers"]), compressed, unpacked,
                 tuple(layer["digest"] for layer in manifest["layers"]))


#: the small working base and the extensions image that registry_with_bases pushes
SMALL_BASE, EXTENSIONS = "ocl/small-base:latest", "ocl/extensions:latest"


def registry_with_bases(root: Path) -> tuple[Registry, R.Host]:
    """A docker-registry under `root` with its access log on, holding SMALL_BASE (for
    push_chunked's `top`) and EXTENSIONS; and the host's buildah set up for it."""
    registry = Registry(root, access_log=True)
    try:
        host = R.Host(root, registry)
        R.build_base_image(host, f"{registry.host}/{SMALL_BASE}")
        R.build_extensions_image(host, f"{registry.host}/{EXTENSIONS}")
    except BaseException:
        registry.stop()
        raise
    return registry, host


def run(items: list[dict[str, Any]], work: Path) -> list[dict[str, Any]]:
    """The reconciler's run (`ocl-reconcile run --snapshot`, in this process) on `items`: the cluster
    after it. Raises RuntimeError with its stderr when it fails."""
    import contextlib
    import io
    import os

    from reconcile import cli
    from reconcile.cluster import snapshot
    work.mkdir(parents=True, exist_ok=True)
    src, out = work / "in.yaml", work / "out.yaml"
    snapshot.write(str(src), items)
    os.environ.setdefault("OCL_RECONCILE_NOW", "2026-11-29T12:00:00Z")
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()) as err:
        code = cli.main(["run", "--snapshot", str(src), "--write-snapshot", str(out)])
    if code != 0:
        raise RuntimeError(f"ocl-reconcile run: {err.getvalue()}")
    return snapshot.load(str(out))


def one_pool(registry: Registry, base: str, mc: dict[str, Any], repo: str = "ocl/os-image") -> list[dict[str, Any]]:
    """A cluster with one opted-in pool whose rendered config is `mc`: built FROM `base`, pushed to
    `repo` of the registry, the extensions image EXTENSIONS."""
    return [F.build_config(finalImagePullspec=f"{registry.host}/{repo}:latest"),
            F.osimageurl(baseOSContainerImage=base, releaseVersion="4.16.0",
                         baseOSExtensionsContainerImage=f"{registry.host}/{EXTENSIONS}"),
            F.secret("pull-secret", payload=R.auth_file(registry, "puller")),
            F.secret("push-secret", payload=R.auth_file(registry, "pusher")),
            F.pool("worker", rendered=mc["metadata"]["name"]), mc]
