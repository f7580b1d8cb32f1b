"""The build-cost figures again, in the build Pod on a real node (issue 53; `build_cost.py --in-pod`).

The same base (build_cost.py's chunked one, in the same registry) and the same three rendered
configs, built by the product's own build Pod (manifests/pod-buildah.yaml.j2, unchanged) under the
real kubelet (tests/support/realnode.py), on the builder image made here (tests/support/
builderimage.py), with the pool's build storage kept on a local PersistentVolume
(tests/support/nodebuild.py). Each build is one `ocl-reconcile run --wait` as the ServiceAccount,
from its start to the digest recorded on the pool: scheduling, the Pod's start and the run's own
requests included. Disk: the volume and the node's emptyDirs (`du`, sampled each second: a peak
between samples is missed) and what the volume keeps after. Root, and `make realnode`'s binaries."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reconcile.contract import annotations as A
from tests.support import nodebuild as NB
from tests.support import osimage as O
from tests.support import realnode
from tests.support.realbuild import Host, Registry

ROOT = Path(__file__).resolve().parent.parent

#: the product image is not run here (its CronJob stays suspended): kustomize/base needs a name
UNUSED_IMAGE = "localhost/ocl-reconciler:bench"


@dataclass
class PodBuild:
    step: str
    wall: float
    pulled: int
    peak: int
    after: int
    driver: str


def du(*paths: Path) -> int:
    out = subprocess.run(["du", "-s", "-B1", "-c", *map(str, paths)], capture_output=True, text=True).stdout
    return int(out.splitlines()[-1].split()[0]) if out.strip() else 0


class Peak:
    """The most `paths` held together while it ran (sampled by a thread)."""

    def __init__(self, *paths: Path):
        self.paths, self.most, self._stop = paths, 0, threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self._stop.wait(1.0):
            self.most = max(self.most, du(*self.paths))

    def __enter__(self) -> Peak:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join()
        self.most = max(self.most, du(*self.paths))


def machineconfigs(pods_registry: str, originals: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """build_cost's three configs, each with the registries.conf that lets the Pod use plain HTTP."""
    out = []
    for mc in originals:
        ours = NB.machineconfig(mc["metadata"]["name"], pods_registry)
        files = {f["path"]: f for f in mc["spec"]["config"]["storage"]["files"]}
        ours["spec"]["config"]["storage"]["files"] = [
            files.get(f["path"], f) for f in ours["spec"]["config"]["storage"]["files"]]
        ours["spec"]["extensions"] = mc["spec"]["extensions"]
        out.append(ours)
    return out


def measure(registry: Registry, host: Host, work: Path, steps: tuple[str, ...],
            originals: list[dict[str, Any]], pulled_bytes: Any) -> list[PodBuild]:
    """The three builds on a node started for them (its index: OCL_REALNODE_OFFSET)."""
    bindir = realnode.prerequisites()
    node = realnode.Node(work / "node", bindir, int(os.environ.get("OCL_REALNODE_OFFSET") or 0))
    (work / "node").mkdir(parents=True)
    node.start()
    try:
        sys.path.insert(0, str(ROOT / "examples"))      # nodejobs's kubelet.py
        from tests.support import nodejobs
        nodejobs.Deployed(node, UNUSED_IMAGE, work / "overlay")
        w = NB.on_node(node, work, registry, host)
        volume = work / "pv"
        NB.provide_storage(node, volume, "ocl-bench-build")
        kubeconfig = NB.sa_kubeconfig(node, work / "sa.kubeconfig")
        mcs = machineconfigs(w.pods_registry, originals)
        node.api.load(NB.scenario(w, mcs[0], extensions=f"{w.pods_registry}/{O.EXTENSIONS}"))
        node.api.kubectl("label", "node", node.name, "node-role.kubernetes.io/worker=", kubeconfig=node.admin)
        return [one(w, kubeconfig, volume, step, mc, n, pulled_bytes)
                for n, (step, mc) in enumerate(zip(steps, mcs, strict=True))]
    finally:
        node.stop()


def one(w: NB.World, kubeconfig: str, volume: Path, step: str, mc: dict[str, Any], n: int,
        pulled_bytes: Any) -> PodBuild:
    if n:
        NB.switch_config(w.node, mc)
    mark = len(w.registry.requests())
    with Peak(volume, w.node.root / "kubelet/pods") as peak:
        started = time.monotonic()
        code, err = NB.run(w.node, kubeconfig, wait=1800)
        wall = time.monotonic() - started
    a = NB.recorded(w.node)
    if code != 0 or a.get(A.STATE) != A.SUCCEEDED:
        raise RuntimeError(f"in the Pod, {step}: exit {code}, {a.get(A.MESSAGE)}: {err[-2000:]}")
    driver = "overlay" if any((volume / "containers/storage").glob("overlay-images")) else "vfs"
    return PodBuild(step, wall, pulled_bytes(w.registry.requests()[mark:]), peak.most, du(volume), driver)


def report(pod: list[PodBuild], host: list[Any], compressed: int, mb: int) -> None:
    """The Pod's figures beside the host process's of the same driver, kept storage."""
    print("\n| build | in the Pod: wall s (x first) | host process, overlay kept: wall s | pulled MB (Pod) "
          "| peak disk MB (Pod) | left on the volume MB (Pod) | Pod's driver |")
    print("|---|---|---|---|---|---|---|")
    same = {b.step: b for b in host if (b.driver, b.mode) == ("overlay", "kept")}
    first = pod[0].wall
    for b in pod:
        h = same.get(b.step)
        print(f"| {b.step} | {b.wall:.1f} ({b.wall / first:.2f}x) | {f'{h.wall:.1f}' if h else '-'} | "
              f"{b.pulled / mb:.1f} ({100 * b.pulled / compressed:.1f}%) | {b.peak / mb:.0f} | "
              f"{b.after / mb:.0f} | {b.driver} |")

