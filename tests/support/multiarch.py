"""A mixed pool's builds with the real tools (issue 55; tests/realbuild/test_multiarch_real.py, make
bench-build ARGS=--archs): the build Pod's own script run once for each architecture of the pool, the
one this machine is not under qemu-user, each pushed to the realbuild suite's docker-registry.

- **The bases.** A base of each architecture, made alike from Debian's packages of that
  architecture (`mmdebstrap --variant=extract --include=busybox-static,jq`: the files of the
  packages and their dependencies, no maintainer script run, so no emulation while making it),
  with the stand-ins of realbuild.write_standins on top; the tarball is cached outside the
  checkout (~/.cache/ocl-reconciler/multiarch-rootfs-<hash of the recipe>-<arch>, OCL_REALBUILD_CACHE
  moves the root). The pool's base is a list of the two (`buildah manifest push --all`: an OCI
  image index), as the release's OS image is in a multi-architecture payload
  (../shared/reference/multiarch.md), named by its digest.
- **The node of each architecture.** The reconciler gives each architecture's build Pod
  `nodeSelector kubernetes.io/arch=<arch>`; on such a node buildah's default platform is that
  architecture (its GOARCH), so `FROM <list>` takes that architecture's instance and the image's
  config says that architecture. build-pod.sh names no platform (it needs none there). On this
  machine, the build of the other architecture runs the same script with a `buildah` first on the
  PATH that adds `--platform linux/<arch>` to `buildah build` alone (`node_host`): the default the
  node's own buildah would have, nothing else. Its RUN steps execute the base's binaries of that
  architecture through binfmt_misc and qemu-user-static. Without it the script builds for this
  machine's architecture from the same list: `wrong_platform_note`.
- **Emulation.** qemu-user-static registered with binfmt_misc for the foreign architecture (`F`:
  the interpreter opened at registration, so it runs inside buildah's chroot and user namespace).
  Where it is not, `qemu()` skips saying how to set it up; `.ci/run` does, and sets
  OCL_QEMU=require, which makes that a failure.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

from tests.support import factory as F
from tests.support import productimage, requirement
from tests.support import realbuild as R

#: .ci/run sets this to `require`: no qemu for the foreign architecture fails the tests.
REQUIRE = "OCL_QEMU"
ARCHS = ("amd64", "arm64")
#: GOARCH (kubernetes.io/arch) -> `uname -m` (the kernel's name, what the emulated `uname -m` says)
UNAME = {"amd64": "x86_64", "arm64": "aarch64"}
#: GOARCH -> ELF e_machine (System V ABI, elf.h: EM_X86_64 62, EM_AARCH64 183)
ELF_MACHINE = {"amd64": 62, "arm64": 183}
#: how a base's root filesystem is made: the key of its cache entry is a hash of this and the arch
MMDEBSTRAP = ["mmdebstrap", "--quiet", "--variant=extract", "--include=busybox-static,jq", "bookworm"]
SETUP = ("`apt-get install qemu-user-static binfmt-support`, then `mount -t binfmt_misc binfmt_misc "
         "/proc/sys/fs/binfmt_misc` and `update-binfmts --enable qemu-{qemu}` as root (.ci/run does them)")


def native() -> str:
    """This machine's architecture, as a GOARCH."""
    machine = platform.machine()
    return next((goarch for goarch, uname in UNAME.items() if uname == machine), machine)


def foreign() -> tuple[str, ...]:
    return tuple(a for a in ARCHS if a != native())


def binfmt_entry(arch: str) -> Path:
    return Path("/proc/sys/fs/binfmt_misc") / f"qemu-{UNAME[arch]}"


def qemu_problem() -> str | None:
    """Why a foreign architecture's binaries cannot run here (None: they can): qemu-user-static
    installed, and registered with binfmt_misc, enabled, with the `F` flag."""
    for arch in foreign():
        name = UNAME[arch]
        how = SETUP.format(qemu=name)
        if shutil.which(f"qemu-{name}-static") is None:
            return f"{arch} builds run under qemu-user here and qemu-{name}-static is not installed: {how}"
        entry = binfmt_entry(arch)
        if not entry.parent.joinpath("status").exists():
            return f"binfmt_misc is not mounted, so {arch} binaries cannot run: {how}"
        lines = entry.read_text().splitlines() if entry.exists() else []
        if "enabled" not in lines:
            return f"binfmt_misc has no enabled qemu-{name} entry: {how}"
        flags = next((line.split(":", 1)[1].strip() for line in lines if line.startswith("flags:")), "")
        if "F" not in flags:
            return (f"binfmt_misc's qemu-{name} entry lacks the F flag (flags: {flags!r}): its interpreter "
                    "cannot be found inside buildah's chroot; Debian's qemu-user-static registers it with F")
    return None


