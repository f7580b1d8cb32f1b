"""The reading half of `ocl-reconcile preflight` (preflight/checklist.py runs the checks): everything read
of a live cluster as the caller, read-only, into `Facts`. Permissions are asked of the server with
SelfSubjectAccessReview under impersonation of our ServiceAccount (`Impersonate-User`, which the
server answers as that account, with its groups) where the caller may impersonate it, else for the
caller; the build object the planner would make is created with `dryRun=All` the same way, so that
the server's own admission (PodSecurity, ServiceAccount, SCC on OpenShift) judges it. A failed read
is a fact for its check; only an unreachable server or refused credentials end the command."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from reconcile.cluster import (
    ClusterError,
    NotFound,
    Unauthorized,
    Unreachable,
    live,
    notices,
    observe,
    registry,
)
from reconcile.cluster.planner import Planner
from reconcile.contract import admission, objects
from reconcile.core import decision, desired, images, storage, transitions
from reconcile.core.rollout import check as rolloutcheck
from reconcile.imagebuild import auth, containersconf, settings, signing
from reconcile.imagebuild.settings import Settings
from reconcile.preflight.access import BUILD_ACCOUNT, BUILDER_SCC, builder_account
from reconcile.preflight.facts import DryRun, Facts
from reconcile.preflight.install import CRONJOB
from reconcile.preflight.permissions import RECONCILER_ACCOUNT, Asked, needs
from reconcile.preflight.pools import ROLLOUT_PARAMS, ROLLOUT_PARAMS_NS

REVIEWS = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"
WHOAMI = "/apis/authentication.k8s.io/v1/selfsubjectreviews"
CLUSTER_VERSION = ("config.openshift.io/v1", "clusterversions", "version")
POLICIES = "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies"


def _read(step: Any) -> tuple[Any, str]:
    """(value, "") or (None, why it could not be read); an unreachable server is not a check's."""
    try:
        return step(), ""
    except (Unreachable, Unauthorized):
        raise
    except ClusterError as err:
        return None, str(err)


def impersonating(cluster: live.LiveCluster, user: str) -> live.LiveCluster:
    """The same connection, every request made as `user` (the server checks that we may)."""
    from kubernetes import client
    api = client.ApiClient(cluster.api.configuration, header_name="Impersonate-User", header_value=user)
    return live.LiveCluster(api, cluster.deadline)


def may(cluster: live.LiveCluster, namespace: str, verb: str, group: str, resource: str,
        name: str = "") -> tuple[bool, str]:
    """A SelfSubjectAccessReview: (allowed, the server's reason)."""
    res, _, sub = resource.partition("/")
    review = {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
              "spec": {"resourceAttributes": {"namespace": namespace, "verb": verb, "group": group,
                                              "resource": res, "subresource": sub, "name": name}}}
    status = (cluster.request("POST", REVIEWS, body=review) or {}).get("status") or {}
    return bool(status.get("allowed")), str(status.get("reason") or status.get("evaluationError") or "")


def whoami(cluster: live.LiveCluster) -> str:
    """The caller's user name (SelfSubjectReview, GA in Kubernetes 1.28); "" if not served. The
    first request: an unreachable server ends the command here."""
    try:
        found = cluster.request("POST", WHOAMI, body={"apiVersion": "authentication.k8s.io/v1",
                                                      "kind": "SelfSubjectReview"}) or {}
    except (Unreachable, Unauthorized):
        raise
    except ClusterError:
        return ""
    return str(((found.get("status") or {}).get("userInfo") or {}).get("username") or "")


def _account(namespace: str, name: str) -> str:
    return f"system:serviceaccount:{namespace}:{name}"


