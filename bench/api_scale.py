#!/usr/bin/env python3
"""Requests per run and wall time of `ocl-reconcile run` against the test API server, for 10, 100
and 200 pools, in a fresh interpreter each time (interpreter start and imports included).

Three runs per size: creating (every pool needs a build), steady while building (every build
Pod running, ~280 KB MachineConfig in each pool's ConfigMap), steady when built (nothing left but
the pools). Targets (issue 3; issue 20 adds one GET of the OSImageStream singleton, issue 21 two
GETs by name in the MCO's namespace): a steady run makes <= 11 requests whatever the pool count, with
the test world's `buildStorage: emptyDir` (the default, persistent, lists our PersistentVolumeClaims too)
(12 when built: with `rollout: annotation` and pools that have an image, one discovery GET asks
whether MachineOSConfig is served); a steady
run at 200 pools takes <= 1.5 s wall including interpreter start.

Memory (issue 23), with `--incompressible`: peak RSS <= 128 MiB (the CronJob's memory request) at
every size, and a creating pass reads <= 1.2x the bytes of the MachineConfigs it reads ("read" over
"MCs read", the ratio column): `run` plans a pool, carries its plan out and drops what it needed
before it reads the next pool's MachineConfig, reads each once, and a create is answered with the
object's metadata only. Measured at 200 pools (2026-12-01): 63 MiB, 237.7 MB read for 236.3 MB of
MachineConfigs (1.01; the real kube-apiserver: 66 MiB, 1.01); before, 510 MiB and 459.9 MB (1.95).

`--real`: the same against the real kube-apiserver and etcd of the realapi suite (`make realapi`
builds them), the reconciler authenticated as its ServiceAccount; requests are counted from the
server's audit log.

`--rollout`: with `rollout: machineconfig` (`rolloutGate: none`; on the real server the rollout
Component is installed, its parameter listing every pool): a built pool also has its
`ocl-osimageurl-<pool>`, so the cluster holds two MachineConfigs a pool (the rendered one at full
size), and a run lists our MachineConfigs and every MachineConfig's metadata (stray ones,
issue 31 item 4).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "examples"))
sys.path.insert(0, str(ROOT / "bench"))

import kubelet  # noqa: E402
from plan_scale import sample_machineconfig  # noqa: E402

from tests.support import factory as F  # noqa: E402
from tests.support.apiserver import APIServer  # noqa: E402


def cluster(n: int, mc: dict, rollout: bool = False) -> list[dict]:
    settings = [F.build_config(**({"rollout": "machineconfig", "rolloutGate": "none"} if rollout else {})),
                F.osimageurl(), F.secret("pull-secret"), F.secret("push-secret")]
    items = F.cluster(*(F.pool(f"pool{i}", rendered=f"rendered-pool{i}-1") for i in range(n)),
                      settings=settings)
    out = []
    for obj in items:
        if obj["kind"] == "MachineConfig":
            big = dict(mc, metadata={"name": obj["metadata"]["name"]})
            out.append(big)
        else:
            out.append(obj)
    return out


#: `ocl-reconcile run` in a fresh interpreter that reports on stderr at the end its own peak RSS
#: (VmHWM of /proc/self/status, which belongs to this program's memory alone: getrusage's maxrss
#: would also count the benchmark process it was forked from, folded in at exec) and the bytes
#: its client read in answers to GETs of MachineConfigs (what the "read" column is compared with)
RUN = ("import sys\nfrom reconcile import cli\nfrom reconcile.cluster import live\nmc = [0]\n"
       "send = live.LiveCluster._send\n"
       "def counted(self, method, path, *rest, **kw):\n"
       "    answer = send(self, method, path, *rest, **kw)\n"
       "    if method == 'GET' and '/machineconfigs/' in path:\n"
       "        mc[0] += len(answer[2])\n"
       "    return answer\n"
       "live.LiveCluster._send = counted\ncode = cli.main(sys.argv[1:])\n"
       "hwm = [l.split()[1] for l in open('/proc/self/status') if l.startswith('VmHWM:')][0]\n"
       "print('MAXRSS', hwm, 'MCBYTES', mc[0], file=sys.stderr)\nsys.exit(code)\n")


@dataclass
class Figures:
    wall: float          # seconds, interpreter start included
    read: float          # MB read from the API server (the run's summary line)
    mc: float            # MB of it that were MachineConfigs
    rss: float           # peak RSS, MiB


def run_reconciler(kubeconfig: str, *extra: str) -> Figures:
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", RUN, "run", "--kubeconfig", kubeconfig, *extra],
                          cwd=ROOT, check=False, capture_output=True, text=True,
                          env=dict(os.environ, OCL_RECONCILE_NOW="2026-11-29T12:00:00Z"))
    wall = time.perf_counter() - start
    read = re.search(r"\((\d+) KiB read\)", done.stderr)
    end = re.search(r"MAXRSS (\d+) MCBYTES (\d+)", done.stderr)
    nan = float("nan")
    return Figures(wall, int(read.group(1)) * 1024 / 1e6 if read else nan,
                   int(end.group(2)) / 1e6 if end else nan, int(end.group(1)) / 1024 if end else nan)


def timed_run(items: list[dict], tmp: Path) -> tuple[Figures, int, Counter, list[dict]]:
    with APIServer(items) as server:
        figures = run_reconciler(server.kubeconfig(tmp / "kubeconfig"))
        kinds = Counter(f"{r.verb} {r.resource}" for r in server.log)
        return figures, len(server.log), kinds, server.items()


HEADER = (f"{'requests':>8} {'wall':>8} {'read':>11} {'MCs read':>11} {'ratio':>6} {'peak RSS':>11}  "
          "requests by verb")


def report(n: int, label: str, count: int, f: Figures, kinds: Counter) -> None:
    ratio = f"{f.read / f.mc:>6.2f}" if f.mc else f"{'-':>6}"
    print(f"{n:>5}  {label:<22} {count:>8} {f.wall:>7.2f}s {f.read:>8.2f} MB {f.mc:>8.2f} MB {ratio} "
          f"{f.rss:>7.0f} MiB  {dict(sorted(kinds.items()))}")


def real_runs(mc: dict, sizes: list[int], rollout: bool = False) -> int:
    from tests.support import realserver
    bindir = realserver.cache_dir()
    if not (bindir / "kube-apiserver").is_file():
        print(f"error: no kube-apiserver in {bindir}: run `make realapi` first", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        api = realserver.RealAPI(Path(tmp), bindir)
        try:
            api.start()
            api.install_product()
            if rollout:
                api.install_rollout(F.REPO, tuple(f"pool{i}" for i in range(max(sizes))))
            kubeconfig = api.kubeconfig(Path(tmp) / "sa.kubeconfig",
                                        api.service_account_token(F.NS, "ocl-reconciler"), "ocl-reconciler")
            print(f"real kube-apiserver started in {api.startup_seconds:.1f}s")

            def run() -> tuple[Figures, int, Counter]:
                mark = api.audit_mark()
                figures = run_reconciler(kubeconfig, "--timeout", "120")
                audit = api.audit(mark, realserver.RECONCILER)
                verbs = Counter(f"{e['verb']} {e.get('objectRef', {}).get('resource', e['requestURI'])}"
                                for e in audit)          # discovery requests have no objectRef
                return figures, len(audit), verbs

            def kubelet_all(phase: str) -> None:
                for pod in api.list("Pod", F.NS):
                    api.write_status(kubelet.set_phase(pod, phase))

            for n in sizes:
                api.reset()
                api.load(cluster(n, mc, rollout))
                figures, count, kinds = run()
                report(n, "creating", count, figures, kinds)
                kubelet_all("Running")
                run()                                                   # records Building
                figures, count, kinds = run()
                report(n, "steady, all building", count, figures, kinds)
                kubelet_all("Succeeded")
                run()                                                   # records Succeeded, cleans up
                figures, count, kinds = run()
                report(n, "steady, all built", count, figures, kinds)
        finally:
            api.stop()
    return 0


def main() -> int:
    """--real: the real kube-apiserver; --incompressible: the 1.2 MB MachineConfig whose encoding is
    over 1 MiB (two ConfigMaps per pool) instead of the ~280 KB realistic one; --sizes 10,200;
    --rollout: rollout: machineconfig."""
    args = sys.argv[1:]
    if "--incompressible" in args:
        path = F.SHARED / "machineconfigs/generated/mc-incompressible-over-1MiB-after-encoding.json"
        mc, source = json.loads(path.read_text()), str(path)
    else:
        mc, source = sample_machineconfig()
    sizes = [int(n) for n in args[args.index("--sizes") + 1].split(",")] if "--sizes" in args \
        else [10, 100, 200]
    rollout = "--rollout" in args
    print(f"MachineConfig per pool: {source}" + ("; rollout: machineconfig" if rollout else ""))
    if "--real" in args:
        print(f"{'pools':>5}  {'run (real server)':<22} {HEADER}")
        return real_runs(mc, sizes, rollout)
    print(f"{'pools':>5}  {'run':<22} {HEADER}")
    with tempfile.TemporaryDirectory() as tmp:
        for n in sizes:
            items = cluster(n, mc, rollout)
            figures, count, kinds, items = timed_run(items, Path(tmp))
            report(n, "creating", count, figures, kinds)
            for obj in items:
                if obj["kind"] == "Pod":
                    kubelet.set_phase(obj, "Running")
            _, _, _, items = timed_run(items, Path(tmp))             # records Building
            figures, count, kinds, _ = timed_run(items, Path(tmp))
            report(n, "steady, all building", count, figures, kinds)
            for obj in items:
                if obj["kind"] == "Pod":
                    kubelet.set_phase(obj, "Succeeded")
            _, _, _, items = timed_run(items, Path(tmp))             # records Succeeded, cleans up
            figures, count, kinds, _ = timed_run(items, Path(tmp))
            report(n, "steady, all built", count, figures, kinds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
