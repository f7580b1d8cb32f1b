"""The cluster-wide build settings, read from the ConfigMaps the MCO defined, and validated.

Reading is pure: the shell hands over the ConfigMaps and Secrets it fetched; a problem becomes a
one-line reason that blocks every opted-in pool (it is not fatal: other work and the snapshot go on).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from reconcile.contract import objects
from reconcile.imagebuild import imageref, signing

BUILD_CONFIG = "on-cluster-build-config"
OSIMAGEURL = "machine-config-osimageurl"
CUSTOM_DOCKERFILE = "on-cluster-build-custom-dockerfile"
SETTINGS_CONFIGMAPS = (BUILD_CONFIG, OSIMAGEURL, CUSTOM_DOCKERFILE)

CUSTOM_POD_BUILDER = "custom-pod-builder"
OPENSHIFT_IMAGE_BUILDER = "openshift-image-builder"
BUILDER_TYPES = (CUSTOM_POD_BUILDER, OPENSHIFT_IMAGE_BUILDER)
#: How a built image reaches the nodes (key `rollout`). `annotation`, the default, only records it
#: on the pool (what earlier versions did, so upgrading never starts reboots by itself);
#: `machineconfig` also writes a MachineConfig holding only `spec.osImageURL`, which the MCO
#: renders and rolls out (core/rollout/).
ROLLOUT_ANNOTATION, ROLLOUT_MACHINECONFIG = "annotation", "machineconfig"
ROLLOUT_MODES = (ROLLOUT_ANNOTATION, ROLLOUT_MACHINECONFIG)
#: With `rollout: machineconfig`, whether the reconciler keeps each pool it builds paused until the
#: pool renders a config whose image content its image carries (key `rolloutGate`, core/rollout/hold.py):
#: `hold`, the default, one disruption per change; `none`, the MCO rolls each rendered config out
#: at once (new files on the old image first, then the image).
GATE_HOLD, GATE_NONE = "hold", "none"
GATE_MODES = (GATE_HOLD, GATE_NONE)
#: key `liveChanges` (core/node/livechange.py): `apply` (the default) keeps the image for a change the
#: nodes take live; `rebuild` builds for every content change, as versions before it did
LIVE_APPLY, LIVE_REBUILD = "apply", "rebuild"
LIVE_MODES = (LIVE_APPLY, LIVE_REBUILD)
#: key `holdTimeout`: a hold older than this releases the pool (a duration: 2h, 90m, 1h30m, 600s)
DEFAULT_HOLD_TIMEOUT = 7200
#: key `waitDeadline`: how long `run --wait` follows its changes at most (a duration, or `0`: not at
#: all); it can only shorten the flag's, which bounds the Job (cluster/follow.py). Unset: the flag's.
WAIT_KEY = "waitDeadline"
#: The build Pod's image where the cluster has no MCO (plain Kubernetes): a moving tag, so set
#: `buildahImage` (README, "The builder image").
DEFAULT_BUILDAH_IMAGE = "quay.io/buildah/stable:latest"
#: The MCO's own images of the release, digest-pinned and mirrored with it (openshift/
#: machine-config-operator install/0000_80_machine-config_02_images.configmap.yaml, parsed by
#: pkg/controller/common/images.go): `machineConfigOperator` is the image the MCO's build Pod runs
#: buildah in (pkg/controller/build/buildrequest/buildrequest.go), and our default where it exists.
MCO_NAMESPACE = "openshift-machine-config-operator"
MCO_IMAGES = "machine-config-operator-images"
MCO_IMAGES_KEY, MCO_IMAGE_FIELD = "images.json", "machineConfigOperator"
#: What the MCO publishes in its namespace and we read there, by name only (RBAC `resourceNames`):
#: the release's OS images and its own images. Our settings live in our own namespace.
MCO_PUBLISHED = (OSIMAGEURL, MCO_IMAGES)
#: Without baseImagePullSecretName the cluster's global pull secret is used, as the MCO does
#: (openshift/machine-config-operator #4756); a reference to another namespace is `namespace/name`.
GLOBAL_PULL_SECRET = "openshift-config/pull-secret"
_PRINTABLE_LINE = re.compile(r"^[^\x00-\x1f\x7f]*$")
#: MachineOSConfig's renderedImagePushSpec rule (openshift/api, machineosconfigs CRD,
#: x-kubernetes-validations): host[:port][/namespace]/name:tag with a registry host, or a service
#: name.namespace.svc:port/repository/name:tag. So: a registry host, a tag, no digest.
_PUSH_SPEC = (re.compile(r"^([a-zA-Z0-9-]+\.)+[a-zA-Z0-9-]+(:[0-9]{2,5})?"
                         r"(/[a-zA-Z0-9-_]{1,61})*/[a-zA-Z0-9-_.]+:[a-zA-Z0-9._-]+$"),
              re.compile(r"^[^.]+\.[^.]+\.svc:\d+\/[^\/]+\/[^\/]+:[^\/]+$"))


#: What a build may use (keys of on-cluster-build-config), the same for the buildah Pod and the
#: OpenShift Build's Pod: a layered OS build unpacks and commits a whole OS image (vfs storage), so
#: it asks for a CPU and 2 GiB and may grow to 8 GiB; without them the Pod is BestEffort, the
#: first a node evicts. No CPU limit (throttling only slows it). The deadline bounds a hung build:
#: the Pod's activeDeadlineSeconds, the Build's completionDeadlineSeconds (OpenShift's default is a
#: week: openshift-controller-manager pkg/build/controller/strategy/util.go, setupActiveDeadline).
#: Disk: the build's image storage lives on the node's disk (an emptyDir) unless `buildStorage:
#: persistent`, so the container asks for ephemeral-storage and is evicted past its limit, and the
#: buildah Pod's emptyDirs carry the limit as their sizeLimit: a build cannot fill the node's disk.
#: Unset, the two ephemeral-storage keys follow the base image's size (core/storage/disk.py); the
#: values here are used when that size cannot be read.
BUILD_RESOURCES = {"buildCPURequest": ("requests", "cpu", "1"),
                   "buildMemoryRequest": ("requests", "memory", "2Gi"),
                   "buildMemoryLimit": ("limits", "memory", "8Gi"),
                   "buildEphemeralStorageRequest": ("requests", "ephemeral-storage", "20Gi"),
                   "buildEphemeralStorageLimit": ("limits", "ephemeral-storage", "80Gi")}
EPHEMERAL_REQUEST, EPHEMERAL_LIMIT = "buildEphemeralStorageRequest", "buildEphemeralStorageLimit"
#: Where a build keeps its image storage (key `buildStorage`): `persistent`, one PersistentVolumeClaim
#: per pool that outlives the build Pod, so that a rebuild reuses the base image it pulled before
#: (core/storage/); `emptyDir` starts empty every build (what versions before it did). Unset:
#: `persistent` for the buildah Pod, whose rebuild after a one-file change then takes 0.24x the
#: first build and pulls 0.02 MB instead of the whole base (docs/development.md, "Build cost");
#: `emptyDir` for an OpenShift Build, which has no such volume. `buildStorageClass` names its
#: StorageClass (unset: the cluster's default); `buildStorageSize` its size (unset: from the base
#: image's size, core/storage/disk.py).
STORAGE_KEY, STORAGE_CLASS, STORAGE_SIZE = "buildStorage", "buildStorageClass", "buildStorageSize"
STORAGE_EMPTYDIR, STORAGE_PERSISTENT = "emptyDir", "persistent"
STORAGE_MODES = (STORAGE_EMPTYDIR, STORAGE_PERSISTENT)
BUILD_TIMEOUT_KEY, DEFAULT_BUILD_TIMEOUT = "buildTimeoutSeconds", 7200
#: the architectures a mixed pool's builds may make under emulation, on a node of another of the
#: pool's architectures (core/multiarch.py): opt-in, none by default (docs/admin.md, "Pools of mixed
#: architectures": a build 5 to 20 times as long; the node needs qemu-user-static in binfmt_misc)
EMULATED_KEY = "emulatedArchitectures"
_GOARCH = re.compile(r"^[a-z0-9]+$")
QUANTITY = re.compile(r"^[0-9]+(\.[0-9]+)?(m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei)?$")


class SettingsError(ValueError):
    """One line naming the ConfigMap or Secret and the key that is wrong."""


@dataclass(frozen=True)
class Settings:
    namespace: str
    pull_secret: str
    push_secret: str
    pullspec: str
    repo: str
    builder_type: str
    base_image: str
    extensions_image: str
    release_version: str
    buildah_image: str
    custom_dockerfiles: Mapping[str, str] = field(default_factory=dict)
    rollout: str = ROLLOUT_ANNOTATION
    #: the build's requests and limits ({"requests": {...}, "limits": {...}}) and deadline
    build_resources: Mapping[str, Mapping[str, str]] = field(default_factory=lambda: _resources({}))
    build_timeout: int = DEFAULT_BUILD_TIMEOUT
    #: EMULATED_KEY: architectures built under emulation (custom-pod-builder only)
    emulated: frozenset[str] = frozenset()
    rollout_gate: str = GATE_HOLD
    hold_timeout: int = DEFAULT_HOLD_TIMEOUT
    #: key `waitDeadline` in seconds (0: no waiting), None when unset (`run --wait` decides)
    wait_deadline: int | None = None
    #: the BUILD_RESOURCES keys and `buildStorage`, where the ConfigMap sets them (the others are
    #: defaults: for ephemeral-storage, used only when the base image's size is unknown)
    explicit: frozenset[str] = frozenset()
    build_storage: str = STORAGE_PERSISTENT
    storage_class: str = ""
    storage_size: str = ""
    #: key `liveChanges` (core/node/livechange.py): `apply`, the default, builds nothing for a
    #: change the nodes take live; `rebuild` builds for every content change
    live_changes: str = LIVE_APPLY
    #: key `imageSigningKeySecretName` (imagebuild/signing/): the key pair Secrets every image is
    #: signed with (none: signing off); their fingerprints once the shell read them (`with_keys`)
    signing_secrets: tuple[str, ...] = ()
    signing_keys: tuple[signing.Key, ...] = ()
    #: key `imageSignerImage`: the image the signing Pod runs cosign in (digest-pinned)
    signer_image: str = signing.DEFAULT_SIGNER_IMAGE

    @property
    def signs(self) -> bool:
        """Every image handed to a pool is signed first (`imageSigningKeySecretName` is set)."""
        return bool(self.signing_secrets)

    @property
    def persistent_storage(self) -> bool:
        return self.build_storage == STORAGE_PERSISTENT

    @property
    def machineconfig_rollout(self) -> bool:
        return self.rollout == ROLLOUT_MACHINECONFIG

    @property
    def applies_live(self) -> bool:
        """A change the nodes take live keeps the image (`liveChanges: apply`), with
        `rollout: machineconfig`: with `annotation` no node boots our image."""
        return self.machineconfig_rollout and self.live_changes == LIVE_APPLY

    @property
    def holds(self) -> bool:
        """The rollout gate is on: `rollout: machineconfig` and `rolloutGate: hold`."""
        return self.machineconfig_rollout and self.rollout_gate == GATE_HOLD


def _data(cm: Mapping[str, Any] | None) -> Mapping[str, str]:
    return (cm or {}).get("data") or {}


def _required(cm_name: str, data: Mapping[str, str], key: str) -> str:
    value = data.get(key)
    if value is None:
        raise SettingsError(f"ConfigMap {cm_name}: required key {key!r} is missing")
    if not str(value).strip():
        raise SettingsError(f"ConfigMap {cm_name}: required key {key!r} is empty")
    return str(value).strip()


def _image(cm_name: str, key: str, value: str) -> str:
    try:
        imageref.parse(value)
    except imageref.InvalidReference as err:
        raise SettingsError(f"ConfigMap {cm_name}: key {key!r}: {err}") from None
    return value


def _secret_ref(key: str, value: str) -> str:
    """`name` or `namespace/name` of a Secret as the API server accepts them (a name with a newline
    put into every pool's message would split it)."""
    ns, slash, name = value.rpartition("/")
    if not objects.valid_name(name) or (slash and not objects.valid_namespace(ns)):
        raise SettingsError(f"ConfigMap {BUILD_CONFIG}: key {key!r}: {value!r} is not a Secret's name or "
                            "namespace/name (lowercase RFC 1123)")
    return value


def _push_spec(value: str) -> str:
    if len(value) > 447 or not any(p.match(value) for p in _PUSH_SPEC):
        raise SettingsError(f"ConfigMap {BUILD_CONFIG}: key 'finalImagePullspec': {value!r} must be "
                            "host[:port][/namespace]/name:tag with a registry host and no digest "
                            "(as MachineOSConfig's renderedImagePushSpec)")
    return value


def _one_of(build: Mapping[str, str], key: str, default: str, choices: tuple[str, ...], noun: str) -> str:
    """The key's value, one of `choices` (unset or blank: `default`)."""
    value = (build.get(key) or "").strip() or default
    if value not in choices:
        raise SettingsError(f"ConfigMap {BUILD_CONFIG}: key {key!r}: unknown {noun} {value!r} "
                            f"(want one of {', '.join(choices)})")
    return value


def read(namespace: str, configmaps: Mapping[str, Mapping[str, Any] | None]) -> Settings:
    """Settings from the three ConfigMaps (by name; None = absent). Raises SettingsError."""
    for required in (BUILD_CONFIG, OSIMAGEURL):
        if configmaps.get(required) is None:
            where = MCO_NAMESPACE if required in MCO_PUBLISHED else namespace
            raise SettingsError(f"ConfigMap {where}/{required} not found")
    build = _data(configmaps[BUILD_CONFIG])
    pull = GLOBAL_PULL_SECRET if "baseImagePullSecretName" not in build else \
        _secret_ref("baseImagePullSecretName", _required(BUILD_CONFIG, build, "baseImagePullSecretName"))
    push = _secret_ref("finalImagePushSecretName", _required(BUILD_CONFIG, build, "finalImagePushSecretName"))
    pullspec = _push_spec(_image(BUILD_CONFIG, "finalImagePullspec",
                                 _required(BUILD_CONFIG, build, "finalImagePullspec")))
    builder = _one_of(build, "imageBuilderType", CUSTOM_POD_BUILDER, BUILDER_TYPES, "builder")
    rollout = _one_of(build, "rollout", ROLLOUT_ANNOTATION, ROLLOUT_MODES, "mode")
    gate = _one_of(build, "rolloutGate", GATE_HOLD, GATE_MODES, "value")
    live = _one_of(build, "liveChanges", LIVE_APPLY, LIVE_MODES, "value")
    try:
        signers = signing.secret_names(str(build.get(signing.KEY_SECRETS) or ""))
    except signing.SigningError as err:
        raise SettingsError(f"ConfigMap {BUILD_CONFIG}: {err}") from None
    signer = _signer_image(build)
    if signers and "/" in push:
        raise SettingsError(f"ConfigMap {BUILD_CONFIG}: key 'finalImagePushSecretName': {push!r} is in "
                            f"another namespace, and with {signing.KEY_SECRETS!r} set the signing Pod mounts "
                            "it: keep "
                            "the push Secret in this namespace")
    buildah = _builder_image(build, configmaps.get(MCO_IMAGES)) if builder == CUSTOM_POD_BUILDER \
        else DEFAULT_BUILDAH_IMAGE          # an OpenShift Build runs in the cluster's builder image
    osurl = _data(configmaps[OSIMAGEURL])
    base = _image(OSIMAGEURL, "baseOSContainerImage",
                  _required(OSIMAGEURL, osurl, "baseOSContainerImage"))
    ext = (osurl.get("baseOSExtensionsContainerImage") or "").strip()
    if ext:
        _image(OSIMAGEURL, "baseOSExtensionsContainerImage", ext)
    release = (osurl.get("releaseVersion") or "").strip()
    if not _PRINTABLE_LINE.match(release):
        raise SettingsError(f"ConfigMap {OSIMAGEURL}: key 'releaseVersion' holds control characters")
    return Settings(
        namespace=namespace, pull_secret=pull, push_secret=push, pullspec=pullspec,
        repo=imageref.parse(pullspec).repo, builder_type=builder, base_image=base,
        extensions_image=ext, release_version=release, buildah_image=buildah,
        custom_dockerfiles=dict(_data(configmaps.get(CUSTOM_DOCKERFILE))), rollout=rollout,
        build_resources=_resources(build), build_timeout=_timeout(build),
        emulated=_emulated(build, builder), rollout_gate=gate, live_changes=live, signing_secrets=signers,
        signer_image=signer,
        hold_timeout=_duration(build, "holdTimeout", DEFAULT_HOLD_TIMEOUT),
        wait_deadline=_wait(build),
        explicit=frozenset(k for k in (*BUILD_RESOURCES, STORAGE_KEY) if str(build.get(k) or "").strip()),
        **_storage(build, builder),
    )


def _emulated(build: Mapping[str, str], builder: str) -> frozenset[str]:
    listed = [a.strip() for a in str(build.get(EMULATED_KEY) or "").split(",") if a.strip()]
    bad = [a for a in listed if not _GOARCH.match(a)]
    if bad:
        raise SettingsError(f"ConfigMap {BUILD_CONFIG}: key {EMULATED_KEY!r}: {bad[0]!r} is not an "
                            "architecture as nodes name it (kubernetes.io/arch: amd64, arm64, s390x, "
                            "ppc64le)")
    if listed and builder != CUSTOM_POD_BUILDER:
        raise SettingsError(f"ConfigMap {BUILD_CONFIG}: key {EMULATED_KEY!r} needs imageBuilderType "
                            f"{CUSTOM_POD_BUILDER} (an OpenShift Build cannot build for another platform)")
    return frozenset(listed)


def _storage(build: Mapping[str, str], builder: str) -> dict[str, str]:
    mode = str(build.get(STORAGE_KEY) or "").strip() or \
        (STORAGE_PERSISTENT if builder == CUSTOM_POD_BUILDER else STORAGE_EMPTYDIR)
    if mode not in STORAGE_MODES:
        raise SettingsError(f"ConfigMap {BUILD_CONFIG}: key {STORAGE_KEY!r}: unknown value {mode!r} "
                            f"(want one of {', '.join(STORAGE_MODES)})")
    name = str(build.get(STORAGE_CLASS) or "").strip()
    if name and not objects.valid_name(name):
        raise SettingsError(f"ConfigMap {BUILD_CONFIG}: key {STORAGE_CLASS!r}: {name!r} is not a "
                            "StorageClass name (lowercase RFC 1123)")
    size = str(build.get(STORAGE_SIZE) or "").strip()
    if size and (not QUANTITY.match(size) or amount(size) < 1):
        raise SettingsError(f"ConfigMap {BUILD_CONFIG}: key {STORAGE_SIZE!r}: {size!r} is not a size "
                            "(e.g. 100Gi)")
    return {"build_storage": mode, "storage_class": name, "storage_size": size}


def _resources(build: Mapping[str, str]) -> dict[str, dict[str, str]]:
    out: dict[str, dict[str, str]] = {"requests": {}, "limits": {}}
    for key, (kind, resource, default) in BUILD_RESOURCES.items():
        value = str(build.get(key) or "").strip() or default
        if not QUANTITY.match(value):
            raise SettingsError(f"ConfigMap {BUILD_CONFIG}: key {key!r}: {value!r} is not a quantity "
                                "(e.g. 500m, 2, 4Gi)")
        out[kind][resource] = value
    for resource, request, limit in (("memory", "buildMemoryRequest", "buildMemoryLimit"),
                                     ("ephemeral-storage", EPHEMERAL_REQUEST, EPHEMERAL_LIMIT)):
        derived = resource == "ephemeral-storage" and not (str(build.get(request) or "").strip()
                                                            and str(build.get(limit) or "").strip())
        if not derived and amount(out["requests"][resource]) > amount(out["limits"][resource]):
            raise SettingsError(f"ConfigMap {BUILD_CONFIG}: {request} {out['requests'][resource]} is "
                                f"more than {limit} {out['limits'][resource]} (the API server refuses "
                                "the Pod)")
    return out


_SUFFIX = {"": 1, "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18,
           "m": 10**-3, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}


def amount(quantity: str) -> float:
    """The value of a quantity that matched QUANTITY, in its base unit."""
    number = re.match(r"^[0-9.]+", quantity).group()             # QUANTITY matched already
    return float(number) * _SUFFIX[quantity[len(number):]]


def _timeout(build: Mapping[str, str]) -> int:
    value = str(build.get(BUILD_TIMEOUT_KEY) or "").strip() or str(DEFAULT_BUILD_TIMEOUT)
    if not re.fullmatch(r"[0-9]+", value) or int(value) <= 0:
        raise SettingsError(f"ConfigMap {BUILD_CONFIG}: key {BUILD_TIMEOUT_KEY!r}: {value!r} is not a "
                            "positive number of seconds")
    return int(value)


_DURATION = re.compile(r"^(?:([0-9]+)h)?(?:([0-9]+)m)?(?:([0-9]+)s)?$")


def _duration(build: Mapping[str, str], key: str, default: int) -> int:
    """Seconds of a duration key, written as Go's time.ParseDuration writes whole units: 2h, 90m,
    1h30m, 600s."""
    value = str(build.get(key) or "").strip()
    if not value:
        return default
    found = _DURATION.match(value)
    seconds = sum(int(n or 0) * unit for n, unit in zip(found.groups(), (3600, 60, 1), strict=True)) \
        if found else 0
    if seconds <= 0:
        raise SettingsError(f"ConfigMap {BUILD_CONFIG}: key {key!r}: {value!r} is not a positive duration "
                            "(e.g. 2h, 90m, 1h30m, 600s)")
    return seconds


def _wait(build: Mapping[str, str]) -> int | None:
    """`waitDeadline`: unset is None, `0` (or `0s`) is 0, else a positive duration."""
    value = str(build.get(WAIT_KEY) or "").strip()
    if not value:
        return None
    if value in ("0", "0s"):
        return 0
    return _duration(build, WAIT_KEY, 0)


def _signer_image(build: Mapping[str, str]) -> str:
    """`imageSignerImage`, by digest: the signer holds the key, so what it runs is pinned."""
    value = str(build.get(signing.SIGNER_IMAGE) or "").strip()
    if not value:
        return signing.DEFAULT_SIGNER_IMAGE
    if not _image(BUILD_CONFIG, signing.SIGNER_IMAGE, value) or imageref.parse(value).digest is None:
        raise SettingsError(f"ConfigMap {BUILD_CONFIG}: key {signing.SIGNER_IMAGE!r}: {value!r} is not "
                            "pinned by digest (name@sha256:...): the signer holds the signing key")
    return value


def with_keys(found: Settings, secrets: Mapping[str, Mapping[str, Any] | None]) -> Settings:
    """The settings with the fingerprints of the key Secrets the shell read (by name, None: absent).
    Raises SettingsError."""
    try:
        keys = signing.keys(found.namespace, found.signing_secrets, secrets)
    except signing.SigningError as err:
        raise SettingsError(str(err)) from None
    return replace(found, signing_keys=keys)


def _builder_image(build: Mapping[str, str], mco_images: Mapping[str, Any] | None) -> str:
    """The build Pod's image: `buildahImage`, else the MCO's own image of the release, else the
    default."""
    explicit = (build.get("buildahImage") or "").strip()
    if explicit:
        return _image(BUILD_CONFIG, "buildahImage", explicit)
    if mco_images is None:
        return DEFAULT_BUILDAH_IMAGE
    where = f"ConfigMap {MCO_NAMESPACE}/{MCO_IMAGES}"
    try:
        images = json.loads(_data(mco_images).get(MCO_IMAGES_KEY) or "")
    except ValueError:
        images = None
    image = images.get(MCO_IMAGE_FIELD) if isinstance(images, dict) else None
    if not isinstance(image, str) or not image.strip():
        raise SettingsError(f"{where}: key {MCO_IMAGES_KEY!r} has no field {MCO_IMAGE_FIELD!r} (the build "
                            f"Pod's default image); set 'buildahImage' in ConfigMap {BUILD_CONFIG}")
    try:
        imageref.parse(image.strip())
    except imageref.InvalidReference as err:
        raise SettingsError(f"{where}: {MCO_IMAGES_KEY} field {MCO_IMAGE_FIELD!r}: {err}") from None
    return image.strip()