def _as(cluster: live.LiveCluster, caller: str, namespace: str, name: str) -> live.LiveCluster | None:
    """The connection to ask as ServiceAccount namespace/name: the caller's own if it is that
    account, an impersonating one if the caller may, else None."""
    if caller == _account(namespace, name):
        return cluster
    answer, _ = _read(lambda: may(cluster, namespace, "impersonate", "", "serviceaccounts", name))
    return impersonating(cluster, _account(namespace, name)) if answer and answer[0] else None


def gather(cluster: live.LiveCluster, namespace: str, ca_file: str | None, now: datetime) -> Facts:
    f = Facts(namespace, caller=whoami(cluster), registry_ca=ca_file)
    f.namespace_obj, f.namespace_error = _read(lambda: _get(cluster, "/api/v1/namespaces", namespace))
    _cronjob(cluster, f)
    seen, f.settings_error = _read(lambda: observe.observe(cluster, namespace))
    if seen is not None:
        f.settings, f.pools, f.owned, f.named = seen.settings, seen.pools, seen.owned, seen.named
    _secrets(cluster, f)
    reconciler = _as(cluster, f.caller, namespace, RECONCILER_ACCOUNT)
    f.impersonated = reconciler is not None and reconciler is not cluster
    _permissions(reconciler or cluster, f)
    _builder(cluster, f)
    _registry(cluster, f)
    f.cluster_version, f.cluster_version_error = _read(lambda: _get(
        cluster, live.api_prefix(CLUSTER_VERSION[0]) + "/" + CLUSTER_VERSION[1], CLUSTER_VERSION[2]))
    f.machineosconfigs, f.machineosconfigs_error = _read(lambda: _machineosconfigs(cluster))
    policy, f.selector_policy_error = _read(lambda: _get(cluster, POLICIES, admission.SELECTOR_POLICY))
    f.selector_policy = None if f.selector_policy_error else policy is not None
    if seen is not None and isinstance(seen.settings, Settings) and seen.settings.machineconfig_rollout:
        f.rollout_params_read = True            # one GET, as the caller
        f.rollout_params, f.rollout_params_error = _read(lambda: _get(
            cluster, f"/api/v1/namespaces/{ROLLOUT_PARAMS_NS}/configmaps", ROLLOUT_PARAMS))
    if seen is not None and isinstance(seen.settings, Settings) and seen.settings.persistent_storage and \
            seen.settings.builder_type == settings.CUSTOM_POD_BUILDER:
        # one metadata-only LIST, as a run makes it: as our ServiceAccount where we may impersonate it
        classes, error = _read(lambda: observe.storage_classes(reconciler or cluster))
        f.storage_classes = classes or storage.Classes(problem=f"cannot list StorageClasses: {error}")
    if seen is not None and isinstance(seen.settings, Settings):
        f.image_policies, f.image_policies_error = _read(lambda: _image_policies(cluster))
        _rendered_policies(cluster, f)
        _plan(cluster, reconciler or cluster, seen, now, f)
        _architectures(cluster, f)
    return f


def _architectures(cluster: live.LiveCluster, f: Facts) -> None:
    """With a mixed pool only: the nodes (one LIST) and, with the pull Secret's credentials, which
    architectures the images its builds pull offer (a GET of each manifest, and of an image's config)."""
    if not f.architectures:
        return
    found, f.nodes_error = _read(lambda: cluster.list("Node", None))
    f.nodes = None if f.nodes_error else list(found or [])
    s, secret = f.settings, f.secrets.get("baseImagePullSecretName")
    assert isinstance(s, Settings)
    wanted = sorted({base for _, base in f.architectures.values()}
                    | ({s.buildah_image} if s.builder_type == settings.CUSTOM_POD_BUILDER else set()))
    try:
        auths = auth.auths(secret) if secret is not None else None
    except auth.AuthError:
        auths = None
    for image in wanted:
        if auths is None:
            f.platforms[image] = "the pull Secret could not be read (the pull-secret line)"
            continue
        client = registry.Client(lambda: auths, cluster.deadline, ca_file=f.registry_ca)
        try:
            f.platforms[image] = client.platforms(image)
        except registry.RegistryError as err:
            f.platforms[image] = str(err)


