"""`ocl-reconcile preflight`: the checks, each a pure function from what was read of a live cluster
(`Facts`, filled by cluster/preflight.py) to result lines `ok` / `warn` / `fail` that say what to do,
and their text and JSON forms. docs/preflight.md explains every line.

Validation is not done again here: the settings come from `settings.read` (through
observe.read_settings), the Secrets from `settings.check_secret` and `auth.auths`, the pools from the
lifecycle's own decisions and the rollout's selector checks; this module only says what they mean
before a first run."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from reconcile.contract import admission, objects
from reconcile.contract import annotations as A
from reconcile.contract.problem import Problem
from reconcile.core import decision, hold, mcolabel, rollout, storage
from reconcile.imagebuild import auth, builders, imageref, settings
from reconcile.imagebuild.settings import Settings, SettingsError

OK, WARN, FAIL = "ok", "warn", "fail"
EXIT = {OK: 0, WARN: 1, FAIL: 2}
#: the reconciler's own ServiceAccount (kustomize/base/serviceaccount.yaml), whose permissions count
RECONCILER_ACCOUNT = "ocl-reconciler"
#: the SCC the build Pod's ServiceAccount is bound to (kustomize/base/builder.yaml, RoleBinding
#: ocl-builder-anyuid): uid 1000 is refused under restricted-v2
BUILDER_SCC = "anyuid"
#: the ServiceAccount OpenShift's build controller runs a Build's Pod under
#: (openshift/openshift-controller-manager pkg/build/controller/strategy/docker.go)
BUILD_ACCOUNT = "builder"
ENFORCE = "pod-security.kubernetes.io/enforce"
APPLY_BASE = ("re-apply your overlay: kubectl kustomize <your overlay> | oc apply -f - (not kustomize/base "
              "alone: it sets the CronJob's image back to the placeholder ocl-reconciler:latest)")
#: the CronJob kustomize/base makes, and the image it names until an overlay sets one (a placeholder
#: no registry serves: tests/unit/test_preflight.py holds both to kustomize/base/cronjob.yaml)
CRONJOB = "ocl-reconciler"
PLACEHOLDER_IMAGE = "ocl-reconciler:latest"
#: a container's waiting reasons that say its image cannot be pulled (kubelet's images.go)
PULL_FAILURES = ("ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull")
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
           ("", "pods", "get list create delete", ""),
           ("", "persistentvolumeclaims", "get list create delete", ""),
           ("build.openshift.io", "builds", "get list create delete", ""),
           ("build.openshift.io", "builds/optimizeddocker", "create", ""),
           ("coordination.k8s.io", "leases", "get create update delete", "")),
    *_role("ClusterRole ocl-reconciler", "kustomize/base/clusterrole.yaml", "",
           (_MCO, "machineconfigpools", "get list patch", ""),
           (_MCO, "machineconfigs", "get", ""),
           (_MCO, "osimagestreams", "get", "cluster"),
           ("config.openshift.io", "proxies", "get", ""),
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
            ns, name = settings.secret_location(namespace, ref)
            if ns != namespace and not any(n.namespace == ns and n.rule.resource == "secrets"
                                           and n.verb == "get" and n.name in ("", name) for n in out):
                out.append(Need(Rule(ns, "", "secrets", ("get",), (name,), "",
                                     f"{settings.BUILD_CONFIG} key {key!r}"), ns, "get", name))
    return out


@dataclass(frozen=True)
class Asked:
    need: Need
    allowed: bool


@dataclass(frozen=True)
class DryRun:
    """The server's judgement of the desired build object, created with dryRun=All."""
    kind: str
    name: str
    pool: str
    error: str = ""             # "" admitted
    status: int = 0


