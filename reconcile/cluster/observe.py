"""Read the live state once, with one LIST per kind and purpose: the namespace's ConfigMaps that
are not ours (the settings and labelled build inputs, with their data), our ConfigMaps and Secrets
as metadata only (their content-hash annotation says whether they are right, so a steady run never
reads the encoded MachineConfigs), our Pods and Builds (their status matters), and the pools. The
rendered MachineConfig and the secrets are read only when some pool needs a new build (the
planner, cluster/planner.py, asks for them); the OS streams singleton once a run, the nodes only
when build/clusterfacts.py says they are needed. This module only reads: what is said about what
was read is cluster/notices.py's."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from reconcile.cluster import Cluster, Forbidden, NotFound
from reconcile.contract import annotations as A
from reconcile.contract import naming, objects
from reconcile.contract.problem import Problem
from reconcile.core import desired, rollout, storage
from reconcile.imagebuild import auth, builders, buildinputs, proxy, settings, signing
from reconcile.imagebuild.settings import Settings, SettingsError

#: Kinds whose objects we create, hence LIST with our selector; and our build storage volumes,
#: listed only where there may be some (`owned_volumes`).
OWNED_KINDS = ("ConfigMap", "Secret", "Pod", "Build")


@dataclass
class Observed:
    namespace: str
    settings: Settings | Problem
    pools: list[dict[str, Any]]
    owned: list[dict[str, Any]]
    configmaps: list[dict[str, Any]] = field(default_factory=list)
    #: with `rollout: machineconfig`, every MachineConfig named like ours, metadata only, whatever
    #: its labels (`named_machineconfigs`): only the stray check reads it, nothing acts on it
    named: list[dict[str, Any]] = field(default_factory=list)
    #: why our PersistentVolumeClaims could not be listed ("": they were, or were not wanted)
    storage_problem: str = ""


def read_settings(namespace: str, configmaps: list[dict[str, Any]],
                  published: dict[str, dict[str, Any] | None] | None = None) -> Settings | Problem:
    """Settings from the namespace's ConfigMaps (already listed), or why they are invalid.
    `published`: what the MCO publishes in its namespace, by name (settings.MCO_PUBLISHED), when we
    run elsewhere; in its namespace they are among `configmaps`."""
    by_name = {objects.name(o): o for o in configmaps}
    cms = {n: by_name.get(n) for n in (*settings.SETTINGS_CONFIGMAPS, settings.MCO_IMAGES)}
    if namespace != settings.MCO_NAMESPACE:
        cms.update({n: (published or {}).get(n) for n in settings.MCO_PUBLISHED})
    try:
        return settings.read(namespace, cms)
    except SettingsError as err:
        return Problem(str(err))


def read_material(cluster: Cluster, found: Settings, configmaps: list[dict[str, Any]],
                  storage_problem: str = "") -> desired.Material:
    """The pull and push secrets and the labelled build inputs (Secrets by two labelled LISTs,
    ConfigMaps from the namespace LIST already made)."""
    secrets: dict[str, dict[str, Any]] = {}
    try:
        for key, ref in (("baseImagePullSecretName", found.pull_secret),
                         ("finalImagePushSecretName", found.push_secret)):
            ns, name = auth.secret_location(found.namespace, ref)
            try:
                secret = secrets.get(ref) or cluster.get("Secret", ns, name)
            except Forbidden as err:        # a Secret of another namespace that our Roles do not name
                return desired.Material(problem=f"cannot read Secret {ns}/{name} "
                                                f"({auth.secret_origin(key, ns, name)}): {err}; keep it "
                                                f"in {found.namespace}")
            auth.check_secret(key, name, secret, ns)
            secrets[ref] = secret
    except SettingsError as err:
        return desired.Material(problem=str(err))
    labelled: dict[tuple[str, str], dict[str, Any]] = {}
    for label in buildinputs.LABELS:
        for obj in cluster.list("Secret", found.namespace, {label: None}):
            labelled[("Secret", objects.name(obj))] = obj
    for obj in configmaps:
        if buildinputs.input_type(obj) is not None:
            labelled[("ConfigMap", objects.name(obj))] = obj
    try:
        inputs = buildinputs.discover(labelled.values(), *builders.reserved())
    except buildinputs.Conflict as err:
        return desired.Material(secrets, problem=str(err))
    classes = None if not found.persistent_storage or found.builder_type != settings.CUSTOM_POD_BUILDER else \
        storage.Classes(problem=storage_problem) if storage_problem else storage_classes(cluster)
    cluster_proxy = proxy.from_object(get_optional(cluster, "Proxy", "", proxy.NAME))
    bundle = None
    if cluster_proxy.trusted_ca:
        try:
            cm = cluster.get("ConfigMap", proxy.TRUST_NAMESPACE, cluster_proxy.trusted_ca)
        except Forbidden as err:            # kustomize/base grants get on user-ca-bundle only
            return desired.Material(secrets, inputs, problem=(
                f"cannot read ConfigMap {proxy.TRUST_NAMESPACE}/{cluster_proxy.trusted_ca} (Proxy cluster, "
                f"spec.trustedCA): {err}; add it to resourceNames of Role ocl-reconciler-trust-bundle "
                "(kustomize/base/openshift-config.yaml)"))
        bundle = ((cm or {}).get("data") or {}).get(proxy.TRUST_KEY) or None
        if bundle is None:
            return desired.Material(secrets, inputs, problem=(
                f"ConfigMap {proxy.TRUST_NAMESPACE}/{cluster_proxy.trusted_ca} (Proxy cluster, "
                f"spec.trustedCA) has no key {proxy.TRUST_KEY!r}"))
    return desired.Material(secrets, inputs, proxy_env=cluster_proxy.env, trust_bundle=bundle,
                            classes=classes)


def signing_keys(cluster: Cluster, found: Settings) -> Settings | Problem:
    """The settings with their key Secrets' fingerprints: a GET of each, every run with signing on
    (whether a pool's image is signed with the keys of now decides its transition); their data is
    looked at here and kept nowhere."""
    try:
        return settings.with_keys(found, {n: cluster.get("Secret", found.namespace, n)
                                          for n in found.signing_secrets})
    except SettingsError as err:
        return Problem(str(err))
    except Forbidden as err:
        return Problem(f"cannot read the signing key Secrets {', '.join(found.signing_secrets)} of "
                       f"{found.namespace}: {err}")


def signing_off(cluster: Cluster, found: Settings) -> Settings | Problem:
    """Signing is off but pools record signed images (it was on): a ClusterImagePolicy that still
    covers our repository makes the nodes refuse every image built from now on (the rebase fails,
    the node goes Degraded), so every pool is Blocked, naming the key and the policy. One LIST of
    ClusterImagePolicies, made only then (a cluster that does not serve them has none)."""
    try:
        policies = cluster.list("ClusterImagePolicy", None)
    except NotFound:
        policies = []
    except Forbidden as err:
        return Problem(f"signing is off (ConfigMap {settings.BUILD_CONFIG} sets no {signing.KEY_SECRETS!r}) "
                       "but "
                       f"pools record signed images, and the ClusterImagePolicies cannot be read: {err}; "
                       "re-apply your overlay (its ClusterRole comes from kustomize/base)")
    names = signing.covering(policies, found.repo)
    if not names:
        return found
    return Problem(f"ConfigMap {settings.BUILD_CONFIG} sets no {signing.KEY_SECRETS!r} (signing is off), but "
                   f"ClusterImagePolicy {', '.join(names)} requires signatures for {found.repo}: the nodes "
                   "would "
                   "refuse every image built from now on and go Degraded; set the key again, or delete the "
                   "policy first (docs/signing.md, \"Turning signing off\")")


def storage_classes(cluster: Cluster) -> storage.Classes:
    """The StorageClasses (one metadata-only LIST, cluster-scoped): which is the default, whether
    the one named exists. A 403 (an install whose ClusterRole predates build storage) falls back."""
    try:
        return storage.Classes(tuple(cluster.list("StorageClass", None, metadata_only=True)))
    except Forbidden as err:
        return storage.Classes(problem=f"cannot list StorageClasses: {err}; re-apply your overlay (its "
                                       "ClusterRole comes from kustomize/base)")


class _Unreadable(Exception):
    """A ConfigMap the MCO publishes could not be read (403): every pool is Blocked saying so."""


#: Why each ConfigMap the MCO publishes is read, for a 403's message.
_WHY = {settings.OSIMAGEURL: "the release's OS images",
        settings.MCO_IMAGES: "the build Pod's default image; or set 'buildahImage' in ConfigMap "
                             f"{settings.BUILD_CONFIG}"}


def _published(cluster: Cluster, namespace: str,
               configmaps: list[dict[str, Any]]) -> dict[str, dict[str, Any] | None]:
    """What the MCO publishes in its namespace, read by name when we run elsewhere (one GET each):
    `machine-config-osimageurl` always, its images ConfigMap only when we build with Pods and the
    settings name no builder image. In its namespace they are among the ConfigMaps listed."""
    if namespace == settings.MCO_NAMESPACE:
        return {}
    config = next((o for o in configmaps if objects.name(o) == settings.BUILD_CONFIG), None) or {}
    data = config.get("data") or {}
    named = str(data.get("buildahImage") or "").strip()
    pods = str(data.get("imageBuilderType") or "").strip() in ("", settings.CUSTOM_POD_BUILDER)
    wanted = [settings.OSIMAGEURL] + ([settings.MCO_IMAGES] if pods and not named else [])
    out: dict[str, dict[str, Any] | None] = {}
    for name in wanted:
        try:
            out[name] = get_optional(cluster, "ConfigMap", settings.MCO_NAMESPACE, name)
        except Forbidden as err:
            raise _Unreadable(f"cannot read ConfigMap {settings.MCO_NAMESPACE}/{name} ({_WHY[name]}): "
                              f"{err}; grant get on it (kustomize/base/mco-namespace.yaml)") from None
    return out


def get_optional(cluster: Cluster, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
    """A GET of a kind the cluster may not serve (the Proxy on plain Kubernetes): absent."""
    try:
        return cluster.get(kind, namespace, name)
    except NotFound:
        return None


#: Kinds of ours whose content a plan never needs: read as metadata only.
CONTENT_ADDRESSED = ("ConfigMap", "Secret")


def _list_optional(cluster: Cluster, kind: str, namespace: str,
                   selector: dict[str, Any]) -> list[dict[str, Any]]:
    """A LIST of a kind whose API group a cluster may not serve (Builds on plain Kubernetes)."""
    try:
        return cluster.list(kind, namespace, selector, metadata_only=kind in CONTENT_ADDRESSED)
    except NotFound:
        return []


def list_owned(cluster: Cluster, namespace: str, pool: str | None = None,
               rollout: bool = False, volumes: bool = False,
               problems: list[str] | None = None) -> list[dict[str, Any]]:
    """Our objects of every kind (of one pool); with `rollout`, our MachineConfigs too (cluster-scoped,
    listed only with `rollout: machineconfig`, whose RBAC Component grants it); our build storage
    volumes with `volumes`, or when a Pod of ours mounts one. Given `problems`, a 403 on the volumes
    where no Pod of ours mounts one (a Role from before build storage, the setting's default) is
    no volumes, and why is added to it: builds then use an emptyDir (core/storage/)."""
    selector = dict(naming.SELECTOR, **({naming.POOL_LABEL: naming.pool_label(pool)} if pool else {}))
    found = [o for kind in OWNED_KINDS for o in _list_optional(cluster, kind, namespace, selector)]
    mounted = any(storage.claim_of(o) for o in found if o.get("kind") == "Pod")
    if volumes or mounted:
        try:
            found += cluster.list(storage.KIND, namespace, selector)
        except Forbidden as err:
            if problems is None or mounted:
                raise
            problems.append(f"cannot list PersistentVolumeClaims in {namespace}: {err}; re-apply your "
                            "overlay (its Role comes from kustomize/base)")
    return found + (cluster.list("MachineConfig", None, selector) if rollout else [])


def named_machineconfigs(cluster: Cluster) -> list[dict[str, Any]]:
    """Every MachineConfig named `ocl-osimageurl-*`, with or without our label: a metadata-only LIST
    of every MachineConfig (names cannot be selected by prefix), kept only for those names. The
    rendered ones are MiBs each; their metadata is about a KiB (docs/design.md)."""
    return rollout.named(cluster.list("MachineConfig", None, metadata_only=True))


def owned_volumes(cluster: Cluster, namespace: str, found: Settings | Problem, pools: list[dict[str, Any]],
                   pool: str | None = None) -> tuple[list[dict[str, Any]], str]:
    """`list_owned`, with our build storage volumes where there can be some: with `buildStorage:
    persistent` (the buildah Pod's default), or a pool that records one (the setting was just
    turned off, or the pool opted out); with `emptyDir` a steady run makes no LIST for them (a pool
    deleted without a run after that takes its volume with it: ownerReference, the garbage
    collector). Where only the setting wants them, a 403 is no volumes, with why (the second)."""
    recorded = any(storage.recorded_claims(objects.annotations(p)) for p in pools)
    problems: list[str] = []
    owned = list_owned(cluster, namespace, pool, machineconfig_rollout(found),
                       volumes=recorded or (isinstance(found, Settings) and found.persistent_storage),
                       problems=None if recorded else problems)
    return owned, "; ".join(problems)


def machineconfig_rollout(found: Settings | Problem) -> bool:
    """Valid settings with `rollout: machineconfig`: our MachineConfigs are read and written."""
    return isinstance(found, Settings) and found.machineconfig_rollout


def annotation_only(found: Settings | Problem) -> bool:
    """Valid settings with `rollout: annotation`: images are only recorded on the pools."""
    return isinstance(found, Settings) and not found.machineconfig_rollout


def observe(cluster: Cluster, namespace: str) -> Observed:
    configmaps = cluster.list("ConfigMap", namespace, {naming.MANAGED_BY: objects.ABSENT})
    try:
        found = read_settings(namespace, configmaps, _published(cluster, namespace, configmaps))
    except _Unreadable as err:
        found = Problem(str(err))
    if isinstance(found, Settings) and found.signs:
        found = signing_keys(cluster, found)
    pools = cluster.list("MachineConfigPool", None)
    if isinstance(found, Settings) and not found.signs and any(
            A.SIGNED in objects.annotations(p) and A.LAYERING_LABEL in objects.labels(p) for p in pools):
        found = signing_off(cluster, found)
    owned, storage_problem = owned_volumes(cluster, namespace, found, pools)
    return Observed(namespace, found, pools, owned, configmaps,
                    named_machineconfigs(cluster) if machineconfig_rollout(found) else [],
                    storage_problem=storage_problem)

