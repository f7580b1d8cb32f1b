"""Each architecture's build time, and the emulation factor (issue 55 item 8; `build_cost.py --archs`).

A mixed pool of amd64 and arm64 nodes (tests/support/multiarch.py): the reconciler renders one build
Pod per architecture, FROM a list of two bases made alike from Debian's packages of each
architecture (busybox, jq, the realbuild stand-ins), and each Pod's own script (manifests/
build-pod.sh) runs as uid 1000 with the Pod's capabilities and a container's /dev, as a node of its
architecture runs it: this machine's natively, the other under qemu-user (binfmt_misc), buildah
itself native in both. Alternately, `--repeat` times each, every build with a fresh storage (the
Pod's emptyDir); a factor is the median of each build's figure over that of the native build just
before it.

Two figures per architecture, and the factor of each against this machine's own:

- **build**: the script's wall time, from its start to its push (pull, the rendered Dockerfile's
  RUN steps and the custom content's, commit, push). Only the RUN steps run emulated.
- **CPU step**: one RUN step of the custom content that compresses the base's own /usr and /lib
  four times (busybox tar | gzip -9 | sha256sum, about 27 MB each), timed inside the build by
  /proc/uptime: the cost of emulated work alone, which an OS image's package installs
  (decompression, scripts) are made of.

Root; buildah, docker-registry, skopeo, mmdebstrap (once: the bases are cached in
~/.cache/ocl-reconciler), qemu-user-static registered with binfmt_misc (.ci/run sets it up).
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from tests.support import factory as F
from tests.support import multiarch as M
from tests.support import realbuild as R

REPO = "ocl/os-image"
#: the custom content: what runs the RUN steps (`uname -m`), then the timed CPU step
CUSTOM = """FROM configs AS final
RUN busybox uname -m > /etc/ocl-uname-m && \\
    read t0 _ < /proc/uptime && \\
    for i in 1 2 3 4; do \\
      busybox tar -cf - /usr /lib 2>/dev/null | busybox gzip -9 | busybox sha256sum > /dev/null; \\
    done && \\
    read t1 _ < /proc/uptime && \\
    echo "$t0 $t1" > /etc/ocl-cpu-step
"""


def step_seconds(host: R.Host, image: str, work: Path) -> tuple[str, float]:
    """What the image's RUN steps said: the machine they ran on, and the CPU step's seconds."""
    work.mkdir(parents=True)
    uname = R.image_file(host, image, "/etc/ocl-uname-m", work / "uname")
    times = R.image_file(host, image, "/etc/ocl-cpu-step", work / "step")
    assert uname and times, f"{image}: no /etc/ocl-uname-m or /etc/ocl-cpu-step"
    t0, t1 = (float(t) for t in times.split())
    return uname.decode().strip(), t1 - t0


def qemu_version() -> str:
    tools = [shutil.which(f"qemu-{M.UNAME[a]}-static") for a in M.foreign()]
    found = [subprocess.run([t, "--version"], capture_output=True, text=True).stdout.splitlines()[0]
             for t in tools if t]
    return "; ".join(found) or "none"


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):.2f} ({min(values):.2f}-{max(values):.2f})"


def main(args: argparse.Namespace) -> int:
    why = R.unprivileged_tools() or M.qemu_problem()
    if why or os.geteuid() != 0:
        print(f"bench/build_cost.py --archs: {why or 'runs as root'}", file=sys.stderr)
        return 2
    work = Path(tempfile.mkdtemp(prefix="ocl-build-arch-"))
    work.chmod(0o755)
    registry = R.Registry(work)
    walls: dict[str, list[float]] = {a: [] for a in M.ARCHS}
    steps: dict[str, list[float]] = {a: [] for a in M.ARCHS}
    try:
        host = R.Host(work, registry)
        _, base = M.bases(host, registry)
        mc = F.machineconfig("rendered-worker-1")
        items, pods = M.render(registry, base, mc, REPO, work / "run", CUSTOM)
        for n in range(args.repeat):
            for arch in M.ARCHS:
                digest, wall = M.build(pods[arch], items, host, arch, work / f"pod-{arch}-{n}")
                said, step = step_seconds(host, f"{registry.host}/{REPO}@{digest}", work / f"read-{arch}-{n}")
                assert said == M.UNAME[arch], f"the {arch} build's RUN steps ran on {said}"
                walls[arch].append(wall)
                steps[arch].append(step)
                print(f"{arch:6} build {n + 1}/{args.repeat}: {wall:6.2f} s, CPU step {step:6.2f} s "
                      f"(uname -m: {said})", flush=True)
                shutil.rmtree(work / f"pod-{arch}-{n}", ignore_errors=True)
    finally:
        registry.stop()
        shutil.rmtree(work, ignore_errors=True)
    report(walls, steps, args.repeat)
    return 0


def ratios(values: list[float], native: list[float]) -> list[float]:
    """Each build's figure over that of the native build just before it: the machine's load drifts
    (other work on 2 cores), and the two builds of a pair share most of it."""
    return [v / n for v, n in zip(values, native, strict=True)]


def report(walls: dict[str, list[float]], steps: dict[str, list[float]], repeat: int) -> None:
    mine = M.native()
    buildah = subprocess.run(["buildah", "--version"], capture_output=True, text=True).stdout.split(" (")[0]
    print(f"\n{os.cpu_count()} cores, Linux {platform.release()}, {buildah}, {qemu_version()}; "
          f"median (min-max) of {repeat} builds each; x native: of each build against the native one "
          "just before it")
    print("\n| architecture | how | build wall s | x native | CPU step s | x native |")
    print("|---|---|---|---|---|---|")
    for arch in M.ARCHS:
        how = "native" if arch == mine else "qemu-user (binfmt_misc)"
        print(f"| {arch} | {how} | {spread(walls[arch])} | {spread(ratios(walls[arch], walls[mine]))} "
              f"| {spread(steps[arch])} | {spread(ratios(steps[arch], steps[mine]))} |")
    for arch in M.foreign():
        print(f"\nemulation factor ({arch} under qemu-user against {mine}, median of the pairs): the build "
              f"{statistics.median(ratios(walls[arch], walls[mine])):.2f}x, its CPU-bound step "
              f"{statistics.median(ratios(steps[arch], steps[mine])):.2f}x")
