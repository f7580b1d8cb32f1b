"""The seccomp filter a container runtime gives a container, for the realbuild suite: a profile
(JSON, containers/common's format) resolved against the container's bounding set into the OCI
runtime spec's `linux.seccomp`, which `seccomp_exec.py` loads into the kernel before the build
command runs. Imitated, each rule from its source:

- The profile resolution is containers/common `pkg/seccomp/seccomp_linux.go` `setupSeccomp`: the
  `archMap` entry of the native architecture gives `architectures` (it and its sub-architectures);
  a rule whose `excludes.arches` holds the native arch, or whose `excludes.caps` has any capability
  of the bounding set, is dropped; so is one whose `includes.arches` lacks the native arch, or whose
  `includes.caps` has a capability not in the bounding set. `defaultAction`, `defaultErrnoRet`,
  `names`, `action`, `errnoRet` and `args` are copied as they are.
- CRI-O's `RuntimeDefault` is containers/common's `DefaultProfile()` (the source `seccomp.json` is
  generated from, `pkg/seccomp/default_linux.go`, shipped as /usr/share/containers/seccomp.json)
  with one change: `unshare` is taken out of the unconditional allow list and allowed only with
  CAP_SYS_ADMIN (cri-o/cri-o `internal/config/seccomp/seccomp.go` `DefaultProfile`, PR #5788,
  CRI-O 1.24 and later; `Setup` resolves it with `seccomp.LoadProfileFromConfig` against the
  container's spec). `PODMAN` names the unchanged profile (podman, buildah and containers/common's
  own default).

What it leaves out: runc's ENOSYS patch for syscalls newer than the profile (`patchbpf`), the
seccomp notifier CRI-O can inject, `minKernel`, and `flags`."""

from __future__ import annotations

import copy
import json
import os
import platform
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

#: containers-common's copy of containers/common pkg/seccomp/seccomp.json (Debian's
#: golang-github-containers-common, a dependency of buildah)
PROFILE = Path("/usr/share/containers/seccomp.json")
#: the system Python with libseccomp's bindings (Debian python3-seccomp) runs the loader
LOADER_PYTHON = "/usr/bin/python3"
LOADER = Path(__file__).with_name("seccomp_exec.py")
#: Go's GOARCH names, as libseccomp-golang's native arch String() gives them (setupSeccomp's `arch`)
_NATIVE = {"x86_64": "amd64", "aarch64": "arm64", "s390x": "s390x", "ppc64le": "ppc64le"}
_TO_SECCOMP = {"amd64": "SCMP_ARCH_X86_64", "arm64": "SCMP_ARCH_AARCH64", "s390x": "SCMP_ARCH_S390X"}
CRIO = "crio"
PODMAN = "podman"


def native_arch() -> str:
    return _NATIVE.get(platform.machine(), platform.machine())


def load_profile() -> dict[str, Any]:
    return json.loads(PROFILE.read_text())


def crio_default(profile: Mapping[str, Any]) -> dict[str, Any]:
    """CRI-O's DefaultProfile(): `unshare` only with CAP_SYS_ADMIN."""
    out = copy.deepcopy(dict(profile))
    for rule in out["syscalls"]:
        if (rule.get("action") == "SCMP_ACT_ALLOW" and not rule.get("args") and not rule.get("includes")
                and not rule.get("excludes") and "unshare" in (rule.get("names") or ())):
            rule["names"] = [n for n in rule["names"] if n != "unshare"]
    out["syscalls"].append({"names": ["unshare"], "action": "SCMP_ACT_ALLOW",
                            "includes": {"caps": ["CAP_SYS_ADMIN"]}})
    return out


def runtime_default(runtime: str = CRIO) -> dict[str, Any]:
    """The profile a runtime applies for `seccompProfile: {type: RuntimeDefault}`."""
    profile = load_profile()
    return crio_default(profile) if runtime == CRIO else profile


