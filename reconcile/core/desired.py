"""What a build of a pool's current rendered MachineConfig needs: its inputs, id and objects."""

from __future__ import annotations

import base64
import dataclasses
import functools
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from reconcile.contract import annotations as A
from reconcile.contract import naming
from reconcile.contract.objects import valid_name
from reconcile.core import storage
from reconcile.core.storage import disk
from reconcile.imagebuild import (
    auth,
    builders,
    buildinputs,
    containersconf,
    dockerlint,
    encoding,
    proxy,
    templates,
)
from reconcile.imagebuild.builders.base import BuildContext
from reconcile.imagebuild.platform import architecture, clusterfacts
from reconcile.imagebuild.settings import CUSTOM_POD_BUILDER, STORAGE_EMPTYDIR, Settings

_ARG_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


class Blocked(Exception):
    """A pool cannot be built as things are; the message says what to fix."""


@dataclass(frozen=True)
class BuildInputs:
    """Every input a build depends on; hashed into the build id. The rendered config is named by
    the objects and the image's tag, but the id hashes what it holds (`content`,
    imagebuild/imagecontent.py), not its name, which changes with our own osImageURL."""
    pool: str
    rendered_config: str
    base_image: str
    extensions_image: str
    release_version: str
    pullspec: str
    builder_type: str
    custom_dockerfile: str
    pull_secret: str
    push_secret: str
    rebuild_token: str
    content: str
    #: the architecture of the pool's nodes ("" while it has none: no node selector)
    arch: str = ""
    #: the OS stream the base and extensions images are of ("": the cluster-wide default)
    os_stream: str = ""
    #: the image the build runs in (the custom-pod-builder's; "" for an OpenShift Build, whose
    #: builder image is the cluster's)
    builder_image: str = ""

    @functools.cached_property
    def build_id(self) -> str:
        return naming.build_id({k: v for k, v in asdict(self).items() if k != "rendered_config"})



#: BuildInputs fields that earlier versions' build ids did not hash.
_PLATFORM_FIELDS = ("arch", "os_stream", "builder_image")


def legacy_build_ids(inp: BuildInputs, settings: Settings) -> tuple[str, ...]:
    """The ids earlier versions gave the same inputs, so that a pool they built keeps its image
    after an upgrade: before the platform fields (architecture, OS stream, builder image: they took
    the base and extensions images from the ConfigMap), and before the content digest (they hashed
    the rendered config's name)."""
    values = {k: v for k, v in asdict(inp).items() if k not in _PLATFORM_FIELDS}
    values.update(base_image=settings.base_image, extensions_image=settings.extensions_image)
    return (naming.build_id({k: v for k, v in values.items() if k != "rendered_config"}),
            naming.build_id({k: v for k, v in values.items() if k != "content"}))


def rebuild_token(pool_annotations: Mapping[str, str]) -> str:
    """The rebuild request in force: the newest request, or the one already handled, so removing
    a handled request does not start a build."""
    return pool_annotations.get(A.REBUILD) or pool_annotations.get(A.REBUILD_HANDLED) or ""


def inputs(settings: Settings, pool: Mapping[str, Any], content: str | None,
           facts: clusterfacts.ClusterFacts | None = None) -> BuildInputs:
    """`content`: the image content digest of the pool's rendered config (None: it could not be
    read); `facts`: the OS streams and nodes (imagebuild/platform/clusterfacts.py)."""
    md = pool.get("metadata") or {}
    name = md.get("name", "")
    if not _LABEL_VALUE.match(naming.pool_label(name)):
        raise Blocked(f"MachineConfigPool {name}: the name cannot be a label value "
                      "(characters of [A-Za-z0-9-_.])")
    custom = settings.custom_dockerfiles.get(name, "")
    try:
        dockerlint.check(custom)
    except dockerlint.DockerfileError as err:
        raise Blocked(f"ConfigMap on-cluster-build-custom-dockerfile: key {name!r}: {err}") from None
    rendered = ((pool.get("spec") or {}).get("configuration") or {}).get("name") or ""
    if not rendered:
        raise Blocked(f"MachineConfigPool {name}: spec.configuration.name is empty; "
                      "no rendered MachineConfig to build yet")
    if not valid_name(rendered):    # the pool's CRD takes any string; a message takes one line
        raise Blocked(f"MachineConfigPool {name}: spec.configuration.name {rendered!r} is not the name "
                      "of a MachineConfig")
    if content is None:
        raise Blocked(f"MachineConfig {rendered} not found")
    try:
        facts = facts or clusterfacts.ClusterFacts()
        stream, arch = clusterfacts.stream(pool, facts), clusterfacts.arch(pool, facts)
    except clusterfacts.Unfit as err:
        raise Blocked(str(err)) from None
    pod_builder = settings.builder_type == CUSTOM_POD_BUILDER
    return BuildInputs(
        pool=name, rendered_config=rendered,
        base_image=stream.os_image if stream else settings.base_image,
        extensions_image=stream.extensions_image if stream else settings.extensions_image,
        os_stream=stream.name if stream else "", arch=arch,
        builder_image=settings.buildah_image if pod_builder else "",
        release_version=settings.release_version,
        pullspec=settings.pullspec, builder_type=settings.builder_type,
        custom_dockerfile=custom,
        pull_secret=settings.pull_secret, push_secret=settings.push_secret,
        rebuild_token=rebuild_token(md.get("annotations") or {}), content=content,
    )


