"""Read the live state once, with one LIST per kind and purpose: the namespace's ConfigMaps that
are not ours (the settings and labelled build inputs, with their data), our ConfigMaps and Secrets
as metadata only (their content-hash annotation says whether they are right, so a steady run never
reads the encoded MachineConfigs), our Pods and Builds (their status matters), and the pools. The
rendered MachineConfig and the secrets are read only when some pool needs a new build; the OS
streams singleton once a run, the nodes only when build/clusterfacts.py says they are needed."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from reconcile.cluster import Cluster, Forbidden, NotFound, registry
from reconcile.contract import annotations as A
from reconcile.contract import naming, objects
from reconcile.contract.problem import Problem
from reconcile.core import (
    actions_table,
    carryforward,
    decision,
    desired,
    images,
    rollout,
    rolloutcheck,
    storage,
    transitions,
)
from reconcile.core.actions import PoolPlan
from reconcile.imagebuild import (
    auth,
    builders,
    buildinputs,
    clusterfacts,
    disk,
    livechange,
    osstream,
    proxy,
    settings,
)
from reconcile.imagebuild.settings import Settings, SettingsError

#: Transitions after which the pool's rendered config is checked for our image.
CHECKED_AFTER = frozenset({transitions.Transition.BUILT, transitions.Transition.EQUIVALENT,
                           transitions.Transition.LIVE})

#: Kinds whose objects we create, hence LIST with our selector; and our build storage volumes,
#: listed only where there may be some (`_owned_volumes`).
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
            ns, name = settings.secret_location(found.namespace, ref)
            try:
                secret = secrets.get(ref) or cluster.get("Secret", ns, name)
            except Forbidden as err:        # a Secret of another namespace that our Roles do not name
                return desired.Material(problem=f"cannot read Secret {ns}/{name} "
                                                f"({settings.secret_origin(key, ns, name)}): {err}; keep it "
                                                f"in {found.namespace}")
            settings.check_secret(key, name, secret, ns)
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
    cluster_proxy = proxy.from_object(_get_optional(cluster, "Proxy", "", proxy.NAME))
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
            out[name] = _get_optional(cluster, "ConfigMap", settings.MCO_NAMESPACE, name)
        except Forbidden as err:
            raise _Unreadable(f"cannot read ConfigMap {settings.MCO_NAMESPACE}/{name} ({_WHY[name]}): "
                              f"{err}; grant get on it (kustomize/base/mco-namespace.yaml)") from None
    return out


def _get_optional(cluster: Cluster, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
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
    no volumes, and why is added to it: builds then use an emptyDir (core/storage.py)."""
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


def _owned_volumes(cluster: Cluster, namespace: str, found: Settings | Problem, pools: list[dict[str, Any]],
                   pool: str | None = None) -> tuple[list[dict[str, Any]], str]:
    """`list_owned`, with our build storage volumes where there can be some: with `buildStorage:
    persistent` (the buildah Pod's default), or a pool that records one (the setting was just
    turned off, or the pool opted out); with `emptyDir` a steady run makes no LIST for them (a pool
    deleted without a run after that takes its volume with it: ownerReference, the garbage
    collector). Where only the setting wants them, a 403 is no volumes, with why (the second)."""
    recorded = any(storage.recorded(objects.annotations(p)) for p in pools)
    problems: list[str] = []
    owned = list_owned(cluster, namespace, pool, _rollout(found),
                       volumes=recorded or (isinstance(found, Settings) and found.persistent_storage),
                       problems=None if recorded else problems)
    return owned, "; ".join(problems)


def _rollout(found: Settings | Problem) -> bool:
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
    pools = cluster.list("MachineConfigPool", None)
    owned, storage_problem = _owned_volumes(cluster, namespace, found, pools)
    return Observed(namespace, found, pools, owned, configmaps,
                    named_machineconfigs(cluster) if _rollout(found) else [], storage_problem=storage_problem)


