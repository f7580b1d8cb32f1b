"""`ocl-reconcile run`: one reconcile pass under the Lease; with --wait, its changes followed."""

from __future__ import annotations

import argparse
import sys
from datetime import datetime

from reconcile.cli import steps
from reconcile.cli.steps import EXIT_BLOCKED, EXIT_OK, KEEP_IMAGES, Fatal

NAME = "run"
ORDER = 10
SUMMARY = "apply one reconcile pass"
LINE = "one pass that applies the plan"
PARENTS = ("source", "select", "namespaced")
DESCRIPTION = (
    "One reconcile pass: plan every opted-in pool and carry the plan out (API writes, Events, "
    "registry deletes), under a Lease so that two runs never overlap. Logs what it does on stderr. "
    "With --wait, it then follows its changes from watch events until nothing is waited for "
    "(a build, the render of its MachineConfig, the gate's release; never the nodes), the "
    "deadline, Ctrl-C or SIGTERM (the kubelet's, at the Job's deadline), or a Lease it cannot "
    "renew, releasing its Lease; every pass is recorded as it goes.")
CODES = (
    "exit codes: 0 every pool reconciled (a failed build is a recorded outcome; an image the "
    "registry will not delete is a warning, kept for the next run); 2 a pool is Blocked (or "
    "carries the MCO's layering label) or a write failed; 3 the cluster "
    "or snapshot cannot be read, or the Lease cannot be taken (a read that fails after some pools "
    "were carried out ends the run there, after its summary and metrics; with --wait also a watch "
    "refused); 130 Ctrl-C or SIGTERM before the wait; the wait's deadline, Ctrl-C or SIGTERM is "
    "not an error")


def arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--write-snapshot", metavar="OUT",
                        help="with --snapshot: write the resulting cluster to OUT ('-' for stdout)")
    parser.add_argument("--keep-images", type=int, default=KEEP_IMAGES, metavar="N",
                        help="after a newer image succeeds, delete a pool's older images from the registry "
                             "but the newest N (default: %(default)s; -1: never delete)")
    parser.add_argument("--metrics-file", metavar="FILE",
                        help="write Prometheus metrics of the run to FILE (node-exporter textfile format)")
    parser.add_argument("--pushgateway", metavar="URL",
                        help="push Prometheus metrics of the run to this Pushgateway")
    parser.add_argument("--wait", type=float, default=0.0, metavar="SECONDS",
                        help="after the pass, follow its changes for at most SECONDS (watch events): record "
                             "each build as it ends, write its MachineConfig, release the pool once the MCO "
                             "rendered it; never the nodes. The settings key waitDeadline can shorten it. "
                             "--timeout still bounds each pass's requests (default: %(default)s, no wait)")


def command(args, now: datetime) -> int:
    """Under the Lease, plan and carry out every pool; then the summary, the metrics and the
    snapshot of what was done (a read that failed after some pools were carried out ends it there)."""
    import logging
    import time

    from reconcile.cluster import lease
    if args.write_snapshot and not args.snapshot:
        raise Fatal("--write-snapshot needs --snapshot")
    started = time.monotonic()
    cluster = steps.cluster(args, now)
    held = _take_lease(cluster, args, now)
    if held is None:
        logging.getLogger("reconcile").info("run skipped: another run holds the Lease")
        return EXIT_OK
    keeper = lease.Keeper(cluster, held, time.monotonic()) if args.wait > 0 else None
    with lease.releasing(cluster, held, keeper):
        if keeper is None:
            seen, result, strays = _reconcile(cluster, args, now)
        else:
            seen, result, strays = _follow(cluster, args, keeper, started)
    seconds = time.monotonic() - started
    logging.getLogger("reconcile").info("%s", result.summary(getattr(cluster, "requests", None), seconds,
                                                             getattr(cluster, "bytes_read", None)))
    push_metrics(cluster, args, seen, result, seconds, strays, now)
    _write_snapshot(cluster, args)
    if result.unread:           # after the summary, the metrics and the snapshot of what was done
        raise steps.unreadable(result.unread)
    return EXIT_BLOCKED if result.failed else EXIT_OK


def _take_lease(cluster, args, now: datetime):
    """The Lease of this run (cluster/lease.py), or None when another run holds it."""
    from reconcile.cluster import ClusterError, lease
    try:
        return lease.acquire(cluster, args.namespace, lease.holder_identity(), int(args.timeout) + 60, now)
    except ClusterError as err:
        raise Fatal(f"cannot take Lease {args.namespace}/{lease.NAME}: {err}") from None


def _reconcile(cluster, args, now: datetime):
    """One pool at a time, planned, carried out, and what it needed dropped (cluster/apply.py
    `run_pass`); then what run says of what it read (cluster/notices.py `after_run`):
    (observed, result, strays)."""
    from reconcile.cluster import apply, notices
    seen, planner = steps.planner(cluster, args, now)
    with steps.reading():
        result = apply.run_pass(cluster, planner, now)
    return seen, result, notices.after_run(cluster, seen, result, now)


def _follow(cluster, args, keeper, started: float):
    """run --wait: the pass, then its changes followed (cluster/follow.py); what it still waited for
    at the end is said, and the metrics pushed as it goes: (observed, result, strays)."""
    import logging
    import time

    from reconcile.cluster import follow
    from reconcile.output.waiting import Shower
    terminal = sys.stderr if sys.stderr.isatty() and args.log_format == "text" else None
    first = [True]

    def one_pass(on, when: datetime) -> follow.Pass:
        if not first[0] and hasattr(cluster, "deadline"):
            cluster.deadline = time.monotonic() + args.timeout     # --timeout bounds each pass's requests
        first[0] = False
        seen, result, strays = _reconcile(on, args, when)
        return follow.Pass(seen, result, strays)

    def report(done: follow.Pass) -> None:
        push_metrics(cluster, args, done.seen, done.result, time.monotonic() - started, done.strays,
                     steps.now())

    done, ended = follow.follow(cluster, one_pass, args.wait, namespace=args.namespace, keeper=keeper,
                                shower=Shower(terminal), report=report, now=steps.now)
    logging.getLogger("reconcile").info("%s", follow.said(ended))
    return done.seen, done.result, done.strays


def push_metrics(cluster, args, seen, result, seconds: float, strays: int, now: datetime) -> None:
    """--metrics-file, --pushgateway: the run's metrics (output/metrics.py); a failure is a warning."""
    if not (args.metrics_file or args.pushgateway):
        return
    import logging

    from reconcile.output import metrics
    registry = metrics.of_run(result, getattr(cluster, "outcomes", {}), seconds, seen.pools, seen.owned, now,
                              strays)
    for problem in metrics.export(registry, args.metrics_file, args.pushgateway):
        logging.getLogger("reconcile").warning("%s", problem)


def _write_snapshot(cluster, args) -> None:
    """--write-snapshot: the resulting cluster (cluster/snapshot.py)."""
    if not args.write_snapshot:
        return
    from reconcile.cluster import snapshot
    try:
        snapshot.write(args.write_snapshot, cluster.items())
    except OSError as err:
        raise Fatal(f"cannot write snapshot {args.write_snapshot}: {err.strerror}") from None
