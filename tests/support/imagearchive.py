"""Images made byte for byte, with no registry and no builder: a one-layer `docker save` archive
(`ctr images import` reads it), and the node's pause image from busybox."""

from __future__ import annotations

import hashlib
import io
import json
import platform
import shutil
import tarfile
from pathlib import Path
from typing import Any

PAUSE = "localhost/ocl-pause:1"
#: this machine's architecture as an image's config names it (GOARCH)
ARCH = {"x86_64": "amd64", "aarch64": "arm64", "s390x": "s390x", "ppc64le": "ppc64le"}


def docker_archive(path: Path, name: str, files: dict[str, tuple[bytes, int]], config: dict[str, Any]) -> Path:
    """A one-layer image as `docker save` writes it (`ctr images import` reads it): files are
    path -> (content, mode). Made byte for byte here, so that no registry is needed."""
    layer = io.BytesIO()
    with tarfile.open(fileobj=layer, mode="w") as tar:
        for dirname in sorted({str(Path(p).parent) for p in files} - {"."}):
            info = tarfile.TarInfo(dirname)
            info.type, info.mode = tarfile.DIRTYPE, 0o755
            tar.addfile(info)
        for name_, (content, mode) in sorted(files.items()):
            info = tarfile.TarInfo(name_)
            info.size, info.mode = len(content), mode
            tar.addfile(info, io.BytesIO(content))
    diff_id = hashlib.sha256(layer.getvalue()).hexdigest()
    image_config = json.dumps({"architecture": ARCH.get(platform.machine(), platform.machine()), "os": "linux",
                               "config": config,
                               "rootfs": {"type": "layers", "diff_ids": [f"sha256:{diff_id}"]}}).encode()
    config_name = hashlib.sha256(image_config).hexdigest() + ".json"
    with tarfile.open(path, "w") as out:
        for member, data in ((f"{diff_id}/layer.tar", layer.getvalue()), (config_name, image_config),
                             ("manifest.json", json.dumps([{"Config": config_name, "RepoTags": [name],
                                                            "Layers": [f"{diff_id}/layer.tar"]}]).encode())):
            info = tarfile.TarInfo(member)
            info.size = len(data)
            out.addfile(info, io.BytesIO(data))
    return path


def pause_image(path: Path) -> Path:
    """The sandbox image: a static busybox that sleeps (registry.k8s.io cannot be reached here)."""
    busybox = Path(shutil.which("busybox") or "/bin/busybox").read_bytes()
    return docker_archive(path, PAUSE, {"bin/busybox": (busybox, 0o755)},
                          {"Entrypoint": ["/bin/busybox", "sleep", "2147483647"]})
