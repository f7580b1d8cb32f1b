"""The build storage, run for real (issue 32): the storage driver build-pod.sh picks, a storage kept
between builds, and a storage that runs out of space. The generated build Pod's script runs as uid
1000 with the Pod's capabilities and a container's /dev (no /dev/fuse), against a docker-registry
whose access log is on; the base is a small image of several generated layers (tests/support/osimage.py)."""

from __future__ import annotations

import copy
import json
import os
import platform
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from reconcile.contract import annotations as A
from reconcile.imagebuild.builders.base import last_line
from tests.support import buildstorage, osimage
from tests.support import factory as F
from tests.support import realbuild as R

pytestmark = pytest.mark.realbuild
#: native overlay in a user namespace: Linux 5.11 (torvalds/linux 459c7c565ac3, "ovl: unprivieged
#: mounts"; rootless-containers/rootlesscontaine.rs content/how-it-works/overlayfs.md)
NATIVE_OVERLAY_KERNEL = (5, 11)


@pytest.fixture(scope="module")
def env():
    R.ensure_tools()
    why = R.unprivileged_tools() or buildstorage.available("tmpfs")
    if why:
        pytest.fail(why) if os.environ.get(R.REQUIRE) == "require" else pytest.skip(why)
    root = Path(tempfile.mkdtemp(prefix="ocl-storage-"))
    root.chmod(0o755)
    registry, host = osimage.registry_with_bases(root)
    try:
        base = osimage.push_chunked(registry, "ocl/base", "v1", osimage.SMALL_BASE, 3_000_000, layers=6)
        yield registry, host, base, root
    finally:
        registry.stop()
        shutil.rmtree(root, ignore_errors=True)


def build(run_cli, env, mc, name, base=None, driver="auto", kept=False, volumes=None, extra=(), **harness):
    """Render the pool's build Pod and run it; (exit code, termination message, logs, requests).
    `extra`: more objects of the cluster; `harness`: more options of run_build_pod_unprivileged."""
    registry, host, image, root = env
    code, after, err = run_cli.run(osimage.one_pool(registry, base or image.ref, mc) + list(extra))
    assert code == 0, err
    (pod,) = [o for o in F.owned(after) if o["kind"] == "Pod"]
    mark = len(registry.requests())
    code, message, logs = R.run_build_pod_unprivileged(R.with_storage(pod, driver, kept), after, host,
                                                       root / name, volumes=volumes, pod_devices=True, **harness)
    return code, message, logs, registry.requests()[mark:], after


def chosen(storage: Path) -> str:
    """The driver of the storage under this directory, from containers/storage's own layout
    (`<driver>-images`)."""
    found = sorted(p.name for p in storage.glob("**/containers/storage/*-images"))
    assert len(found) == 1, found
    return found[0].removesuffix("-images")


@pytest.mark.parametrize("driver", ["vfs", "auto"])
def test_the_build_works_with_each_driver_as_uid_1000(env, run_cli, driver):
    """vfs as today, and auto, which takes overlay where the kernel allows it: natively, in
    buildah's user namespace (no fuse-overlayfs: the Pod has no /dev/fuse)."""
    registry, host, image, _ = env
    code, message, logs, _, _ = build(run_cli, env, F.machineconfig(f"rendered-worker-{driver}"), f"drv-{driver}",
                                      driver=driver)
    assert code == 0, logs
    kernel = tuple(int(p) for p in platform.release().split(".")[:2])
    assert chosen(env[3] / f"drv-{driver}") == (driver if driver != "auto" else
                            "overlay" if kernel >= NATIVE_OVERLAY_KERNEL else "vfs")
    inspected = json.loads(host.run("skopeo", "inspect", "--tls-verify=false",
                                    f"docker://{registry.host}/ocl/os-image:rendered-worker-{driver}").stdout)
    assert inspected["Digest"] == message.strip()
    assert inspected["Layers"][:len(image.layer_digests)] == list(image.layer_digests)


