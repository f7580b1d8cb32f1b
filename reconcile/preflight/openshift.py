"""The OpenShift version (what it means for `rollout`) and the MCO's own builder."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from reconcile.contract import objects
from reconcile.core import decision, rollout
from reconcile.imagebuild import settings
from reconcile.imagebuild.settings import Settings
from reconcile.preflight.facts import Facts
from reconcile.preflight.report import FAIL, OK, WARN, Line


def version_of(cluster_version: Mapping[str, Any] | None) -> str:
    """The version a ClusterVersion is at or going to: status.desired.version, else the newest
    history entry's."""
    status = (cluster_version or {}).get("status") or {}
    history = [h.get("version") for h in status.get("history") or [] if isinstance(h, Mapping)]
    return str((status.get("desired") or {}).get("version") or next((v for v in history if v), ""))


def minor(version: str) -> tuple[int, int] | None:
    m = re.match(r"^(\d+)\.(\d+)(?:[.-]|$)", version)
    return (int(m.group(1)), int(m.group(2))) if m else None


_SET_MACHINECONFIG = (f"set 'rollout: machineconfig' in ConfigMap {settings.BUILD_CONFIG} and deploy "
                      "kustomize/components/rollout (docs/rollout.md)")


def check_openshift_version(f: Facts) -> list[Line]:
    """What the OpenShift version means for `rollout` (docs/rollout.md, section 1)."""
    if f.cluster_version_error:
        return [(WARN, f"cannot read ClusterVersion version: {f.cluster_version_error}",
                 "run preflight as a user who may read it (oc get clusterversion)")]
    if f.cluster_version is None:
        return [(WARN, "no ClusterVersion: not an OpenShift cluster, so no MCO rolls an image out here",
                 "images are built and recorded only; run it on OpenShift 4.16 or later")]
    version = version_of(f.cluster_version)
    at = minor(version)
    mode = f.settings.rollout if isinstance(f.settings, Settings) else None
    if at is None:
        return [(WARN, f"ClusterVersion names no version ({version or 'empty'})",
                 "oc get clusterversion version")]
    if at < (4, 14):
        return [(WARN, f"OpenShift {version}: older than 4.14, which this tool was never checked against",
                 "try it on a test pool first")]
    if mode == settings.ROLLOUT_ANNOTATION:
        why = ("the node controller rolls newestImageEquivalentConfig out only with BuildSuccess in the "
               "pool's status, which only the MCO writes" if at < (4, 16)
               else "nothing reads newestImageEquivalentConfig since 4.16")
        return [(WARN, f"OpenShift {version}, rollout: annotation: {why}, so no node gets the image",
                 _SET_MACHINECONFIG)]
    if at < (4, 16):
        return [(WARN, f"OpenShift {version}, rollout: machineconfig: the node controller of 4.14/4.15 may "
                       "hold a labelled pool until it reports BuildSuccess (not verified)",
                 "try it on a test pool first (docs/rollout.md)")]
    return [(OK, f"OpenShift {version}: rollout: machineconfig hands each image to the MCO through "
                 f"MachineConfig {rollout.PREFIX}<pool>, which it renders and rolls out")]


def check_mco_builder(f: Facts) -> list[Line]:
    """The MCO's own builder must not build a pool we build: a MachineOSConfig for it (4.16 on), or
    on 4.14/4.15 our settings in the MCO's namespace, where its machine-os-builder reads them."""
    if f.machineosconfigs_error:
        return [(WARN, f"cannot list MachineOSConfigs: {f.machineosconfigs_error}",
                 "run preflight as a user who may (oc get machineosconfigs)")]
    opted = {objects.name(p) for p in f.pools if decision.opted_in(p)}
    out: list[Line] = []
    for mosc in f.machineosconfigs or []:
        pool = str(((mosc.get("spec") or {}).get("machineConfigPool") or {}).get("name") or "")
        if pool in opted:
            out.append((FAIL, f"MachineOSConfig {objects.name(mosc)} has the MCO build pool {pool}, which is "
                              "labelled for us too: two builders would fight over its image",
                        f"keep one: oc delete machineosconfig {objects.name(mosc)}, or remove the label from "
                        f"mcp/{pool}"))
    version = version_of(f.cluster_version)
    if f.namespace == settings.MCO_NAMESPACE and minor(version) in ((4, 14), (4, 15)) and opted:
        gate = "" if minor(version) == (4, 14) else " with the OnClusterBuild gate"
        out.append((FAIL if not gate else WARN,
                    f"OpenShift {version} with our settings in {settings.MCO_NAMESPACE}: the MCO's "
                    f"machine-os-builder (which the label starts{gate}) reads {settings.BUILD_CONFIG} there "
                    "and builds the same pools",
                    "install into our own namespace (docs/namespace.md, \"Moving an install\")"))
    if out:
        return out
    if f.machineosconfigs is None:
        return [(OK, "the MachineOSConfig API is not served: the MCO's own builder has nothing to build")]
    return [(OK, f"{len(f.machineosconfigs)} MachineOSConfig(s), none for a pool labelled for us")]
