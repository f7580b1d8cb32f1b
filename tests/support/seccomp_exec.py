"""Load an OCI `linux.seccomp` (tests/support/seccompprofile.py `resolve`) into the kernel, then exec a
command under it: `python3 seccomp_exec.py SPEC.json -- COMMAND...`. Run by the system Python with
libseccomp's bindings (Debian python3-seccomp), not the project's venv.

The rules are runc's (opencontainers/runc libcontainer/seccomp/seccomp_linux.go, `InitSeccomp`,
`getAction`, `matchCall`): the default action, ERRNO and TRACE returning `errnoRet` or EPERM; the
spec's extra architectures; the no_new_privs attribute off (the runtime sets no_new_privs itself,
setpriv does here); one rule per syscall name, skipped when its action is the default action or
libseccomp does not know the name; conditions on distinct arguments in one rule (all must hold),
but one rule per condition when two conditions name the same argument. Loaded before the uid and
capabilities are dropped, as runc does without no_new_privs (libcontainer/standard_init_linux.go:
"Without NoNewPrivileges seccomp is a privileged operation")."""

import errno
import json
import os
import sys

import seccomp

_OPS = {"SCMP_CMP_EQ": seccomp.EQ, "SCMP_CMP_NE": seccomp.NE, "SCMP_CMP_GT": seccomp.GT,
        "SCMP_CMP_GE": seccomp.GE, "SCMP_CMP_LT": seccomp.LT, "SCMP_CMP_LE": seccomp.LE,
        "SCMP_CMP_MASKED_EQ": seccomp.MASKED_EQ}
_ARCHES = {"SCMP_ARCH_" + a: getattr(seccomp.Arch, a) for a in dir(seccomp.Arch) if not a.startswith("_")}


def action(name, errno_ret):
    code = errno.EPERM if errno_ret is None else errno_ret
    fixed = {"SCMP_ACT_ALLOW": seccomp.ALLOW, "SCMP_ACT_KILL": seccomp.KILL, "SCMP_ACT_KILL_THREAD": seccomp.KILL,
             "SCMP_ACT_KILL_PROCESS": seccomp.KILL_PROCESS, "SCMP_ACT_TRAP": seccomp.TRAP,
             "SCMP_ACT_LOG": seccomp.LOG}
    if name in fixed:
        return fixed[name]
    if name == "SCMP_ACT_ERRNO":
        return seccomp.ERRNO(code)
    if name == "SCMP_ACT_TRACE":
        return seccomp.TRACE(code)
    raise SystemExit(f"seccomp_exec: invalid action {name}")


def build(spec):
    default = action(spec["defaultAction"], spec.get("defaultErrnoRet"))
    f = seccomp.SyscallFilter(default)
    for arch in spec.get("architectures") or ():
        if not f.exist_arch(_ARCHES[arch]):        # the native one is there already
            f.add_arch(_ARCHES[arch])
    f.set_attr(seccomp.Attr.CTL_NNP, 0)
    for call in spec["syscalls"]:
        act = action(call["action"], call.get("errnoRet"))
        if act == default:
            continue
        conds = [seccomp.Arg(a["index"], _OPS[a["op"]], a["value"], a.get("valueTwo", 0))
                 for a in call.get("args") or ()]
        indexes = [a["index"] for a in call.get("args") or ()]
        groups = [[c] for c in conds] if len(set(indexes)) < len(indexes) else [conds]
        for name in call["names"]:
            if seccomp.resolve_syscall(seccomp.Arch.NATIVE, name) == -1:
                continue                       # runc: "unknown seccomp syscall ignored"
            for group in groups:
                f.add_rule(act, name, *group)
    return f


def main(argv):
    spec_path, sep, *command = argv
    assert sep == "--" and command, "usage: seccomp_exec.py SPEC.json -- COMMAND..."
    with open(spec_path) as fh:
        build(json.load(fh)).load()
    os.execvp(command[0], command)


if __name__ == "__main__":
    main(sys.argv[1:])