@dataclass
class Facts:
    """What cluster/preflight.py read; a `*_error` says why a fact could not be read."""
    namespace: str
    namespace_obj: Mapping[str, Any] | None = None
    namespace_error: str = ""
    #: the CronJob CRONJOB (None: not found, or not read: `cronjob_error`) and the Pods of its Jobs
    cronjob: Mapping[str, Any] | None = None
    cronjob_error: str = ""
    cronjob_pods: list[Mapping[str, Any]] = field(default_factory=list)
    #: None: not read (the ConfigMaps could not be listed: `settings_error`)
    settings: Settings | Problem | None = None
    settings_error: str = ""
    #: settings key -> the Secret as read (None: absent), or the reason it could not be read
    secrets: dict[str, Mapping[str, Any] | None] = field(default_factory=dict)
    secret_errors: dict[str, str] = field(default_factory=dict)
    #: who the permission reviews were asked as, and whether that is our ServiceAccount
    caller: str = ""
    impersonated: bool = False
    access: list[Asked] | None = None
    access_error: str = ""
    builder_account: Mapping[str, Any] | None = None
    builder_account_error: str = ""
    #: may the build Pod's ServiceAccount use BUILDER_SCC (None: not asked: `builder_scc_error`)
    builder_scc: bool | None = None
    builder_scc_error: str = ""
    registry_url: str = ""
    registry_error: str = ""
    registry_ca: str | None = None
    cluster_version: Mapping[str, Any] | None = None
    cluster_version_error: str = ""
    #: None: the MachineOSConfig API is not served
    machineosconfigs: list[Mapping[str, Any]] | None = None
    machineosconfigs_error: str = ""
    pools: list[Mapping[str, Any]] = field(default_factory=list)
    owned: list[Mapping[str, Any]] = field(default_factory=list)
    #: every MachineConfig named like ours, metadata only (rollout: machineconfig): the stray check
    named: list[Mapping[str, Any]] = field(default_factory=list)
    #: pool -> what the next run would do (the lifecycle's transition), or why it is Blocked
    decisions: dict[str, tuple[str, str]] = field(default_factory=dict)
    #: pool -> what stops its rollout (overridden, render failed: core/rolloutcheck.py), as the plan leaves it
    rollouts: dict[str, str] = field(default_factory=dict)
    plan_error: str = ""
    dry_run: DryRun | None = None
    dry_run_skipped: str = ""
    #: is the MCO's ValidatingAdmissionPolicy custom-machine-config-pool-selector served (None: the
    #: read failed: `selector_policy_error`)
    selector_policy: bool | None = None
    selector_policy_error: str = ""
    #: with `rollout: machineconfig`: the rollout policy's parameter ConfigMap ROLLOUT_PARAMS as
    #: read (None: not found, or not read: `rollout_params_error`; `rollout_params_read`: asked)
    rollout_params: Mapping[str, Any] | None = None
    rollout_params_error: str = ""
    rollout_params_read: bool = False
    #: with `buildStorage: persistent` and custom-pod-builder: the StorageClasses as a run reads
    #: them when a build is due (None: not read)
    storage_classes: storage.Classes | None = None


@dataclass(frozen=True)
class Result:
    check: str
    result: str
    message: str
    hint: str = ""


#: A check's lines before it is named: (result, message) or (result, message, hint).
Line = tuple[str, ...]
#: The checks by name, in the order they run and print (docs/preflight.md has a section each).
CHECKS: dict[str, Callable[[Facts], list[Line]]] = {}


def _check(name: str) -> Callable[[Callable[[Facts], list[Line]]], Callable[[Facts], list[Line]]]:
    def register(fn: Callable[[Facts], list[Line]]) -> Callable[[Facts], list[Line]]:
        CHECKS[name] = fn
        return fn
    return register


def checks(f: Facts) -> list[Result]:
    """Every check's lines, in order."""
    return [Result(name, *line) for name, fn in CHECKS.items() for line in fn(f)]


def _reconciler(f: Facts) -> str:
    return f"ServiceAccount {f.namespace}/{RECONCILER_ACCOUNT}"


def _is_reconciler(f: Facts) -> bool:
    return f.caller == f"system:serviceaccount:{f.namespace}:{RECONCILER_ACCOUNT}"


@_check("namespace")
def _namespace(f: Facts) -> list[Line]:
    if f.namespace_error:
        return [(WARN, f"cannot read Namespace {f.namespace}: {f.namespace_error}",
                 "the checks below still say whether its objects can be read")]
    if f.namespace_obj is None:
        return [(FAIL, f"Namespace {f.namespace} not found",
                 f"kustomize/base makes it ({APPLY_BASE}), or pass -n with the namespace you use")]
    level = objects.labels(f.namespace_obj).get(ENFORCE)
    return [(OK, f"Namespace {f.namespace} exists (Pod Security enforce: {level or 'unset'})")]


