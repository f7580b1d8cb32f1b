"""What the machine-config daemon does to a node that moves from one rendered config to another: a
reboot, or which service it reloads or restarts, or nothing. A port of the daemon's own rule
(openshift/machine-config-operator @ 7ff337a4, `pkg/daemon/update.go`), so that a change the node
takes live costs no image build and no reboot (docs/rollout.md, "Changes a node takes live"):

- `diff`: `newMachineConfigDiff`, with the file and unit sets `update` builds
  (`ctrlcommon.CalculateConfigFileDiffs`, `ctrlcommon.GetChangedConfigUnitsByType`,
  `pkg/controller/common/helpers.go`);
- `actions` with the cluster's policy: the prelude of
  `(*Daemon).calculatePostConfigChangeNodeDisruptionAction`
  (an `osImageURL`, kernel argument, fips, kernel type or extensions change reboots), then
  `calculatePostConfigChangeNodeDisruptionActionFromMCDiffs`, whose file rule is
  `ctrlcommon.FindClosestFilePolicyPathMatch` (the longest policy path equal to or above the file);
- `actions` without one: `calculatePostConfigChangeAction` and
  `calculatePostConfigChangeActionFromMCDiffs`, the rule of releases before node disruption
  policies (their fixed list of files).

Files and units are compared as the JSON the rendered config holds, where the daemon compares
the Ignition structs it parsed: a field the parser drops, or a default written out, counts here as
a change (at worst a build where none was needed). One difference goes the other way: an absent
list and an empty one are the same here, where Go's `reflect.DeepEqual` tells a nil slice from an
empty one; rendered configs are written with `omitempty`, so they carry neither. Pure."""

from __future__ import annotations

import posixpath
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

REBOOT, NONE, RELOAD, RESTART, DRAIN, DAEMON_RELOAD, SPECIAL = (
    "Reboot", "None", "Reload", "Restart", "Drain", "DaemonReload", "Special")
ACTION_TYPES = (REBOOT, NONE, RELOAD, RESTART, DRAIN, DAEMON_RELOAD, SPECIAL)

#: `calculatePostConfigChangeActionFromMCDiffs`: the paths of the rule before node disruption
#: policies (`caBundleFilePath`, `pkg/daemon/daemon.go`; the rest `pkg/daemon/constants/constants.go`)
LEGACY_NONE = ("/etc/kubernetes/kubelet-ca.crt", "/var/lib/kubelet/config.json")
LEGACY_NONE_DIRS = ("/etc/nmstate/openshift",)
LEGACY_RELOAD_CRIO = ("/etc/containers/registries.conf",
                      "/etc/machine-config-daemon/no-reboot/containers-gpg.pub",
                      "/etc/containers/policy.json")
LEGACY_RELOAD_CRIO_DIRS = ("/etc/containers/registries.d",)
LEGACY_RESTART_CRIO = ("/etc/pki/ca-trust/source/anchors/openshift-config-user-ca-bundle.crt",)


@dataclass(frozen=True)
class Action:
    """A `NodeDisruptionPolicyStatusAction`: its type, and the service of a Reload or Restart."""
    type: str
    service: str = ""

    def text(self) -> str:
        return {RELOAD: f"reload {self.service}", RESTART: f"restart {self.service}", NONE: "none",
                REBOOT: "reboot", DRAIN: "drain", DAEMON_RELOAD: "daemon-reload",
                SPECIAL: "reload crio.service (drain only for an unsafe registries.conf change)",
                }.get(self.type, self.type)


REBOOTS = (Action(REBOOT),)


