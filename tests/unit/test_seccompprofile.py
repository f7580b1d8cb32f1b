"""tests/support/seccompprofile.py resolves a profile as containers/common's setupSeccomp does
(pkg/seccomp/seccomp_linux.go) and changes the default as CRI-O's DefaultProfile does
(cri-o internal/config/seccomp/seccomp.go): each rule below is one clause of that code."""

import pytest

from tests.support import seccompprofile as SP

PROFILE = {
    "defaultAction": "SCMP_ACT_ERRNO", "defaultErrnoRet": 38,
    "archMap": [{"architecture": "SCMP_ARCH_AARCH64", "subArchitectures": ["SCMP_ARCH_ARM"]},
                {"architecture": "SCMP_ARCH_X86_64", "subArchitectures": ["SCMP_ARCH_X86", "SCMP_ARCH_X32"]}],
    "syscalls": [
        {"names": ["read", "unshare"], "action": "SCMP_ACT_ALLOW"},
        {"names": ["chroot"], "action": "SCMP_ACT_ALLOW", "includes": {"caps": ["CAP_SYS_CHROOT"]}},
        {"names": ["chroot"], "action": "SCMP_ACT_ERRNO", "errnoRet": 1, "excludes": {"caps": ["CAP_SYS_CHROOT"]}},
        {"names": ["arch_prctl"], "action": "SCMP_ACT_ALLOW", "includes": {"arches": ["amd64", "x32"]}},
        {"names": ["vm86"], "action": "SCMP_ACT_ALLOW", "excludes": {"arches": ["amd64"]}},
        {"names": ["both"], "action": "SCMP_ACT_ALLOW", "includes": {"caps": ["CAP_SETUID", "CAP_SYS_ADMIN"]}},
        {"names": ["socket"], "action": "SCMP_ACT_ALLOW",
         "args": [{"index": 0, "value": 16, "op": "SCMP_CMP_NE"}]},
    ]}


def names(spec):
    return [(tuple(r["names"]), r["action"]) for r in spec["syscalls"]]


def test_arch_map_gives_the_native_arch_and_its_sub_arches():
    assert SP.resolve(PROFILE, [], arch="amd64")["architectures"] == ["SCMP_ARCH_X86_64", "SCMP_ARCH_X86",
                                                                     "SCMP_ARCH_X32"]
    assert SP.resolve(PROFILE, [], arch="arm64")["architectures"] == ["SCMP_ARCH_AARCH64", "SCMP_ARCH_ARM"]


def test_rules_are_kept_by_the_bounding_set_and_the_arch():
    without = names(SP.resolve(PROFILE, ["SETUID"], arch="amd64"))
    assert without == [(("read", "unshare"), "SCMP_ACT_ALLOW"), (("chroot",), "SCMP_ACT_ERRNO"),
                       (("arch_prctl",), "SCMP_ACT_ALLOW"), (("socket",), "SCMP_ACT_ALLOW")]
    # includes.caps needs every capability; excludes.caps drops the rule on any one
    with_caps = names(SP.resolve(PROFILE, ["CAP_SYS_CHROOT", "SETUID", "SYS_ADMIN"], arch="arm64"))
    assert with_caps == [(("read", "unshare"), "SCMP_ACT_ALLOW"), (("chroot",), "SCMP_ACT_ALLOW"),
                         (("vm86",), "SCMP_ACT_ALLOW"), (("both",), "SCMP_ACT_ALLOW"),
                         (("socket",), "SCMP_ACT_ALLOW")]


def test_actions_errnos_and_args_are_copied():
    spec = SP.resolve(PROFILE, [], arch="amd64")
    assert (spec["defaultAction"], spec["defaultErrnoRet"]) == ("SCMP_ACT_ERRNO", 38)
    chroot = next(r for r in spec["syscalls"] if r["names"] == ["chroot"])
    assert chroot["errnoRet"] == 1
    socket = next(r for r in spec["syscalls"] if r["names"] == ["socket"])
    assert socket["args"] == [{"index": 0, "value": 16, "valueTwo": 0, "op": "SCMP_CMP_NE"}]


def test_both_architectures_and_arch_map_is_an_error():
    with pytest.raises(ValueError, match="'architectures' and 'archMap'"):
        SP.resolve(dict(PROFILE, architectures=["SCMP_ARCH_X86_64"]), [])


def test_crio_allows_unshare_only_with_cap_sys_admin():
    crio = SP.crio_default(PROFILE)
    assert "unshare" not in names(SP.resolve(crio, ["SETUID"], arch="amd64"))[0][0]
    assert (("unshare",), "SCMP_ACT_ALLOW") not in names(SP.resolve(crio, ["SETUID"], arch="amd64"))
    assert (("unshare",), "SCMP_ACT_ALLOW") in names(SP.resolve(crio, ["SYS_ADMIN"], arch="amd64"))
    assert "unshare" in PROFILE["syscalls"][0]["names"]                      # the input is not changed