@dataclass(frozen=True)
class Names:
    dockerfile: str
    machineconfig: str
    build: str
    pull_auth: str
    push_auth: str


def names(inp: BuildInputs) -> Names:
    bid = inp.build_id
    return Names(*(naming.object_name(role, inp.pool, bid)
                   for role in ("dockerfile", "mc", "build", "pull", "push")))


@dataclass(frozen=True)
class Material:
    """What a new build needs beyond the settings and the MachineConfig, read only when one is
    due: the pull and push Secrets (by name) and the labelled build inputs."""
    secrets: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    inputs: buildinputs.Inputs = field(default_factory=buildinputs.Inputs)
    problem: str | None = None          # blocks every new build (bad secret, clashing inputs)
    proxy_env: tuple[tuple[str, str], ...] = ()    # the cluster Proxy's settings
    trust_bundle: str | None = None                # the cluster's additional CA bundle
    #: the StorageClasses, read with `buildStorage: persistent` (None: not read)
    classes: storage.Classes | None = None


#: What a mixed pool's record names (core/multiarch.py): its image index, which is no Kubernetes object.
INDEX_KIND = "ImageIndex"


def build_name(inp: BuildInputs, attempt: int = 1, build_id: str | None = None) -> str:
    """The build object of an attempt: the first keeps the plain name, retries are numbered.
    `build_id`: another id than the inputs' (the one an earlier version gave them). A mixed pool's
    inputs name its index (`ocl-index-...`): its builds are those of each architecture."""
    if architecture.mixed(inp.arch):
        return naming.object_name("index", inp.pool, build_id or inp.build_id)
    role = "build" if attempt <= 1 else f"build{attempt}"
    return naming.object_name(role, inp.pool, build_id or inp.build_id)


def build_ref(builder: Any, namespace: str, inp: BuildInputs, attempt: int = 1,
              build_id: str | None = None) -> str:
    kind = INDEX_KIND if architecture.mixed(inp.arch) else builder.kind
    return f"{kind}/{namespace}/{build_name(inp, attempt, build_id)}"


def image_labels(inp: BuildInputs) -> list[dict[str, str]]:
    """image-labels.yaml's, then our build id (not an input: a hash of them), which a reuse checks
    in the image's config before reusing it (docs/contract.md, "Image reuse")."""
    values = asdict(inp)
    return [{"name": row["name"], "value": values[row["input"]]}
            for row in templates.table("image-labels.yaml")
            if values[row["input"]] or not row.get("optional")] + [       # optional: left out when empty
        {"name": naming.BUILD_ID_LABEL, "value": inp.build_id}]


def os_content(inp: BuildInputs, machineconfig: Mapping[str, Any] | None) -> dict[str, Any]:
    """What the MachineConfig asks of the image itself: extensions and a kernel type (kernel
    arguments are not image content: the node applies them). Raises Blocked."""
    spec = (machineconfig or {}).get("spec") or {}
    table = templates.table("extensions.yaml")
    extensions = list(spec.get("extensions") or [])
    kernel_type = spec.get("kernelType") or "default"
    unknown = [e for e in extensions if e not in table["extensions"]]
    if unknown:
        shown = ", ".join(e if valid_name(e) else repr(e) for e in unknown)     # "" or a newline: quoted
        raise Blocked(f"MachineConfig {inp.rendered_config}: spec.extensions: unknown extension(s) {shown} "
                      f"(supported: {', '.join(sorted(table['extensions']))})")
    if kernel_type not in table["kernelTypes"]:
        raise Blocked(f"MachineConfig {inp.rendered_config}: unknown kernelType {kernel_type!r} "
                      f"(supported: {', '.join(table['kernelTypes'])})")
    packages = [p for e in extensions for p in table["extensions"][e]]
    kernel = table["kernelTypes"][kernel_type]
    if (packages or kernel) and not inp.extensions_image:
        needs = " and ".join(n for n in (f"extensions {', '.join(extensions)}" if packages else "",
                                         f"kernelType {kernel_type}" if kernel else "") if n)
        raise Blocked(f"MachineConfig {inp.rendered_config} needs {needs}, but ConfigMap "
                      "machine-config-osimageurl has no 'baseOSExtensionsContainerImage'")
    return {"extensions": extensions, "packages": packages, "kernel": kernel, "kernel_type": kernel_type,
            "extensions_image": inp.extensions_image}