@dataclass(frozen=True)
class Diff:
    """`machineConfigDiff`, with the paths of the files and the names of the units that changed
    (added, removed or changed), and those removed."""
    os_update: bool = False
    kargs: bool = False
    fips: bool = False
    kernel_type: bool = False
    extensions: bool = False
    passwd: bool = False
    files_changed: bool = False        # the daemon's `files`: the file list differs at all
    units_changed: bool = False        # `units`: the unit list differs at all
    files: tuple[str, ...] = ()
    units: tuple[str, ...] = ()
    removed_files: tuple[str, ...] = ()
    removed_units: tuple[str, ...] = ()

    @property
    def os_changes(self) -> bool:
        """The prelude's reasons to reboot before any policy is read."""
        return self.os_update or self.kargs or self.fips or self.kernel_type or self.extensions


def _spec(mc: Mapping[str, Any]) -> Mapping[str, Any]:
    spec = mc.get("spec") if isinstance(mc, Mapping) else None
    return spec if isinstance(spec, Mapping) else {}


def _config(mc: Mapping[str, Any]) -> Mapping[str, Any]:
    config = _spec(mc).get("config")
    return config if isinstance(config, Mapping) else {}


def _section(config: Mapping[str, Any], outer: str, inner: str) -> list[Any]:
    part = config.get(outer)
    items = part.get(inner) if isinstance(part, Mapping) else None
    return list(items) if isinstance(items, list) else []


def _by(items: Iterable[Any], key: str) -> dict[str, Any]:
    return {str(i[key]): i for i in items if isinstance(i, Mapping) and isinstance(i.get(key), str)}


def _kernel_type(value: Any) -> str:
    """`helpers.CanonicalizeKernelType`: "" and "default" are the same kernel."""
    return "default" if value in (None, "", "default") else str(value)


def _both_empty(a: Any, b: Any) -> bool:
    return not a and not b


def diff(old: Mapping[str, Any], new: Mapping[str, Any]) -> Diff:
    """`newMachineConfigDiff(old, new)` and the file and unit sets of `update`."""
    o, n = _spec(old), _spec(new)
    old_files, new_files = _by(_section(_config(old), "storage", "files"), "path"), \
        _by(_section(_config(new), "storage", "files"), "path")
    old_units, new_units = _by(_section(_config(old), "systemd", "units"), "name"), \
        _by(_section(_config(new), "systemd", "units"), "name")
    removed_files = sorted(set(old_files) - set(new_files))
    removed_units = sorted(set(old_units) - set(new_units))
    return Diff(
        os_update=(o.get("osImageURL") or "") != (n.get("osImageURL") or ""),
        kargs=not (_both_empty(o.get("kernelArguments"), n.get("kernelArguments"))
                   or o.get("kernelArguments") == n.get("kernelArguments")),
        fips=bool(o.get("fips")) != bool(n.get("fips")),
        kernel_type=_kernel_type(o.get("kernelType")) != _kernel_type(n.get("kernelType")),
        extensions=not (_both_empty(o.get("extensions"), n.get("extensions"))
                        or o.get("extensions") == n.get("extensions")),
        passwd=(_config(old).get("passwd") or {}) != (_config(new).get("passwd") or {}),
        files_changed=_section(_config(old), "storage", "files") != _section(_config(new), "storage",
                                                                              "files"),
        units_changed=_section(_config(old), "systemd", "units") != _section(_config(new), "systemd",
                                                                              "units"),
        files=tuple(removed_files + sorted(p for p, f in new_files.items() if old_files.get(p) != f)),
        units=tuple(removed_units + sorted(u for u, v in new_units.items() if old_units.get(u) != v)),
        removed_files=tuple(removed_files), removed_units=tuple(removed_units))


def _action(raw: Any) -> Action:
    raw = raw if isinstance(raw, Mapping) else {}
    kind = str(raw.get("type") or "")
    service = (raw.get("reload") if kind == RELOAD else raw.get("restart") if kind == RESTART else None) or {}
    # the API's validation makes every type one of ACTION_TYPES; anything else is taken as a reboot
    return Action(kind if kind in ACTION_TYPES else REBOOT,
                  str(service.get("serviceName") or "") if isinstance(service, Mapping) else "")


def _actions(raw: Any) -> list[Action]:
    return [_action(a) for a in raw] if isinstance(raw, list) else []