def qemu() -> None:
    """Skip (fail under OCL_QEMU=require) unless each foreign architecture's binaries run here."""
    why = qemu_problem()
    if why:
        requirement.missing(REQUIRE, why)


def elf_arch(data: bytes) -> str:
    """The architecture an ELF executable is for, from its header (e_machine, a little-endian
    half-word at offset 18 of an ELFCLASS64 little-endian file), or why it cannot say."""
    if data[:4] != b"\x7fELF":
        return "not an ELF file"
    machine = int.from_bytes(data[18:20], "little" if data[5] == 1 else "big")
    return next((a for a, m in ELF_MACHINE.items() if m == machine), f"e_machine {machine}")


def cache_root() -> Path:
    return Path(os.environ.get("OCL_REALBUILD_CACHE") or Path.home() / ".cache/ocl-reconciler")


def rootfs(arch: str, cache: Path | None = None, figures: dict[str, float] | None = None) -> Path:
    """The base's root filesystem for `arch`: a tarball made once by MMDEBSTRAP (Debian's mirror
    is needed the first time), then reused."""
    cache = cache or cache_root()
    key = productimage.digest_of(json.dumps(MMDEBSTRAP).encode())
    tarball = cache / f"multiarch-rootfs-{key}-{arch}" / "rootfs.tar"
    with productimage.locked(cache / f"multiarch-rootfs-{key}-{arch}.lock"):
        if tarball.is_file():
            return tarball
        if shutil.which("mmdebstrap") is None:
            requirement.missing(R.REQUIRE, "the bases of each architecture are made by mmdebstrap: "
                                           "`apt-get install mmdebstrap` (.ci/run does it)")
        tarball.parent.mkdir(parents=True, exist_ok=True)
        partial = tarball.with_name(f"rootfs.partial-{os.getpid()}.tar")
        started = time.monotonic()
        result = subprocess.run([*MMDEBSTRAP[:-1], f"--architectures={arch}", MMDEBSTRAP[-1], str(partial)],
                                capture_output=True, text=True, timeout=900)
        if result.returncode != 0:
            partial.unlink(missing_ok=True)
            requirement.missing(R.REQUIRE, f"mmdebstrap could not make the {arch} base from Debian's mirror "
                                           f"(needed once): {result.stderr.strip()[-400:]}")
        partial.rename(tarball)
        if figures is not None:
            figures[f"{arch} base: mmdebstrap"] = time.monotonic() - started
    return tarball


def base_image(host: R.Host, ref: str, arch: str, cache: Path | None = None) -> str:
    """FROM scratch: the `arch` root filesystem, realbuild's stand-ins on top, the config saying
    linux/`arch`; pushed to `ref` (a tag). Returns `<repository>@<digest>`."""
    tarball = rootfs(arch, cache)
    standins = host.root / f"standins-{arch}"
    R.write_standins(standins)
    buildah = ("buildah", "--storage-driver", "vfs")
    ctr = host.run(*buildah, "from", "--arch", arch, "scratch").stdout.strip()
    try:
        host.run(*buildah, "add", ctr, str(tarball), "/")
        host.run(*buildah, "copy", ctr, str(standins), "/")
        host.run(*buildah, "config", "--arch", arch, "--os", "linux", "--env", "PATH=/usr/bin:/bin", ctr)
        host.run(*buildah, "commit", "--quiet", ctr, ref)
    finally:
        host.run(*buildah, "rm", ctr, check=False)
    digest = host.root / f"base-{arch}.digest"
    host.run(*buildah, "push", "--digestfile", str(digest), ref, f"docker://{ref}")
    return f"{ref.rsplit(':', 1)[0]}@{digest.read_text().strip()}"