@_check("cronjob")
def _cronjob(f: Facts) -> list[Line]:
    """The image every run is made of: not kustomize/base's placeholder, pinned, and pulled by the
    Pods of its Jobs where there are any (issue 29: re-applying base alone reset it, and every Job
    failed to pull while preflight said ok)."""
    fix = ("set it in your overlay: kustomize edit set image "
           "ocl-reconciler=<registry>/<repository>@sha256:<digest>")
    if f.cronjob_error:
        return [(WARN, f"cannot read CronJob {f.namespace}/{CRONJOB}: {f.cronjob_error}",
                 "run preflight as a user who may read it")]
    if f.cronjob is None:
        return [(FAIL, f"CronJob {f.namespace}/{CRONJOB} not found: nothing runs the reconciler",
                 "apply your overlay (docs/admin.md, \"Installing\")")]
    containers = ((((f.cronjob.get("spec") or {}).get("jobTemplate") or {}).get("spec") or {}).get("template")
                  or {}).get("spec", {}).get("containers") or [{}]
    image = str(containers[0].get("image") or "")
    if image == PLACEHOLDER_IMAGE:
        return [(FAIL, f"CronJob {CRONJOB} runs {image}, the placeholder of kustomize/base that no registry "
                       "serves: every Job fails to pull it", fix)]
    for pod in f.cronjob_pods:
        for status in (pod.get("status") or {}).get("containerStatuses") or []:
            waiting = (status.get("state") or {}).get("waiting") or {}
            if waiting.get("reason") in PULL_FAILURES and status.get("image") in (image, None, ""):
                return [(FAIL, f"CronJob {CRONJOB} runs {image}, which Pod {objects.name(pod)} cannot pull: "
                               f"{waiting.get('reason')}: {A.one_line(waiting.get('message') or '', 200)}",
                         "push it, or give the namespace's ServiceAccount ocl-reconciler pull access to it")]
    if "@sha256:" in image:
        return [(OK, f"CronJob {CRONJOB} runs {image} (pinned by digest)")]
    tag = image.rpartition(":")[2] if ":" in image.rpartition("/")[2] else ""
    if not tag or tag == "latest":
        return [(WARN, f"CronJob {CRONJOB} runs {image}, a moving tag: a new push changes what every run is "
                       "made of without a change you can see", fix)]
    return [(OK, f"CronJob {CRONJOB} runs {image} (a version tag; a digest pins it for good)")]


#: what the checks that need valid settings are called, for the line that says they did not run
_NEED_SETTINGS = "pull-secret, push-secret, registry, pools, pod-security"


@_check("settings")
def _settings(f: Facts) -> list[Line]:
    if f.settings is None:
        return [(FAIL, f"cannot read the settings: {f.settings_error}",
                 f"preflight reads the ConfigMaps of {f.namespace} as you: run it as a user who may "
                 f"(not checked without them: {_NEED_SETTINGS})")]
    if isinstance(f.settings, Problem):
        return [(FAIL, f.settings.message, "fix the ConfigMap and key it names (docs/preflight.md); not "
                                           f"checked without valid settings: {_NEED_SETTINGS}")]
    s = f.settings
    return [(OK, f"ConfigMap {f.namespace}/{settings.BUILD_CONFIG} is valid: builder {s.builder_type}, "
                 f"rollout: {s.rollout}, pushes to {s.pullspec}, base image {s.base_image}")]


def _secret(f: Facts, key: str, ref: str, images: Mapping[str, str], push: bool) -> Line:
    """A pull or push Secret: read, parsed as the build reads it, and naming the registries of
    `images` (what each is used for -> image); never a value in a message."""
    ns, name = settings.secret_location(f.namespace, ref)
    implied = ref == settings.GLOBAL_PULL_SECRET and not push    # the key is unset: the MCO's default
    where = f"Secret {ns}/{name} ({settings.secret_origin(key, ns, name)})"
    if key in f.secret_errors:
        return (FAIL, f"cannot read {where}: {f.secret_errors[key]}",
                "run preflight as a user who may read it (the permissions line says if the reconciler may)")
    secret = f.secrets.get(key)
    try:
        settings.check_secret(key, name, secret, ns)
        found = auth.auths(secret or {})
    except (SettingsError, auth.AuthError) as err:
        if secret is not None:
            fix = f"make it type {auth.DOCKERCONFIGJSON} with \"auths\" in .dockerconfigjson"
        elif implied:
            fix = f"name a Secret of {f.namespace} with the pull credentials in {key!r}"
        else:
            fix = f"create it: oc create secret docker-registry {name} -n {ns} --docker-server=..."
        return (FAIL, str(err), fix)
    missing = {what: imageref.parse(image).repo for what, image in images.items()
               if auth.key_for(found, imageref.parse(image).repo) is None}
    named = ", ".join(sorted(map(str, found))) or "none"
    if not missing:
        return (OK, f"{where} parses and names registries {named}")
    hosts = ", ".join(sorted({auth.host_and_path(repo)[0] for repo in missing.values()}))
    return (FAIL if push else WARN,
            f"{where} names registries {named}, none for {'; '.join(f'{w} {r}' for w, r in missing.items())}",
            f"add credentials for {hosts} to it" + ("" if push else " (else it is pulled anonymously)"))


@_check("pull-secret")
def _pull_secret(f: Facts) -> list[Line]:
    s = f.settings
    if not isinstance(s, Settings):
        return []
    pulled = {"the base image": s.base_image, **({"the extensions image": s.extensions_image}
                                                 if s.extensions_image else {})}
    return [_secret(f, "baseImagePullSecretName", s.pull_secret, pulled, push=False)]


