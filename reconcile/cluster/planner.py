"""The planner: what each pool's plan is, from what cluster/observe.py read, reading more only
when a pool needs it (its rendered MachineConfig, the build material, the nodes, the OS streams,
the registry about an image to reuse or a base image's size), each at most once a run."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from reconcile.cluster import Cluster, Forbidden, observe, registry
from reconcile.cluster.observe import Observed
from reconcile.contract import annotations as A
from reconcile.contract import naming, objects
from reconcile.core import decision, desired, images, multiarch, rollout, signgate, transitions
from reconcile.core.actions import PoolPlan
from reconcile.core.actions import table as actions_table
from reconcile.core.node import livechange
from reconcile.core.rollout import check as rolloutcheck
from reconcile.core.storage import disk
from reconcile.imagebuild import auth
from reconcile.imagebuild.platform import clusterfacts, osstream
from reconcile.imagebuild.settings import Settings

#: A mixed pool's transitions whose parts the registry is asked about (core/multiarch.py): its builds
#: are made or followed; a success or its signing comes out of that.
FOLLOWED = frozenset({transitions.Transition.START, transitions.Transition.RETRY,
                      transitions.Transition.PROGRESS})

#: Transitions after which the pool's rendered config is checked for our image.
CHECKED_AFTER = frozenset({transitions.Transition.BUILT, transitions.Transition.EQUIVALENT,
                           transitions.Transition.LIVE})


def _of(obj: dict[str, Any], pool: str) -> bool:
    """Is this object of ours the pool's (by its pool label, or as its rollout MachineConfig)?"""
    return objects.labels(obj).get(naming.POOL_LABEL) == naming.pool_label(pool) or (
        obj.get("kind") == rollout.KIND and objects.name(obj) == rollout.name(pool))


@dataclass(frozen=True)
class RegistryAccess:
    """How the planner reaches the registry (a live run; a snapshot is a simulation and asks none):
    the run's deadline and the CA file trusted besides the system's."""
    deadline: float | None = None
    ca_file: str | None = None


