"""Command line: `ocl-reconcile run|diff|render|status|explain|preflight`. Imports are lazy, so
`--help` is fast."""

from __future__ import annotations

import argparse
import contextlib
import functools
import os
import sys
from datetime import UTC, datetime

EXIT_OK, EXIT_CHANGES, EXIT_BLOCKED, EXIT_FATAL = 0, 1, 2, 3
#: --keep-images: how many of a pool's newest images pruning keeps
KEEP_IMAGES = 2
#: --registry-ca default: the service CA (signs the internal registry's certificate), as mounted
REGISTRY_CA = "/etc/ocl/service-ca/service-ca.crt"

DESCRIPTION = """\
One-shot reconciler for OpenShift on-cluster layering. Finds every MachineConfigPool labelled
ocl-reconciler.io/layering-enabled, builds a layered OS image of its rendered MachineConfig, and
records the outcome on the pool as annotations. A pool labelled with the MCO's own
machineconfiguration.openshift.io/layering-enabled is reported, not built (docs/rollout.md).
"""

EPILOG = """\
commands:
  run       one pass that applies the plan
  diff      the same plan as a unified diff per object, no writes, secret values masked
  render    the build objects the current plan keeps or creates, as a YAML stream on stdout
  status    a table of the pools: POOL RENDERED STATE ROLLOUT IMAGE AGE MESSAGE
  explain   what a run saw for one pool, the lifecycle row it chose and why, what would change it
  preflight read-only checks of a live cluster before the first run: ok / warn / fail, what to do
`ocl-reconcile COMMAND --help` says each one's flags and exit codes.

examples:
  ocl-reconcile diff --snapshot cluster.yaml
  ocl-reconcile run --snapshot cluster.yaml --write-snapshot after.yaml
  oc get mcp -o yaml | ocl-reconcile status --snapshot -
  ocl-reconcile explain worker
  ocl-reconcile preflight
"""

#: per command: (description, exit codes) shown by `COMMAND --help`
COMMAND_HELP = {
    "run": ("One reconcile pass: plan every opted-in pool and carry the plan out (API writes, Events, "
            "registry deletes), under a Lease so that two runs never overlap. Logs what it does on stderr. "
            "With --wait, it then follows its changes from watch events until nothing is waited for "
            "(a build, the render of its MachineConfig, the gate's release; never the nodes), the "
            "deadline, Ctrl-C, or a Lease it cannot renew; every pass is recorded as it goes.",
            "exit codes: 0 every pool reconciled (a failed build is a recorded outcome; an image the "
            "registry will not delete is a warning, kept for the next run); 2 a pool is Blocked (or "
            "carries the MCO's layering label) or a write failed; 3 the cluster "
            "or snapshot cannot be read, or the Lease cannot be taken (a read that fails after some pools "
            "were carried out ends the run there, after its summary and metrics; with --wait also a watch "
            "refused); the wait's deadline is not an error"),
    "diff": ("Show what `run` would change, as kubectl diff does, with no writes: a unified YAML diff per "
             "object (secret values masked), registry deletes, then a summary line. KUBECTL_EXTERNAL_DIFF "
             "names a program to compare the live and desired trees instead; its exit status is ours. "
             "A stray MachineConfig (named ocl-osimageurl-*, not written by us) is a warning on stderr, "
             "not a change.",
             "exit codes: 0 no differences; 1 differences; 2 or more an error (3: the cluster or snapshot "
             "cannot be read)"),
    "render": ("Print exactly the build objects the current plan keeps or creates, in their desired form, "
               "as a YAML stream on stdout (an Argo CD Config Management Plugin's generate command): "
               "nothing for a pool built for its current inputs or Blocked. Problems on stderr; Secrets "
               "of ours are named on stderr, never printed.",
               "exit codes: 0 rendered; 2 a pool is Blocked; 3 the cluster or snapshot cannot be read"),
    "status": ("A table of the pools from their annotations: POOL RENDERED STATE ROLLOUT IMAGE AGE MESSAGE. "
               "Reads the MachineConfigPools, our rollout MachineConfigs and every MachineConfig's metadata "
               "(rollout: machineconfig; a stray one named ocl-osimageurl-* is a warning on stderr); "
               "ROLLOUT says what the pool's rendered config holds, as the last run checked it: "
               "'rolled out', '3/5 nodes', 'overridden by zz-os', 'render failed', 'rendering', "
               "'unchecked', 'waiting', '-' without one (rollout: annotation) (docs/rollout.md); a pool "
               "that inherits one gets a row 'Inherited'. -o wide adds ARCH, STREAM and BUILDER "
               "(docs/builder-image.md).",
               "exit codes: 0 shown; 3 the cluster or snapshot cannot be read"),
    "explain": ("What a run sees for one pool and why it does what it does: the state recorded on the pool, "
                "the build of the current inputs and its live object, the attempts, the image history, the "
                "rendered config and its content digest; the lifecycle row chosen (docs/contract.md) and "
                "why; what this run would do; what would change the outcome. Reads what `diff --pool POOL` "
                "reads; no writes, secret values never shown.",
                "exit codes: 0 explained; 2 no such pool (and nothing of ours for it); 3 the cluster or "
                "snapshot cannot be read"),
    "preflight": ("Read-only checks of a live cluster before the first run, one line each (ok, warn or fail, "
                  "and what to do): the namespace and settings, the pull and push Secrets, our "
                  "ServiceAccount's permissions (SelfSubjectAccessReview, by impersonation where you may), "
                  "the build's ServiceAccount and SCC, the registry's /v2/ with the push credentials, the "
                  "OpenShift version and the MCO's own builder, every opted-in pool, and the build Pod "
                  "judged by the server (dryRun=All). No --snapshot: the server must answer "
                  "(docs/preflight.md).",
                  "exit codes: 0 every check ok; 1 a warning; 2 a failure (or --snapshot); 3 the cluster "
                  "cannot be reached"),
}

