"""`ocl-reconcile status`: a table of the pools, from their annotations."""

from __future__ import annotations

import argparse
import sys
from datetime import datetime

from reconcile.cli import steps
from reconcile.cli.steps import EXIT_OK

NAME = "status"
ORDER = 40
SUMMARY = "table of pool build states"
LINE = "a table of the pools: POOL RENDERED STATE ROLLOUT IMAGE AGE MESSAGE"
PARENTS = ("source", "select")          # pools only: no namespace
DESCRIPTION = (
    "A table of the pools from their annotations: POOL RENDERED STATE ROLLOUT IMAGE AGE MESSAGE. "
    "Reads the MachineConfigPools, our rollout MachineConfigs and every MachineConfig's metadata "
    "(rollout: machineconfig; a stray one named ocl-osimageurl-* is a warning on stderr); "
    "ROLLOUT says what the pool's rendered config holds, as the last run checked it: "
    "'rolled out', '3/5 nodes', 'overridden by zz-os', 'render failed', 'rendering', "
    "'unchecked', 'waiting', '-' without one (rollout: annotation) (docs/rollout.md); a pool "
    "that inherits one gets a row 'Inherited'. -o wide adds ARCH, STREAM and BUILDER "
    "(docs/builder-image.md).")
CODES = "exit codes: 0 shown; 3 the cluster or snapshot cannot be read"


def arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-o", "--output", choices=("table", "wide"), default="table",
                        help="wide: also ARCH (the architecture built for), STREAM (the OS stream, "
                             "a custom pool's inherited from worker) and BUILDER (the image the "
                             "build ran in), as recorded on the pool")


def command(args, now: datetime) -> int:
    from reconcile.cluster import ClusterError
    from reconcile.output import status
    cluster = steps.cluster(args, now)
    try:
        pools = cluster.list("MachineConfigPool", None)
    except ClusterError as err:
        raise steps.unreadable(err) from None
    mcs, named = _machineconfigs(cluster)
    _stranded(cluster, pools, mcs)
    strays = status.stray_lines(pools, mcs, named, args.pool)
    if args.pool:
        pools = [p for p in pools if p["metadata"]["name"] in args.pool]
    if not status.rows(pools, now, mcs):            # as kubectl's "No resources found": on stderr
        from reconcile.contract import annotations as A
        among = f" (of {', '.join(args.pool)})" if args.pool else ""
        print(f"no MachineConfigPool is labelled {A.LAYERING_LABEL}{among} and none has a record of ours; "
              f"opt one in: oc label mcp/worker {A.LAYERING_LABEL}=",
              file=sys.stderr)
    else:
        sys.stdout.write(status.text(pools, now, mcs, wide=args.output == "wide"))
        sys.stdout.flush()                          # the warnings come after the table
    for line in strays:
        print(f"warning: {line}", file=sys.stderr)
    return EXIT_OK


def _machineconfigs(cluster):
    """Our rollout MachineConfigs and those named like ours: (ours, named)."""
    from reconcile.cluster import ClusterError, observe
    try:        # a token without `list machineconfigs` (no rollout Component) shows no rollout, no strays
        from reconcile.contract import naming
        mcs = cluster.list("MachineConfig", None, naming.SELECTOR)
        named = observe.named_machineconfigs(cluster)
    except ClusterError:
        mcs, named = [], []
    return mcs, named


def _stranded(cluster, pools, mcs) -> None:
    """The stranded-image notice, as a warning on stderr."""
    from reconcile.cluster import ClusterError, notices
    try:
        notice = notices.annotation_notice(cluster, notices.stranded(pools, machineconfigs=mcs))
    except ClusterError:
        notice = None
    if notice:
        print(f"warning: {notice}", file=sys.stderr)
