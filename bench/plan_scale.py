#!/usr/bin/env python3
"""Planning cost at scale: for N pools each with a ~280 KB rendered MachineConfig, prints the time
of a pass that creates every build (pure planning, encoding included), of a steady pass (every
build running, nothing to write), peak RSS, and the wall time of `ocl-reconcile --help`.

Targets (issue 2): steady pass at 200 pools <= 0.3 s; creating pass <= 20 ms per pool;
`--help` <= 0.3 s. Uses ../shared's realistic worker MachineConfig when present, else the
generator of examples/cluster.yaml.
"""

from __future__ import annotations

import copy
import json
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "examples"))

from reconcile.cluster.memory import MemoryCluster  # noqa: E402
from reconcile.core import lifecycle  # noqa: E402
from reconcile.imagebuild import settings  # noqa: E402
from tests.support import factory as F  # noqa: E402

SHARED_MC = ROOT.parent / "shared/machineconfigs/generated/mc-synthetic-rendered-worker-from-templates.json"


def sample_machineconfig() -> tuple[dict, str]:
    if SHARED_MC.exists():
        return json.loads(SHARED_MC.read_text()), f"../shared/{SHARED_MC.name}"
    import generate
    return generate.machineconfig("worker", "rendered-worker-x", ca_certs=75, scripts=25), \
        "examples/generate.py worker"


def world(n: int, mc: dict) -> tuple[list[dict], dict[str, dict]]:
    pools, mcs = [], {}
    for i in range(n):
        rendered = f"rendered-pool{i}-{i:032x}"
        pools.append(F.pool(f"pool{i}", rendered=rendered))
        m = copy.deepcopy(mc)
        m["metadata"]["name"] = rendered
        # make each config distinct, as real pools' are
        m["spec"]["config"].setdefault("storage", {}).setdefault("files", []).append(
            {"path": f"/etc/pool-{i}", "mode": 420, "contents": {"source": f"data:,pool{i}"}})
        mcs[rendered] = m
    return pools, mcs


def best(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> int:
    mc, source = sample_machineconfig()
    s = settings.read(F.NS, {"on-cluster-build-config": F.build_config(),
                             "machine-config-osimageurl": F.osimageurl()})
    print(f"MachineConfig sample: {source} ({len(json.dumps(mc, separators=(',', ':'))) // 1024} KiB JSON)")
    print(f"{'pools':>6} {'creating pass':>15} {'per pool':>10} {'steady pass':>13} {'per pool':>10}")
    for n in (10, 100, 200):
        pools, mcs = world(n, mc)
        create = best(lambda p=pools, m=mcs: lifecycle.plan_cluster(s, p, [], F.NOW, m), 3 if n < 200 else 2)
        # steady: every build created and its Pod running, so the pass has nothing to write
        cluster = MemoryCluster(pools, clock=lambda: F.NOW)
        for plan in lifecycle.plan_cluster(s, pools, [], F.NOW, mcs):
            for action in plan.actions:
                if action.verb == "create":
                    cluster.create(action.obj)
                else:
                    cluster.patch(action.obj["kind"], "", action.obj["metadata"]["name"], list(action.patch))
        live_pools = cluster.list("MachineConfigPool", None)
        owned = cluster.list("ConfigMap", F.NS) + cluster.list("Pod", F.NS)
        steady_plans = lifecycle.plan_cluster(s, live_pools, owned, F.NOW)
        assert all(not p.actions for p in steady_plans)
        steady = best(lambda p=live_pools, o=owned: lifecycle.plan_cluster(s, p, o, F.NOW), 5)
        print(f"{n:>6} {create:>14.3f}s {create / n * 1000:>8.1f}ms {steady:>12.4f}s "
              f"{steady / n * 1000:>8.3f}ms")
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak RSS: {rss:.0f} MiB (this process, all sizes above)")
    exe = [sys.executable, "-m", "reconcile", "--help"]
    walls = []
    for _ in range(5):
        start = time.perf_counter()
        subprocess.run(exe, cwd=ROOT, capture_output=True, check=True)
        walls.append(time.perf_counter() - start)
    print(f"ocl-reconcile --help: {min(walls):.3f}s wall (best of 5, median {statistics.median(walls):.3f}s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
