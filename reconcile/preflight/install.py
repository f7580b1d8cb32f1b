"""The install checks: the namespace, the CronJob that runs us, the settings, the pull and push
Secrets."""

from __future__ import annotations

from collections.abc import Mapping

from reconcile.contract import annotations as A
from reconcile.contract import objects
from reconcile.contract.problem import Problem
from reconcile.imagebuild import auth, imageref, settings
from reconcile.imagebuild.settings import Settings, SettingsError
from reconcile.preflight.facts import ENFORCE, Facts
from reconcile.preflight.report import APPLY_BASE, FAIL, OK, WARN, Line

#: the CronJob kustomize/base makes, and the image it names until an overlay sets one (a placeholder
#: no registry serves: tests/unit/test_preflight.py holds both to kustomize/base/cronjob.yaml)
CRONJOB = "ocl-reconciler"
PLACEHOLDER_IMAGE = "ocl-reconciler:latest"
#: a container's waiting reasons that say its image cannot be pulled (kubelet's images.go)
PULL_FAILURES = ("ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull")


def check_namespace(f: Facts) -> list[Line]:
    if f.namespace_error:
        return [(WARN, f"cannot read Namespace {f.namespace}: {f.namespace_error}",
                 "the checks below still say whether its objects can be read")]
    if f.namespace_obj is None:
        return [(FAIL, f"Namespace {f.namespace} not found",
                 f"kustomize/base makes it ({APPLY_BASE}), or pass -n with the namespace you use")]
    level = objects.labels(f.namespace_obj).get(ENFORCE)
    return [(OK, f"Namespace {f.namespace} exists (Pod Security enforce: {level or 'unset'})")]


def check_cronjob(f: Facts) -> list[Line]:
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


def check_settings(f: Facts) -> list[Line]:
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
    ns, name = auth.secret_location(f.namespace, ref)
    implied = ref == settings.GLOBAL_PULL_SECRET and not push    # the key is unset: the MCO's default
    where = f"Secret {ns}/{name} ({auth.secret_origin(key, ns, name)})"
    if key in f.secret_errors:
        return (FAIL, f"cannot read {where}: {f.secret_errors[key]}",
                "run preflight as a user who may read it (the permissions line says if the reconciler may)")
    secret = f.secrets.get(key)
    try:
        auth.check_secret(key, name, secret, ns)
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


def check_pull_secret(f: Facts) -> list[Line]:
    s = f.settings
    if not isinstance(s, Settings):
        return []
    pulled = {"the base image": s.base_image, **({"the extensions image": s.extensions_image}
                                                 if s.extensions_image else {})}
    return [_secret(f, "baseImagePullSecretName", s.pull_secret, pulled, push=False)]


def check_push_secret(f: Facts) -> list[Line]:
    s = f.settings
    if not isinstance(s, Settings):
        return []
    return [_secret(f, "finalImagePushSecretName", s.push_secret, {"finalImagePullspec": s.pullspec},
                    push=True)]
