"""`ocl-reconcile render`: the build objects the current plan keeps or creates, as a YAML stream."""

from __future__ import annotations

import argparse
import sys
from datetime import datetime

from reconcile.cli import steps
from reconcile.cli.steps import EXIT_BLOCKED, EXIT_OK

NAME = "render"
ORDER = 30
SUMMARY = "print the desired build objects as YAML"
LINE = "the build objects the current plan keeps or creates, as a YAML stream on stdout"
PARENTS = ("source", "select", "namespaced")
DESCRIPTION = (
    "Print exactly the build objects the current plan keeps or creates, in their desired form, "
    "as a YAML stream on stdout (an Argo CD Config Management Plugin's generate command): "
    "nothing for a pool built for its current inputs or Blocked. Problems on stderr; Secrets "
    "of ours are named on stderr, never printed.")
CODES = "exit codes: 0 rendered; 2 a pool is Blocked; 3 the cluster or snapshot cannot be read"


def arguments(parser: argparse.ArgumentParser) -> None:
    """No flags of its own."""


def command(args, now: datetime) -> int:
    from reconcile.cluster import ClusterError
    from reconcile.contract import yamlio
    from reconcile.output import manifests
    cluster = steps.cluster(args, now)
    _, planner, plans = steps.observe(cluster, args, now)
    pairs = [(planner.decided[p.pool], p) for p in plans]
    try:
        planner.read(d.inputs.rendered_config for d, p in pairs if manifests.kept_objects(d, p)[1])
        objs, problems, notes = manifests.wanted_objects(pairs, planner.machineconfigs.get, planner.material)
    except ClusterError as err:
        raise steps.unreadable(err) from None
    sys.stdout.write(yamlio.dump_all(objs) if objs else "")
    for line in notes:
        print(f"note: {line}", file=sys.stderr)
    for line in problems:
        print(f"error: {line}", file=sys.stderr)
    return EXIT_BLOCKED if problems else EXIT_OK
