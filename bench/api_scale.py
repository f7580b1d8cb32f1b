#!/usr/bin/env python3
"""Requests per run and wall time of `ocl-reconcile run` against the test API server, for 10, 100
and 200 pools, in a fresh interpreter each time (interpreter start and imports included).

Three runs per size: creating (every pool needs a build), steady while building (every build
Pod running, ~280 KB MachineConfig in each pool's ConfigMap), steady when built (nothing left but
the pools). Targets (issue 3): a steady run makes <= 8 requests whatever the pool count; a steady
run at 200 pools takes <= 1.5 s wall including interpreter start.

`--real`: the same against the real kube-apiserver and etcd of the realapi suite (`make realapi`
builds them), the reconciler authenticated as its ServiceAccount; requests are counted from the
server's audit log.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "examples"))
sys.path.insert(0, str(ROOT / "bench"))

import kubelet  # noqa: E402
from plan_scale import sample_machineconfig  # noqa: E402

from tests import factory as F  # noqa: E402
from tests.apiserver import APIServer  # noqa: E402


def cluster(n: int, mc: dict) -> list[dict]:
    items = F.cluster(*(F.pool(f"pool{i}", rendered=f"rendered-pool{i}-1") for i in range(n)))
    out = []
    for obj in items:
        if obj["kind"] == "MachineConfig":
            big = dict(mc, metadata={"name": obj["metadata"]["name"]})
            out.append(big)
        else:
            out.append(obj)
    return out


def timed_run(items: list[dict], tmp: Path) -> tuple[float, int, Counter, list[dict]]:
    with APIServer(items) as server:
        kubeconfig = server.kubeconfig(tmp / "kubeconfig")
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "reconcile", "run", "--kubeconfig", kubeconfig],
                       cwd=ROOT, check=False, capture_output=True,
                       env=dict(os.environ, OCL_RECONCILE_NOW="2026-11-29T12:00:00Z"))
        wall = time.perf_counter() - start
        kinds = Counter(f"{r.verb} {r.resource}" for r in server.log)
        return wall, len(server.log), kinds, server.items()


def report(n: int, label: str, count: int, wall: float, kinds: Counter) -> None:
    print(f"{n:>5}  {label:<22} {count:>8} {wall:>7.2f}s  {dict(sorted(kinds.items()))}")


def real_runs(mc: dict) -> int:
    from tests import realserver
    bindir = realserver.cache_dir()
    if not (bindir / "kube-apiserver").is_file():
        print(f"error: no kube-apiserver in {bindir}: run `make realapi` first", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        api = realserver.RealAPI(Path(tmp), bindir)
        try:
            api.start()
            api.install_product()
            kubeconfig = api.kubeconfig(Path(tmp) / "sa.kubeconfig",
                                        api.service_account_token(F.NS, "ocl-reconciler"), "ocl-reconciler")
            print(f"real kube-apiserver started in {api.startup_seconds:.1f}s")

            def run() -> tuple[float, int, Counter]:
                mark = api.audit_mark()
                start = time.perf_counter()
                subprocess.run([sys.executable, "-m", "reconcile", "run", "--kubeconfig", kubeconfig,
                                "--timeout", "120"], cwd=ROOT, check=False, capture_output=True,
                               env=dict(os.environ, OCL_RECONCILE_NOW="2026-11-29T12:00:00Z"))
                wall = time.perf_counter() - start
                audit = api.audit(mark, realserver.RECONCILER)
                return wall, len(audit), Counter(f"{e['verb']} {e['objectRef']['resource']}" for e in audit)

            def kubelet_all(phase: str) -> None:
                for pod in api.list("Pod", F.NS):
                    api.write_status(kubelet.set_phase(pod, phase))

            for n in (10, 100, 200):
                api.reset()
                api.load(cluster(n, mc))
                wall, count, kinds = run()
                report(n, "creating", count, wall, kinds)
                kubelet_all("Running")
                run()                                                   # records Building
                wall, count, kinds = run()
                report(n, "steady, all building", count, wall, kinds)
                kubelet_all("Succeeded")
                run()                                                   # records Succeeded, cleans up
                wall, count, kinds = run()
                report(n, "steady, all built", count, wall, kinds)
        finally:
            api.stop()
    return 0


def main() -> int:
    mc, source = sample_machineconfig()
    print(f"MachineConfig per pool: {source}")
    if "--real" in sys.argv[1:]:
        print(f"{'pools':>5}  {'run (real server)':<22} {'requests':>8} {'wall':>8}  requests by verb")
        return real_runs(mc)
    print(f"{'pools':>5}  {'run':<22} {'requests':>8} {'wall':>8}  requests by verb")
    with tempfile.TemporaryDirectory() as tmp:
        for n in (10, 100, 200):
            items = cluster(n, mc)
            wall, count, kinds, items = timed_run(items, Path(tmp))
            report(n, "creating", count, wall, kinds)
            for obj in items:
                if obj["kind"] == "Pod":
                    kubelet.set_phase(obj, "Running")
            wall, _, _, items = timed_run(items, Path(tmp))          # records Building
            wall, count, kinds, _ = timed_run(items, Path(tmp))
            report(n, "steady, all building", count, wall, kinds)
            for obj in items:
                if obj["kind"] == "Pod":
                    kubelet.set_phase(obj, "Succeeded")
            _, _, _, items = timed_run(items, Path(tmp))             # records Succeeded, cleans up
            wall, count, kinds, _ = timed_run(items, Path(tmp))
            report(n, "steady, all built", count, wall, kinds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