@_check("push-secret")
def _push_secret(f: Facts) -> list[Line]:
    s = f.settings
    if not isinstance(s, Settings):
        return []
    return [_secret(f, "finalImagePushSecretName", s.push_secret, {"finalImagePullspec": s.pullspec},
                    push=True)]


def _where(n: Need) -> str:
    what = f"{n.rule.resource}.{n.rule.group}" if n.rule.group else n.rule.resource
    named = f" {n.name!r}" if n.name else ""
    return f"{what}{named} " + (f"in namespace {n.namespace}" if n.namespace else "cluster-wide")


@_check("permissions")
def _permissions(f: Facts) -> list[Line]:
    """Asked as our ServiceAccount (impersonated, or the caller is it): a missing verb fails; asked
    as another caller, it says nothing certain about the account: a warning."""
    if f.access is None:
        return [(WARN, f"cannot ask the server: {f.access_error}",
                 "SelfSubjectAccessReview is open to every authenticated user on a default cluster")]
    about_us = f.impersonated or _is_reconciler(f)
    who = f"{_reconciler(f)} (asked by impersonation)" if f.impersonated else \
        f"{_reconciler(f)} (you are it)" if about_us else \
        f"you ({f.caller or 'the current user'}; you may not impersonate {_reconciler(f)})"
    missing: dict[tuple[Rule, str], list[str]] = {}
    for asked in f.access:
        if not asked.allowed:
            missing.setdefault((asked.need.rule, _where(asked.need)), []).append(asked.need.verb)
    if not missing:
        return [(OK if about_us else WARN, f"all {len(f.access)} permissions a run uses are granted to {who}",
                 "" if about_us else f"run preflight as a user who may impersonate {_reconciler(f)} "
                                     "(cluster-admin may) to ask about the account itself")]
    out: list[Line] = []
    for (rule, where), verbs in missing.items():
        grant = f"grant get on it, or keep the Secret in {f.namespace} (docs/namespace.md)" if not rule.role \
            else f"{rule.role} ({rule.source}) grants it: " + (
                "deploy kustomize/components/rollout" if "components/rollout" in rule.source else APPLY_BASE)
        out.append((FAIL if about_us else WARN, f"{who} cannot {', '.join(verbs)} {where}", grant))
    return out


@_check("builder-account")
def _builder_account(f: Facts) -> list[Line]:
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


@_check("build-storage")
def _build_storage(f: Facts) -> list[Line]:
    """Where builds keep their images (core/storage.py): the StorageClass each pool's volume would
    be made of, decided as a run decides it."""
    found = f.settings
    if not isinstance(found, Settings):
        return [(OK, "not checked: the settings are not valid (the settings line)")]
    if not found.persistent_storage:
        return [(OK, f"{settings.STORAGE_KEY}: {found.build_storage}: every build starts from an empty "
                     "emptyDir")]
    if found.builder_type != settings.CUSTOM_POD_BUILDER:
        return [(WARN, f"{settings.STORAGE_KEY}: persistent, but an OpenShift Build has no persistent build "
                       "storage: its builds use an emptyDir",
                 f"remove {settings.STORAGE_KEY} from ConfigMap {settings.BUILD_CONFIG}")]
    use, why = storage.storage_class(found, f.storage_classes)
    if use is None:
        return [(WARN, f"{settings.STORAGE_KEY}: persistent, but new builds would use an emptyDir: {why}",
                 f"set {settings.STORAGE_CLASS} to a StorageClass that provisions ReadWriteOnce volumes, or "
                 f"{settings.STORAGE_KEY}: emptyDir, in ConfigMap {settings.BUILD_CONFIG}")]
    how = settings.STORAGE_CLASS if found.storage_class else "the cluster's default"
    return [(OK, f"{settings.STORAGE_KEY}: persistent: each pool's build storage is a volume of StorageClass "
                 f"{use} ({how})")]


def builder_account() -> str:
    """The ServiceAccount every build Pod names (manifests/pod-buildah.yaml.j2)."""
    return str(builders.sample_pod()["spec"]["serviceAccountName"])


def _in_cluster_only(host: str) -> bool:
    return host.rsplit(":", 1)[0].endswith((".svc", ".svc.cluster.local"))