def _image_policies(cluster: live.LiveCluster) -> list[dict[str, Any]]:
    """The ClusterImagePolicies, as the caller (a cluster that does not serve them has none)."""
    try:
        return cluster.list("ClusterImagePolicy", None)
    except NotFound:
        return []


def _rendered_policies(cluster: live.LiveCluster, f: Facts) -> None:
    """With signing on and a policy covering us: each opted-in pool's rendered config's policy.json
    (a GET of each rendered MachineConfig, as the caller)."""
    s = f.settings
    if not isinstance(s, Settings) or not s.signs or not signing.covering(f.image_policies or [], s.repo):
        return
    for pool in f.pools:
        if not decision.opted_in(pool):
            continue
        name = objects.name(pool)
        mc, error = _read(lambda p=pool: cluster.get("MachineConfig", "", decision.rendered_config(p)))
        if error or mc is None:
            f.rendered_policy_errors[name] = error or "not found"
            continue
        try:
            f.rendered_policies[name] = containersconf.from_machineconfig(mc).get("policy.json", "")
        except containersconf.UnreadableFile as err:
            f.rendered_policy_errors[name] = str(err)


def _cronjob(cluster: live.LiveCluster, f: Facts) -> None:
    """The CronJob, as the caller, and the Pods of its Jobs (by its Pod template's labels: one LIST)."""
    collection = f"/apis/batch/v1/namespaces/{f.namespace}/cronjobs"
    f.cronjob, f.cronjob_error = _read(lambda: _get(cluster, collection, CRONJOB))
    job = ((f.cronjob or {}).get("spec") or {}).get("jobTemplate") or {}
    template = (job.get("spec") or {}).get("template")
    labels = ((template or {}).get("metadata") or {}).get("labels") or {}
    if labels:
        pods, _ = _read(lambda: cluster.list("Pod", f.namespace, dict(labels)))
        f.cronjob_pods = list(pods or [])


def _get(cluster: live.LiveCluster, collection: str, name: str) -> dict[str, Any] | None:
    try:
        return cluster.request("GET", f"{collection}/{name}")
    except NotFound:
        return None


def _secrets(cluster: live.LiveCluster, f: Facts) -> None:
    """The pull and push Secrets the settings name, read as the caller."""
    if not isinstance(f.settings, Settings):
        return
    for key, ref in (("baseImagePullSecretName", f.settings.pull_secret),
                     ("finalImagePushSecretName", f.settings.push_secret)):
        ns, name = auth.secret_location(f.namespace, ref)
        secret, error = _read(lambda ns=ns, name=name: cluster.get("Secret", ns, name))
        if error:
            f.secret_errors[key] = error
        else:
            f.secrets[key] = secret


def _permissions(asker: live.LiveCluster, f: Facts) -> None:
    asked = []
    for need in needs(f.settings, f.namespace):
        answer, error = _read(lambda n=need: may(asker, n.namespace, n.verb, n.rule.group, n.rule.resource,
                                                 n.name))
        if error:
            f.access_error = error
            return
        asked.append(Asked(need, answer[0]))
    f.access = asked


def _builder(cluster: live.LiveCluster, f: Facts) -> None:
    """The build's ServiceAccount, and (ours) whether it may use the SCC, asked as it."""
    pods = not isinstance(f.settings, Settings) or f.settings.builder_type == settings.CUSTOM_POD_BUILDER
    name = builder_account() if pods else BUILD_ACCOUNT
    f.builder_account, f.builder_account_error = _read(lambda: _get(
        cluster, f"/api/v1/namespaces/{f.namespace}/serviceaccounts", name))
    if not pods or f.builder_account is None:
        return
    builder = _as(cluster, f.caller, f.namespace, name)
    if builder is None:
        f.builder_scc_error = f"you may not impersonate ServiceAccount {f.namespace}/{name} to ask"
        return
    answer, f.builder_scc_error = _read(lambda: may(builder, f.namespace, "use", "security.openshift.io",
                                                    "securitycontextconstraints", BUILDER_SCC))
    f.builder_scc = answer[0] if answer else None


