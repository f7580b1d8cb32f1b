#!/usr/bin/env python3
"""`run --wait` on a snapshot, for `make demo`: the in-memory cluster's `world` plays, one step each
time the run waits, the kubelet (every build of ours Running, then Succeeded: examples/kubelet.py)
and the MCO's render controller (examples/mco.py: our osImageURL into the pools that select it). The
run follows what they do from the events made of successive states (reconcile/cluster/memory.py),
as it follows a live cluster's watch events.

    python3 examples/follow.py IN.yaml OUT.yaml [SECONDS]
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.append(str(Path(__file__).resolve().parent.parent))  # the checkout, after an installed package

import kubelet  # noqa: E402
import mco  # noqa: E402

from reconcile import cli  # noqa: E402
from reconcile.cli import steps as cli_steps  # noqa: E402
from reconcile.cluster import snapshot  # noqa: E402
from reconcile.cluster.memory import MemoryCluster  # noqa: E402
from reconcile.contract import naming, objects  # noqa: E402

#: a snapshot's world that has nothing left to do after this many steps ends the wait
STEPS = 20


def world_of() -> object:
    steps = [0]

    def step(cluster: MemoryCluster) -> None:
        steps[0] += 1
        if steps[0] > STEPS:
            cluster.world = None                # nothing changes any more: the wait ends
            return
        items = cluster.items()
        for obj in items:
            if obj.get("kind") in ("Pod", "Build") and naming.MANAGED_BY in objects.labels(obj):
                phase = (obj.get("status") or {}).get("phase")
                if phase in (None, "Pending", "New"):
                    kubelet.set_phase(obj, "Running")
                elif phase == "Running":
                    kubelet.set_phase(obj, "Succeeded")
        mco.render(items)
        cluster.become(items)
    return step


def main(argv: list[str] | None = None) -> int:
    args = argv if argv is not None else sys.argv[1:]
    if len(args) not in (2, 3):
        print(__doc__.split("\n\n")[1].strip(), file=sys.stderr)
        return 2
    cluster = MemoryCluster(snapshot.load(args[0]))
    cluster.world = world_of()
    cli_steps.cluster = lambda parsed, now: cluster          # the snapshot, with its world
    return cli.main(["run", "--snapshot", args[0], "--write-snapshot", args[1],
                     "--wait", args[2] if len(args) == 3 else "60"])


if __name__ == "__main__":
    sys.exit(main())
