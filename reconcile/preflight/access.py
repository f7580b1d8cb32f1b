"""Who may do what: the permissions of our ServiceAccount, and the build's ServiceAccount with its
SCC."""

from __future__ import annotations

from reconcile.imagebuild import builders, settings
from reconcile.imagebuild.settings import Settings
from reconcile.preflight.facts import Facts
from reconcile.preflight.permissions import Need, Rule
from reconcile.preflight.report import APPLY_BASE, FAIL, OK, WARN, Line

#: the SCC the build Pod's ServiceAccount is bound to (kustomize/base/builder.yaml, RoleBinding
#: ocl-builder-anyuid): uid 1000 is refused under restricted-v2
BUILDER_SCC = "anyuid"
#: the ServiceAccount OpenShift's build controller runs a Build's Pod under
#: (openshift/openshift-controller-manager pkg/build/controller/strategy/docker.go)
BUILD_ACCOUNT = "builder"


def _where(n: Need) -> str:
    what = f"{n.rule.resource}.{n.rule.group}" if n.rule.group else n.rule.resource
    named = f" {n.name!r}" if n.name else ""
    return f"{what}{named} " + (f"in namespace {n.namespace}" if n.namespace else "cluster-wide")


def check_permissions(f: Facts) -> list[Line]:
    """Asked as our ServiceAccount (impersonated, or the caller is it): a missing verb fails; asked
    as another caller, it says nothing certain about the account: a warning."""
    if f.access is None:
        return [(WARN, f"cannot ask the server: {f.access_error}",
                 "SelfSubjectAccessReview is open to every authenticated user on a default cluster")]
    about_us = f.impersonated or f.is_reconciler()
    who = f"{f.reconciler()} (asked by impersonation)" if f.impersonated else \
        f"{f.reconciler()} (you are it)" if about_us else \
        f"you ({f.caller or 'the current user'}; you may not impersonate {f.reconciler()})"
    missing: dict[tuple[Rule, str], list[str]] = {}
    for asked in f.access:
        if not asked.allowed:
            missing.setdefault((asked.need.rule, _where(asked.need)), []).append(asked.need.verb)
    if not missing:
        return [(OK if about_us else WARN, f"all {len(f.access)} permissions a run uses are granted to {who}",
                 "" if about_us else f"run preflight as a user who may impersonate {f.reconciler()} "
                                     "(cluster-admin may) to ask about the account itself")]
    out: list[Line] = []
    for (rule, where), verbs in missing.items():
        grant = f"grant get on it, or keep the Secret in {f.namespace} (docs/namespace.md)" if not rule.role \
            else f"{rule.role} ({rule.source}) grants it: " + (
                "deploy kustomize/components/rollout" if "components/rollout" in rule.source else APPLY_BASE)
        out.append((FAIL if about_us else WARN, f"{who} cannot {', '.join(verbs)} {where}", grant))
    return out


def check_builder_account(f: Facts) -> list[Line]:
    """The build's ServiceAccount: ours (custom-pod-builder, the one the build Pod names), which may
    use BUILDER_SCC on OpenShift; or the namespace's `builder` (openshift-image-builder)."""
    pods = not isinstance(f.settings, Settings) or f.settings.builder_type == settings.CUSTOM_POD_BUILDER
    ref = f"ServiceAccount {f.namespace}/{builder_account() if pods else BUILD_ACCOUNT}"
    if f.builder_account_error:
        return [(WARN, f"cannot read {ref}: {f.builder_account_error}",
                 "run preflight as a user who may read ServiceAccounts there")]
    if f.builder_account is None and pods:
        return [(FAIL, f"{ref} not found: the build Pod runs under it",
                 f"kustomize/base/builder.yaml makes it: {APPLY_BASE}")]
    if f.builder_account is None:
        return [(FAIL, f"{ref} not found: OpenShift's build controller runs the Build's Pod under it (the "
                       "Build stays New with CannotCreateBuildPod)",
                 "OpenShift makes it in every namespace while the Build capability is enabled; or "
                 f"oc create serviceaccount {BUILD_ACCOUNT} -n {f.namespace}")]
    if not pods:
        return [(OK, f"{ref} exists (OpenShift's build controller runs the Build's Pod under it, privileged: "
                     "docs/openshift-build.md)")]
    if f.builder_scc is None:
        return [(WARN, f"{ref} exists; if it may use SCC {BUILDER_SCC} is not known: {f.builder_scc_error}",
                 f"the pod-security line's dry run judges the build Pod; or run preflight as a user who may "
                 f"impersonate {ref}")]
    if f.builder_scc:
        return [(OK, f"{ref} exists and may use SCC {BUILDER_SCC} (asked as it)")]
    if f.cluster_version is None:
        return [(OK, f"{ref} exists; it may not use SCC {BUILDER_SCC}, which only OpenShift has (no "
                     "ClusterVersion here)")]
    return [(FAIL, f"{ref} may not use SCC {BUILDER_SCC}: the build Pod runs as uid 1000, which "
                   "restricted-v2 refuses",
             f"kustomize/base/builder.yaml binds it (RoleBinding ocl-builder-anyuid to ClusterRole "
             f"system:openshift:scc:{BUILDER_SCC}): {APPLY_BASE}")]


def builder_account() -> str:
    """The ServiceAccount every build Pod names (manifests/pod-buildah.yaml.j2)."""
    return str(builders.sample_pod()["spec"]["serviceAccountName"])