def _registry(cluster: live.LiveCluster, f: Facts) -> None:
    """`GET /v2/` of the pullspec's registry with the push Secret's credentials."""
    s = f.settings
    secret = f.secrets.get("finalImagePushSecretName")
    if not isinstance(s, Settings) or secret is None:
        return
    try:
        auths = auth.auths(secret)
    except auth.AuthError:
        return                                  # the push-secret line says why
    client = registry.Client(lambda: auths, cluster.deadline, ca_file=f.registry_ca)
    try:
        f.registry_url = client.ping(s.repo)
    except registry.RegistryError as err:
        f.registry_error = str(err)


def _machineosconfigs(cluster: live.LiveCluster) -> list[dict[str, Any]] | None:
    if not cluster.serves(*notices.MACHINEOSCONFIGS):
        return None
    api_version, plural = notices.MACHINEOSCONFIGS
    found = cluster.request("GET", f"{live.api_prefix(api_version)}/{plural}") or {}
    return list(found.get("items") or [])


def _plan(cluster: live.LiveCluster, asker: live.LiveCluster, seen: observe.Observed, now: datetime,
          f: Facts) -> None:
    """What the next run would do for each pool (the planner, no registry, no writes), and the
    first buildable pool's build object created with dryRun=All (as our ServiceAccount if we may)."""
    planner = Planner(cluster, seen, now)
    plans, f.plan_error = _read(planner.plan)
    if f.plan_error:
        return
    blocked = {p.pool: p.message for p in plans or [] if p.blocked}
    for name, d in sorted(planner.decided.items()):
        if d.parts:
            f.architectures[name] = (tuple(p.arch for p in d.parts), d.inputs.base_image)
        # decided to build but blocked by what the build needs (a Secret): as the run records it
        f.decisions[name] = ((d.transition.name, d.problem) if d.problem or name not in blocked
                             else (transitions.Transition.BLOCKED.name, blocked[name]))
    f.rollouts = rolloutcheck.problems(images.pools_after(seen.pools, plans or []), seen.owned)
    buildable = [d for _, d in sorted(planner.decided.items())
                 if d.inputs is not None and d.transition is not transitions.Transition.BLOCKED
                 and d.pool is not None and decision.opted_in(d.pool)]
    if not buildable:
        f.dry_run_skipped = "no opted-in pool can be built"
        return
    d = buildable[0]
    _, error = _read(lambda: planner.read([d.inputs.rendered_config]))
    material = planner.material
    why = error or (material.problem if material is not None and material.problem else "")
    if why:
        f.dry_run_skipped = why
        return
    try:
        objs = desired.objects(seen.settings, d.pool, d.inputs, d.builder, planner.machineconfigs.get(
            d.inputs.rendered_config) or decision.MISSING, material, d.attempt)
    except desired.Blocked as err:
        f.dry_run_skipped = str(err)
        return
    build = objs[-1]
    path = live.path_of(build["kind"], objects.namespace(build))
    try:
        asker.request("POST", path, [("dryRun", "All")], build)
        f.dry_run = DryRun(build["kind"], objects.name(build), d.pool_name)
    except (Unreachable, Unauthorized):
        raise
    except ClusterError as err:
        admitted = err.status == 409 and "AlreadyExists" in str(err)      # admission ran before storage
        f.dry_run = DryRun(build["kind"], objects.name(build), d.pool_name,
                             "" if admitted else str(err), err.status)
        if not admitted:        # the run's create would be refused the same way: the pool is Blocked
            f.decisions[d.pool_name] = (transitions.Transition.BLOCKED.name,
                                        f"create {build['kind']} {objects.name(build)}: {err}")
