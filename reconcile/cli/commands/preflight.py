"""`ocl-reconcile preflight`: read-only checks of a live cluster before the first run."""

from __future__ import annotations

import argparse
import sys
from datetime import datetime

from reconcile.cli import steps
from reconcile.cli.steps import EXIT_BLOCKED

NAME = "preflight"
ORDER = 60
SUMMARY = "check a live cluster before the first run"
LINE = "read-only checks of a live cluster before the first run: ok / warn / fail, what to do"
PARENTS = ("live", "namespaced")
DESCRIPTION = (
    "Read-only checks of a live cluster before the first run, one line each (ok, warn or fail, "
    "and what to do): the namespace and settings, the pull and push Secrets, our "
    "ServiceAccount's permissions (SelfSubjectAccessReview, by impersonation where you may), "
    "the build's ServiceAccount and SCC, the registry's /v2/ with the push credentials, the "
    "OpenShift version and the MCO's own builder, every opted-in pool, and the build Pod "
    "judged by the server (dryRun=All). No --snapshot: the server must answer "
    "(docs/preflight.md).")
CODES = ("exit codes: 0 every check ok; 1 a warning; 2 a failure (or --snapshot); 3 the cluster "
         "cannot be reached")


def arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-o", "--output", choices=("text", "json"), default="text",
                        help="json: a list of {check, result, message, hint} for scripts")


def command(args, now: datetime) -> int:
    if args.snapshot:
        print("error: preflight asks the live server (permissions, the registry, admission of the build "
              "Pod): --snapshot cannot answer that; `diff --snapshot FILE` shows what a run would do",
              file=sys.stderr)
        return EXIT_BLOCKED
    from reconcile.cluster import ClusterError
    from reconcile.preflight import checklist, read, report
    ca = steps.registry_ca(args)
    cluster = steps.cluster(args, now)
    try:                        # only an unreachable server or refused credentials get here
        results = checklist.checks(read.gather(cluster, args.namespace, ca, now))
    except ClusterError as err:
        raise steps.unreadable(err) from None
    sys.stdout.write(report.as_json(results) if args.output == "json" else report.text(results))
    return report.exit_code(results)