#: The API of the MCO's own on-cluster layering (4.16 on): where it is served, nothing reads the
#: pool annotation `newestImageEquivalentConfig` any more (docs/rollout.md).
MACHINEOSCONFIGS = ("machineconfiguration.openshift.io/v1", "machineosconfigs")
ANNOTATION_ONLY = ("rollout: annotation: this cluster serves the MachineOSConfig API "
                   "(OpenShift 4.16 or later), "
                   "where nothing reads machineconfiguration.openshift.io/newestImageEquivalentConfig, so no "
                   "node gets the image{s} recorded for pool(s) {pools}; to hand images to the MCO set "
                   "'rollout: machineconfig' in ConfigMap on-cluster-build-config and deploy "
                   "kustomize/components/rollout (docs/contract.md, \"Rolling the image out\")")


def annotation_notice(cluster: Cluster, stranded: Iterable[str]) -> str | None:
    """Said once by run, diff and status when images recorded for these pools reach no node (no
    rollout MachineConfig) on a cluster that serves MachineOSConfig: one discovery GET, made only
    when there is such a pool."""
    stranded = sorted(set(stranded))
    if not stranded or not cluster.serves(*MACHINEOSCONFIGS):
        return None
    return ANNOTATION_ONLY.format(s="s" if len(stranded) > 1 else "", pools=", ".join(stranded))


MOVED = ("pool(s) {pools} record builds of an install of ocl-reconciler in namespace {old}: its build "
         "objects there are not deleted from here ({namespace} has no rights there); once no pool needs "
         "them, delete them: oc delete pods,builds,configmaps,secrets -n {old} -l "
         "app.kubernetes.io/managed-by=ocl-reconciler (docs/namespace.md, \"Moving an install\")")


def moved_notice(pools: Iterable[dict[str, Any]], namespace: str) -> str | None:
    """Said once a run when pools record builds in another namespace (the MCO's, where earlier
    versions lived): read from the pools alone, as we may not list there."""
    found: dict[str, list[str]] = {}
    for pool in pools:
        old = carryforward.moved_from(objects.annotations(pool), namespace)
        if old and decision.opted_in(pool):
            found.setdefault(old, []).append(objects.name(pool))
    return "; ".join(MOVED.format(pools=", ".join(sorted(names)), old=old, namespace=namespace)
                     for old, names in sorted(found.items())) or None


def stranded(pools: Iterable[dict[str, Any]], plans: Iterable[PoolPlan] = (),
             machineconfigs: Iterable[dict[str, Any]] = ()) -> list[str]:
    """The opted-in pools that have (or get in these plans) an image that none of our rollout
    MachineConfigs hands to the MCO."""
    handed = set(rollout.view((), machineconfigs, ()).ours)
    imaged = {objects.name(p) for p in pools if decision.opted_in(p) and objects.annotations(p).get(A.IMAGE)}
    return sorted((imaged | {p.pool for p in plans if p.state_after == A.SUCCEEDED}) - handed)


def _of(obj: dict[str, Any], pool: str) -> bool:
    """Is this object of ours the pool's (by its pool label, or as its rollout MachineConfig)?"""
    return objects.labels(obj).get(naming.POOL_LABEL) == naming.pool_label(pool) or (
        obj.get("kind") == rollout.KIND and objects.name(obj) == rollout.name(pool))