#: quay.io/buildah/stable's storage.conf, the parts that matter: containers-common's default (driver,
#: runroot, graphroot) with `#mount_program` switched on by its Containerfile (containers/image_build
#: buildah/Containerfile: sed -e 's|^#mount_program|mount_program|g', into /etc/containers/storage.conf
#: and again into /home/build/.config/containers/storage.conf, the `build` user's own).
FUSE_STORAGE_CONF = ('[storage]\ndriver = "overlay"\nrunroot = "/run/containers/storage"\n'
                     'graphroot = "/var/lib/containers/storage"\n\n'
                     '[storage.options.overlay]\nmount_program = "/usr/bin/fuse-overlayfs"\n')


@pytest.mark.parametrize("where", ["system", "user"])
def test_auto_takes_native_overlay_whatever_the_images_storage_conf_names(env, run_cli, where):
    """The builder image's storage.conf names fuse-overlayfs, which fails without /dev/fuse: the
    check of native overlay must not read it, or `auto` takes vfs where overlay works, and the build
    itself never reads it (CONTAINERS_STORAGE_CONF, the script's own). `system`: the image's
    /etc/containers/storage.conf; `user`: $HOME/.config/containers/storage.conf, the one a rootless
    user's buildah reads (containers/storage types/options.go, DefaultConfigFile). The harness gives
    the script no CONTAINERS_STORAGE_CONF, as the Pod does not."""
    kernel = tuple(int(p) for p in platform.release().split(".")[:2])
    name = f"fuse-conf-{where}"
    code, message, logs, _, _ = build(run_cli, env, F.machineconfig(f"rendered-worker-{name}"), name,
                                      **{f"{where}_storage_conf": FUSE_STORAGE_CONF})
    assert code == 0 and message.strip().startswith("sha256:"), logs
    assert chosen(env[3] / name) == ("overlay" if kernel >= NATIVE_OVERLAY_KERNEL else "vfs"), logs


@pytest.fixture
def overlay_home(env):
    """A directory on an overlayfs: native overlay cannot use it as its upper layer, so
    containers/storage falls back to fuse-overlayfs (drivers/overlay/overlay.go, Init), which the
    Pod cannot run without /dev/fuse."""
    root = Path(tempfile.mkdtemp(prefix="ocl-ovl-", dir=env[3]))
    for sub in ("lower", "upper", "work", "merged"):
        (root / sub).mkdir()
    subprocess.run(["mount", "-t", "overlay", "overlay", "-o",
                    f"lowerdir={root}/lower,upperdir={root}/upper,workdir={root}/work", str(root / "merged")],
                   check=True)
    yield root / "merged"
    subprocess.run(["umount", str(root / "merged")], check=False)


def test_auto_falls_back_to_vfs_where_native_overlay_cannot_mount(env, run_cli, overlay_home):
    if shutil.which("fuse-overlayfs") is None:
        pytest.skip("the case needs fuse-overlayfs on the PATH, as the MCO's image has it (apt-get install fuse-overlayfs)")
    volumes = {"/home/build": overlay_home}
    code, _, logs, _, _ = build(run_cli, env, F.machineconfig("rendered-worker-ovl"), "ovl-overlay", driver="overlay",
                                volumes=volumes)
    assert code != 0 and "fuse" in logs.lower(), logs          # overlay there needs what the Pod lacks
    for entry in overlay_home.iterdir():
        subprocess.run(["rm", "-rf", str(entry)], check=True)
    code, message, logs, _, _ = build(run_cli, env, F.machineconfig("rendered-worker-ovl"), "ovl-auto",
                                      volumes=volumes)
    assert code == 0, logs
    assert chosen(overlay_home) == "vfs" and message.strip().startswith("sha256:")
    # and says why: buildah's error from the check's mount
    (why,) = [line for line in (env[3] / "ovl-auto/pod.log").read_text().splitlines()
              if line.startswith("build storage: native overlay unavailable: ")]
    assert why.removeprefix("build storage: native overlay unavailable: ").startswith("Error: ") and "fuse" in why, why


def _layer_gets(requests, image):
    """The GETs of the image's layer blobs that the registry answered with content."""
    wanted = {f"/v2/ocl/base/blobs/{d}" for d in image.layer_digests}
    return [r for r in requests if r["method"] == "GET" and r["uri"] in wanted and r["status"] == 200]


