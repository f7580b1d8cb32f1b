#!/usr/bin/env python3
"""Per-object cost of `diff`: 1000 unchanged and 1000 changed Pod-sized objects (~10 KB of JSON
each), and a 1 MiB ConfigMap. Unchanged objects take only the cheap path (normalised ==);
changed ones the whole pipeline: JSON patch, masking, deepdiff summary and unified YAML diff.
(Our own ConfigMaps and Secrets are compared by their content hash, never by content.)

Targets (issue 6): <= 0.1 ms per unchanged object, <= 30 ms per changed object, <= 20 ms for the
1 MiB ConfigMap compare.
"""

from __future__ import annotations

import copy
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import jsonpatch  # noqa: E402

from reconcile.core import patches  # noqa: E402
from reconcile.core.actions import PoolPlan, Write  # noqa: E402
from reconcile.diff import view  # noqa: E402


def pod(i: int) -> dict:
    containers = [{
        "name": f"c{c}", "image": f"quay.io/example/app:{i}",
        "env": [{"name": f"VAR_{c}_{e}", "value": f"value-{i}-{e}" * 3} for e in range(35)],
        "volumeMounts": [{"name": f"v{v}", "mountPath": f"/mnt/v{v}", "readOnly": True} for v in range(8)],
        "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}},
    } for c in range(3)]
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"pod-{i}", "namespace": "ns", "labels": {"app": "x", "n": str(i)},
                         "annotations": {"note": "a" * 200}},
            "spec": {"containers": containers, "restartPolicy": "Never",
                     "volumes": [{"name": f"v{v}", "configMap": {"name": f"cm-{v}"}} for v in range(8)]}}


def live_of(desired: dict) -> dict:
    live = copy.deepcopy(desired)
    live["metadata"].update(uid="u", resourceVersion="7", creationTimestamp="2026-01-01T00:00:00Z",
                            managedFields=[{"manager": "kube-controller-manager", "fieldsV1": {"f:x": {}}}])
    live["status"] = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
    return live


def per_object(fn, items, repeat=3) -> float:
    best = min(_timed(fn, items) for _ in range(repeat))
    return best / len(items) * 1000


def _timed(fn, items) -> float:
    start = time.perf_counter()
    for item in items:
        fn(item)
    return time.perf_counter() - start


def unchanged(pair):
    live, desired = pair
    return view.comparable(live) == view.comparable(desired)


def changed(pair):
    live, desired = pair
    ops = jsonpatch.make_patch(live, desired).patch
    action = Write("patch", live, tuple(patches.guarded(live, ops)), patches.apply(live, ops))
    return view.unified([PoolPlan("p", actions=[action])])


def main() -> int:
    desired = [pod(i) for i in range(1000)]
    size = len(json.dumps(desired[0]))
    same = [(live_of(d), d) for d in desired]
    assert all(unchanged(p) for p in same)
    different = []
    for d in desired:
        live = live_of(d)
        live["spec"]["containers"][1]["env"][3]["value"] = "changed"
        different.append((live, d))
    print(f"Pod-sized object: {size} bytes of JSON")
    print(f"unchanged: {per_object(unchanged, same):.4f} ms per object (1000 objects)")
    print(f"changed:   {per_object(changed, different, repeat=1):.2f} ms per object (1000 objects)")

    # a 1 MiB ConfigMap: same text / one line changed / the MachineConfig written by another gzip
    text = "\n".join(f"line {i} " + "x" * 60 for i in range(15_500))
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "big", "namespace": "ns"},
          "data": {"big.txt": text}}
    other = copy.deepcopy(cm)
    other["data"]["big.txt"] = text.replace("line 7000 ", "line 7000 changed ", 1)
    print(f"1 MiB ConfigMap ({len(text)} bytes): identical "
          f"{per_object(lambda _: unchanged((cm, cm)), [0] * 20):.2f} ms, one line changed "
          f"{per_object(lambda _: changed((other, cm)), [0] * 5):.2f} ms (compare + diff view)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
