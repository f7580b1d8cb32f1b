"""Every check, in the one order they run and print (docs/preflight.md has a section each, in
this order): a check is a pure function from `Facts` to its result lines. A new check is a
function in the module of its subject, and a row here."""

from __future__ import annotations

from collections.abc import Callable

from reconcile.preflight import access, builds, install, openshift, pools, signing
from reconcile.preflight.facts import Facts
from reconcile.preflight.report import Line, Result

#: The checks by name, in the order they run and print.
CHECKS: dict[str, Callable[[Facts], list[Line]]] = {
    "namespace": install.check_namespace,
    "cronjob": install.check_cronjob,
    "settings": install.check_settings,
    "pull-secret": install.check_pull_secret,
    "push-secret": install.check_push_secret,
    "permissions": access.check_permissions,
    "builder-account": access.check_builder_account,
    "build-storage": builds.check_build_storage,
    "registry": builds.check_registry,
    "architectures": builds.check_architectures,
    "openshift-version": openshift.check_openshift_version,
    "mco-builder": openshift.check_mco_builder,
    "pools": pools.check_pools,
    "stray-machineconfigs": pools.check_strays,
    "pool-admission": pools.check_pool_admission,
    "rollout-params": pools.check_rollout_params,
    "pod-security": builds.check_pod_security,
    "image-policy": signing.check_image_policy,
    "policy-key": signing.check_policy_key,
    "rendered-policy": signing.check_rendered_policy,
}


def checks(f: Facts) -> list[Result]:
    """Every check's lines, in order."""
    return [Result(name, *line) for name, fn in CHECKS.items() for line in fn(f)]