@_check("registry")
def _registry(f: Facts) -> list[Line]:
    s = f.settings
    if not isinstance(s, Settings) or not (f.registry_url or f.registry_error):
        return []
    host = auth.host_and_path(s.repo)[0]
    trust = f"the system CAs and {f.registry_ca}" if f.registry_ca else "the system CAs"
    if f.registry_url:
        how = "plain HTTP: a loopback registry" if f.registry_url.startswith("http:") \
            else f"TLS verified against {trust}"
        return [(OK, f"{host} answers {f.registry_url} with the push credentials ({how})")]
    err = f.registry_error
    if re.search(r"answered 40[13]|not authorised|token service", err):
        ns, name = settings.secret_location(f.namespace, s.push_secret)
        return [(FAIL, f"{host} refuses the push credentials: {err}",
                 f"put credentials that may push to {s.repo} in Secret {ns}/{name}")]
    if "certificate" in err.lower():
        return [(FAIL, f"{host}: its certificate does not verify against {trust}: {err}",
                 "pass --registry-ca FILE with the CA that signs it (the CronJob mounts the service CA at "
                 "/etc/ocl/service-ca/service-ca.crt)")]
    if _in_cluster_only(host) and "answered" not in err:
        return [(WARN, f"{host} is not reachable from here: {err}",
                 "a service name resolves only inside the cluster: run preflight there (the image, as the "
                 "CronJob runs it) to check the registry")]
    return [(FAIL, f"{host}: {err}", "check that the registry of finalImagePullspec is up and reachable from "
                                     "where preflight runs")]


def version_of(cluster_version: Mapping[str, Any] | None) -> str:
    """The version a ClusterVersion is at or going to: status.desired.version, else the newest
    history entry's."""
    status = (cluster_version or {}).get("status") or {}
    history = [h.get("version") for h in status.get("history") or [] if isinstance(h, Mapping)]
    return str((status.get("desired") or {}).get("version") or next((v for v in history if v), ""))


def minor(version: str) -> tuple[int, int] | None:
    m = re.match(r"^(\d+)\.(\d+)(?:[.-]|$)", version)
    return (int(m.group(1)), int(m.group(2))) if m else None


_SET_MACHINECONFIG = (f"set 'rollout: machineconfig' in ConfigMap {settings.BUILD_CONFIG} and deploy "
                      "kustomize/components/rollout (docs/rollout.md)")


@_check("openshift-version")
def _version(f: Facts) -> list[Line]:
    """What the OpenShift version means for `rollout` (docs/rollout.md, section 1)."""
    if f.cluster_version_error:
        return [(WARN, f"cannot read ClusterVersion version: {f.cluster_version_error}",
                 "run preflight as a user who may read it (oc get clusterversion)")]
    if f.cluster_version is None:
        return [(WARN, "no ClusterVersion: not an OpenShift cluster, so no MCO rolls an image out here",
                 "images are built and recorded only; run it on OpenShift 4.16 or later")]
    version = version_of(f.cluster_version)
    at = minor(version)
    mode = f.settings.rollout if isinstance(f.settings, Settings) else None
    if at is None:
        return [(WARN, f"ClusterVersion names no version ({version or 'empty'})",
                 "oc get clusterversion version")]
    if at < (4, 14):
        return [(WARN, f"OpenShift {version}: older than 4.14, which this tool was never checked against",
                 "try it on a test pool first")]
    if mode == settings.ROLLOUT_ANNOTATION:
        why = ("the node controller rolls newestImageEquivalentConfig out only with BuildSuccess in the "
               "pool's status, which only the MCO writes" if at < (4, 16)
               else "nothing reads newestImageEquivalentConfig since 4.16")
        return [(WARN, f"OpenShift {version}, rollout: annotation: {why}, so no node gets the image",
                 _SET_MACHINECONFIG)]
    if at < (4, 16):
        return [(WARN, f"OpenShift {version}, rollout: machineconfig: the node controller of 4.14/4.15 may "
                       "hold a labelled pool until it reports BuildSuccess (not verified)",
                 "try it on a test pool first (docs/rollout.md)")]
    return [(OK, f"OpenShift {version}: rollout: machineconfig hands each image to the MCO through "
                 f"MachineConfig {rollout.PREFIX}<pool>, which it renders and rolls out")]


@_check("mco-builder")
def _mco_builder(f: Facts) -> list[Line]:
    """The MCO's own builder must not build a pool we build: a MachineOSConfig for it (4.16 on), or
    on 4.14/4.15 our settings in the MCO's namespace, where its machine-os-builder reads them."""
    if f.machineosconfigs_error:
        return [(WARN, f"cannot list MachineOSConfigs: {f.machineosconfigs_error}",
                 "run preflight as a user who may (oc get machineosconfigs)")]
    opted = {objects.name(p) for p in f.pools if decision.opted_in(p)}
    out: list[Line] = []
    for mosc in f.machineosconfigs or []:
        pool = str(((mosc.get("spec") or {}).get("machineConfigPool") or {}).get("name") or "")
        if pool in opted:
            out.append((FAIL, f"MachineOSConfig {objects.name(mosc)} has the MCO build pool {pool}, which is "
                              "labelled for us too: two builders would fight over its image",
                        f"keep one: oc delete machineosconfig {objects.name(mosc)}, or remove the label from "
                        f"mcp/{pool}"))
    version = version_of(f.cluster_version)
    if f.namespace == settings.MCO_NAMESPACE and minor(version) in ((4, 14), (4, 15)) and opted:
        gate = "" if minor(version) == (4, 14) else " with the OnClusterBuild gate"
        out.append((FAIL if not gate else WARN,
                    f"OpenShift {version} with our settings in {settings.MCO_NAMESPACE}: the MCO's "
                    f"machine-os-builder (which the label starts{gate}) reads {settings.BUILD_CONFIG} there "
                    "and builds the same pools",
                    "install into our own namespace (docs/namespace.md, \"Moving an install\")"))
    if out:
        return out
    if f.machineosconfigs is None:
        return [(OK, "the MachineOSConfig API is not served: the MCO's own builder has nothing to build")]
    return [(OK, f"{len(f.machineosconfigs)} MachineOSConfig(s), none for a pool labelled for us")]