#: Build arguments every Dockerfile has without an ARG line (Docker's and buildah's predefined ARGs).
PREDEFINED_ARGS = frozenset(p for n in ("HTTP_PROXY", "HTTPS_PROXY", "FTP_PROXY", "NO_PROXY", "ALL_PROXY")
                            for p in (n, n.lower()))


def dockerfile(inp: BuildInputs, inputs: buildinputs.Inputs | None = None,
               machineconfig: Mapping[str, Any] | None = None, base: str = "") -> str:
    """The Dockerfile; every other build arg the build passes (e.g. SSL_CERT_FILE of an internal-ca
    input) is declared with ARG in the stage whose RUN steps use it, or buildah ignores it. `base`:
    the image FROM names, when not the inputs' base image (one architecture's instance of it, by
    digest: core/multiarch.py); the build id and labels still name the inputs' own."""
    inputs = inputs or buildinputs.Inputs()
    build_args = sorted({e["name"] for e in inputs.env} - PREDEFINED_ARGS)
    bad = [a for a in build_args if not _ARG_NAME.match(a)]
    if bad:         # names come from manifests/build-inputs.yaml, but a Dockerfile line is no place to guess
        raise Blocked(f"Dockerfile for pool {inp.pool}: build arg name {bad[0]!r} is not a valid name")
    try:
        return templates.render_text(
            "Dockerfile.j2", pool=inp.pool, rendered_config=inp.rendered_config,
            base_image=base or inp.base_image, image_labels=image_labels(inp), build_args=build_args,
            input_types=sorted(inputs.types), input_mounts=inputs.mounts,
            custom_content=inp.custom_dockerfile.strip("\n"), **os_content(inp, machineconfig))
    except templates.TemplateValueError as err:
        raise Blocked(f"Dockerfile for pool {inp.pool}: {err}") from None


def _auth_secret(name: str, configured: str, role: str, material: Material,
                 common: Mapping[str, Any]) -> dict[str, Any] | None:
    """Our own copy of the registry auth when the configured secret is legacy, inputs merge, or it
    lives in another namespace (the global pull secret), where no build can mount it."""
    source = material.secrets.get(configured)
    extras = material.inputs.merge.get(role, ())
    if source is None or not ("/" in configured or auth.needs_own(source, extras)):
        return None
    try:
        data = auth.merged(source, extras)
    except auth.AuthError as err:
        raise Blocked(str(err)) from None
    return templates.render_object("secret-auth.yaml.j2", name=name, data=templates.Opaque(data),
                                   source=configured, **common)


def default_placement(settings: Settings, builder: Any) -> storage.Placement:
    """An emptyDir, sized by the defaults: a build whose base's size and storage nobody asked about."""
    return storage.Placement(disk.plan(settings, None, STORAGE_EMPTYDIR,
                                       builders.storage_driver(builder)))


def _encoded(machineconfig: Mapping[str, Any], inp: BuildInputs) -> str:
    """The rendered MachineConfig encoded for its ConfigMaps. Raises Blocked."""
    config = (machineconfig.get("spec") or {}).get("config") if isinstance(machineconfig, Mapping) else None
    if not isinstance(config, Mapping):
        raise Blocked(f"MachineConfig {inp.rendered_config}: spec.config is missing or not a JSON object")
    encoded = encoding.encode(machineconfig)
    if len(encoded) > encoding.CEILING:
        raw = len(encoding.json_bytes(machineconfig))
        raise Blocked(f"MachineConfig {inp.rendered_config}: encoded size {len(encoded)} bytes "
                      f"({raw} bytes of JSON) exceeds the ceiling of {encoding.CEILING} bytes "
                      f"({-(-encoding.CEILING // encoding.PART_SIZE)} ConfigMaps)")
    return encoded

