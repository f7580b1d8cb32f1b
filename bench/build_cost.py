#!/usr/bin/env python3
"""What a build costs, on a base image shaped like a chunked OS image (issue 32).

Generates a base of about 51 layers (FCOS's layer sizes scaled to --size, tests/support/osimage.py)
in a local docker-registry whose access log is on, with the small working base on top. Then runs the
build Pod's own script (manifests/build-pod.sh, rendered by the reconciler for a pool, as uid 1000
with the Pod's capabilities and a container's /dev: tests/support/realbuild.py) three times: the
first build, a rebuild after a one-file MachineConfig change, a rebuild after an extensions change.
It does so for each storage driver, in two modes side by side:

  today  the storage starts empty for each build (the Pod's emptyDir: today's behaviour)
  kept   the storage is a directory kept between builds (BUILD_STORAGE_DIR; a PersistentVolumeClaim)

The storage is on a filesystem of its own (loop-mounted, --fs), sampled with statvfs. For each build:
wall time, bytes pulled (GET responses in the registry's log), bytes pushed (the blobs whose upload
completed, and new blobs in the registry's storage), the storage's peak disk, the base layers
reused (not pulled) and the image layers reused on push (not uploaded). Then the goals of issue 32
item 4, met or not, and the peak-disk factors (--write-table: manifests/build-disk.yaml). Root only.

--archs instead gives each architecture's build time for a mixed pool, amd64 natively and arm64 under
qemu-user, and the emulation factor (bench/build_cost_arch.py).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.parse
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.support import buildstorage, osimage  # noqa: E402
from tests.support import factory as F  # noqa: E402
from tests.support import realbuild as R  # noqa: E402

MB = 1_000_000
TABLE = ROOT / "manifests/build-disk.yaml"
STEPS = ("first", "one-file change", "extensions change")


def machineconfigs() -> list[dict]:
    """The three builds' rendered MachineConfigs: the second differs in one file's content, the
    third adds an extension."""
    first, second = F.machineconfig("rendered-worker-1"), F.machineconfig("rendered-worker-2")
    third = F.machineconfig("rendered-worker-3", content="rendered-worker-2")
    third["spec"]["extensions"] = ["usbguard"]
    return [first, second, third]


def render(registry: R.Registry, base: str, mc: dict, repo: str, work: Path) -> tuple[list, dict]:
    """The reconciler's first run on a cluster with one pool: its objects and the build Pod."""
    after = osimage.run(osimage.one_pool(registry, base, mc, repo), work)
    return after, next(o for o in after if o["kind"] == "Pod")


def blobs(registry: R.Registry) -> dict[str, int]:
    """Every blob the registry stores: digest -> bytes."""
    found = {}
    for data in (registry.storage / "docker/registry/v2/blobs").glob("sha256/*/*/data"):
        found["sha256:" + data.parent.name] = data.stat().st_size
    return found


@dataclass
class Build:
    driver: str
    mode: str
    step: str
    wall: float
    pulled: int
    pushed: int
    peak: int
    after: int
    base_layers_reused: int
    push_layers_reused: int
    push_layers: int