def base_list(host: R.Host, ref: str, instances: list[str]) -> str:
    """A list of `instances` (digested references) pushed to `ref` (a tag) by buildah: `manifest
    create`, `manifest add` of each, `manifest push --all`. Returns `<repository>@<digest>`."""
    name = f"localhost/ocl-base-list-{os.getpid()}-{time.monotonic_ns()}"
    buildah = ("buildah", "--storage-driver", "vfs")
    host.run(*buildah, "manifest", "create", name)
    try:
        for image in instances:
            host.run(*buildah, "manifest", "add", "--tls-verify=false", name, f"docker://{image}")
        digest = host.root / "base-list.digest"
        host.run(*buildah, "manifest", "push", "--all", "--tls-verify=false", "--digestfile", str(digest), name, f"docker://{ref}")
    finally:
        host.run(*buildah, "manifest", "rm", name, check=False)
    return f"{ref.rsplit(':', 1)[0]}@{digest.read_text().strip()}"


def node_host(host: R.Host, arch: str) -> R.Host:
    """`host` as a node of `arch` runs the build Pod's script: on this machine's own architecture,
    itself; on another, a `buildah` first on the PATH whose `build` takes `--platform linux/<arch>`,
    buildah's default on a node of that architecture (module docstring)."""
    if arch == native():
        return host
    where = host.root / f"node-{arch}"
    where.mkdir(exist_ok=True)
    real = shutil.which("buildah", path=host.env.get("PATH"))
    wrapper = where / "buildah"
    wrapper.write_text(f"""#!/bin/sh
# buildah as on a node of linux/{arch}: its build's default platform is the node's (tests/support/multiarch.py)
if [ "$1" = build ]; then shift; exec {real} build --platform linux/{arch} "$@"; fi
exec {real} "$@"
""")
    wrapper.chmod(0o755)
    node = R.Host.__new__(R.Host)
    node.root, node.env = host.root, dict(host.env, PATH=f"{where}:{host.env.get('PATH', '/usr/bin:/bin')}")
    return node


def bases(host: R.Host, registry: R.Registry, cache: Path | None = None) -> tuple[dict[str, str], str]:
    """A base of each of ARCHS (`<registry>/ocl/base:<arch>`) and the list of them
    (`ocl/base:list`, the pool's base), each by digest: ({arch: base}, list)."""
    made = {arch: base_image(host, f"{registry.host}/ocl/base:{arch}", arch, cache) for arch in ARCHS}
    return made, base_list(host, f"{registry.host}/ocl/base:list", list(made.values()))


def render(registry: R.Registry, base: str, mc: dict[str, Any], repo: str, work: Path,
           custom: str = "") -> tuple[list[dict[str, Any]], dict[str, dict[str, Any]]]:
    """The reconciler's first run on a mixed pool built FROM `base` into `repo`, with `custom` as
    the pool's custom Dockerfile content: the cluster after it and each architecture's build Pod."""
    from tests.support import osimage
    cluster = mixed_pool(registry, base, mc, repo)
    if custom:
        cluster.append(F.configmap("on-cluster-build-custom-dockerfile", {"worker": custom}))
    items = osimage.run(cluster, work)
    return items, pods_by_arch(items)


def build(pod: dict[str, Any], items: list[dict[str, Any]], host: R.Host, arch: str, root: Path) -> tuple[str, float]:
    """The Pod's script run as a node of `arch` runs it (`node_host`), as uid 1000 with the Pod's
    capabilities and a container's /dev (realbuild.run_build_pod_unprivileged), its files under
    `root` (a new folder): the digest it reported, and its wall time. Raises AssertionError with
    the log's tail when it fails."""
    started = time.monotonic()
    code, message, logs = R.run_build_pod_unprivileged(pod, items, node_host(host, arch), root, pod_devices=True)
    wall = time.monotonic() - started
    assert code == 0, f"the {arch} build failed ({code}): {logs}"
    return message.strip(), wall


def mixed_pool(registry: R.Registry, base: str, mc: dict[str, Any], repo: str) -> list[dict[str, Any]]:
    """osimage.one_pool's cluster with a node of each of ARCHS in the pool, and its machineCount
    as the MCO keeps it: a mixed pool."""
    from tests.support import osimage
    items = osimage.one_pool(registry, base, mc, repo)
    items += [F.node(f"worker-{arch}", "worker", arch) for arch in ARCHS]
    F.the_pool(items).setdefault("status", {})["machineCount"] = len(ARCHS)
    return items


def pods_by_arch(items: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The build Pods of a run, by the architecture of their node selector."""
    return {(o["spec"].get("nodeSelector") or {}).get("kubernetes.io/arch", ""): o
            for o in items if o["kind"] == "Pod" and "ocl-sign" not in o["metadata"]["name"]}