def objects(settings: Settings, pool: Mapping[str, Any], inp: BuildInputs, builder: Any,
            machineconfig: Mapping[str, Any], material: Material | None = None,
            attempt: int = 1, placement: storage.Placement | None = None,
            tag: str = "", runs_on: str = "", base: str = "") -> list[dict[str, Any]]:
    """The ConfigMaps, our auth Secrets where needed, and the build object, in creation order;
    `placement`: its storage and disk (core/storage/; default: `default_placement`); `tag`: where
    the image is pushed (default `<repo>:<rendered config>`; one architecture's build of a mixed
    pool adds `-<arch>`, core/multiarch.py); `runs_on`: the architecture of the node it runs on, when
    not the one it builds for (emulatedArchitectures); `base`: the image FROM names when not the
    inputs' base (`dockerfile`). The build object records its disk figures and its storage. Raises
    Blocked."""
    material = material or Material()
    placement = placement or default_placement(settings, builder)
    encoded = _encoded(machineconfig, inp)
    n = names(inp)
    common = dict(namespace=settings.namespace, labels=naming.our_labels(inp.pool, inp.build_id),
                  annotations=naming.our_annotations(inp.rendered_config, wave=0),
                  owner=naming.owner_reference(pool))
    proxy_name = naming.object_name("proxy", inp.pool, inp.build_id)
    inputs, trust = _with_trust_bundle(inp, build_inputs(builder, material, proxy_name), material, common)
    proxy_secret = [s for s in proxy_env_secret(proxy_name, builder, material, common)
                    if any(e.get("valueFrom", {}).get("secretKeyRef", {}).get("name") == proxy_name
                           for e in inputs.env)]
    dockerfile_cm = templates.render_object(
        "configmap.yaml.j2", name=n.dockerfile,
        data={"Dockerfile": dockerfile(inp, inputs, machineconfig, base)}, **common)
    mc_cms = [templates.render_object(
        "configmap.yaml.j2", data={key: templates.Opaque(value)}, **common,
        name=n.machineconfig if i == 0 else naming.object_name(f"mc{i}", inp.pool, inp.build_id))
        for i, (key, value) in enumerate(encoding.parts(encoded).items())]
    try:
        containers = containersconf.from_machineconfig(machineconfig) if builder.CONTAINERS_CONF else {}
    except containersconf.UnreadableFile as err:
        raise Blocked(f"MachineConfig {inp.rendered_config}: {err}") from None
    containers_cm = [templates.render_object(
        "configmap.yaml.j2", name=naming.object_name("containers", inp.pool, inp.build_id),
        data=containers, **common)] if containers else []
    secrets = [s for s in (_auth_secret(n.pull_auth, inp.pull_secret, "pull", material, common),
                           _auth_secret(n.push_auth, inp.push_secret, "push", material, common)) if s]
    own = {s["metadata"]["name"] for s in secrets}
    build_annotations = dict(naming.our_annotations(inp.rendered_config, wave=1), **{A.ATTEMPT: str(attempt)},
                             **({A.BUILDER_IMAGE: inp.builder_image} if inp.builder_image else {}),
                             **({A.DISK: placement.disk.figures} if placement.disk.figures else {}),
                             **({A.BUILD_STORAGE: placement.record} if placement.record else {}))
    ctx = BuildContext(**dict(common, annotations=build_annotations),
        pool=inp.pool, rendered_config=inp.rendered_config, name=build_name(inp, attempt),
        tag=tag or f"{settings.repo}:{inp.rendered_config}", dockerfile_configmap=n.dockerfile,
        machineconfig_configmaps=tuple(cm["metadata"]["name"] for cm in mc_cms),
        pull_secret=n.pull_auth if n.pull_auth in own else inp.pull_secret,
        push_secret=n.push_auth if n.push_auth in own else inp.push_secret,
        buildah_image=settings.buildah_image,
        input_env=inputs.env, input_mounts=inputs.mounts,
        containers_configmap=containers_cm[0]["metadata"]["name"] if containers_cm else None,
        containers_files=tuple(sorted(containers)),
        # one build object, of one architecture (a mixed pool's: one of these each, core/multiarch.py)
        node_selector=architecture.node_selector(runs_on or inp.arch),
        platform=f"linux/{inp.arch}" if runs_on and runs_on != inp.arch else "",
        resources=disk.resources(settings, placement.disk), deadline_seconds=settings.build_timeout,
        storage_claim=placement.claim, storage_mount=storage.MOUNT if placement.claim else "")
    # immutable and content-addressed: never patched, replaced when their hash is not the one wanted
    sealed = (dockerfile_cm, *mc_cms, *trust, *containers_cm, *secrets, *proxy_secret)
    return [*(naming.seal(o) for o in sealed), builder.render(ctx)]