def measure(registry, host, fs, home, image, driver, mode, step, mc, work, n) -> Build:
    """One build. `fs` holds the storage: the Pod's emptyDir (today), or the volume kept between
    builds (kept), where `home` is the Pod's emptyDir beside it: build-pod.sh builds there, keeping
    nothing, where vfs has no reflink on the volume. The peak counts both; `after`, what the volume
    keeps."""
    repo = f"ocl/os-image-{driver}-{mode}"
    items, pod = render(registry, image.ref, mc, repo, work)
    kept = mode == "kept"
    pod = R.with_storage(pod, driver, kept=kept)
    (home or fs).wipe()                                  # an emptyDir starts empty
    volumes = {R.KEPT_STORAGE: fs.mount, "/home/build": home.mount} if kept else {"/home/build": fs.mount}
    mark, before = len(registry.requests()), blobs(registry)
    start = time.monotonic()
    with fs.peak(also=(home,) if home else ()) as peak:
        code, message, logs = R.run_build_pod_unprivileged(pod, items, host, work / f"pod-{n}",
                                                           volumes=volumes, pod_devices=True)
    wall = time.monotonic() - start
    if code != 0:
        raise RuntimeError(f"{driver} {mode} {step}: exit {code}: {logs}")
    shutil.rmtree(work / f"pod-{n}", ignore_errors=True)
    requests = registry.requests()[mark:]
    pulled = pulled_bytes(requests)
    base_blobs = {f"/v2/ocl/base/blobs/{d}" for d in image.layer_digests}
    base_pulled = sum(1 for r in requests
                      if r["method"] == "GET" and r["uri"] in base_blobs and r["status"] == 200)
    stored = blobs(registry)
    new = {d: size for d, size in stored.items() if d not in before}
    # a blob uploaded again is not new in the registry's storage: count each completed upload too
    for r in requests:
        if r["method"] == "PUT" and "/blobs/uploads/" in r["uri"] and r["status"] == 201:
            digest = urllib.parse.parse_qs(urllib.parse.urlsplit(r["uri"]).query)["digest"][0]
            new[digest] = stored[digest]
    manifest = json.loads(host.run("skopeo", "inspect", "--raw", "--tls-verify=false",
                                   f"docker://{registry.host}/{repo}@{message.strip()}").stdout)
    layers = [layer["digest"] for layer in manifest["layers"]]
    return Build(driver, mode, step, wall, pulled, sum(new.values()), peak[0], fs.used(),
                 len(image.layer_digests) - base_pulled, sum(1 for d in layers if d not in new), len(layers))


def pulled_bytes(requests: list[dict]) -> int:
    """What the registry served (GET responses' bytes), from its log's requests."""
    return sum(r["written"] for r in requests if r["method"] == "GET")


def ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}x" if b else "-"


