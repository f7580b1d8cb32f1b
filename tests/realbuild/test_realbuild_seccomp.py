"""Issue 31 item 6: the build Pod's script under a real seccomp filter. The runtime's default
profile (tests/support/seccompprofile.py: containers/common's, as CRI-O changes it) is resolved
against the Pod's bounding set and loaded into the kernel by libseccomp before the script runs as
uid 1000 (tests/support/seccomp_exec.py). Which profile lets rootless buildah build, and why the
Pod sets none (docs/design.md, "The build Pod's seccomp profile")."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from reconcile.contract import annotations as A
from tests.realbuild.test_realbuild import cluster, env, first_run, unprivileged_root  # noqa: F401 (fixtures)
from tests.support import factory as F
from tests.support import realbuild as R
from tests.support import seccompprofile as SP

pytestmark = pytest.mark.realbuild
#: the build Pod's bounding set: the runtime's defaults less what its securityContext drops
BOUNDING = {"SETUID", "SETGID"}


@pytest.fixture(scope="module")
def loader():
    why = SP.loader_missing()
    if why:
        pytest.fail(why) if os.environ.get(R.REQUIRE) == "require" else pytest.skip(f"{why}: `{R.INSTALL}`")


def _under(spec, tmp_path, *command):
    return subprocess.run(SP.wrap(spec, tmp_path / "spec.json", list(command)), capture_output=True, text=True)


def test_the_filter_is_in_force_and_denies_what_the_profile_denies(loader, tmp_path):
    """Under CRI-O's default resolved for the build Pod's bounding set, the kernel reports a filter,
    and the two syscalls it denies fail with the errno the profile gives them (as root, where
    nothing else would refuse them); without the filter both succeed."""
    profile = SP.runtime_default(SP.CRIO)
    spec = SP.resolve(profile, BOUNDING)
    chroot_errno = next(r["errnoRet"] for r in spec["syscalls"] if r["names"] == ["chroot"])
    status = _under(spec, tmp_path, "grep", "^Seccomp:", "/proc/self/status")
    assert status.stdout.split() == ["Seccomp:", "2"], status          # 2: SECCOMP_MODE_FILTER
    denied = _under(spec, tmp_path, "unshare", "--user", "true")
    assert denied.returncode != 0 and os.strerror(profile["defaultErrnoRet"]) in denied.stderr, denied
    denied = _under(spec, tmp_path, "chroot", "/", "true")
    assert denied.returncode != 0 and os.strerror(chroot_errno) in denied.stderr, denied
    for command in (["unshare", "--user", "true"], ["chroot", "/", "true"]):
        assert subprocess.run(command, capture_output=True).returncode == 0, command


@pytest.mark.parametrize("name, profile, fails_with", [
    # CRI-O allows unshare only with CAP_SYS_ADMIN: buildah's first step, its user namespace, fails
    ("CRI-O's RuntimeDefault", lambda: SP.runtime_default(SP.CRIO),
     "error during unshare(clone_newuser): function not implemented"),
    # containers/common's own default allows unshare, but chroot only with CAP_SYS_CHROOT in the
    # bounding set: buildah's copier chroots inside its user namespace and is refused (the copier
    # child says so, or dies before it can and its parent reads EOF: which one is a race)
    ("containers/common's default", lambda: SP.runtime_default(SP.PODMAN),
     ("chrooting to directory", "error decoding response from copier subprocess")),
    # a Localhost profile would need both: CRI-O's default with unshare and chroot allowed builds
    ("CRI-O's default + unshare + chroot", lambda: SP.allowing(SP.runtime_default(SP.CRIO), ["unshare", "chroot"]),
     None),
])
def test_which_seccomp_profile_lets_rootless_buildah_build(env, run_cli, unprivileged_root, loader,  # noqa: F811
                                                          name, profile, fails_with):
    registry, host, base = env
    after, pod = first_run(run_cli, cluster(registry, base, F.machineconfig("rendered-worker-1")))
    ctx = pod["spec"]["containers"][0]["securityContext"]
    assert set(R.RUNTIME_DEFAULT_CAPS) - set(ctx["capabilities"]["drop"]) == BOUNDING
    code, message, logs = R.run_build_pod_unprivileged(pod, after, host, unprivileged_root / "p", profile=profile())
    if fails_with:
        assert code != 0 and any(m in logs.lower() for m in ((fails_with,) if isinstance(fails_with, str) else fails_with)), (name, logs)
        if isinstance(fails_with, str):     # one error: the pool's reason is it, not what buildah says after it
            _, a, _ = R.pool_after_failure(run_cli, after, message or logs)
            assert (a[A.STATE], fails_with in a[A.MESSAGE].lower()) == (A.FAILED, True), (a[A.MESSAGE], logs)
        return
    assert code == 0, (name, logs)
    inspected = json.loads(host.run("skopeo", "inspect", "--tls-verify=false",
                                    f"docker://{registry.host}/ocl/os-image:rendered-worker-1").stdout)
    assert inspected["Digest"] == message.strip()