@dataclass
class Planner:
    """Plans from what was observed, reading build material (MachineConfigs, secrets) at most
    once, and re-plans a single pool from a fresh read after a write conflict."""
    cluster: Cluster
    seen: Observed
    now: datetime
    only: Iterable[str] = ()
    #: image pruning: keep the newest N of a pool's images (-1: never prune)
    keep_images: int = -1
    machineconfigs: dict[str, Any] = field(default_factory=dict)
    material: desired.Material | None = None
    #: the nodes, metadata only (their labels and annotations): listed once, when first needed
    nodes: list[dict[str, Any]] | None = None
    #: the OSImageStream `cluster` (None: absent or not served), read once if some pool is opted in
    streams: dict[str, Any] | None = None
    streams_read: bool = False
    streams_problem: str = ""
    #: the registry, for reuse checks and pruning; None on a snapshot (both are simulated)
    registry_client: registry.Client | None = None
    lookups: dict[str, images.Lookup] = field(default_factory=dict)
    #: the registry with the pull credentials, for the base image's size; None on a snapshot
    base_client: registry.Client | None = None
    bases: dict[tuple[str, str], disk.BaseSize] = field(default_factory=dict)
    #: the last plan's decisions by pool (render prints what they keep)
    decided: dict[str, decision.Decision] = field(default_factory=dict)
    #: the node disruption policy (imagebuild/livechange.py): read once, when a change may be live
    policy: livechange.Policy | None = None

    def _lookup(self, image: str, build_id: str) -> images.Lookup:
        """Does the registry still have an image we would reuse, labelled by our build of this
        build id (the manifest and its config, two GETs)? Asked once per run; a failure to ask is
        an answer too (the pool builds, saying so): an optimisation never blocks."""
        key = f"{build_id}={image}"
        if key not in self.lookups:
            if self.registry_client is None:
                self.lookups[key] = images.Lookup(image, True, simulated=True)
            else:
                try:
                    self.lookups[key] = images.labelled(image, self.registry_client.labels(image), build_id)
                except registry.RegistryError as err:
                    self.lookups[key] = images.Lookup(image, None, str(err))
        return self.lookups[key]

    def _with_base(self, d: decision.Decision) -> decision.Decision:
        """A build that is due, with its base image's size (one GET of the manifest, two for a
        manifest list; asked once a run per image and architecture). A failure to ask is an
        answer too: the build is sized by the defaults, saying so (imagebuild/disk.py)."""
        if not d.needs_build or (self.material is not None and self.material.problem):
            return d
        key = (d.inputs.base_image, d.inputs.arch)
        if key not in self.bases:
            if self.base_client is None:
                self.bases[key] = disk.BaseSize(key[0], why="a snapshot run does not ask the registry")
            else:
                try:
                    self.bases[key] = disk.BaseSize(key[0], self.base_client.image_size(*key))
                except registry.RegistryError as err:
                    self.bases[key] = disk.BaseSize(key[0], why=str(err))
        return replace(d, base=self.bases[key])

    def pull_auths(self) -> dict[str, Any]:
        """Registry credentials for the base image: what the build pulls with (the pull secret
        merged with labelled pull-secret inputs), from the build material already read."""
        found, material = self.seen.settings, self.material
        assert isinstance(found, Settings)
        source = material.secrets.get(found.pull_secret) if material else None
        if source is None:
            raise auth.AuthError(f"the pull secret {found.pull_secret} was not read")
        merged = auth.merged(source, material.inputs.merge.get("pull", ()))
        return auth.auths({"data": {".dockerconfigjson": merged}})

    def _read_machineconfigs(self, wanted: Iterable[str]) -> None:
        for name in sorted(set(wanted) - set(self.machineconfigs)):
            self.machineconfigs[name] = self.cluster.get("MachineConfig", "", name) or decision.MISSING

    def read(self, wanted: Iterable[str]) -> None:
        """Read these MachineConfigs and the build material, each at most once."""
        self._read_machineconfigs(wanted)
        if self.material is None and isinstance(self.seen.settings, Settings):
            self.material = read_material(self.cluster, self.seen.settings, self.seen.configmaps,
                                          self.seen.storage_problem)

    def _list_nodes(self) -> list[dict[str, Any]]:
        if self.nodes is None:
            self.nodes = self.cluster.list("Node", None, metadata_only=True)
        return self.nodes

    def _facts(self, pools: list[dict[str, Any]], only: Iterable[str],
               fresh: frozenset[str]) -> clusterfacts.ClusterFacts:
        """The OS streams and nodes the decisions need (build/clusterfacts.py says when that is);
        `fresh`: the pools whose architecture is taken from their nodes (read now if any)."""
        if not self.streams_read and clusterfacts.needs_streams(pools, only):
            try:
                self.streams = _get_optional(self.cluster, osstream.KIND, "", osstream.NAME)
            except Forbidden as err:        # an install whose ClusterRole predates the OS streams
                self.streams_problem = (f"cannot read {osstream.KIND} {osstream.NAME} (the pool's OS "
                                        f"stream): {err}; re-apply your overlay (its ClusterRole comes "
                                        "from kustomize/base)")
            self.streams_read = True
        if fresh:
            self._list_nodes()
        return clusterfacts.ClusterFacts(self.streams, None if self.nodes is None else tuple(self.nodes),
                                         tuple(self._everyone(pools).values()), fresh, self.streams_problem)

    def _everyone(self, pools: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
        """Every pool as read, those re-read for this plan in place of theirs: pruning protects what
        any pool uses, and a rollout looks at every pool's selector."""
        return {objects.name(p): p for p in self.seen.pools} | {objects.name(p): p for p in pools}

    def _each(self, pools: list[dict[str, Any]], owned: list[dict[str, Any]], only: Iterable[str],
              hold: bool = True, reread: str | None = None) -> Iterator[PoolPlan]:
        """Plan one pool at a time, in decide_cluster's order: decide it (pure; its rendered
        MachineConfig read first when no annotation records its content), decide it again on its
        nodes' architecture when its build is due, ask the registry about an image it could
        reuse, read the MachineConfig and build material if it still makes a new build, build its
        actions (pure). Without `hold`, a MachineConfig no later pool renders is dropped when the
        next plan is asked for (by then the caller carried this one out): a run holds one pool's
        MachineConfig at a time, and reads each once. No image prunes (`_with_prunes`). `reread`: the
        pool whose objects `owned` holds as read again (a re-plan); what the first read held of it
        is gone if not among them, and is never acted on again (a delete would meet the uid again)."""
        valid = isinstance(self.seen.settings, Settings)     # else every pool is Blocked: read nothing
        everyone = self._everyone(pools)
        fresh = {(o.get("kind"), objects.name(o)) for o in owned}
        view = decision.rollout_view(self.seen.settings, everyone.values(), owned + [
            o for o in self.seen.owned if (o.get("kind"), objects.name(o)) not in fresh
            and (reread is None or not _of(o, reread))])
        scope = decision.in_scope(pools, owned, only)
        last = {decision.rendered_config(e.pool): i for i, e in enumerate(scope) if e.pool is not None}
        from_nodes = clusterfacts.unrecorded(pools, only) if valid else frozenset()
        facts = self._facts(pools, only, from_nodes) if valid else clusterfacts.ClusterFacts()
        due: clusterfacts.ClusterFacts | None = None            # with the nodes, once some build is due
        for i, entry in enumerate(scope):
            if valid and entry.pool is not None:
                self._read_machineconfigs(decision.unknown_content([entry.pool]))
            d = decision.decide_one(self.seen.settings, entry, self.machineconfigs, view, facts, self.now)
            d = self._with_live(d)
            if d.needs_build and entry.name not in from_nodes:
                # its build is due: decided again on its nodes' architecture, not the one recorded
                due = due or self._facts(pools, only, from_nodes | {entry.name})
                d = replace(decision.decide_one(self.seen.settings, entry, self.machineconfigs, view,
                                                 due.with_fresh(from_nodes | {entry.name}), self.now),
                            live=d.live, live_why=d.live_why)
            if d.candidate:
                d = decision.with_lookup(d, self._lookup(d.candidate, d.inputs.build_id))
            if d.needs_build:
                self.read([d.inputs.rendered_config])
                d = self._with_base(d)
            d = self._check_rollout(d)
            self.decided[d.pool_name] = d
            yield actions_table.act(d, self.now, self.machineconfigs.get(d.inputs.rendered_config)
                                if d.needs_build else None, self.material)
            if not hold:
                for name in [n for n in self.machineconfigs if last.get(n, -1) <= i]:
                    del self.machineconfigs[name]

    def _with_live(self, d: decision.Decision) -> decision.Decision:
        """A START that may be a live change: the config the image was built from, the current one
        and the one recorded before (the nodes' config) are read (a GET each, cached), and the node disruption policy once a run (one GET of the
        MachineConfiguration `cluster`; none on a release without policies)."""
        built = decision.built_from(d)
        if built is None:
            return d
        previous = objects.annotations(d.pool).get(A.RENDERED) or built
        self._read_machineconfigs([built, d.inputs.rendered_config, previous])
        return decision.with_live(d, self.machineconfigs.get(built) or decision.MISSING,
                                  self.machineconfigs.get(d.inputs.rendered_config) or decision.MISSING,
                                  self._policy(d.settings.release_version),
                                  self.machineconfigs.get(previous) if previous != built else None)

    def _policy(self, release: str) -> livechange.Policy:
        if self.policy is None:
            if not livechange.has_policies(release):
                self.policy = livechange.LEGACY
            else:
                try:
                    self.policy = livechange.policy_of(_get_optional(
                        self.cluster, livechange.POLICY_KIND, "", livechange.POLICY_NAME))
                except Forbidden as err:
                    self.policy = livechange.policy_of(None, str(err))
        return self.policy

    def _check_rollout(self, d: decision.Decision) -> decision.Decision:
        """With `rollout: machineconfig`, a built pool whose rendered config includes our
        MachineConfig and was not checked yet (`rolloutcheck.due`): that rendered config is read
        (one GET, none when the content digest's read made it already) and, only when its
        osImageURL is not ours, the pool's MachineConfigs (one labelled LIST) to name the winner."""
        if d.rollout is None or d.pool is None or d.transition not in CHECKED_AFTER:
            return d
        ours = d.rollout.ours.get(d.pool_name)
        if not rolloutcheck.due(d.pool, ours):
            return d
        name = decision.rendered_config(d.pool)
        self._read_machineconfigs([name])
        rendered = self.machineconfigs.get(name)
        if not rendered:                    # gone: the pool renders again; checked then
            return d
        listed = (self.cluster.list("MachineConfig", None, rolloutcheck.list_selector(d.pool))
                  if rolloutcheck.needs_selected(d.pool, rendered, ours) else [])
        return replace(d, checked=rolloutcheck.check(d.pool, rendered, ours, listed))

    def _with_prunes(self, plans: list[PoolPlan], pools: list[dict[str, Any]]) -> list[PoolPlan]:
        """Registry deletes are actions of the pool's plan too. What pools and nodes use is
        protected, so every pool (not only those planned) and the nodes are looked at; the nodes
        are listed only when some planned pool's history is longer than --keep-images."""
        if self.keep_images < 0 or not isinstance(self.seen.settings, Settings):
            return plans
        planned = {p.pool for p in plans}
        everyone = self._everyone(pools)
        after = images.pools_after(everyone.values(), plans)
        if not images.pending([p for p in after if objects.name(p) in planned], self.keep_images):
            return plans
        images.add_to(plans, everyone.values(), self._list_nodes(), self.keep_images, self.seen.settings.repo)
        return plans

    def push_auths(self) -> dict[str, Any]:
        """Registry credentials for pruning, from the push secret (read when first needed)."""
        from reconcile.imagebuild import auth
        found = self.seen.settings
        assert isinstance(found, Settings)
        ns, name = settings.secret_location(found.namespace, found.push_secret)
        secret = (self.material.secrets.get(found.push_secret) if self.material else None) \
            or self.cluster.get("Secret", ns, name)           # read once if a build already did
        if secret is None:
            raise auth.AuthError(f"Secret {ns}/{name} not found")
        return auth.auths(secret)

    def plan(self) -> list[PoolPlan]:
        """Every pool's plan, image prunes included, holding every MachineConfig read (diff,
        render and explain show them); `each` is run's."""
        return self._with_prunes(list(self._each(self.seen.pools, self.seen.owned, self.only)),
                                 self.seen.pools)

    def each(self) -> Iterator[PoolPlan]:
        """Every pool's plan, made when asked for: the caller carries each out before it asks for
        the next, which drops what the last one needed. Image prunes need every pool's plan:
        `prune` adds them to the plans once all are made."""
        return self._each(self.seen.pools, self.seen.owned, self.only, hold=False)

    def prune(self, plans: list[PoolPlan]) -> list[PoolPlan]:
        """The prunes of `each`'s plans, added to them (what any pool uses after them is kept)."""
        return self._with_prunes(plans, self.seen.pools)

    def replan(self, pool_name: str) -> PoolPlan | None:
        pool = self.cluster.get("MachineConfigPool", "", pool_name)
        pools = [pool] if pool else []
        owned, _ = _owned_volumes(self.cluster, self.seen.namespace, self.seen.settings, pools, pool_name)
        plans = self._with_prunes(list(self._each(pools, owned, [pool_name], reread=pool_name)), pools)
        return plans[0] if plans else None