def report(builds: list[Build], image: osimage.Image) -> None:
    first = {(b.driver, b.mode): b for b in builds if b.step == "first"}
    today = first.get(("vfs", "today")) or builds[0]
    print("\n| driver | storage | build | wall s (x first) | pulled MB (% of base) | pushed MB "
          "| peak disk MB (x unpacked) | left in storage MB | base layers reused | layers reused on push |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for b in builds:
        f = first[(b.driver, b.mode)]
        print(f"| {b.driver} | {b.mode} | {b.step} | {b.wall:.1f} ({ratio(b.wall, f.wall)}) | "
              f"{b.pulled / MB:.1f} ({100 * b.pulled / image.compressed:.1f}%) | {b.pushed / MB:.2f} | "
              f"{b.peak / MB:.0f} ({ratio(b.peak, image.unpacked)}) | "
              f"{b.after / MB:.0f} | {b.base_layers_reused}/{image.layers} | "
              f"{b.push_layers_reused}/{b.push_layers} |")
    print(f"\nfirst builds against today's (vfs, today: {today.wall:.1f} s):",
          ", ".join(f"{d} {m} {ratio(b.wall, today.wall)}" for (d, m), b in first.items()))


def goals(builds: list[Build], image: osimage.Image) -> list[tuple[str, str, str, bool]]:
    """Issue 32 item 4 for each driver and mode: (setup, goal, figure, met)."""
    out = []
    today = next((b for b in builds if (b.driver, b.mode, b.step) == ("vfs", "today", "first")), None)
    for driver, mode in dict.fromkeys((b.driver, b.mode) for b in builds):
        mine = {b.step: b for b in builds if (b.driver, b.mode) == (driver, mode)}
        first, one = mine["first"], mine["one-file change"]
        peak = max(b.peak for b in mine.values())
        setup = f"{driver}, {mode}"
        out.append((setup, "one-file rebuild <= 0.3x first build's wall time",
                    f"{one.wall:.1f} s / {first.wall:.1f} s = {one.wall / first.wall:.2f}x",
                    one.wall <= 0.3 * first.wall))
        out.append((setup, "one-file rebuild pulls <= 1% of the base",
                    f"{one.pulled / MB:.2f} MB = {100 * one.pulled / image.compressed:.2f}%",
                    one.pulled <= 0.01 * image.compressed))
        out.append((setup, "peak disk <= 1.5x the image's unpacked size",
                    f"{peak / MB:.0f} MB = {peak / image.unpacked:.2f}x", peak <= 1.5 * image.unpacked))
        if today is not None:
            out.append((setup, "first build no slower than today's",
                        f"{first.wall:.1f} s vs {today.wall:.1f} s", first.wall <= today.wall))
    return out


HEADER = """\
# The build storage's disk, as a multiple of the base OS image's unpacked size, for each filesystem
# the storage was on, storage driver and mode (today: a storage that starts empty for each build;
# kept: one kept between builds). `peak` is the most a build's storage held (it sizes the build
# Pod's ephemeral-storage, or the volume); `kept` what a kept storage holds between builds. Without
# knowing the node's filesystem, size from the largest factor over the filesystems. Written by
# bench/build_cost.py --write-table (make bench-build ARGS="--write-table [--fs xfs]"), one
# filesystem per run; do not edit by hand. A kept vfs storage on a filesystem without reflink keeps
# nothing (build-pod.sh builds in the Pod's emptyDir): its `kept` is 0, its peak that emptyDir's.
# The generated base is incompressible: for a real base, the unpacked size is larger than its
# compressed (registry) size.
"""


def table(builds: list[Build], image: osimage.Image, args: argparse.Namespace, reflink: bool) -> dict:
    """This run's entry of manifests/build-disk.yaml (its filesystem's). `reflink`: whether a copy
    shares extents there (without it, build-pod.sh keeps no vfs storage on the volume)."""
    factors: dict = {}
    for b in builds:
        mine = [x for x in builds if (x.driver, x.mode) == (b.driver, b.mode)]
        peak = max(x.peak for x in mine) / image.unpacked
        kept = max(x.after for x in mine) / image.unpacked if b.mode == "kept" else 0.0
        factors.setdefault(b.driver, {})[b.mode] = {"peak": round(peak, 2), "kept": round(kept, 2)}
    return {"measured": {
        "date": datetime.date.today().isoformat(),
        "command": f"python bench/build_cost.py --size {args.size} --fs {args.fs} --write-table",
        "machine": f"{os.cpu_count()} cores, Linux {platform.release()}, {buildah_version()}",
        "reflink": reflink,
        "base": {"layers": image.layers, "compressed_mb": round(image.compressed / MB, 1),
                 "unpacked_mb": round(image.unpacked / MB, 1)}},
        "factors": factors}


def write_table(entry: dict, fs_kind: str) -> str:
    """The table with this filesystem's entry replaced, the others kept."""
    import yaml
    current = yaml.safe_load(TABLE.read_text()) if TABLE.exists() else None
    filesystems = dict((current or {}).get("filesystems") or {})
    filesystems[fs_kind] = entry
    text = HEADER + yaml.safe_dump({"filesystems": dict(sorted(filesystems.items()))}, sort_keys=False)
    TABLE.write_text(text)
    return text


def buildah_version() -> str:
    return subprocess.run(["buildah", "--version"], capture_output=True, text=True).stdout.split(" (")[0]


def capacity(driver: str, size: int, layers: int) -> int:
    """The dedicated filesystem's size: vfs keeps a full copy of the tree per layer."""
    return (layers + 8) * size + 2_000_000_000 if driver == "vfs" else 6 * size + 1_000_000_000


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", type=int, default=400, help="generated layers' total, MB (default 400)")
    parser.add_argument("--layers", type=int, default=osimage.FCOS_LAYERS)
    parser.add_argument("--drivers", default="vfs,overlay")
    parser.add_argument("--modes", default="today,kept")
    parser.add_argument("--fs", default="ext4", choices=["ext4", "xfs", "tmpfs"])
    parser.add_argument("--write-table", action="store_true", help=f"write {TABLE.relative_to(ROOT)}")
    parser.add_argument("--json", help="write the figures to this file")
    parser.add_argument("--from-json", help="report on the figures a --json run wrote, without building")
    parser.add_argument("--in-pod", action="store_true",
                        help="then the same builds in the build Pod on a real node (bench/build_cost_pod.py)")
    parser.add_argument("--archs", action="store_true",
                        help="instead: each architecture's build time and the emulation factor "
                             "(bench/build_cost_arch.py)")
    parser.add_argument("--repeat", type=int, default=5, help="with --archs: builds of each architecture")
    args = parser.parse_args(argv)
    if args.archs:
        import build_cost_arch
        return build_cost_arch.main(args)
    if args.from_json:
        figures = json.loads(Path(args.from_json).read_text())
        saved = figures["image"]
        image = osimage.Image(**dict(saved, layer_digests=tuple(saved["layer_digests"])))
        return finish([Build(**b) for b in figures["builds"]], image, args, bool(figures.get("reflink")))
    why = R.unprivileged_tools() or buildstorage.available(args.fs)
    if why or shutil.which("buildah") is None:
        print(f"bench/build_cost.py: {why or 'needs buildah'}", file=sys.stderr)
        return 2
    work = Path(tempfile.mkdtemp(prefix="ocl-build-cost-"))
    work.chmod(0o755)
    registry, host = osimage.registry_with_bases(work)
    try:
        start = time.monotonic()
        image = osimage.push_chunked(registry, "ocl/base", "latest", osimage.SMALL_BASE,
                                     args.size * MB, args.layers)
        print(f"base {image.ref}: {image.layers} layers, {image.compressed / MB:.1f} MB compressed, "
              f"{image.unpacked / MB:.1f} MB unpacked, generated and pushed in "
              f"{time.monotonic() - start:.1f} s")
        builds: list[Build] = []
        reflink: bool | None = None
        for driver in args.drivers.split(","):
            for mode in args.modes.split(","):
                size = capacity(driver, image.unpacked, image.layers)
                fs = buildstorage.Filesystem(work / f"fs-{driver}-{mode}", size, args.fs)
                home = buildstorage.Filesystem(work / f"home-{driver}-{mode}", size, args.fs) \
                    if mode == "kept" else None
                if reflink is None:            # the filesystem's, the same for each of them
                    reflink = fs.reflinks()
                    print(f"{args.fs}: reflink {'yes' if reflink else 'no'} (cp --reflink=always)",
                          flush=True)
                try:
                    for n, (step, mc) in enumerate(zip(STEPS, machineconfigs(), strict=True)):
                        b = measure(registry, host, fs, home, image, driver, mode, step, mc, work, n)
                        print(f"{driver:7} {mode:5} {step:17} {b.wall:6.1f} s  pulled {b.pulled / MB:7.1f} MB"
                              f"  pushed {b.pushed / MB:6.2f} MB  peak {b.peak / MB:7.0f} MB", flush=True)
                        builds.append(b)
                finally:
                    fs.close()
                    if home:
                        home.close()
        if args.in_pod:
            in_pod(registry, host, image, work, builds)
    finally:
        registry.stop()
        shutil.rmtree(work, ignore_errors=True)
    if args.json:
        figures = {"image": asdict(image), "builds": [asdict(b) for b in builds], "reflink": bool(reflink)}
        Path(args.json).write_text(json.dumps(figures, indent=1))
    return finish(builds, image, args, bool(reflink))


def in_pod(registry: R.Registry, host: R.Host, image: osimage.Image, work: Path, builds: list[Build]) -> None:
    """The three builds in the build Pod on a real node, printed beside the host process's."""
    import build_cost_pod
    pod = build_cost_pod.measure(registry, host, work / "in-pod", STEPS, machineconfigs(), pulled_bytes)
    build_cost_pod.report(pod, builds, image.compressed, MB)


def finish(builds: list[Build], image: osimage.Image, args: argparse.Namespace, reflink: bool) -> int:
    """The figures, the goals, and this filesystem's entry of the disk table."""
    report(builds, image)
    print("\n| setup | goal | measured | met |\n|---|---|---|---|")
    for setup, goal, figure, met in goals(builds, image):
        print(f"| {setup} | {goal} | {figure} | {'met' if met else 'NOT met'} |")
    entry = table(builds, image, args, reflink)
    print(f"\nbuild-disk.yaml, filesystems.{args.fs}: {json.dumps(entry)}")
    if args.write_table:
        write_table(entry, args.fs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
