"""The permissions a run uses, rule by rule as kustomize renders them (`PERMISSIONS`), and the
SelfSubjectAccessReviews that ask the server about each (`needs`, answered as `Asked`)."""

from __future__ import annotations

from dataclasses import dataclass

from reconcile.contract.problem import Problem
from reconcile.imagebuild import auth, settings
from reconcile.imagebuild.settings import Settings

#: the reconciler's own ServiceAccount (kustomize/base/serviceaccount.yaml), whose permissions count
RECONCILER_ACCOUNT = "ocl-reconciler"
#: the placeholder of `Rule.namespace` for the namespace of -n (kustomize/base writes ocl-reconciler)
OURS = "<namespace>"


@dataclass(frozen=True)
class Rule:
    """One rule of our RBAC as kustomize renders it: where (OURS, another namespace, or "" for
    cluster-wide), what, and the file and role that grant it."""
    namespace: str
    group: str
    resource: str               # "builds/optimizeddocker": a subresource
    verbs: tuple[str, ...]
    names: tuple[str, ...] = ()
    role: str = ""
    source: str = ""


def _role(role: str, source: str, namespace: str, *rows: tuple[str, str, str, tuple[str, ...]]
          ) -> tuple[Rule, ...]:
    """A role's rules: rows of (group, resource, verbs, resourceNames as one comma-separated text)."""
    return tuple(Rule(namespace, group, resource, tuple(verbs.split()), tuple(filter(None, names.split(","))),
                      role, source) for group, resource, verbs, names in rows)


_MCO = "machineconfiguration.openshift.io"
#: Every verb a run uses, rule by rule, as kustomize/base grants them (tests/standin/test_rbac.py and
#: tests/realapi/test_realapi_rbac.py show a run needs each one); tests/unit/test_preflight.py holds
#: this table equal to those files.
PERMISSIONS: tuple[Rule, ...] = (
    *_role("Role ocl-reconciler", "kustomize/base/role.yaml", OURS,
           ("", "configmaps", "get list create delete", ""),
           ("", "secrets", "get list create delete", ""),
           ("", "pods", "get list watch create delete", ""),
           ("", "persistentvolumeclaims", "get list create delete", ""),
           ("build.openshift.io", "builds", "get list watch create delete", ""),
           ("build.openshift.io", "builds/optimizeddocker", "create", ""),
           ("coordination.k8s.io", "leases", "get create update delete", "")),
    *_role("ClusterRole ocl-reconciler", "kustomize/base/clusterrole.yaml", "",
           (_MCO, "machineconfigpools", "get list watch patch", ""),
           (_MCO, "machineconfigs", "get", ""),
           (_MCO, "osimagestreams", "get", "cluster"),
           ("config.openshift.io", "proxies", "get", ""),
           ("config.openshift.io", "clusterimagepolicies", "list", ""),
           ("", "nodes", "list", ""),
           ("storage.k8s.io", "storageclasses", "list", "")),
    *_role("Role ocl-reconciler-published", "kustomize/base/mco-namespace.yaml", settings.MCO_NAMESPACE,
           ("", "configmaps", "get", ",".join(settings.MCO_PUBLISHED))),
    *_role("Role ocl-reconciler-trust-bundle", "kustomize/base/openshift-config.yaml", "openshift-config",
           ("", "configmaps", "get", "user-ca-bundle"),
           ("", "secrets", "get", "pull-secret")),
    *_role("Role ocl-reconciler-events", "kustomize/base/events.yaml", "default",
           ("", "events", "create", "")),
)
#: `rollout: machineconfig` adds these
ROLLOUT_PERMISSIONS: tuple[Rule, ...] = _role(
    "ClusterRole ocl-reconciler-rollout", "kustomize/components/rollout/rbac.yaml", "",
    (_MCO, "machineconfigs", "list create patch delete", ""),
    ("operator.openshift.io", "machineconfigurations", "get", "cluster"))


@dataclass(frozen=True)
class Need:
    """One SelfSubjectAccessReview: a verb on a resource (by name) in a namespace ("" cluster-wide)."""
    rule: Rule
    namespace: str
    verb: str
    name: str = ""


def needs(found: Settings | Problem | None, namespace: str) -> list[Need]:
    """What to ask the server: every verb of every rule (the rollout's with `rollout: machineconfig`),
    and get on a pull or push Secret that the settings name in a namespace no rule covers."""
    rules = list(PERMISSIONS) + (list(ROLLOUT_PERMISSIONS) if isinstance(found, Settings)
                                 and found.machineconfig_rollout else [])
    out = [Need(r, namespace if r.namespace == OURS else r.namespace, verb, name)
           for r in rules for verb in r.verbs for name in (r.names or ("",))]
    if isinstance(found, Settings):
        for key, ref in (("baseImagePullSecretName", found.pull_secret),
                         ("finalImagePushSecretName", found.push_secret)):
            ns, name = auth.secret_location(namespace, ref)
            if ns != namespace and not any(n.namespace == ns and n.rule.resource == "secrets"
                                           and n.verb == "get" and n.name in ("", name) for n in out):
                out.append(Need(Rule(ns, "", "secrets", ("get",), (name,), "",
                                     f"{settings.BUILD_CONFIG} key {key!r}"), ns, "get", name))
    return out


@dataclass(frozen=True)
class Asked:
    need: Need
    allowed: bool