@_check("pools")
def _pools(f: Facts) -> list[Line]:
    """Every opted-in pool: what the next run would do, or Blocked with the lifecycle's own reason
    (the rollout's selector checks among them), and which pools roll its image out."""
    s = f.settings
    if not isinstance(s, Settings):
        return []
    if f.plan_error:
        return [(FAIL, f"cannot plan: {f.plan_error}",
                 "run preflight as a user who may read the pools and MachineConfigs")]
    foreign = sorted((p for p in f.pools if mcolabel.carries(p)), key=objects.name)
    out: list[Line] = [(FAIL, mcolabel.problem(objects.name(p), s.release_version),
                        " && ".join(mcolabel.commands(objects.name(p)))) for p in foreign]
    opted = sorted((p for p in f.pools if decision.opted_in(p) and not mcolabel.carries(p)),
                   key=objects.name)
    if not opted and not foreign:
        return [(WARN, f"no MachineConfigPool is labelled {A.LAYERING_LABEL}: nothing is built",
                 f"label a pool to start: oc label mcp/worker {A.LAYERING_LABEL}=")]
    view = decision.rollout_view(s, f.pools, f.owned)
    for pool in opted:
        name = objects.name(pool)
        transition, problem = f.decisions.get(name, ("", ""))
        if problem:
            out.append((FAIL, f"MachineConfigPool {name} would be Blocked: {problem}",
                        "fix what the message names (docs/rollout.md for selectors and OS streams)"))
            continue
        rolls = "rollout: annotation writes no MachineConfig"
        if view is not None:
            selecting = view.selecting(name)        # valid: the decision checked them
            heirs = [objects.name(p) for p in selecting if objects.name(p) not in view.built]
            early = [objects.name(p) for p in selecting
                     if objects.name(p) in view.built and objects.name(p) not in view.ours]
            rolls = (f"MachineConfig {rollout.name(name)} rolls its image out to {', '.join([name, *heirs])}"
                     + (f" ({', '.join(heirs)} inherit it)" if heirs else "")
                     + (f"; written once {', '.join(early)} have their own" if early else ""))
        out.append((OK, f"MachineConfigPool {name}: the next run's lifecycle row is {transition}; {rolls}"))
        if s.holds and hold.REQUIRED_FOR_UPGRADE in objects.labels(pool):
            held = hold.waiting(pool)
            now = "holds a change back from it now" if held else "pauses it between rollouts"
            out.append((WARN if held else OK,
                        f"MachineConfigPool {name} is required for upgrades and the rollout gate {now}: the "
                        f"MCO then reports 'the required MachineConfigPool {name} is paused and cannot sync "
                        f"until it is unpaused' and an upgrade waits for its build, at most holdTimeout "
                        f"({s.hold_timeout}s)",
                        "nothing to do unless an upgrade must not wait: rolloutGate: none, or leave this "
                        "pool out (docs/rollout.md, section 3)" if held else ""))
        if name in f.rollouts:
            out.append((WARN, f"MachineConfigPool {name}: its nodes do not get our image: {f.rollouts[name]}",
                        "docs/admin.md, \"Troubleshooting\": overridden, render failed"))
    return out


@_check("stray-machineconfigs")
def _strays(f: Facts) -> list[Line]:
    """MachineConfigs named like ours that we did not write (core/rollout.py `strays`): from what a
    run reads too (the labelled LIST of ours, the metadata-only LIST of every MachineConfig, the
    pools' rendered sources)."""
    if not isinstance(f.settings, Settings) or not f.settings.machineconfig_rollout:
        return [(OK, "not checked: with rollout: annotation the reconciler lists no MachineConfigs "
                     "(kustomize/base grants no list) and writes none")]
    found = rollout.strays(f.pools, f.owned, f.settings.repo, f.named)
    if not found:
        return [(OK, f"no stray MachineConfig named {rollout.PREFIX}*")]
    return [(FAIL, s.line(), f"find who wrote it (docs/rollout-permissions.md, \"Stray MachineConfigs\"), "
                             f"then oc delete machineconfig {s.name}") for s in found]


