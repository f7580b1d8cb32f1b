"""The product image, built from the Containerfile of the current checkout, for the node tests.

`product_image(cache)` builds it with buildah exactly as `make image` does (offline: `--network
none`, the hash-checked wheels of requirements.lock and requirements-build.lock mounted at /wheels)
from a copy of the checkout's tracked files (as a clean clone has them), and writes a docker archive
that containerd's `ctr images import` and `skopeo` read, tagged `localhost/ocl-reconciler:test-<hash
of those files>`.

No registry is reachable here, so the base is made, not pulled: `mmdebstrap --variant=apt
--include=python3,python3-venv bookworm` (Debian's mirror) with a venv at /opt/venv whose bin leads
the PATH, so the Containerfile's `pip` installs onto the PATH as on UBI 9's python-311. It is made
once into the cache (keyed by a hash of the recipe), imported into buildah's storage and passed as
BASE_IMAGE by digest; the wheels are downloaded once (keyed by the lock files' hash). The product
layer is built again each session; buildah's --layers reuses the dependency layer.

Without mmdebstrap, buildah or runc, or without the network for a first download, the caller skips
saying why; OCL_REALNODE=require makes that a failure. `run()` starts the image with runc as the
CronJob's securityContext says (kustomize/base/cronjob.yaml).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from tests.support import factory as F
from tests.support import installed as I
from tests.support import requirement

REQUIRE = "OCL_REALNODE"
NAME = "localhost/ocl-reconciler"
BASE_NAME = "localhost/ocl-reconciler-testbase"
HASHES = F.ROOT / "tests/tools/lock/hashes.py"
LOCKS = (F.ROOT / "requirements.lock", F.ROOT / "requirements-build.lock")
#: how the base is made: the key of its cache entry is a hash of these
MMDEBSTRAP = ["mmdebstrap", "--quiet", "--variant=apt", "--include=python3,python3-venv",
              '--customize-hook=chroot "$1" python3 -m venv /opt/venv', "bookworm"]
BASE_CONFIG = ["--env", "PATH=/opt/venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
               "--env", "LANG=C.UTF-8", "--cmd", "/bin/sh"]


def default_cache() -> Path:
    return Path(os.environ.get("OCL_REALNODE_CACHE") or Path.home() / ".cache/ocl-reconciler")


def missing(problem: str) -> None:
    requirement.missing(REQUIRE, problem)


def tools() -> None:
    """Skip (or fail) when a tool the image needs is not on the PATH."""
    for tool, why in (("buildah", "builds the image"), ("runc", "runs it (and buildah's RUN steps)"),
                      ("mmdebstrap", "makes the test base from Debian's mirror")):
        if shutil.which(tool) is None:
            missing(f"{tool} is not on the PATH ({why})")
    if os.geteuid() != 0:
        missing("the image tests run as root (buildah's storage, runc)")


def sh(*args: str | Path, timeout: float = 900, check: bool = True) -> subprocess.CompletedProcess[str]:
    result = subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=timeout)
    if check and result.returncode != 0:
        raise AssertionError(f"{' '.join(map(str, args[:3]))} ... failed ({result.returncode}):\n"
                             f"{result.stdout[-2000:]}\n{result.stderr[-3000:]}")
    return result


def digest_of(*parts: bytes) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(part)
    return h.hexdigest()[:12]


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """One builder at a time (pytest-xdist workers share the cache and buildah's storage)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield


def image_digest(ref: str) -> str:
    """The manifest digest of an image in buildah's storage ('' when it is not there)."""
    result = sh("buildah", "inspect", "--type", "image", "--format", "{{.FromImageDigest}}", ref, check=False)
    return result.stdout.strip() if result.returncode == 0 else ""


def base_image(cache: Path, figures: dict[str, float]) -> str:
    """The test base by digest (BASE_NAME@sha256:...), made and imported once."""
    key = digest_of(json.dumps([MMDEBSTRAP, BASE_CONFIG]).encode())
    ref = f"{BASE_NAME}:{key}"
    if digest := image_digest(ref):
        return f"{BASE_NAME}@{digest}"
    rootfs = cache / f"testbase-{key}" / "rootfs.tar"
    if not rootfs.is_file():
        rootfs.parent.mkdir(parents=True, exist_ok=True)
        partial = rootfs.with_name(f"rootfs.partial-{os.getpid()}.tar")
        started = time.monotonic()
        result = sh(*MMDEBSTRAP, partial, timeout=1800, check=False)
        if result.returncode != 0:
            partial.unlink(missing_ok=True)
            missing(f"mmdebstrap could not make the base from Debian's mirror: {result.stderr.strip()[-400:]}")
        partial.rename(rootfs)
        figures["base: mmdebstrap"] = time.monotonic() - started
    started = time.monotonic()
    container = sh("buildah", "from", "scratch").stdout.strip()
    try:
        sh("buildah", "add", container, rootfs, "/")
        sh("buildah", "config", *BASE_CONFIG, container)
        sh("buildah", "commit", "--quiet", container, ref)
    finally:
        sh("buildah", "rm", container, check=False)
    figures["base: import into buildah"] = time.monotonic() - started
    return f"{BASE_NAME}@{image_digest(ref)}"


def wheels(cache: Path, figures: dict[str, float]) -> Path:
    """Both lock files' wheels for this architecture, hash-checked, as `make image` keeps them."""
    arch = platform.machine()
    where = cache / f"wheels-{digest_of(*(lock.read_bytes() for lock in LOCKS))}-{arch}"
    if where.is_dir():
        return where
    partial = where.with_name(where.name + f".partial-{os.getpid()}")
    shutil.rmtree(partial, ignore_errors=True)
    started = time.monotonic()
    result = subprocess.run([sys.executable, str(HASHES), "wheels", str(partial)], capture_output=True,
                            text=True, timeout=900)
    if result.returncode != 0:
        shutil.rmtree(partial, ignore_errors=True)
        if "THESE PACKAGES DO NOT MATCH THE HASHES" in result.stderr:
            raise AssertionError(f"a downloaded wheel does not match requirements.lock:\n{result.stderr}")
        missing(f"downloading the locked wheels failed (the package index is needed once): "
                f"{result.stderr.strip()[-400:]}")
    partial.rename(where)
    figures["wheels: download"] = time.monotonic() - started
    return where


def checkout_hash() -> str:
    """A hash of the tracked files' names and contents (what a clean clone has)."""
    names = sorted(I._tracked(F.ROOT))
    return digest_of(*(part for name in names for part in (name.encode(), b"\0", (F.ROOT / name).read_bytes())))


def bud(context: Path, tag: str, base: str, wheel_dir: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    """`make image`'s build: offline, the wheels read-only at /wheels, layers kept for the next build."""
    return sh("buildah", "bud", "--layers", "--force-rm", "--network", "none", "--runtime", "runc",
              "--volume", f"{wheel_dir}:/wheels:ro", "--build-arg", "PIP_NO_INDEX=1",
              "--build-arg", "PIP_FIND_LINKS=/wheels", "--build-arg", f"BASE_IMAGE={base}", *extra,
              "-f", context / "Containerfile", "-t", tag, context, check=False, timeout=1800)


@dataclass(frozen=True)
class ProductImage:
    """The image built from the checkout: its docker archive, its name in that archive and in buildah's
    storage, its size, and what it took to make."""

    archive: Path
    name: str
    size: int                       # bytes: the uncompressed layers (the docker archive holds them)
    base: str                       # BASE_IMAGE, by digest
    wheels: Path
    build_output: str
    dependency_layer_reused: bool
    figures: dict[str, float] = field(default_factory=dict)

    def config(self) -> dict:
        """The image's OCI config (User, Entrypoint, Cmd, Env, WorkingDir)."""
        out = sh("buildah", "inspect", "--type", "image", self.name).stdout
        return json.loads(out)["OCIv1"]["config"]

    def report(self) -> str:
        times = ", ".join(f"{k} {v:.1f} s" for k, v in self.figures.items())
        reused = "reused" if self.dependency_layer_reused else "built"
        return (f"{self.name}: {self.size / 1e6:.0f} MB ({self.archive}); {times}; "
                f"dependency layer {reused}; base {self.base}")


_BUILT: dict[Path, ProductImage] = {}


def product_image(cache: Path | None = None) -> ProductImage:
    """The image of the current checkout, built once a process (under a lock shared by processes)."""
    tools()
    cache = Path(cache or default_cache())
    if cache in _BUILT:
        return _BUILT[cache]
    figures: dict[str, float] = {}
    with locked(cache / "product-image" / ".lock"):
        base = base_image(cache, figures)
        wheel_dir = wheels(cache, figures)
        name = f"{NAME}:test-{checkout_hash()}"
        with tempfile.TemporaryDirectory(prefix="ocl-image-") as tmp:
            context = I.copy_checkout(Path(tmp) / "src")
            started = time.monotonic()
            result = bud(context, name, base, wheel_dir)
            figures["image: build"] = time.monotonic() - started
        assert result.returncode == 0, f"buildah bud failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
        reused = dependency_layer_reused(result.stdout)
        archive = export(cache / "product-image", name)
    built = ProductImage(archive, name, archive.stat().st_size, base, wheel_dir, result.stdout, reused, figures)
    _BUILT[cache] = built
    print(f"product image: {built.report()}", file=sys.stderr)
    return built


def dependency_layer_reused(output: str) -> bool:
    """Whether buildah took the `pip install -r requirements.lock` step from its layer cache."""
    lines = output.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("STEP") and "-r requirements.lock" in line:
            return i + 1 < len(lines) and lines[i + 1].startswith("--> Using cache")
    return False


def export(where: Path, name: str) -> Path:
    """A docker archive of the image, tagged with its name. Other checkouts share the cache, so only
    archives unused for a day are removed."""
    where.mkdir(parents=True, exist_ok=True)
    archive = where / f"{name.rsplit(':', 1)[1]}.tar"
    partial = archive.with_suffix(f".partial-{os.getpid()}")
    partial.unlink(missing_ok=True)
    sh("buildah", "push", "--quiet", name, f"docker-archive:{partial}:{name}")
    partial.rename(archive)
    for old in where.glob("test-*.tar"):
        if old != archive and time.time() - old.stat().st_mtime > 86400:
            old.unlink(missing_ok=True)
    return archive


# running it as the CronJob does ---------------------------------------------------------------------
CRONJOB = F.ROOT / "kustomize/base/cronjob.yaml"


@dataclass(frozen=True)
class Policy:
    """What the CronJob's Pod asks of the runtime (kustomize/base/cronjob.yaml)."""

    run_as_non_root: bool
    read_only_root: bool
    no_new_privileges: bool
    dropped: tuple[str, ...]
    empty_dirs: tuple[str, ...]               # mount paths of its emptyDir volumes
    env: dict[str, str]


def cronjob_policy() -> Policy:
    import yaml

    pod = yaml.safe_load(CRONJOB.read_text())["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    sc = container["securityContext"]
    empty = {v["name"] for v in pod["volumes"] if "emptyDir" in v}
    return Policy(run_as_non_root=bool(sc.get("runAsNonRoot", pod["securityContext"].get("runAsNonRoot"))),
                  read_only_root=bool(sc.get("readOnlyRootFilesystem")),
                  no_new_privileges=sc.get("allowPrivilegeEscalation") is False,
                  dropped=tuple(sc.get("capabilities", {}).get("drop", [])),
                  empty_dirs=tuple(m["mountPath"] for m in container["volumeMounts"] if m["name"] in empty),
                  env={e["name"]: e["value"] for e in container.get("env", []) if "value" in e})


def runtime_spec(spec: dict, config: dict, policy: Policy, argv: list[str], env: dict[str, str],
                 binds: dict[Path, str]) -> dict:
    """runc's default spec (`runc spec`) turned into the CronJob's container: the image's numeric USER
    (runAsNonRoot: the kubelet refuses a name or 0), read-only root, /tmp a tmpfs, no capability."""
    user = config.get("User", "")
    if policy.run_as_non_root and (not user.isdigit() or int(user) == 0):
        raise AssertionError(f"runAsNonRoot needs a numeric non-root USER, the image says {user!r}")
    process = spec["process"]
    process.update(terminal=False, args=argv, cwd=config.get("WorkingDir") or "/",
                   user={"uid": int(user or 0), "gid": 0}, noNewPrivileges=policy.no_new_privileges,
                   env=[*config.get("Env", []), *(f"{k}={v}" for k, v in {**policy.env, **env}.items())])
    process.pop("rlimits", None)                  # setrlimit is refused here (no CAP_SYS_RESOURCE)
    if "ALL" in policy.dropped:
        process["capabilities"] = {k: [] for k in ("bounding", "effective", "permitted", "inheritable",
                                                   "ambient")}
    spec["root"]["readonly"] = policy.read_only_root
    spec["mounts"] += [{"destination": d, "type": "tmpfs", "source": "tmpfs",
                        "options": ["nosuid", "nodev", "mode=1777", "size=64m"]} for d in policy.empty_dirs]
    spec["mounts"] += [{"destination": d, "type": "bind", "source": str(s), "options": ["rbind", "ro"]}
                       for s, d in binds.items()]
    return spec


_RUNS = iter(range(1 << 30))


def run(image: ProductImage, *args: str, entrypoint: list[str] | None = None, env: dict[str, str] | None = None,
        binds: dict[Path, str] | None = None, policy: Policy | None = None,
        timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """The image run by runc as the CronJob's securityContext says; args replace its CMD, entrypoint
    its ENTRYPOINT."""
    config = image.config()
    argv = [*(entrypoint if entrypoint is not None else config.get("Entrypoint") or []),
            *(args or config.get("Cmd") or [])]
    container = sh("buildah", "from", "--pull-never", "--quiet", image.name).stdout.strip()
    try:
        rootfs = sh("buildah", "mount", container).stdout.strip()
        with tempfile.TemporaryDirectory(prefix="ocl-runc-") as bundle:
            sh("runc", "spec", "--bundle", bundle)
            spec = json.loads((Path(bundle) / "config.json").read_text())
            spec["root"] = {"path": rootfs}
            spec = runtime_spec(spec, config, policy or cronjob_policy(), argv, env or {}, binds or {})
            (Path(bundle) / "config.json").write_text(json.dumps(spec))
            name = f"ocl-image-{os.getpid()}-{next(_RUNS)}"
            try:
                return subprocess.run(["runc", "run", "--bundle", bundle, name], capture_output=True,
                                      text=True, timeout=timeout, stdin=subprocess.DEVNULL)
            finally:
                subprocess.run(["runc", "delete", "--force", name], capture_output=True)
    finally:
        sh("buildah", "rm", container, check=False)