def without(profile: Mapping[str, Any], names: Iterable[str]) -> dict[str, Any]:
    """The profile with `names` taken out of every rule that allows them (so they get the default
    action): a stricter profile for negative controls."""
    drop = set(names)
    out = copy.deepcopy(dict(profile))
    for rule in out["syscalls"]:
        if rule.get("action") == "SCMP_ACT_ALLOW":
            rule["names"] = [n for n in rule.get("names") or () if n not in drop]
    return out


def allowing(profile: Mapping[str, Any], names: Iterable[str]) -> dict[str, Any]:
    """The profile with `names` allowed whatever the capabilities: what a Localhost profile for the
    build would add."""
    allow = list(names)
    out = copy.deepcopy(dict(profile))
    for rule in out["syscalls"]:
        rule["names"] = [n for n in rule.get("names") or () if n not in allow]
    out["syscalls"].append({"names": allow, "action": "SCMP_ACT_ALLOW"})
    return out


def resolve(profile: Mapping[str, Any], bounding: Iterable[str], arch: str | None = None) -> dict[str, Any]:
    """containers/common setupSeccomp: the OCI spec's linux.seccomp for a container whose bounding
    set is `bounding` (names with or without `CAP_`)."""
    arch = arch or native_arch()
    caps = {c if c.startswith("CAP_") else f"CAP_{c}" for c in bounding}
    if profile.get("architectures") and profile.get("archMap"):
        raise ValueError("'architectures' and 'archMap' were specified in the seccomp profile")
    arches = list(profile.get("architectures") or ())
    for entry in profile.get("archMap") or ():
        if entry["architecture"] == _TO_SECCOMP.get(arch):
            arches += [entry["architecture"], *(entry.get("subArchitectures") or ())]
            break
    syscalls = []
    for rule in profile.get("syscalls") or ():
        inc, exc = rule.get("includes") or {}, rule.get("excludes") or {}
        if arch in (exc.get("arches") or ()) or any(c in caps for c in exc.get("caps") or ()):
            continue
        if (inc.get("arches") and arch not in inc["arches"]) or any(c not in caps for c in inc.get("caps") or ()):
            continue
        if rule.get("name") and rule.get("names"):
            raise ValueError("'name' and 'names' were specified in the seccomp profile")
        names = [rule["name"]] if rule.get("name") else list(rule.get("names") or ())
        if names:
            syscalls.append({"names": names, "action": rule["action"], "errnoRet": rule.get("errnoRet"),
                             "args": [{k: a.get(k, 0) for k in ("index", "value", "valueTwo", "op")}
                                      for a in rule.get("args") or ()]})
    return {"defaultAction": profile["defaultAction"], "defaultErrnoRet": profile.get("defaultErrnoRet"),
            "architectures": arches, "syscalls": syscalls}


def pod_profile(pod: Mapping[str, Any]) -> str | None:
    """The container's seccompProfile type (the container's own, else the Pod's), as the kubelet
    chooses it; None when neither sets one."""
    (container,) = pod["spec"]["containers"]
    for ctx in (container.get("securityContext") or {}, pod["spec"].get("securityContext") or {}):
        if ctx.get("seccompProfile"):
            return ctx["seccompProfile"]["type"]
    return None


def loader_missing() -> str | None:
    """Why a filter cannot be loaded here, or None."""
    missing = []
    if not PROFILE.exists():
        missing.append(f"{PROFILE} (golang-github-containers-common)")
    if not os.path.exists(LOADER_PYTHON) or os.system(f"{LOADER_PYTHON} -c 'import seccomp' 2>/dev/null"):
        missing.append(f"libseccomp's Python bindings for {LOADER_PYTHON} (python3-seccomp)")
    return f"needs {', '.join(missing)}" if missing else None


def wrap(spec: Mapping[str, Any], path: Path, command: list[str]) -> list[str]:
    """`command` run under the filter `spec` (written to `path`)."""
    path.write_text(json.dumps(spec))
    return [LOADER_PYTHON, str(LOADER), str(path), "--", *command]
