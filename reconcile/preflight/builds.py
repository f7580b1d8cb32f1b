"""Where builds run: their storage, the registry they push to, and the build Pod as the server's
admission judges it."""

from __future__ import annotations

import re

from reconcile.contract import objects
from reconcile.core import storage
from reconcile.imagebuild import auth, settings
from reconcile.imagebuild.settings import Settings
from reconcile.preflight.access import BUILDER_SCC
from reconcile.preflight.facts import ENFORCE, Facts
from reconcile.preflight.report import APPLY_BASE, FAIL, OK, WARN, Line


def check_build_storage(f: Facts) -> list[Line]:
    """Where builds keep their images (core/storage/): the StorageClass each pool's volume would
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


def _in_cluster_only(host: str) -> bool:
    return host.rsplit(":", 1)[0].endswith((".svc", ".svc.cluster.local"))


def check_registry(f: Facts) -> list[Line]:
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
        ns, name = auth.secret_location(f.namespace, s.push_secret)
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


_ADMIT_HINT = {
    "violates PodSecurity": "the build Pod needs allowPrivilegeEscalation: true, which `restricted` refuses: "
                            f"label the namespace {ENFORCE}=baseline (kustomize/base/namespace.yaml; on "
                            "OpenShift with security.openshift.io/scc.podSecurityLabelSync=false)",
    "security context constraint": f"the build Pod's ServiceAccount needs SCC {BUILDER_SCC}: "
                                   f"kustomize/base/builder.yaml binds it; {APPLY_BASE}",
    "service account": f"the build's ServiceAccount is missing: {APPLY_BASE}",
}


def check_pod_security(f: Facts) -> list[Line]:
    """The build object as the planner makes it, judged by the server (dryRun=All: PodSecurity,
    ServiceAccount and, on OpenShift, SCC admission); without one, by the namespace's label."""
    s = f.settings
    if not isinstance(s, Settings):
        return []
    level = objects.labels(f.namespace_obj or {}).get(ENFORCE) or ("unknown" if f.namespace_error else "")
    run = f.dry_run
    who = f"as {f.reconciler()}" if f.impersonated or f.is_reconciler() else "as you"
    if run is not None and not run.error:
        extra = "" if run.kind != "Build" else (
            "; its Pod is made by OpenShift's build controller, privileged, under OpenShift's own Pod "
            "Security exemption (not judged here: docs/openshift-build.md)")
        return [(OK, f"the server admits {run.kind} {run.name} of pool {run.pool} (dry run {who}; namespace "
                     f"enforce: {level or 'unset'}){extra}")]
    if run is not None and run.status == 403 and "cannot create resource" in run.error:
        return [(WARN, f"not judged: RBAC refused the dry run of {run.kind} {run.name} {who}: {run.error}",
                 "the permissions line says what to grant; or run preflight as a user who may impersonate "
                 f"{f.reconciler()}")]
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
