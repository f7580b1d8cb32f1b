"""Where builds run: their storage, the registry they push to, and the build Pod as the server's
admission judges it."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from reconcile.contract import objects
from reconcile.core import storage
from reconcile.imagebuild import auth, settings
from reconcile.imagebuild.platform import architecture
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


#: taints that keep a build Pod (which tolerates none) off a node
_NO_SCHEDULE = ("NoSchedule", "NoExecute")


def _schedulable(node: Mapping[str, Any]) -> bool:
    spec = node.get("spec") or {}
    ready = any(c.get("type") == "Ready" and c.get("status") == "True"
                for c in (node.get("status") or {}).get("conditions") or [] if isinstance(c, Mapping))
    return ready and not spec.get("unschedulable") and not any(
        isinstance(t, Mapping) and t.get("effect") in _NO_SCHEDULE for t in spec.get("taints") or [])


def _offers(f: Facts, image: str, arch: str, what: str) -> Line | None:
    """A FAIL or WARN line when `image` does not offer `arch`, else None."""
    offered = f.platforms.get(image)
    if isinstance(offered, str):
        return (WARN, f"{arch}: cannot tell whether the {what} {image} offers linux/{arch}: {offered}",
                "check that the pull Secret may read it")
    if offered is not None and arch not in offered:
        return (FAIL, f"{arch}: the {what} {image} offers {', '.join(offered) or 'no architecture'}, not "
                      f"linux/{arch}", f"use a {what} built for {arch} too (a manifest list)")
    return None


def check_architectures(f: Facts) -> list[Line]:
    """Each mixed pool's architectures (core/multiarch.py): a schedulable node of each (Ready, not
    cordoned, no NoSchedule taint: our build Pod tolerates none), or the emulation the settings ask
    for; the base image and the builder image offering it."""
    s = f.settings
    if not isinstance(s, Settings):
        return []
    if not f.architectures:
        return [(OK, "no pool of mixed architectures: each pool builds on a node of its own")]
    if f.nodes is None:
        return [(WARN, f"cannot list the nodes: {f.nodes_error}",
                 "run preflight as a user who may list nodes")]
    out: list[Line] = []
    for pool, (archs, base) in sorted(f.architectures.items()):
        native = [a for a in archs if a not in s.emulated]
        for arch in archs:
            runs_on = arch if arch in native else (native[0] if native else "")
            nodes = [n for n in f.nodes if objects.labels(n).get(architecture.ARCH_LABEL) == runs_on
                     and _schedulable(n)] if runs_on else []
            problems = [line for line in (
                _offers(f, base, arch, "base image"),
                _offers(f, s.buildah_image, runs_on, "builder image")
                if s.builder_type == settings.CUSTOM_POD_BUILDER and runs_on else None) if line]
            if not runs_on:
                out.append((FAIL, f"MachineConfigPool {pool}: {arch}: {settings.EMULATED_KEY} names every "
                                  "architecture of the pool: no node to run its builds on",
                            f"leave one architecture out of {settings.EMULATED_KEY}"))
            elif not nodes:
                fix = (f"add a schedulable {runs_on} node" if arch in s.emulated else
                       f"add a schedulable {arch} node, or build it under emulation: "
                       f"{settings.EMULATED_KEY}: {arch} in ConfigMap {settings.BUILD_CONFIG} (a build "
                       "several times as long; the nodes need qemu-user-static in binfmt_misc)")
                out.append((FAIL, f"MachineConfigPool {pool}: {arch}: no schedulable {runs_on} node: its "
                                  "build would stay Pending", fix))
            elif arch in s.emulated:
                out.append((WARN, f"MachineConfigPool {pool}: {arch}: built under emulation on "
                                  f"{len(nodes)} schedulable {runs_on} node(s) ({settings.EMULATED_KEY}): "
                                  "several times as long, and only where qemu-user-static is in binfmt_misc",
                            "check `cat /proc/sys/fs/binfmt_misc/qemu-*` on those nodes"))
            else:
                out.append((OK, f"MachineConfigPool {pool}: {arch}: {len(nodes)} schedulable node(s)"))
            out += [(level, f"MachineConfigPool {pool}: {text}", *fix) for level, text, *fix in problems]
    return out


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