@_check("pool-admission")
def _pool_admission(f: Facts) -> list[Line]:
    """Every opted-in pool as the MCO's policy custom-machine-config-pool-selector judges it
    (contract/admission.py mirrors its CEL): a pool it refuses can never record its state, since
    every write of it is denied. A failure where the server serves the policy, or where that cannot
    be read; a warning where it is not served (before 4.18): an upgrade brings it."""
    policy = f"ValidatingAdmissionPolicy {admission.SELECTOR_POLICY}"
    if f.selector_policy is None:
        served, result = f"whether this cluster serves it cannot be read: {f.selector_policy_error}", FAIL
    elif f.selector_policy:
        served, result = "served here", FAIL
    else:
        served, result = "not served here; OpenShift 4.18 and later deploy it", WARN
    out: list[Line] = []
    opted = sorted((p for p in f.pools if decision.opted_in(p)), key=objects.name)
    for pool in opted:
        admitted, why = admission.admits_selector(pool)
        if not admitted:
            out.append((result, f"MachineConfigPool {objects.name(pool)}: {policy} ({served}) denies every "
                                f"write of it, so no run can record its state: {why}",
                        admission.selector_fix(objects.name(pool))))
    if out or not opted:
        return out
    return [(OK, f"every opted-in pool selects the worker role (or master or arbiter), as {policy} requires "
                 f"({served})")]


#: The parameter of ValidatingAdmissionPolicy ocl-reconciler-rollout
#: (kustomize/components/rollout/params.yaml): the repository and the pools our ServiceAccount may
#: write MachineConfigs for.
ROLLOUT_PARAMS_NS, ROLLOUT_PARAMS = "openshift-config", "ocl-reconciler-rollout"


def listed_pools(params: Mapping[str, Any] | None) -> list[str]:
    """data.pools as the policy reads it: comma-separated, blanks around a name ignored."""
    raw = str(((params or {}).get("data") or {}).get("pools") or "")
    return [p.strip() for p in raw.split(",") if p.strip()]


def params_patch(repository: str, pools: list[str]) -> str:
    """The one command that makes the parameter agree (docs/admin.md)."""
    body = json.dumps({"data": {"repository": repository, "pools": ",".join(pools)}}, separators=(",", ":"))
    return f"oc patch configmap {ROLLOUT_PARAMS} -n {ROLLOUT_PARAMS_NS} --type merge -p '{body}'"


def params_create(repository: str, pools: list[str]) -> str:
    return (f"oc create configmap {ROLLOUT_PARAMS} -n {ROLLOUT_PARAMS_NS} "
            f"--from-literal=repository={repository} --from-literal=pools={','.join(pools)} "
            "--dry-run=client -o yaml | oc apply -f -")


@_check("rollout-params")
def _rollout_params(f: Facts) -> list[Line]:
    """With `rollout: machineconfig`: the policy's parameter names the settings' repository and
    every opted-in pool (else the policy refuses our MachineConfig for them), and no other pool
    (our ServiceAccount could write one for it)."""
    s = f.settings
    if not isinstance(s, Settings) or not s.machineconfig_rollout or not f.rollout_params_read:
        return []
    where = (f"ConfigMap {ROLLOUT_PARAMS_NS}/{ROLLOUT_PARAMS} (the parameter of ValidatingAdmissionPolicy "
             "ocl-reconciler-rollout)")
    opted = sorted(objects.name(p) for p in f.pools if decision.opted_in(p))
    fix = params_patch(s.repo, opted)
    if f.rollout_params_error:
        return [(WARN, f"cannot read {where}: {f.rollout_params_error}",
                 "run preflight as an administrator to check it (our ServiceAccount may not read it)")]
    if f.rollout_params is None:
        return [(FAIL, f"{where} not found: the policy denies every MachineConfig write of ours",
                 params_create(s.repo, opted))]
    repository = str((f.rollout_params.get("data") or {}).get("repository") or "").strip()
    listed = listed_pools(f.rollout_params)
    problems = []
    if repository != s.repo:
        problems.append(f"data.repository is {repository or 'not set'}, the settings' is {s.repo}")
    missing = [p for p in opted if p not in listed]
    if missing:
        problems.append(f"data.pools ({', '.join(listed) or 'none'}) does not list the opted-in "
                        f"{', '.join(missing)}")
    if problems:
        return [(FAIL, f"{where}: {'; '.join(problems)}: the policy refuses our MachineConfig writes", fix)]
    extra = [p for p in listed if p not in opted]
    if extra:
        return [(WARN, f"{where} lists {', '.join(extra)}, not opted in: our ServiceAccount may write a "
                       "MachineConfig for it", fix)]
    return [(OK, f"{where} names {s.repo} and the opted-in pools ({', '.join(opted) or 'none'})")]