def _images(storage: Path) -> list[list[str]]:
    """The names of every image in a kept storage, read from containers/storage's own index."""
    (index,) = storage.glob("containers/storage/*-images/images.json")
    return sorted(sorted(i.get("names") or []) for i in json.loads(index.read_text()))


def test_a_kept_storage_rebuilds_without_pulling_the_base_and_keeps_only_what_it_uses(env, run_cli):
    """The second build with the same storage pulls no layer of the base (buildah's default pull
    policy, `--pull=true`, pulls only a newer image: containers/buildah pkg/cli/build.go); after
    each build only the images the Dockerfile names stay; after a base upgrade the old base goes;
    a build with another driver drops the first driver's storage."""
    registry, host, image, root = env
    storage = Path(tempfile.mkdtemp(prefix="kept-", dir=root))
    volumes = {R.KEPT_STORAGE: storage}
    mc = F.machineconfig("rendered-kept-1")
    mc["spec"]["extensions"] = ["usbguard"]
    code, _, logs, requests, _ = build(run_cli, env, mc, "kept-1", driver="overlay", kept=True, volumes=volumes)
    assert code == 0, logs
    assert len(_layer_gets(requests, image)) == len(image.layer_digests)
    extensions = [f"{registry.host}/{osimage.EXTENSIONS}"]
    assert _images(storage) == sorted([[image.ref], extensions])

    changed = copy.deepcopy(mc)
    changed["metadata"]["name"] = "rendered-kept-2"
    changed["spec"]["config"]["storage"]["files"][0]["contents"]["source"] = "data:,one%20file%20changed"
    code, message, logs, requests, _ = build(run_cli, env, changed, "kept-2", driver="overlay", kept=True,
                                             volumes=volumes)
    assert code == 0, logs
    assert _layer_gets(requests, image) == []
    assert _images(storage) == sorted([[image.ref], extensions])
    assert message.strip().startswith("sha256:")

    upgraded = osimage.push_chunked(registry, "ocl/base", "v2", osimage.SMALL_BASE, 3_000_000, layers=6, seed=2)
    code, _, logs, requests, _ = build(run_cli, env, changed, "kept-3", base=upgraded.ref, driver="overlay",
                                       kept=True, volumes=volumes)
    assert code == 0, logs
    new_layers = set(upgraded.layer_digests) - set(image.layer_digests)        # the small base's layer is kept
    assert {r["uri"].rsplit("/", 1)[1] for r in _layer_gets(requests, upgraded)} == new_layers
    assert _images(storage) == sorted([[upgraded.ref], extensions])


def kept_after_one_build(run_cli, env, name: str) -> tuple[Path, dict[str, Path]]:
    """A kept storage after one good build with overlay on the base: (its directory, the volumes
    that mount it); it holds the base alone."""
    registry, host, image, root = env
    storage = Path(tempfile.mkdtemp(prefix=f"{name}-", dir=root))
    volumes = {R.KEPT_STORAGE: storage}
    code, _, logs, _, _ = build(run_cli, env, F.machineconfig(f"rendered-{name}-1"), f"{name}-1",
                                driver="overlay", kept=True, volumes=volumes)
    assert code == 0, logs
    assert _images(storage) == [[image.ref]]
    return storage, volumes


def test_a_failed_build_on_a_kept_storage_still_removes_what_it_does_not_use(env, run_cli):
    """A build after a base upgrade that fails (a custom step exits 3) removes the old base all the
    same, or a pool whose builds keep failing fills its volume; the build stays failed, and the
    reason the reconciler shows (the log's last line: FallbackToLogsOnError) stays buildah's."""
    registry, host, image, root = env
    storage, volumes = kept_after_one_build(run_cli, env, "kept-failed")
    upgraded = osimage.push_chunked(registry, "ocl/base", "v3", osimage.SMALL_BASE, 3_000_000, layers=6, seed=3)
    failing = F.configmap("on-cluster-build-custom-dockerfile", {"worker": "FROM configs AS final\nRUN exit 3\n"})
    code, message, logs, _, after = build(run_cli, env, F.machineconfig("rendered-kept-failed-2"), "kept-failed-2",
                                           base=upgraded.ref, driver="overlay", kept=True, volumes=volumes,
                                           extra=[failing])
    assert code != 0 and message == "", logs
    assert _images(storage) == [[upgraded.ref]], logs
    assert last_line(logs).startswith("Error: ") and last_line(logs).endswith("exit status 3"), logs
    code, a, _ = R.pool_after_failure(run_cli, after, logs)
    assert (code, a[A.STATE]) == (0, A.FAILED)
    assert a[A.MESSAGE].endswith("exit status 3"), a[A.MESSAGE]


