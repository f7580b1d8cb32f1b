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
    "that inherits one gets a row 'Inherited'. The table fits 120 columns: IMAGE is the "
    "repository's last path element and a short digest, RENDERED the rendered config's hash (12 hex), "
    "MESSAGE cut; -o wide shows them in full and adds ARCH, STREAM and BUILDER "
    "(docs/builder-image.md); -o json and -o yaml every pool's full state (docs/contract.md), "
    "-o name its name as kubectl prints it.")
CODES = ("exit codes: 0 shown; 3 the cluster or snapshot cannot be read. With --check: 0 every pool "
         "built and rolled out (or no pool to show); 4 a pool Failed or Blocked, its render failed or "
         "its image is overridden; 5 none of those, but a pool is still pending, building or rolling "
         "out; 3 as without it")


def arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-o", "--output", choices=("table", "wide", "json", "yaml", "name"), default="table",
                        help="wide: every cell in full, and ARCH (the architecture built for), STREAM "
                             "(the OS stream, a custom pool's inherited from worker) and BUILDER (the "
                             "image the build ran in), as recorded on the pool; json, yaml: a "
                             "PoolStatusList of every pool's full state; name: a "
                             "line a pool as `oc get mcp -o name` prints it")
    parser.add_argument("--no-headers", action="store_true",
                        help="table and wide: no header line")
    parser.add_argument("--check", action="store_true",
                        help="exit with a verdict: 0 all built and rolled out, 4 a pool failed or is "
                             "blocked, 5 a pool still building or rolling out")


def command(args, now: datetime) -> int:
    from reconcile.cluster import ClusterError
    from reconcile.output import status, statuslist
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
    shown = status.rows(pools, now, mcs)          # once: every output below is made of these rows
    _show(args, pools, shown)
    for line in strays:
        print(f"warning: {line}", file=sys.stderr)
    return statuslist.exit_code(shown) if args.check else EXIT_OK


def _show(args, pools, shown) -> None:
    """The output -o asks for; kubectl's "No resources found" on stderr when a table has no row."""
    from reconcile.output import status, statuslist
    if args.output in ("json", "yaml"):
        doc = statuslist.document(pools, shown)
        sys.stdout.write(statuslist.as_json(doc) if args.output == "json" else statuslist.as_yaml(doc))
    elif not shown:
        from reconcile.contract import annotations as A
        among = f" (of {', '.join(args.pool)})" if args.pool else ""
        print(f"no MachineConfigPool is labelled {A.LAYERING_LABEL}{among} and none has a record of ours; "
              f"opt one in: oc label mcp/worker {A.LAYERING_LABEL}=",
              file=sys.stderr)
    elif args.output == "name":
        sys.stdout.write(statuslist.names(shown))
    else:
        wide = args.output == "wide"
        sys.stdout.write(status.text(pools, shown, wide=wide, headers=not args.no_headers))
    sys.stdout.flush()                          # the warnings come after it


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