_ADMIT_HINT = {
    "violates PodSecurity": "the build Pod needs allowPrivilegeEscalation: true, which `restricted` refuses: "
                            f"label the namespace {ENFORCE}=baseline (kustomize/base/namespace.yaml; on "
                            "OpenShift with security.openshift.io/scc.podSecurityLabelSync=false)",
    "security context constraint": f"the build Pod's ServiceAccount needs SCC {BUILDER_SCC}: "
                                   f"kustomize/base/builder.yaml binds it; {APPLY_BASE}",
    "service account": f"the build's ServiceAccount is missing: {APPLY_BASE}",
}


@_check("pod-security")
def _pod_security(f: Facts) -> list[Line]:
    """The build object as the planner makes it, judged by the server (dryRun=All: PodSecurity,
    ServiceAccount and, on OpenShift, SCC admission); without one, by the namespace's label."""
    s = f.settings
    if not isinstance(s, Settings):
        return []
    level = objects.labels(f.namespace_obj or {}).get(ENFORCE) or ("unknown" if f.namespace_error else "")
    run = f.dry_run
    who = f"as {_reconciler(f)}" if f.impersonated or _is_reconciler(f) else "as you"
    if run is not None and not run.error:
        extra = "" if run.kind != "Build" else (
            "; its Pod is made by OpenShift's build controller, privileged, under OpenShift's own Pod "
            "Security exemption (not judged here: docs/openshift-build.md)")
        return [(OK, f"the server admits {run.kind} {run.name} of pool {run.pool} (dry run {who}; namespace "
                     f"enforce: {level or 'unset'}){extra}")]
    if run is not None and run.status == 403 and "cannot create resource" in run.error:
        return [(WARN, f"not judged: RBAC refused the dry run of {run.kind} {run.name} {who}: {run.error}",
                 "the permissions line says what to grant; or run preflight as a user who may impersonate "
                 f"{_reconciler(f)}")]
    if run is not None:
        return [(FAIL, f"the server refuses {run.kind} {run.name} of pool {run.pool} (dry run {who}): "
                       f"{run.error}",
                 next((h for key, h in _ADMIT_HINT.items() if key in run.error),
                      "the message is the server's: fix what it names"))]
    why = "no build object to ask the server about" + (f" ({f.dry_run_skipped})" if f.dry_run_skipped else "")
    if s.builder_type != settings.CUSTOM_POD_BUILDER:
        return [(OK, f"{why}; the Build's Pod is made by OpenShift's build controller, under its own Pod "
                     "Security exemption (docs/openshift-build.md)")]
    if level == "restricted":
        return [(FAIL, f"Namespace {f.namespace} enforces `restricted`, which refuses the build Pod "
                       f"(allowPrivilegeEscalation: true); {why}", _ADMIT_HINT["violates PodSecurity"])]
    if level in ("baseline", "privileged"):
        return [(OK, f"Namespace {f.namespace} enforces `{level}`, which admits the build Pod (judged by its "
                     f"label: {why})")]
    if f.namespace_error:
        return [(WARN, f"cannot read Namespace {f.namespace} ({f.namespace_error}): its Pod Security level "
                       f"is not known here; {why}",
                 "run preflight as a user who may read the namespace (oc get namespace "
                 f"{f.namespace} --show-labels), or fix what keeps the dry run from being made")]
    return [(WARN, f"Namespace {f.namespace} has no {ENFORCE} label: the cluster's default level applies "
                   f"(`restricted` on some); {why}", _ADMIT_HINT["violates PodSecurity"])]


def exit_code(results: Iterable[Result]) -> int:
    """0 all ok, 1 a warning, 2 a failure."""
    return max((EXIT[r.result] for r in results), default=0)


def text(results: list[Result]) -> str:
    """One line a result: `RESULT  CHECK  MESSAGE -> what to do`, then the counts."""
    width = max((len(r.check) for r in results), default=0)
    lines = [f"{r.result:<4}  {r.check:<{width}}  {r.message}" + (f" -> {r.hint}" if r.hint else "")
             for r in results]
    counts = {k: sum(r.result == k for r in results) for k in (OK, WARN, FAIL)}
    lines.append(f"preflight: {counts[OK]} ok, {counts[WARN]} warning(s), {counts[FAIL]} failure(s) "
                 "(docs/preflight.md)")
    return "\n".join(lines) + "\n"


def as_json(results: list[Result]) -> str:
    """A list of {check, result, message, hint}."""
    return json.dumps([asdict(r) for r in results], indent=2) + "\n"
