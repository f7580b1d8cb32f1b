"""The public contract written on each MachineConfigPool (docs/contract.md: "Results on the pool").

Only these keys are ours; every write touches these keys alone.
"""

from __future__ import annotations

from collections.abc import Mapping

KEY_PREFIX = "ocl-reconciler.io/"
STATE = KEY_PREFIX + "state"
RENDERED = KEY_PREFIX + "rendered-config"
BUILD = KEY_PREFIX + "build"
MESSAGE = KEY_PREFIX + "message"
TRANSITION = KEY_PREFIX + "transition-time"
BUILT_CONFIG = KEY_PREFIX + "built-config"
REBUILD = KEY_PREFIX + "rebuild"
REBUILD_HANDLED = KEY_PREFIX + "rebuild-handled"
ATTEMPT = KEY_PREFIX + "attempt"
#: `<rendered config>=<digest>`: the image content (imagebuild/imagecontent.py) of the rendered config
#: the state is about, so a steady run never reads the MachineConfig to know it
CONTENT = KEY_PREFIX + "content"
#: the CPU architecture the build is for (that of the pool's nodes; "" while it had none), so a
#: steady run need not list the nodes (imagebuild/platform/clusterfacts.py)
ARCH = KEY_PREFIX + "arch"
#: with ARCH: the pool's `status.machineCount` when its architecture was read from its nodes; a
#: run reads the nodes again when the MCO counts another number (a node joined or left: maybe of
#: another architecture, core/multiarch.py), so a steady run still lists no nodes
ARCH_NODES = KEY_PREFIX + "arch-nodes"
#: the OS stream the current build is of (imagebuild/platform/osstream.py: the pool's own, a custom pool's
#: inherited from worker, or the default; "" where the cluster lists none)
OS_STREAM = KEY_PREFIX + "os-stream"
#: on a build Pod and on its pool: the image the build runs in (imagebuild/settings.py)
BUILDER_IMAGE = KEY_PREFIX + "builder-image"
#: on a build object: its disk figures and where they came from (core/storage/disk.py), said again
#: when it runs out of disk space (imagebuild/builders/outofdisk.py)
DISK = KEY_PREFIX + "disk"
#: on the pool and its build Pod: the storage its builds keep images in, `PersistentVolumeClaim/<name>`
#: (buildStorage: persistent), or `emptyDir: <why>` where persistent storage was asked for and
#: cannot be had (core/storage/); absent with buildStorage: emptyDir
BUILD_STORAGE = KEY_PREFIX + "build-storage"
#: with `rollout: machineconfig`: `<rendered config>=<image>`, the osImageURL the pool's rendered
#: config (`spec.configuration.name`) held when a run last read it (core/rollout/check.py), so a
#: steady run reads no MachineConfig to know it
ROLLOUT = KEY_PREFIX + "rollout"
#: written with ROLLOUT when that image is not ours: the MachineConfig whose osImageURL won (absent
#: otherwise); a key of its own so that Argo CD's health check, which has no string functions, can
#: see it
OVERRIDDEN_BY = KEY_PREFIX + "rollout-overridden-by"
#: `<what the machine-config daemon does>` (core/node/livechange.py: "reload crio.service", "none"):
#: the pool's current rendered config differs from the one its image was built from (BUILT_CONFIG)
#: only in what the nodes take live, so no image was built for it; removed by the next build
LIVE = KEY_PREFIX + "live"
#: with LIVE: the image content digest of BUILT_CONFIG, so a run can tell, without reading it, that
#: the recorded build is still the one the current inputs (settings, Dockerfile, rebuild token) make
BUILT_CONTENT = KEY_PREFIX + "built-content"
#: with signing on (imagebuild/signing/): `<image>=<fingerprint>[,<fingerprint>]`, the image the
#: pool records and the keys it was signed with; a transition that records or rolls out an image
#: waits for it (core/signgate.py); removed once signing is off
SIGNED = KEY_PREFIX + "signed"
IMAGES = KEY_PREFIX + "images"            # digested images of this pool's builds, newest first
#: a mixed pool's indexes (core/multiarch.py): `<index digest>=<instance digest>,...` entries, newest
#: first, so that pruning never deletes an instance a kept index names
INDEX_INSTANCES = KEY_PREFIX + "index-instances"
#: why the last run could not delete images of the history from the registry (kept there, tried
#: again by the next run); removed once a prune of the pool goes through
PRUNE_ERROR = KEY_PREFIX + "prune-error"
#: At most this many images are remembered (annotations share 256 KiB per object).
IMAGES_LIMIT = 50
#: A build that fails for a transient reason is tried again, up to this many attempts in all.
MAX_ATTEMPTS = 3
IMAGE = "machineconfiguration.openshift.io/newestImageEquivalentConfig"