def _clean(path: str) -> str:
    """Go's `filepath.Clean`: as `normpath`, but a leading `//` is one `/`."""
    cleaned = posixpath.normpath(path) if path else "."
    return "/" + cleaned.lstrip("/") if cleaned.startswith("//") else cleaned


def _subdirectory(directory: str, target: str) -> bool:
    """`ctrlcommon.IsSubdirectory`: `Clean(dir) + "/"` is a prefix of `Clean(target)` (so a policy
    path `/` matches no file: `//`)."""
    return _clean(target).startswith(_clean(directory) + "/")


def _closest_file_policy(path: str, files: Iterable[Any]) -> list[Action] | None:
    """`ctrlcommon.FindClosestFilePolicyPathMatch`: the actions of the longest policy path that is
    the file's or a directory above it (None: no policy names it)."""
    found, length = None, 0
    for policy in files:
        if not isinstance(policy, Mapping):
            continue
        where = str(policy.get("path") or "")
        if where and (path == where or _subdirectory(where, path)) and len(where) > length:
            found, length = _actions(policy.get("actions")), len(where)
    return found


def from_policy(d: Diff, policies: Mapping[str, Any]) -> tuple[Action, ...]:
    """`calculatePostConfigChangeNodeDisruptionActionFromMCDiffs(diff.passwd, files, units,
    clusterPolicies)`."""
    out: list[Action] = []
    for path in d.files:
        found = _closest_file_policy(path, policies.get("files") or [])
        if found is None:
            return REBOOTS
        out += found
    units = {str(u.get("name")): _actions(u.get("actions")) for u in policies.get("units") or []
             if isinstance(u, Mapping)}
    for unit in d.units:
        if unit not in units:
            return REBOOTS
        out += units[unit]
    if d.passwd:
        sshkey = policies.get("sshkey")
        out += _actions(sshkey.get("actions") if isinstance(sshkey, Mapping) else None)
    if any(a.type == REBOOT for a in out):
        return REBOOTS
    if any(a.type == NONE for a in out):
        rest = [a for a in out if a.type != NONE]
        return tuple(rest) if rest else (Action(NONE),)
    return tuple(out)


def legacy(d: Diff) -> tuple[Action, ...]:
    """`calculatePostConfigChangeAction` without the force file: the rule before node disruption
    policies; its actions named as the policy names them (reload or restart crio.service)."""
    if d.os_changes or d.units_changed:
        return REBOOTS
    action = Action(NONE)
    for path in d.files:
        directory = posixpath.dirname(path)
        if path in LEGACY_NONE:
            continue
        if path in LEGACY_RELOAD_CRIO or directory in LEGACY_RELOAD_CRIO_DIRS:
            if action != Action(RESTART, "crio.service"):
                action = Action(RELOAD, "crio.service")
        elif path in LEGACY_RESTART_CRIO:
            action = Action(RESTART, "crio.service")
        elif directory in LEGACY_NONE_DIRS:
            continue
        else:
            return REBOOTS
    return (action,)


def actions(d: Diff, policies: Mapping[str, Any] | None) -> tuple[Action, ...]:
    """What the daemon does for `d`: under the cluster's merged policy
    (`status.nodeDisruptionPolicyStatus.clusterPolicies` of the MachineConfiguration `cluster`),
    or, with None, by the rule of releases before node disruption policies."""
    if policies is None:
        return legacy(d)
    if d.os_changes:
        return REBOOTS
    if not d.files_changed and not d.units_changed and not d.passwd:
        return (Action(NONE),)
    return from_policy(d, policies)


def reboots(done: Iterable[Action]) -> bool:
    return any(a.type == REBOOT for a in done)


def said(done: Iterable[Action]) -> str:
    """One line for status and explain: "reload crio.service", "restart a, restart b", "none"."""
    texts = list(dict.fromkeys(a.text() for a in done))
    return ", ".join(texts) if texts else "none"
