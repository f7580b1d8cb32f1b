"""`ocl-reconcile preflight`: read-only checks of a live cluster before the first run. docs/preflight.md
explains every line.

- preflight/read.py reads the cluster as the caller into `Facts` (preflight/facts.py), asking the
  server about the permissions of preflight/permissions.py;
- preflight/checklist.py runs the checks in their one order, each a pure function from the facts
  to result lines in the module of its subject (install, access, builds, openshift, pools);
- preflight/report.py gives the lines as text or JSON, and the exit code.

Validation is not done again here: the settings come from `settings.read` (through
observe.read_settings), the Secrets from `auth.check_secret` and `auth.auths`, the pools from the
lifecycle's own decisions and the rollout's selector checks; the checks only say what they mean
before a first run. This module names the package's surface, for the command and the tests."""

from __future__ import annotations

from reconcile.preflight.access import BUILD_ACCOUNT, BUILDER_SCC, builder_account
from reconcile.preflight.checklist import CHECKS, checks
from reconcile.preflight.facts import ENFORCE, DryRun, Facts
from reconcile.preflight.install import CRONJOB, PLACEHOLDER_IMAGE
from reconcile.preflight.openshift import minor, version_of
from reconcile.preflight.permissions import (
    OURS,
    PERMISSIONS,
    RECONCILER_ACCOUNT,
    ROLLOUT_PERMISSIONS,
    Asked,
    Need,
    Rule,
    needs,
)
from reconcile.preflight.pools import (
    ROLLOUT_PARAMS,
    ROLLOUT_PARAMS_NS,
    listed_pools,
    params_create,
    params_patch,
)
from reconcile.preflight.report import APPLY_BASE, FAIL, OK, WARN, Result, as_json, exit_code, text

__all__ = ["APPLY_BASE", "BUILDER_SCC", "BUILD_ACCOUNT", "CHECKS", "CRONJOB", "ENFORCE", "FAIL", "OK", "OURS",
           "PERMISSIONS", "PLACEHOLDER_IMAGE", "RECONCILER_ACCOUNT", "ROLLOUT_PARAMS", "ROLLOUT_PARAMS_NS",
           "ROLLOUT_PERMISSIONS", "WARN", "Asked", "DryRun", "Facts", "Need", "Result", "Rule", "as_json",
           "builder_account", "checks", "exit_code", "listed_pools", "minor", "needs", "params_create",
           "params_patch", "text", "version_of"]