def test_a_killed_builds_overlay_check_is_removed_from_a_kept_storage(env, run_cli):
    """The check of native overlay keeps its own storage beside the graph root while it runs; a
    build killed then leaves it on the volume, which the next build removes (as uid 1000, in
    buildah's user namespace: a file of a subordinate id inside). So are the probe files of the
    reflink and writability checks a build killed in them leaves, and the check's own storage
    once it is done."""
    registry, host, image, root = env
    storage, volumes = kept_after_one_build(run_cli, env, "kept-probe")
    stale = storage / "containers" / "storage.probe.Ab12Cd"
    (stale / "root").mkdir(parents=True)
    (stale / "root" / "layer-file").write_text("left by a killed build")
    for path in (stale, stale / "root", stale / "root" / "layer-file"):
        os.chown(path, 100000, 100000)          # a subordinate id of the build user (/etc/subuid)
    probes = [storage / ".ocl-reflink.Ab12Cd", storage / ".ocl-reflink.Ab12Cd.copy",
              storage / ".ocl-write.Ab12Cd", storage / "containers" / ".ocl-write.Ab12Cd",
              storage / "containers" / "storage" / ".ocl-write.Ab12Cd"]
    for probe in probes:
        probe.write_text("probe\n")
        os.chown(probe, 1000, 1000)
    code, _, logs, _, _ = build(run_cli, env, F.machineconfig("rendered-kept-probe-2"), "kept-probe-2",
                                kept=True, volumes=volumes)
    assert code == 0, logs
    assert not stale.exists(), logs
    assert [p for p in probes if p.exists()] == [], logs
    assert list((storage / "containers").glob("storage.probe.*")) == [], logs     # this build's own check
    assert _images(storage) == [[image.ref]]


@pytest.mark.parametrize("made, driver", [("nothing", "overlay"), ("graph-root", "vfs")])
def test_a_volume_uid_1000_cannot_write_keeps_nothing_and_the_build_works(env, run_cli, made, driver):
    """A CSI driver that does not apply fsGroup leaves the volume's root root-owned (0755): the build
    keeps nothing there and builds in $HOME, the Pod's emptyDir, as without a volume, and says why.
    `graph-root`: the graph root on it is uid 1000's (made before), the root is not: vfs cannot check
    for reflink there, and the log says the volume is not writable, not that it has no reflink."""
    registry, host, image, root = env
    storage = Path(tempfile.mkdtemp(prefix=f"unwritable-{made}-", dir=root))
    storage.chmod(0o755)
    graph = storage / "containers" / "storage"
    if made == "graph-root":
        graph.mkdir(parents=True)
        os.chown(graph, 1000, 1000)
    name = f"unwritable-{made}"
    code, message, logs, _, _ = build(run_cli, env, F.machineconfig(f"rendered-{name}"), name, driver=driver,
                                      kept=True, volumes={R.KEPT_STORAGE: storage}, chown_volumes=False)
    assert code == 0, logs
    inspected = json.loads(host.run("skopeo", "inspect", "--tls-verify=false",
                                    f"docker://{registry.host}/ocl/os-image:rendered-{name}").stdout)
    assert message.strip() == inspected["Digest"], logs
    assert (storage.stat().st_uid, storage.stat().st_mode & 0o777) == (0, 0o755)
    if made == "nothing":
        assert not (storage / "containers").exists(), logs
    else:
        assert list(graph.iterdir()) == [], logs
    assert list(storage.glob(".ocl-*")) == []
    log = (root / name / "pod.log").read_text().splitlines()
    said = [line for line in log if line.startswith("build storage: ") and "keeps nothing" in line]
    kept = f"{root / name}{R.KEPT_STORAGE}"               # BUILD_STORAGE_DIR, as the harness points it
    assert said == [f"build storage: {kept} is not writable by uid 1000: this build keeps nothing there"], log
    assert chosen(root / name / "home") == driver, logs