#: The rollout gate's record on the pool (core/rollout/hold.py): `held` (we paused it), `rolling` (we let it
#: roll out a config that carries its image), `released` (a failed build or holdTimeout released
#: it), `admin` (someone unpaused it while we held it: not paused again until this key is removed);
#: for which rendered config, since when, and why a release happened.
GATE = KEY_PREFIX + "gate"
GATE_CONFIG = KEY_PREFIX + "gate-config"
GATE_SINCE = KEY_PREFIX + "gate-since"
GATE_REASON = KEY_PREFIX + "gate-reason"

#: Opt-in label on the pool (presence only; any value).
LAYERING_LABEL = KEY_PREFIX + "layering-enabled"
#: The MCO's own layering switch, our opt-in before: a pool carrying it is reported, not built
#: (core/mcolabel.py).
MCO_LAYERING_LABEL = "machineconfiguration.openshift.io/layering-enabled"
#: On a pool carrying MCO_LAYERING_LABEL: what it does there (core/mcolabel.py), as last said; the
#: Event says it when this changes. Removed once the pool carries our label alone.
MCO_LABEL = KEY_PREFIX + "mco-label"

PENDING, BUILDING, SUCCEEDED, FAILED, BLOCKED = "Pending", "Building", "Succeeded", "Failed", "Blocked"
#: The states this version writes.
STATES = (PENDING, BUILDING, SUCCEEDED, FAILED, BLOCKED)
#: Written by older versions only; read as FAILED for the inputs it is about.
INTERRUPTED = "Interrupted"


def owned(key: str) -> bool:
    """Keys removed on opt-out: every `ocl-reconciler.io/*` key (a pending rebuild request too:
    opting out forgets the pool) and the image annotation."""
    return key.startswith(KEY_PREFIX) or key == IMAGE


def content(rendered_config: str, digest: str) -> str:
    return f"{rendered_config}={digest}"


def recorded_content(ann: Mapping[str, str], rendered_config: str) -> str | None:
    """The content digest recorded for this rendered config, if it is the one recorded."""
    name, sep, digest = (ann.get(CONTENT) or "").rpartition("=")
    return digest if sep and digest and name == rendered_config else None


def one_line(text: str, limit: int = 512, keep_end: bool = False) -> str:
    """Annotations hold one line: collapse whitespace, cap the length (`keep_end`: by cutting the
    middle, for a reason whose cause comes last, as in a Go error chain)."""
    flat = " ".join(str(text).split())
    if len(flat) <= limit:
        return flat
    if keep_end:
        head = (limit - 3) // 2
        return flat[:head] + "..." + flat[len(flat) - (limit - 3 - head):]
    return flat[: limit - 3] + "..."


def changes(current: Mapping[str, str], wanted: Mapping[str, str | None]) -> dict[str, str | None]:
    """The subset of `wanted` that differs from `current` (None = remove the key)."""
    out: dict[str, str | None] = {}
    for key, value in wanted.items():
        if value is None:
            if key in current:
                out[key] = None
        elif current.get(key) != value:
            out[key] = value
    return out