class Planner:
    """Plans from what was observed, reading build material (MachineConfigs, secrets) at most
    once, and re-plans a single pool from a fresh read after a write conflict. Built whole: with
    `registry`, its two registry clients (the push credentials for reuse checks and pruning, the
    pull credentials for the base image's size) are made here; without, both are simulated."""

    def __init__(self, cluster: Cluster, seen: Observed, now: datetime, only: Iterable[str] = (),
                 keep_images: int = -1, registry_access: RegistryAccess | None = None) -> None:
        self.cluster, self.seen, self.now, self.only = cluster, seen, now, only
        #: image pruning: keep the newest N of a pool's images (-1: never prune)
        self.keep_images = keep_images
        #: the registry, for reuse checks and pruning (image deletes); None on a snapshot
        self.registry_client: registry.Client | None = None
        #: the registry with the pull credentials, for the base image's size; None on a snapshot
        self.base_client: registry.Client | None = None
        if registry_access is not None:
            self.registry_client = registry.Client(self.push_auths, registry_access.deadline,
                                                   ca_file=registry_access.ca_file)
            self.base_client = registry.Client(self.pull_auths, registry_access.deadline,
                                               ca_file=registry_access.ca_file)
        # what was read or asked, each at most once a run
        self.machineconfigs: dict[str, Any] = {}
        self.material: desired.Material | None = None
        #: the nodes, metadata only (their labels and annotations): listed once, when first needed
        self.nodes: list[dict[str, Any]] | None = None
        #: the OSImageStream `cluster` (None: absent or not served), read once if some pool is opted in
        self.streams: dict[str, Any] | None = None
        self.streams_read = False
        self.streams_problem = ""
        self.lookups: dict[str, images.Lookup] = {}
        self.bases: dict[tuple[str, str], disk.BaseSize] = {}
        #: each architecture's instance of a base image (a mixed pool's builds), and why not
        self.instances: dict[tuple[str, str], tuple[str, str]] = {}
        #: the last plan's decisions by pool (render prints what they keep)
        self.decided: dict[str, decision.Decision] = {}
        #: the node disruption policy (core/node/livechange.py): read once, when a change may be live
        self.policy: livechange.Policy | None = None

    def _lookup(self, image: str, build_id: str) -> images.Lookup:
        """Does the registry still have an image we would reuse, labelled by our build of this
        build id (the manifest and its config, two GETs)? With signing on and the label ours, also
        its cosign signatures (the signature tag's manifest and each signature's blob), which the
        core verifies (core/signgate.py `verified`). Asked once per run; a failure to ask is an
        answer too (the pool builds, saying so): an optimisation never blocks."""
        key = f"{build_id}={image}"
        if key not in self.lookups:
            if self.registry_client is None:
                self.lookups[key] = images.Lookup(image, True, simulated=True)
            else:
                try:
                    found = images.labelled(image, self.registry_client.labels(image), build_id)
                    signs = isinstance(self.seen.settings, Settings) and self.seen.settings.signs
                    if found.found and signs:
                        found = replace(found, signatures=tuple(self.registry_client.signatures(image) or ()))
                    self.lookups[key] = found
                except registry.RegistryError as err:
                    self.lookups[key] = images.Lookup(image, None, str(err))
        return self.lookups[key]

    def _part(self, part: multiarch.Part, repo: str) -> multiarch.Part:
        """One architecture of a mixed pool: the registry asked about the image its history names
        (reused only if labelled by its build id, `_lookup`), and about its image once there is one
        (its manifest and config: what the index names, `registry.instance`, checked to be of its
        architecture and labelled by its build id). A snapshot run asks nothing: the description is
        made up, and said to be. With signing on, an image found only in the registry is reused
        only if a current key signed it (`signgate.verified`), as a rollback's is."""
        if part.candidate and part.lookup is None:
            # with signing on, reused only if a current key signed it, as any reuse (core/signgate.py)
            part = replace(part, lookup=signgate.verified(self.seen.settings,
                                                          self._lookup(part.candidate, part.build_id)))
        image = part.image(repo)
        if image is None:
            return part
        if self.registry_client is None:
            return replace(part, instance=multiarch.simulated(part, image))
        try:
            found, labels = self.registry_client.instance(image, part.arch)
        except registry.RegistryError as err:
            return replace(part, unread=str(err))
        if labels.get(naming.BUILD_ID_LABEL) != part.build_id:
            return replace(part, unread=f"its image config's {naming.BUILD_ID_LABEL} label is not "
                                        f"{part.build_id}")
        return replace(part, instance=found)

    def _based(self, part: multiarch.Part) -> multiarch.Part:
        """A part whose build is to be made, with its architecture's instance of the base image (a
        GET of the release's list; asked once a run per image and architecture). Not resolved (a
        snapshot, a registry that cannot say): FROM names the list, and buildah picks the instance."""
        key = (part.inputs.base_image, part.arch)
        if key not in self.instances:
            if self.base_client is None:
                self.instances[key] = ("", "a snapshot run does not ask the registry for the instance")
            else:
                try:
                    self.instances[key] = (self.base_client.resolve(*key), "")
                except registry.RegistryError as err:
                    self.instances[key] = ("", f"not resolved: {err}; buildah picks it from the list")
        base, why = self.instances[key]
        return replace(part, base=base, base_why=why, size=self._base_size(*key))

    def _with_base(self, d: decision.Decision) -> decision.Decision:
        """A build that is due, with its base image's size (one GET of the manifest, two for a
        manifest list; asked once a run per image and architecture). A failure to ask is an
        answer too: the build is sized by the defaults, saying so (core/storage/disk.py)."""
        if not d.needs_build or (self.material is not None and self.material.problem):
            return d
        if d.parts:                     # each architecture's build is sized by its own instance
            return d
        return replace(d, base=self._base_size(d.inputs.base_image, d.inputs.arch))

    def _base_size(self, image: str, arch: str) -> disk.BaseSize:
        key = (image, arch)
        if key not in self.bases:
            if self.base_client is None:
                self.bases[key] = disk.BaseSize(key[0], why="a snapshot run does not ask the registry")
            else:
                try:
                    self.bases[key] = disk.BaseSize(key[0], self.base_client.image_size(*key))
                except registry.RegistryError as err:
                    self.bases[key] = disk.BaseSize(key[0], why=str(err))
        return self.bases[key]

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
            self.material = observe.read_material(self.cluster, self.seen.settings, self.seen.configmaps,
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
                self.streams = observe.get_optional(self.cluster, osstream.KIND, "", osstream.NAME)
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
                d = self._with_live(decision.decide_one(self.seen.settings, entry, self.machineconfigs, view,
                                                        due.with_fresh(from_nodes | {entry.name}), self.now))
            if d.candidate:
                d = decision.with_lookup(d, self._lookup(d.candidate, d.inputs.build_id))
            if d.parts and d.transition in FOLLOWED:    # a built pool asks the registry nothing
                d = decision.with_parts(d, tuple(self._part(p, d.settings.repo) for p in d.parts))
            if d.needs_build:
                self.read([d.inputs.rendered_config])
                d = self._with_base(d)
                if d.parts:             # with the pull secret read: each architecture's base instance
                    d = replace(d, parts=tuple(self._based(p) if p.needs_object else p for p in d.parts))
            d = self._check_rollout(d)
            self.decided[d.pool_name] = d
            yield actions_table.act(d, self.now, self.machineconfigs.get(d.inputs.rendered_config)
                                if d.needs_build else None, self.material)
            if not hold:
                for name in [n for n in self.machineconfigs if last.get(n, -1) <= i]:
                    del self.machineconfigs[name]

    def _with_live(self, d: decision.Decision) -> decision.Decision:
        """A START that may be a live change: the config the image was built from, the current one
        and the one recorded before (the nodes' config) are read (a GET each, cached: asked again after
        the architecture's re-decision, it reads nothing more), and the node
        disruption policy once a run (one GET of the MachineConfiguration `cluster`; none on a
        release without policies)."""
        built = decision.built_from(d)
        if built is None:
            return d
        previous = objects.annotations(d.pool).get(A.RENDERED) or built
        self._read_machineconfigs([built, d.inputs.rendered_config, previous])
        mcs = self.machineconfigs
        return decision.with_live(d, mcs[built], mcs[d.inputs.rendered_config],
                                  self._policy(d.settings.release_version),
                                  mcs[previous] if previous != built else None)

    def _policy(self, release: str) -> livechange.Policy:
        if self.policy is None:
            if not livechange.has_policies(release):
                self.policy = livechange.LEGACY
            else:
                try:
                    self.policy = livechange.policy_of(observe.get_optional(
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
        images.add_to(plans, everyone.values(), self._list_nodes(), self.keep_images, self.seen.settings.repo,
                      self.seen.settings.signs)
        return plans

    def push_auths(self) -> dict[str, Any]:
        """Registry credentials for pruning, from the push secret (read when first needed)."""
        found = self.seen.settings
        assert isinstance(found, Settings)
        ns, name = auth.secret_location(found.namespace, found.push_secret)
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
        owned, _ = observe.owned_volumes(self.cluster, self.seen.namespace, self.seen.settings, pools,
                                         pool_name)
        plans = self._with_prunes(list(self._each(pools, owned, [pool_name], reread=pool_name)), pools)
        return plans[0] if plans else None
