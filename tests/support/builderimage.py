"""The build Pod's builder image, made here for the realnode suite: buildah from Debian's packages.

No registry is reachable, so the image the build Pod names (settings `buildahImage`) is made, as
the product image's base is (tests/support/productimage.py): `mmdebstrap` with buildah, uidmap and
libcap2-bin, then what quay.io/buildah/stable and the MCO's image give their `build` user
(../shared/reference/realnode.md, "Containers run here"; tests/support/realbuild.py IMAGE_NEEDS):
- uid 1000 named `build`, its home /home/build;
- subordinate ids for it: `build:1:999` and `build:1001:64535` in /etc/subuid and /etc/subgid;
- newuidmap and newgidmap NOT setuid, with the file capabilities cap_setuid=ep and cap_setgid=ep,
  as Fedora's shadow-utils ships them (Debian's setuid newuidmap fails in a container:
  `newuidmap: open of uid_map failed: Permission denied`).

The image is made once into the cache, keyed by a hash of this recipe, as a docker archive that
`Node.import_image` gives the node's containerd (the Pod names it with imagePullPolicy
IfNotPresent). The file capabilities are set on the mounted root (buildah mount) before the commit:
containers/storage keeps `security.capability` in the layer, and containerd's unpack sets it again.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path

from tests.support import productimage as P

NAME = "localhost/ocl-builder"
MMDEBSTRAP = ["mmdebstrap", "--quiet", "--variant=apt",
              "--include=buildah,uidmap,libcap2-bin,ca-certificates", "bookworm"]
#: run as root in the image's root (chroot) before the commit
SETUP = """set -eu
echo 'build:x:1000:1000:build:/home/build:/bin/sh' >> /etc/passwd
echo 'build:x:1000:' >> /etc/group
mkdir -p /home/build && chown 1000:1000 /home/build
printf 'build:1:999\\nbuild:1001:64535\\n' > /etc/subuid
cp /etc/subuid /etc/subgid
chmod 0755 /usr/bin/newuidmap /usr/bin/newgidmap
setcap cap_setuid=ep /usr/bin/newuidmap
setcap cap_setgid=ep /usr/bin/newgidmap
"""
CONFIG = ["--env", "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
          "--env", "LANG=C.UTF-8", "--user", "1000", "--workingdir", "/home/build", "--cmd", "/bin/sh"]


@dataclass(frozen=True)
class BuilderImage:
    archive: Path
    name: str
    figures: dict[str, float]


def recipe_key() -> str:
    return P.digest_of(json.dumps([MMDEBSTRAP, SETUP, CONFIG]).encode())


def builder_image(cache: Path | None = None) -> BuilderImage:
    """The builder image's docker archive, made once into the cache (under the product image's lock:
    both use buildah's storage)."""
    P.tools()
    cache = Path(cache or P.default_cache())
    key = recipe_key()
    name = f"{NAME}:{key}"
    where = cache / "builder-image"
    archive = where / f"{key}.tar"
    figures: dict[str, float] = {}
    with P.locked(where / ".lock"):
        if not archive.is_file():
            _make(where, name, archive, figures)
    return BuilderImage(archive, name, figures)


def _make(where: Path, name: str, archive: Path, figures: dict[str, float]) -> None:
    where.mkdir(parents=True, exist_ok=True)
    rootfs = where / f"rootfs.partial-{os.getpid()}.tar"
    started = time.monotonic()
    result = P.sh(*MMDEBSTRAP, rootfs, timeout=1800, check=False)
    if result.returncode != 0:
        rootfs.unlink(missing_ok=True)
        P.missing(f"mmdebstrap could not make the builder image: {result.stderr.strip()[-400:]}")
    figures["builder: mmdebstrap"] = time.monotonic() - started
    container = P.sh("buildah", "from", "scratch").stdout.strip()
    try:
        P.sh("buildah", "add", container, rootfs, "/")
        mounted = P.sh("buildah", "mount", container).stdout.strip()
        P.sh("chroot", mounted, "/bin/sh", "-c", SETUP)
        P.sh("buildah", "config", *CONFIG, container)
        P.sh("buildah", "commit", "--quiet", container, name)
    finally:
        P.sh("buildah", "rm", container, check=False)
        rootfs.unlink(missing_ok=True)
    partial = archive.with_suffix(f".partial-{os.getpid()}")
    P.sh("buildah", "push", "--quiet", name, f"docker-archive:{partial}:{name}")
    partial.rename(archive)
    P.sh("buildah", "rmi", name, check=False)
    figures["builder: image"] = time.monotonic() - started
