"""`ocl-reconcile explain POOL`: what a run saw for one pool, the lifecycle row it chose and why."""

from __future__ import annotations

import argparse
import sys
from datetime import datetime

from reconcile.cli import steps
from reconcile.cli.steps import EXIT_BLOCKED, EXIT_OK, KEEP_IMAGES

NAME = "explain"
ORDER = 50
SUMMARY = "why a pool is where it is, and what would move it"
LINE = "what a run saw for one pool, the lifecycle row it chose and why, what would change it"
PARENTS = ("source", "namespaced")
DESCRIPTION = (
    "What a run sees for one pool and why it does what it does: the state recorded on the pool, "
    "the build of the current inputs and its live object, the attempts, the image history, the "
    "rendered config and its content digest; the lifecycle row chosen (docs/contract.md) and "
    "why; what this run would do; what would change the outcome. Reads what `diff --pool POOL` "
    "reads; no writes, secret values never shown.")
CODES = ("exit codes: 0 explained; 2 no such pool (and nothing of ours for it); 3 the cluster or "
         "snapshot cannot be read")


def arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("pool_name", metavar="POOL", help="the MachineConfigPool to explain")
    parser.add_argument("--keep-images", type=int, default=KEEP_IMAGES, metavar="N",
                        help="as for diff: which images run would delete from the registry")
    parser.add_argument("-o", "--output", choices=("text", "json"), default="text",
                        help="json: the same report for scripts")


def command(args, now: datetime) -> int:
    from reconcile.cluster import notices
    from reconcile.contract import objects
    from reconcile.core import rollout
    from reconcile.output import explain
    args.pool = [args.pool_name]          # read and plan what `diff --pool POOL` does
    cluster = steps.cluster(args, now)
    seen, planner, plans = steps.observe(cluster, args, now)
    pool = next((p for p in seen.pools if objects.name(p) == args.pool_name), None)
    plan = next(iter(plans), None)
    decision = planner.decided.get(plan.pool) if plan else None
    if pool is None and plan is None:
        print(f"error: no MachineConfigPool {args.pool_name} (and nothing of ours labelled for it)",
              file=sys.stderr)
        return EXIT_BLOCKED
    strays = [s for s in notices.found_strays(seen)
              if args.pool_name in (s.pool, s.name[len(rollout.PREFIX):])]
    report = explain.explain(args.pool_name, pool, decision, plan, args.namespace, seen.pools, strays)
    sys.stdout.write(explain.as_json(report) if args.output == "json" else explain.text(report))
    return EXIT_OK