def test_a_build_that_cannot_pull_its_base_leaves_a_kept_storage_as_it_was(env, run_cli):
    """A pull that fails (here the registry has no such manifest; a refused or unreachable registry
    alike) adds nothing to the storage: the last base stays, since the next build most likely shares
    most of its layers (an OS image's upgrade changes some chunks, not all)."""
    registry, host, image, root = env
    storage, volumes = kept_after_one_build(run_cli, env, "kept-nopull")
    missing = f"{registry.host}/ocl/base@sha256:{'0' * 64}"
    code, _, logs, _, _ = build(run_cli, env, F.machineconfig("rendered-kept-nopull-2"), "kept-nopull-2",
                                base=missing, driver="overlay", kept=True, volumes=volumes)
    assert code != 0, logs
    assert _images(storage) == [[image.ref]], logs


@pytest.mark.parametrize("kind, keeps", [("xfs", True), ("ext4", False)])
def test_vfs_keeps_its_storage_only_on_a_volume_that_reflinks(env, run_cli, kind, keeps):
    """vfs copies every layer in full where the filesystem cannot share extents (46x the unpacked
    image on ext4, 1.1x on xfs with reflink: docs/development.md, "Build cost"), so on a volume
    sized for overlay it would fill it: there build-pod.sh keeps nothing and builds in $HOME, the
    Pod's emptyDir. On xfs it keeps its storage, dropping the one an overlay build left."""
    why = buildstorage.available(kind)
    if why:
        pytest.fail(why) if os.environ.get(R.REQUIRE) == "require" else pytest.skip(why)
    registry, host, image, root = env
    fs = buildstorage.Filesystem(root / f"reflink-{kind}", 1 << 30, kind)
    try:
        volumes = {R.KEPT_STORAGE: fs.mount}
        mc = F.machineconfig(f"rendered-reflink-{kind}")
        code, _, logs, _, _ = build(run_cli, env, mc, f"reflink-{kind}-1", driver="overlay", kept=True,
                                    volumes=volumes)
        assert code == 0, logs
        assert chosen(fs.mount) == "overlay"
        code, message, logs, _, _ = build(run_cli, env, mc, f"reflink-{kind}-2", driver="vfs", kept=True,
                                          volumes=volumes)
        assert code == 0 and message.strip().startswith("sha256:"), logs
        assert chosen(fs.mount) == ("vfs" if keeps else "overlay")     # ext4: left as the overlay build kept it
        in_home = sorted((root / f"reflink-{kind}-2").glob("**/containers/storage/vfs-images"))
        assert bool(in_home) is not keeps, in_home
    finally:
        fs.close()


def test_a_build_that_runs_out_of_space_says_so(env, run_cli, capsys):
    """A storage too small for the base: buildah fails with ENOSPC, the termination message (the
    reason the kubelet reports and the reconciler shows) says the build storage is full."""
    registry, host, image, root = env
    fs = buildstorage.Filesystem(root / "tiny-fs", 2_000_000, "tmpfs")
    try:
        code, message, logs, _, after = build(run_cli, env, F.machineconfig("rendered-worker-full"), "full",
                                              driver="vfs", volumes={"/home/build": fs.mount})
    finally:
        fs.close()
    assert code != 0 and "no space left on device" in logs, logs
    assert message.startswith("build storage full (vfs driver, ") and "no space left on device" in message
    assert len(message.splitlines()) == 1
    code, a, _ = R.pool_after_failure(run_cli, after, message)     # the message, not the log
    assert (code, a[A.STATE]) == (0, A.FAILED)
    assert "build storage full" in a[A.MESSAGE]
