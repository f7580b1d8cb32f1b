"""The MCO's own layering label on a pool: a switch of the MCO's, not an opt-in of ours.

`machineconfiguration.openshift.io/layering-enabled` was this project's first opt-in label. The
machine-config operator reads it on every release, with no feature gate
(openshift/machine-config-operator `pkg/operator/sync.go`, `getLayeredMachineConfigPools`, run by
`syncAll` before `RequiredPools`):
- 4.16 and later: for such a pool `startOrUpdateMachineOSBuilderDeployment` calls
  `build.ValidateOnClusterBuildConfig`, which fails ("MachineOSConfig for pool <pool> missing, did
  you create it?") when no MachineOSConfig names the pool; `syncAll` stops there, so the
  machine-config ClusterOperator reports Degraded (`MachineOSBuilderFailed`) and `RequiredPools`,
  which follows upgrades, never runs: an upgrade cannot complete;
- 4.14 and 4.15 (release-4.14/4.15 `syncMachineOSBuilder`): the MCO starts its own
  machine-os-builder, which validates its own `on-cluster-build-config` and Secrets in
  `openshift-machine-config-operator`, and where they pass builds the pool too.

So a pool carrying it is reported (Blocked rules: exit 2, `ocl_errors_total{reason="blocked"}`),
built by nobody here, and not treated as an opt-out: its objects, its record and its MachineConfig
stay, so that moving it to our label (`annotations.LAYERING_LABEL`) rebuilds and rolls out nothing.
Pure."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from reconcile.contract import annotations as A
from reconcile.contract import objects

#: The Event (Warning) that says it, once per change of what is said.
REASON = "MCOLayeringLabel"


def carries(pool: Mapping[str, Any]) -> bool:
    return A.MCO_LAYERING_LABEL in objects.labels(pool)


def _minor(release: str) -> int | None:
    """4.x's x from the release version the MCO publishes (`4.16.12`), or None."""
    parts = release.strip().split(".")
    if len(parts) >= 2 and parts[0] == "4" and parts[1].isdigit():
        return int(parts[1])
    return None


def effect(release: str) -> str:
    """What the label does to the MCO of this release ("" or unparsed: what it does on each)."""
    later = ("the machine-config operator fails to sync (no MachineOSConfig names the pool): the "
             "ClusterOperator degrades (MachineOSBuilderFailed) and cluster upgrades cannot complete")
    earlier = ("the MCO starts its own machine-os-builder, which validates its own on-cluster-build-config "
               "and Secrets in openshift-machine-config-operator and builds the pool too")
    minor = _minor(release)
    if minor is not None and minor >= 16:
        return f"on {release} {later}"
    if minor is not None and minor >= 14:
        return f"on {release} {earlier}"
    return f"on 4.16 and later {later}; on 4.14 and 4.15 {earlier}"


def commands(pool: str) -> tuple[str, str]:
    """The two commands that move the pool to our label (in this order: ours first, so the pool
    is never without an opt-in and nothing of it is removed in between)."""
    return (f"oc label mcp/{pool} {A.LAYERING_LABEL}=",
            f"oc label mcp/{pool} {A.MCO_LAYERING_LABEL}-")


def problem(pool: str, release: str) -> str:
    """The one line run, diff, status and explain say for such a pool."""
    first, second = commands(pool)
    return (f"MachineConfigPool {pool} carries the MCO's label {A.MCO_LAYERING_LABEL}, which is not "
            f"an opt-in of ocl-reconciler: {effect(release)}; nothing is built or deleted for it and its "
            f"record is kept; move it to our label: {first} && {second}")
