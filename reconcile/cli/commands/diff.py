"""`ocl-reconcile diff`: what `run` would change, as kubectl diff shows it; no writes."""

from __future__ import annotations

import argparse
import os
import sys
from datetime import datetime

from reconcile.cli import steps
from reconcile.cli.steps import EXIT_CHANGES, EXIT_OK, KEEP_IMAGES, Fatal

NAME = "diff"
ORDER = 20
SUMMARY = "show what run would change; no writes"
LINE = "the same plan as a unified diff per object, no writes, secret values masked"
PARENTS = ("source", "select", "namespaced")
DESCRIPTION = (
    "Show what `run` would change, as kubectl diff does, with no writes: a unified YAML diff per "
    "object (secret values masked), registry deletes, then a summary line. KUBECTL_EXTERNAL_DIFF "
    "names a program to compare the live and desired trees instead; its exit status is ours. "
    "A stray MachineConfig (named ocl-osimageurl-*, not written by us) is a warning on stderr, "
    "not a change.")
CODES = ("exit codes: 0 no differences; 1 differences; 2 or more an error (3: the cluster or snapshot "
         "cannot be read)")


def arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--keep-images", type=int, default=KEEP_IMAGES, metavar="N",
                        help="show which images run would delete from the registry (as for run)")
    parser.add_argument("--color", choices=("auto", "always", "never"), default="auto",
                        help="colour the diff (auto: only on a terminal)")
    parser.add_argument("-o", "--output", choices=("diff", "json"), default="diff",
                        help="json: the plan (writes with their JSON patches, state changes) for scripts")


def command(args, now: datetime) -> int:
    """A stray MachineConfig is not a change of the plan: a warning on stderr (and `strays` in -o
    json), the exit code the plan's (kubectl diff: 1 means differences)."""
    import logging

    from reconcile.cluster import notices
    from reconcile.diff import view
    cluster = steps.cluster(args, now)
    seen, _, plans = steps.observe(cluster, args, now)
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