def build_inputs(builder: Any, material: Material, proxy_secret: str = "") -> buildinputs.Inputs:
    """The labelled inputs as this builder can pass them, plus the cluster Proxy's env (a labelled
    `proxy` input wins where both set a variable).

    A Proxy value with credentials (`http://user:password@...`) never goes into a manifest, which
    `render` prints for Argo CD to apply: the build Pod takes it from `proxy_secret` (a Secret of
    ours, `proxy_env_secret`); an OpenShift Build gets none, as its build controller gives the build
    Pod the cluster Proxy itself (openshift/openshift-controller-manager build/defaults;
    docs/openshift-build.md), and says so in the pool's message.

    A builder that takes env by value only (an OpenShift Build: `dockerStrategy.buildArgs` ignores
    `valueFrom`, openshift/openshift-docs modules/builds-strategy-docker-build-arguments.adoc) cannot
    get an env var from a Secret or ConfigMap key without its value in the manifest: such an input
    is skipped, said in the pool's message, and does not displace the cluster Proxy's value. A
    mount path the builder's own Pod uses blocks the pool, naming the input. Raises Blocked."""
    inputs = material.inputs
    for m in inputs.mounts:
        path = m.path.rstrip("/") or "/"
        if path in builder.RESERVED_MOUNTS or (path + "/").startswith(builder.RESERVED_UNDER):
            raise Blocked(f"build input {m.kind}/{m.source}: mount path {m.path} is one the {builder.kind}'s "
                          "own Pod uses (OpenShift's build controller would leave the Build New with "
                          "CannotCreateBuildPodSpec, or its builder refuse the RUN steps); choose another "
                          "path for it")
    if not builder.ENV_BY_REFERENCE:
        by_ref = [e for e in inputs.env if "valueFrom" in e]
        skipped = tuple(f"skipped env {e['name']} from {_source(e)}: {builder.kind} build args take "
                        f"values only, and a referenced value never goes into a manifest" for e in by_ref)
        inputs = dataclasses.replace(inputs, env=tuple(e for e in inputs.env if "valueFrom" not in e),
                                     skipped=inputs.skipped + skipped)
    taken = {e["name"] for e in inputs.env}
    env, skipped = list(inputs.env), list(inputs.skipped)
    for k, v in material.proxy_env:
        if k in taken:
            continue
        if not proxy.credentialed(v):
            env.append({"name": k, "value": v})
        elif builder.ENV_BY_REFERENCE:
            env.append({"name": k, "valueFrom": {"secretKeyRef": {"name": proxy_secret, "key": k}}})
        else:
            skipped.append(f"skipped env {k} from the cluster Proxy: it holds credentials, and "
                           f"{builder.kind} build args take values only; OpenShift's build controller "
                           "gives the build Pod the cluster Proxy itself")
    return dataclasses.replace(inputs, env=tuple(env), skipped=tuple(skipped))


def proxy_env_secret(name: str, builder: Any, material: Material,
                     common: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The Secret of ours the build Pod takes the cluster Proxy's credentialed values from."""
    data = {k: base64.b64encode(v.encode()).decode() for k, v in material.proxy_env if proxy.credentialed(v)}
    if not data or not builder.ENV_BY_REFERENCE:
        return []
    return [templates.render_object("secret-proxy.yaml.j2", name=name, data=data, **common)]


def _source(env: Mapping[str, Any]) -> str:
    ref = env["valueFrom"].get("secretKeyRef") or env["valueFrom"].get("configMapKeyRef") or {}
    kind = "Secret" if "secretKeyRef" in env["valueFrom"] else "ConfigMap"
    return f"{kind}/{ref.get('name', '')} key {ref.get('key', '')}"


def _with_trust_bundle(inp: BuildInputs, inputs: buildinputs.Inputs, material: Material,
                       common: Mapping[str, Any]) -> tuple[buildinputs.Inputs, list[dict[str, Any]]]:
    """The cluster's trust bundle, copied into a ConfigMap of ours and mounted like an input."""
    if not material.trust_bundle:
        return inputs, []
    name = naming.object_name("ca", inp.pool, inp.build_id)
    cm = templates.render_object("configmap.yaml.j2", name=name,
                                 data={"ca.crt": templates.Opaque(material.trust_bundle)}, **common)
    mount = buildinputs.Mount("cluster-ca", "ConfigMap", name, proxy.MOUNT)
    return dataclasses.replace(inputs, mounts=inputs.mounts + (mount,),
                               types=inputs.types | {"cluster-ca"}), [cm]
