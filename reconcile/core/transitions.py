"""The lifecycle table of docs/contract.md, row by row, and `decide`: what was observed about a pool ->
one transition, one `match`. Pure and alone: what a pool's transition does is core/actions/table.py,
how the observation is gathered core/decision.py. tests/unit/test_lifecycle_unit.py checks `Transition`
against docs/contract.md's table.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from reconcile.contract import annotations as A
from reconcile.imagebuild.builders.base import BuildStatus


class Transition(enum.Enum):
    """(situation, outcome): the lifecycle table of docs/contract.md, one member a row."""
    START = ("no build object for the current inputs (a new pool, or inputs changed: a new "
             "rendered config, settings, custom Dockerfile or rebuild token)",
             "create the ConfigMaps (our auth Secrets where needed) and the Pod or Build; delete the "
             "older builds' objects (a running one is interrupted: the message says which); `Pending`")
    REUSE = ("the same, but the pool's image history says this build id already produced an image "
             "(a rollback) and the registry still has its manifest, labelled with that build id; with "
             "signing on, also a signature there that a current key verifies, for that digest and our "
             "repository (checked, never made: else the pool builds)",
             "build nothing: record that image, `Succeeded`, `reused <image> of build <id>`, Event "
             "`BuildReused`; delete the older builds' objects")
    PROGRESS = ("Pod `Pending` / `Running` (Build `New`, `Pending` / `Running`)", "`Pending` / `Building`")
    SUCCEED = ("Pod `Succeeded` with a digest in its termination message (Build `Complete` with "
               "`imageDigest`)", "record the image; `Succeeded`; delete the build's objects")
    FAIL = ("the same without a digest, or Pod `Failed` (Build `Failed`, `Error`, `Cancelled`)",
            "`Failed` with the reason; objects kept for debugging")
    STAY_FAILED = ("recorded `Failed` for the current inputs",
                   "nothing: no automatic re-creation for the same inputs (older builds' objects go)")
    RETRY = ("the build failed for a transient reason, or its Pod or Build was deleted by someone",
             "another attempt (at most 3): `Pending`, `ocl-reconciler.io/attempt` counts, the message "
             "keeps each attempt's reason")
    GIVE_UP = ("the same at the third attempt", "`Failed`: `failed after 3 attempts: ...`")
    EQUIVALENT = ("built for the current inputs, but recorded for another rendered config with the same "
                  "image content (our own osImageURL MachineConfig or a kernel argument gave the pool a new "
                  "rendered config), or recorded `Succeeded` by an earlier version under its build id",
                  "build nothing: one pool patch records the rendered config and its content digest, "
                  "the image is kept; no Event")
    LIVE = ("recorded `Succeeded`; the pool's new rendered config differs from the one its image was built "
            "from only in what its nodes take live (`liveChanges: apply`, `rollout: machineconfig`: the "
            "machine-config daemon's own rule under the cluster's node disruption policy), or the pool "
            "records that already",
            "build nothing: one pool patch records the rendered config, its content digest and what the "
            "daemon will do (`ocl-reconciler.io/live`), the image and the build it came from are kept; "
            "Event `LiveChange`")
    SIGN = ("signing on (`imageSigningKeySecretName`), and the image one of SUCCEED, REUSE, BUILT, "
            "EQUIVALENT or LIVE would record is not recorded signed with every current key "
            "(`ocl-reconciler.io/signed`): a new build's, a rollback's that one current key of two signed "
            "already, or the one a pool uses when signing is turned on or a key added",
            "create or follow the signing Pod (cosign signs the digest with each key); `Building` for a new "
            "image, the record kept for one in use; once it succeeds the transition goes on and records "
            "`ocl-reconciler.io/signed`; if it fails, `Failed` with the signer's reason, the image not "
            "recorded and nothing rolled out")
    BUILT = ("already built for the current inputs", "no writes at all (leftovers of a killed run go); "
             "with `rollout: machineconfig`, the pool's MachineConfig is written if it is missing or "
             "points at another image")
    OPT_OUT = ("label removed", "delete the pool's build objects (and its rollout MachineConfig: the MCO "
               "then rolls the pool back to the release's OS image, Event `ImageRollback`), remove every "
               "`ocl-reconciler.io/*` annotation (a rebuild request too) and the image annotation")
    POOL_GONE = ("pool deleted", "its objects are deleted (no garbage collector is needed)")
    BLOCKED = ("invalid or missing inputs",
               "`Blocked`; the message names the ConfigMap, Secret or key; other pools go on")
    MCO_LABEL = ("the pool carries the MCO's label `machineconfiguration.openshift.io/layering-enabled` "
                 "(with ours or without)",
                 "nothing built or deleted, the record and the MachineConfig kept; reported as `Blocked` "
                 "(exit 2): what the label does to the MCO of this release and the two `oc label` commands "
                 "that move the pool to ours; `ocl-reconciler.io/mco-label` records it and Event "
                 "`MCOLayeringLabel` (Warning) says it once")

    @property
    def situation(self) -> str:
        return self.value[0]

    @property
    def outcome(self) -> str:
        return self.value[1]


#: Transitions that make a new build object: they need the MachineConfig and the build material.
NEEDS_BUILD = frozenset({Transition.START, Transition.RETRY})


@dataclass(frozen=True)
class Observation:
    """What `decide` looks at: the recorded state and the live build object of the current inputs."""
    recorded: str | None                  # the pool's state annotation
    at_ref: bool                          # the annotations are about this build (and attempt)
    has_image: bool
    build: BuildStatus | None             # the current attempt's build object, read by its builder
    attempts_left: bool
    #: the registry has the image the history maps this build id to (asked only for a START or
    #: RETRY, see `with_lookup`)
    reusable: bool = False
    #: the pool's recorded rendered config and content digest are the current ones
    content_recorded: bool = True
    #: the annotations are about the build an earlier version named for the current inputs
    legacy_ref: bool = False
    #: the pool records that its current rendered config is taken live on its image (LIVE, earlier)
    live_recorded: bool = False
    #: the shell found this run that the current rendered config is taken live on the pool's image
    #: (core/node/livechange.py; asked only for a START)
    live: bool = False


def decide(o: Observation) -> Transition:
    match o:
        case Observation(at_ref=True, recorded=A.SUCCEEDED, has_image=True, content_recorded=True):
            return Transition.BUILT
        case Observation(live_recorded=True, recorded=A.SUCCEEDED, has_image=True, content_recorded=True):
            return Transition.BUILT
        case Observation(at_ref=True, recorded=A.SUCCEEDED, has_image=True):
            return Transition.EQUIVALENT
        case Observation(legacy_ref=True, recorded=A.SUCCEEDED, has_image=True):
            return Transition.EQUIVALENT
        case Observation(at_ref=True, recorded=A.FAILED | A.INTERRUPTED):
            return Transition.STAY_FAILED
        case Observation(live=True, recorded=A.SUCCEEDED, has_image=True, build=None):
            return Transition.LIVE
        case Observation(reusable=True):
            return Transition.REUSE
        case Observation(build=BuildStatus(state=A.FAILED, transient=True), attempts_left=False):
            return Transition.GIVE_UP
        case Observation(build=BuildStatus(state=A.FAILED, transient=True)):
            return Transition.RETRY
        case Observation(build=BuildStatus(state=A.SUCCEEDED)):
            return Transition.SUCCEED
        case Observation(build=BuildStatus(state=A.FAILED)):
            return Transition.FAIL
        case Observation(build=BuildStatus()):
            return Transition.PROGRESS
        case Observation(build=None, at_ref=True, recorded=A.PENDING | A.BUILDING, attempts_left=False):
            return Transition.GIVE_UP
        case Observation(build=None, at_ref=True, recorded=A.PENDING | A.BUILDING):
            return Transition.RETRY
        case _:
            return Transition.START