class Fatal(Exception):
    """The cluster or the snapshot cannot be read: exit 3 with one line."""


@functools.cache
def _parser() -> argparse.ArgumentParser:
    """Built once a process (parsing leaves it as it was): a process that runs `main` many times,
    as the tests do, builds it once (11 ms each time)."""
    def connection(snapshot_help: str) -> argparse.ArgumentParser:
        parent = argparse.ArgumentParser(add_help=False)
        parent.add_argument("--snapshot", metavar="FILE", help=snapshot_help)
        parent.add_argument("--kubeconfig", metavar="FILE",
                            help="kubeconfig file (default: $KUBECONFIG, ~/.kube/config, then in-cluster)")
        parent.add_argument("--context", help="kubeconfig context to use (default: the current one)")
        parent.add_argument("--timeout", type=float, default=120.0, metavar="SECONDS",
                            help="deadline for the whole run, retries included (default: %(default)s)")
        parent.add_argument("-v", "--verbose", action="count", default=0,
                            help="more logging (run logs what it does; -v: the others too; -vv: debug)")
        parent.add_argument("--log-format", choices=("text", "json"), default="text",
                            help="log lines on stderr as text or JSON (default: %(default)s)")
        return parent
    source = connection("read the cluster from FILE ('-' for stdin) as `oc get ... -o yaml` prints it, "
                        "instead of a live cluster")
    live = connection(argparse.SUPPRESS)       # preflight: live only (--snapshot refused, saying why)
    select = argparse.ArgumentParser(add_help=False)
    select.add_argument("--pool", action="append", default=[], metavar="NAME",
                        help="only this MachineConfigPool (repeatable)")
    namespaced = argparse.ArgumentParser(add_help=False)
    from reconcile.contract.naming import DEFAULT_NAMESPACE
    namespaced.add_argument("-n", "--namespace", default=DEFAULT_NAMESPACE,
                            help="namespace of the settings and build objects (default: %(default)s)")
    namespaced.add_argument("--registry-ca", metavar="FILE", default=None,
                            help="PEM CA certificates trusted for the image registry besides the system's "
                                 f"(default: {REGISTRY_CA} when it exists: the CronJob mounts the "
                                 "namespace's openshift-service-ca.crt ConfigMap there)")
    parser = argparse.ArgumentParser(
        prog="ocl-reconcile", description=DESCRIPTION, epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    from reconcile import __version__
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    def command(name: str, summary: str, parents: list[argparse.ArgumentParser]) -> argparse.ArgumentParser:
        description, codes = COMMAND_HELP[name]
        return sub.add_parser(name, parents=parents, help=summary, description=description, epilog=codes)
    run = command("run", "apply one reconcile pass", [source, select, namespaced])
    run.add_argument("--write-snapshot", metavar="OUT",
                     help="with --snapshot: write the resulting cluster to OUT ('-' for stdout)")
    run.add_argument("--keep-images", type=int, default=KEEP_IMAGES, metavar="N",
                     help="after a newer image succeeds, delete a pool's older images from the registry "
                          "but the newest N (default: %(default)s; -1: never delete)")
    run.add_argument("--metrics-file", metavar="FILE",
                     help="write Prometheus metrics of the run to FILE (node-exporter textfile format)")
    run.add_argument("--pushgateway", metavar="URL",
                     help="push Prometheus metrics of the run to this Pushgateway")
    run.add_argument("--wait", type=float, default=0.0, metavar="SECONDS",
                     help="after the pass, follow its changes for at most SECONDS (watch events): record "
                          "each build as it ends, write its MachineConfig, release the pool once the MCO "
                          "rendered it; never the nodes. The settings key waitDeadline can shorten it. "
                          "--timeout still bounds each pass's requests (default: %(default)s, no wait)")
    diff = command("diff", "show what run would change; no writes", [source, select, namespaced])
    diff.add_argument("--keep-images", type=int, default=KEEP_IMAGES, metavar="N",
                      help="show which images run would delete from the registry (as for run)")
    diff.add_argument("--color", choices=("auto", "always", "never"), default="auto",
                      help="colour the diff (auto: only on a terminal)")
    diff.add_argument("-o", "--output", choices=("diff", "json"), default="diff",
                      help="json: the plan (writes with their JSON patches, state changes) for scripts")
    command("render", "print the desired build objects as YAML", [source, select, namespaced])
    status = command("status", "table of pool build states", [source, select])      # pools only: no namespace
    status.add_argument("-o", "--output", choices=("table", "wide"), default="table",
                        help="wide: also ARCH (the architecture built for), STREAM (the OS stream, "
                             "a custom pool's inherited from worker) and BUILDER (the image the "
                             "build ran in), as recorded on the pool")
    explain = command("explain", "why a pool is where it is, and what would move it", [source, namespaced])
    explain.add_argument("pool_name", metavar="POOL", help="the MachineConfigPool to explain")
    explain.add_argument("--keep-images", type=int, default=KEEP_IMAGES, metavar="N",
                         help="as for diff: which images run would delete from the registry")
    explain.add_argument("-o", "--output", choices=("text", "json"), default="text",
                         help="json: the same report for scripts")
    preflight = command("preflight", "check a live cluster before the first run", [live, namespaced])
    preflight.add_argument("-o", "--output", choices=("text", "json"), default="text",
                           help="json: a list of {check, result, message, hint} for scripts")
    return parser


def _now() -> datetime:
    """The clock; OCL_RECONCILE_NOW (RFC 3339) pins it for reproducible output."""
    pinned = os.environ.get("OCL_RECONCILE_NOW")
    if pinned:
        try:
            return datetime.strptime(pinned, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
        except ValueError:
            raise Fatal(f"OCL_RECONCILE_NOW={pinned!r} is not an RFC 3339 UTC time "
                        "like 2026-01-02T03:04:05Z") from None
    return datetime.now(UTC)


def _cluster(args, now: datetime):
    if not args.snapshot:
        from reconcile.cluster import live
        try:
            return live.connect(args.kubeconfig, args.context, args.timeout)
        except live.ConnectError as err:
            raise Fatal(str(err)) from None
    from reconcile.cluster import snapshot
    from reconcile.cluster.memory import MemoryCluster
    try:
        return MemoryCluster(snapshot.load(args.snapshot), clock=lambda: now)
    except snapshot.SnapshotError as err:
        raise Fatal(str(err)) from None


def _planner(cluster, args, now: datetime):
    """Read the cluster and make the planner of what was read: (observed, planner). A failed read
    here or while planning is fatal (exit 3), as nothing can be planned without it."""
    from reconcile.cluster import observe
    from reconcile.cluster.planner import Planner, RegistryAccess
    ca = _registry_ca(args)                                                     # before reading anything
    with _reading(), getattr(cluster, "keep", contextlib.nullcontext)():     # a waiting run keeps the read
        seen = observe.observe(cluster, args.namespace)
    # a snapshot is a simulation: reuse and pruning never ask a registry
    access = None if args.snapshot else RegistryAccess(getattr(cluster, "deadline", None), ca)
    return seen, Planner(cluster, seen, now, args.pool, getattr(args, "keep_images", -1), access)


def _registry_ca(args) -> str | None:
    """--registry-ca (a file that must exist), else the mounted service CA where it is."""
    if args.registry_ca and not os.path.isfile(args.registry_ca):
        raise Fatal(f"--registry-ca {args.registry_ca}: no such file")
    return args.registry_ca or (REGISTRY_CA if os.path.exists(REGISTRY_CA) else None)


@contextlib.contextmanager
def _reading():
    from reconcile.cluster import ClusterError
    try:
        yield
    except ClusterError as err:
        raise _unreadable(err) from None


def _unreadable(err: object) -> Fatal:
    return Fatal(f"cannot read the cluster: {err}")


def _observe(cluster, args, now: datetime):
    """Read the cluster and plan every pool at once (diff, render, explain); the notices of what
    was read (cluster/notices.py)."""
    from reconcile.cluster import ClusterError, notices
    seen, planner = _planner(cluster, args, now)
    with _reading():
        plans = planner.plan()
    try:
        notices.say(cluster, seen, plans)
    except ClusterError as err:
        raise _unreadable(err) from None
    return seen, planner, plans


def cmd_run(args, now: datetime) -> int:
    """Under the Lease, plan and carry out every pool; then the summary, the metrics and the
    snapshot of what was done (a read that failed after some pools were carried out ends it there)."""
    import logging
    import time

    from reconcile.cluster import lease
    if args.write_snapshot and not args.snapshot:
        raise Fatal("--write-snapshot needs --snapshot")
    started = time.monotonic()
    cluster = _cluster(args, now)
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
    _metrics(cluster, args, seen, result, seconds, strays, now)
    _write_snapshot(cluster, args)
    if result.unread:           # after the summary, the metrics and the snapshot of what was done
        raise _unreadable(result.unread)
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
    seen, planner = _planner(cluster, args, now)
    with _reading():
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
        _metrics(cluster, args, done.seen, done.result, time.monotonic() - started, done.strays, _now())

    done, ended = follow.follow(cluster, one_pass, args.wait, namespace=args.namespace, keeper=keeper,
                                shower=Shower(terminal), report=report, now=_now)
    logging.getLogger("reconcile").info("%s", follow.said(ended))
    return done.seen, done.result, done.strays


def _metrics(cluster, args, seen, result, seconds: float, strays: int, now: datetime) -> None:
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


def cmd_diff(args, now: datetime) -> int:
    """A stray MachineConfig is not a change of the plan: a warning on stderr (and `strays` in -o
    json), the exit code the plan's (kubectl diff: 1 means differences)."""
    import logging

    from reconcile.cluster import notices
    from reconcile.diff import view
    cluster = _cluster(args, now)
    seen, _, plans = _observe(cluster, args, now)
    strays = notices.found_strays(seen)
    for stray in strays:
        logging.getLogger("reconcile").warning("%s", stray.line())
    changed = EXIT_CHANGES if any(p.actions for p in plans) else EXIT_OK
    if args.output == "json":
        sys.stdout.write(view.as_json(plans, strays))
        return changed
    external = os.environ.get("KUBECTL_EXTERNAL_DIFF", "").strip()
    if external:
        sys.stdout.flush()
        try:
            return view.external(plans, external)
        except RuntimeError as err:
            raise Fatal(str(err)) from None
    sys.stdout.write(view.unified(plans, view.color_wanted(args.color, sys.stdout)))
    return changed


def cmd_render(args, now: datetime) -> int:
    from reconcile.cluster import ClusterError
    from reconcile.contract import yamlio
    from reconcile.output import manifests
    cluster = _cluster(args, now)
    _, planner, plans = _observe(cluster, args, now)
    pairs = [(planner.decided[p.pool], p) for p in plans]
    try:
        planner.read(d.inputs.rendered_config for d, p in pairs if manifests.kept_objects(d, p)[1])
        objs, problems, notes = manifests.wanted_objects(pairs, planner.machineconfigs.get, planner.material)
    except ClusterError as err:
        raise _unreadable(err) from None
    sys.stdout.write(yamlio.dump_all(objs) if objs else "")
    for line in notes:
        print(f"note: {line}", file=sys.stderr)
    for line in problems:
        print(f"error: {line}", file=sys.stderr)
    return EXIT_BLOCKED if problems else EXIT_OK


def cmd_status(args, now: datetime) -> int:
    from reconcile.cluster import ClusterError
    from reconcile.output import status
    cluster = _cluster(args, now)
    try:
        pools = cluster.list("MachineConfigPool", None)
    except ClusterError as err:
        raise _unreadable(err) from None
    from reconcile.cluster import notices, observe
    try:        # a token without `list machineconfigs` (no rollout Component) shows no rollout, no strays
        from reconcile.contract import naming
        mcs = cluster.list("MachineConfig", None, naming.SELECTOR)
        named = observe.named_machineconfigs(cluster)
    except ClusterError:
        mcs, named = [], []
    try:
        notice = notices.annotation_notice(cluster, notices.stranded(pools, machineconfigs=mcs))
    except ClusterError:
        notice = None
    if notice:
        print(f"warning: {notice}", file=sys.stderr)
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


def cmd_explain(args, now: datetime) -> int:
    from reconcile.cluster import notices
    from reconcile.contract import objects
    from reconcile.core import rollout
    from reconcile.output import explain
    args.pool = [args.pool_name]          # read and plan what `diff --pool POOL` does
    cluster = _cluster(args, now)
    seen, planner, plans = _observe(cluster, args, now)
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


def cmd_preflight(args, now: datetime) -> int:
    if args.snapshot:
        print("error: preflight asks the live server (permissions, the registry, admission of the build "
              "Pod): --snapshot cannot answer that; `diff --snapshot FILE` shows what a run would do",
              file=sys.stderr)
        return EXIT_BLOCKED
    from reconcile.cluster import ClusterError
    from reconcile.preflight import checklist, read, report
    ca = _registry_ca(args)
    cluster = _cluster(args, now)
    try:                        # only an unreachable server or refused credentials get here
        results = checklist.checks(read.gather(cluster, args.namespace, ca, now))
    except ClusterError as err:
        raise _unreadable(err) from None
    sys.stdout.write(report.as_json(results) if args.output == "json" else report.text(results))
    return report.exit_code(results)


COMMANDS = {"run": cmd_run, "diff": cmd_diff, "render": cmd_render, "status": cmd_status,
            "explain": cmd_explain, "preflight": cmd_preflight}


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    from reconcile.output import logs
    # run logs what it does; the others, like kubectl diff, say only what goes wrong unless -v
    logs.setup(args.verbose + (1 if args.command == "run" else 0), args.log_format)
    try:
        return COMMANDS[args.command](args, _now())
    except Fatal as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_FATAL
    except BrokenPipeError:
        return EXIT_FATAL
