"""Does a new rendered config need a new image, or do the pool's nodes take it live on the image
they run? (settings key `liveChanges`, imagebuild/settings.py `LIVE_MODES`; docs/rollout.md,
"Changes a node takes live")

Since 4.20 the MCO's own layering builds nothing for a change its daemon applies without a
reboot (`ctrlcommon.RequiresRebuild`, openshift/machine-config-operator PR 4996). We do the same,
with the daemon's own rule (core/node/disruption.py) applied to the config the pool's image was
built from and the new rendered config, `osImageURL` and kernel arguments left out (our image stays;
kernel arguments are never image content). Not `RequiresRebuild` as it stands: it compares the
rendered `osImageURL`, our own image here, and rebuilds for kernel arguments. A change is live only
when the image would not differ in what it installs (extensions, kernel type, fips), no file or
unit the image holds is removed (it would stay in the image for every node that joins later), and
the daemon reboots for none of it. Pure."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from reconcile.core.node import disruption

#: The first release whose daemon reads node disruption policies by default (GA in 4.17; before it,
#: `calculatePostConfigChangeActionFromMCDiffs`'s fixed list)
POLICY_SINCE = (4, 17)


@dataclass(frozen=True)
class LiveVerdict:
    """`live`: build nothing; `actions`: what the daemon does on each node; `why`: why it is not
    live (one line, "" when it is)."""
    live: bool
    actions: tuple[disruption.Action, ...] = ()
    why: str = ""

    @property
    def said(self) -> str:
        return disruption.said(self.actions)


#: what the daemon applies on a node (the rest of the rendered config only the image holds)
_DAEMON_SPEC = ("config", "osImageURL", "kernelArguments")


def _rest(mc: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The spec and the Ignition config without what the daemon applies (files, units, passwd, the
    Ignition version, osImageURL, kernel arguments): the image alone holds the rest (links,
    directories, the kernel type, extensions, fips), so any change in it builds."""
    spec = mc.get("spec") if isinstance(mc.get("spec"), Mapping) else {}
    config = dict(spec.get("config") or {}) if isinstance(spec.get("config"), Mapping) else {}
    config.pop("passwd", None)
    config["ignition"] = {k: v for k, v in (config.get("ignition") or {}).items() if k != "version"}
    config["storage"] = {k: v for k, v in (config.get("storage") or {}).items() if k != "files"}
    config["systemd"] = {k: v for k, v in (config.get("systemd") or {}).items() if k != "units"}
    return ({k: v for k, v in spec.items() if k not in _DAEMON_SPEC},
            {k: v for k, v in config.items() if v not in ({}, None, [])})


def _removed_from_units(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """What a unit kept in the new config loses that the image holds: its contents, a drop-in
    (the daemon deletes it on a node, `deleteStaleData`; the image keeps it for a new one)."""
    def units(mc: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
        found = (((mc.get("spec") or {}).get("config") or {}).get("systemd") or {}).get("units") or []
        return {str(u.get("name")): u for u in found if isinstance(u, Mapping)}
    before, after = units(old), units(new)
    out = []
    for name, unit in before.items():
        if name not in after:
            continue
        if unit.get("contents") and not after[name].get("contents"):
            out.append(name)
        kept = {str(d.get("name")) for d in after[name].get("dropins") or [] if isinstance(d, Mapping)}
        out += [f"{name}.d/{d.get('name')}" for d in unit.get("dropins") or []
                if isinstance(d, Mapping) and str(d.get("name")) not in kept]
    return out


def verdict(built_from: Mapping[str, Any], rendered: Mapping[str, Any],
            policies: Mapping[str, Any] | None) -> LiveVerdict:
    """`built_from`: the rendered MachineConfig the pool's image was built from; `rendered`: the
    pool's new one; `policies`: the cluster's merged node disruption policies, None on a release
    without them."""
    d = disruption.diff(built_from, rendered)
    if d.fips or d.kernel_type or d.extensions:
        return LiveVerdict(False, why="the image installs what changed (extensions, kernel type or fips)")
    if _rest(built_from) != _rest(rendered):
        return LiveVerdict(False, why="what changed is in the image alone (links, directories or another "
                                      "field the machine-config daemon does not apply)")
    gone = [*d.removed_files, *d.removed_units, *_removed_from_units(built_from, rendered)]
    if gone:
        return LiveVerdict(False, why=f"removed from the config, still in the image: {', '.join(gone)}")
    done = disruption.actions(replace(d, os_update=False, kargs=False), policies)
    if disruption.reboots(done):
        return LiveVerdict(False, done, why="the machine-config daemon reboots for it")
    return LiveVerdict(True, done)


def has_policies(release: str) -> bool:
    """The daemon of this release reads node disruption policies (an unknown release: assumed so,
    and the MachineConfiguration's own status decides)."""
    try:
        major, minor = (int(p) for p in release.split(".")[:2])
    except ValueError:
        return True
    return (major, minor) >= POLICY_SINCE


#: The MachineConfiguration the operator publishes the merged node disruption policies in
#: (`ctrlcommon.MCOOperatorKnobsObjectName`)
POLICY_KIND, POLICY_NAME = "MachineConfiguration", "cluster"


@dataclass(frozen=True)
class Policy:
    """What a run decides live changes by: the merged policies (`clusterPolicies`), or None for the
    rule of a release without them (`legacy`); `why`: why neither can be used ("" when one can)."""
    policies: Mapping[str, Any] | None = None
    legacy: bool = False
    why: str = ""

    @property
    def usable(self) -> bool:
        return self.legacy or self.policies is not None


def policy_of(obj: Mapping[str, Any] | None, problem: str = "") -> Policy:
    """The policy as the daemon reads it (`calculatePostConfigChangeNodeDisruptionAction`): trusted
    only when the operator observed the MachineConfiguration's generation. `problem`: why it could
    not be read (a 403)."""
    where = f"{POLICY_KIND} {POLICY_NAME}"
    if problem:
        return Policy(why=f"cannot read {where}: {problem}")
    if obj is None:
        return Policy(why=f"{where} not found (the node disruption policies)")
    generation = (obj.get("metadata") or {}).get("generation")
    status = obj.get("status") if isinstance(obj.get("status"), Mapping) else {}
    if generation is None or status.get("observedGeneration") != generation:
        return Policy(why=f"{where}: the operator has not observed generation {generation} yet")
    found = (status.get("nodeDisruptionPolicyStatus") or {}).get("clusterPolicies")
    if not isinstance(found, Mapping):
        return Policy(why=f"{where} has no status.nodeDisruptionPolicyStatus.clusterPolicies")
    return Policy(found)


LEGACY = Policy(legacy=True)
