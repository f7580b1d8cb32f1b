"""Parts of the build Pod's script (manifests/build-pod.sh) run on their own in dash, the POSIX sh
of Debian's /bin/sh, with a stand-in `buildah` on the PATH: what the realbuild suite cannot make
the real buildah do on demand (an `rmi` that fails)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from reconcile.imagebuild.builders import pod as pod_builder

SCRIPT = Path(__file__).resolve().parents[2] / "manifests" / "build-pod.sh"

#: A stand-in for buildah: every call goes to $FAKE_LOG; `images` lists $FAKE_IDS (the full ids,
#: as `buildah images --quiet --no-trunc` prints them: sha256:<hex>), `inspect` answers the image
#: id (hex, as {{.FromImageID}}) of a name in $FAKE_NAMES ("name=hex ..."), else fails as buildah
#: does for an unknown image; `unshare` runs its command (here as the caller); the command named by
#: $FAKE_FAILS (`rmi`, `images`, `unshare`) fails.
FAKE_BUILDAH = r"""#!/bin/sh
echo "$*" >> "$FAKE_LOG"
for last; do :; done
[ "$1" != "${FAKE_FAILS:-}" ] || { echo "Error: $1 $last: refused" >&2; exit 1; }
case $1 in
  unshare) shift; exec "$@" ;;
  inspect)
    for pair in $FAKE_NAMES; do
      [ "${pair%%=*}" = "$last" ] && { echo "${pair#*=}"; exit 0; }
    done
    echo "Error: $last: image not known" >&2; exit 125 ;;
  images)
    for id in $FAKE_IDS; do
      if [ "$2" = --quiet ]; then echo "sha256:$id"; else echo "localhost/x latest ${id%"${id#????????????}"}"; fi
    done ;;
esac
"""


def shell_functions() -> str:
    """Every function the script defines (from `name() {` to the `}` that closes it at the start
    of a line), and nothing it runs."""
    found = re.findall(r"^[a-z_]+\(\) \{\n.*?^\}\n", SCRIPT.read_text(), re.S | re.M)
    assert "prune_storage() {" in "".join(found)
    return "".join(found)


def dash() -> str:
    path = shutil.which("dash")
    if path is None:
        why = "needs dash, the POSIX sh the script must stay within (apt-get install dash)"
        pytest.fail(why) if os.environ.get("OCL_REALBUILD") == "require" else pytest.skip(why)
    return path


def run_prune(tmp_path: Path, dockerfile: str, names: dict[str, str], ids: list[str],
              fails: str = "") -> tuple[int, list[str], str]:
    """prune_storage as the script calls it (under set -eu, on the left of ||): its exit status,
    the buildah calls it made, its output."""
    result, status, calls = prune_process(tmp_path, dockerfile, names, ids, fails)
    return status, calls, result.stdout + result.stderr


def prune_process(tmp_path: Path, dockerfile: str, names: dict[str, str], ids: list[str],
                  fails: str = "") -> tuple[subprocess.CompletedProcess[str], int, list[str]]:
    """run_prune's shell, its two streams apart."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "buildah").write_text(FAKE_BUILDAH)
    (bindir / "buildah").chmod(0o755)
    (tmp_path / "Dockerfile").write_text(dockerfile)
    log = tmp_path / "calls"
    env = dict(os.environ, PATH=f"{bindir}:{os.environ['PATH']}", DOCKERFILE_DIR=str(tmp_path),
               FAKE_LOG=str(log), FAKE_IDS=" ".join(ids), FAKE_NAMES=" ".join(f"{k}={v}" for k, v in names.items()),
               FAKE_FAILS=fails)
    program = f"set -eu\n{shell_functions()}\nif prune_storage; then echo status=0; else echo status=$?; fi\n"
    result = subprocess.run([dash(), "-c", program], env=env, capture_output=True, text=True, timeout=30,
                            cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    status = int(re.search(r"^status=(\d+)$", result.stdout, re.M).group(1))
    calls = log.read_text().splitlines() if log.exists() else []
    return result, status, calls


BASE, OLD, BUILT = "a" * 64, "b" * 64, "c" * 64
DOCKERFILE = "FROM registry.example/base:v2 AS extract\nRUN true\nFROM registry.example/base:v2 AS configs\n"


def test_prune_storage_removes_every_image_the_dockerfile_does_not_name(tmp_path):
    status, calls, out = run_prune(tmp_path, DOCKERFILE, {"registry.example/base:v2": BASE}, [BASE, OLD, BUILT])
    assert status == 0, out
    assert sorted(c for c in calls if c.startswith("rmi")) == [f"rmi --force sha256:{OLD}", f"rmi --force sha256:{BUILT}"]


def test_prune_storage_removes_nothing_when_no_image_the_dockerfile_names_is_stored(tmp_path):
    """A build that failed before its pull added nothing: the last base stays (its layers are most
    of the next base's)."""
    status, calls, out = run_prune(tmp_path, DOCKERFILE, {}, [OLD])
    assert status == 0, out
    assert not [c for c in calls if c.startswith("rmi")], calls
    assert "build storage kept as it was" in out


@pytest.mark.parametrize("stored", [True, False], ids=["kept", "kept-as-it-was"])
def test_prune_storage_says_what_it_kept_on_stderr_before_the_failed_builds_reason(tmp_path, stored):
    """A failed build's reason is the log's last line (the kubelet's FallbackToLogsOnError reads the
    log's tail), said again on stderr after the pruning. The runtime reads stdout and stderr from
    two pipes, with no order between them: a pruning line on stdout may land after the reason. On
    the real node a push the registry refused once left the
    pool's reason `build storage kept: 1 images`."""
    names = {"registry.example/base:v2": BASE} if stored else {}
    result, status, calls = prune_process(tmp_path, DOCKERFILE, names, [BASE, OLD])
    assert [line for line in result.stdout.splitlines() if not line.startswith("status=")] == []
    assert "build storage kept" in result.stderr


@pytest.mark.parametrize("fails", ["rmi", "images"])
def test_prune_storage_fails_when_an_image_cannot_be_removed(tmp_path, fails):
    """The script says `removing the images this build did not use failed` on the function's
    status: an `rmi` that fails, or the listing, must make it non-zero, whatever the function does
    after it."""
    status, calls, out = run_prune(tmp_path, DOCKERFILE, {"registry.example/base:v2": BASE}, [BASE, OLD],
                                   fails=fails)
    assert f"{fails} " in "\n".join(calls)
    assert status != 0, out


def test_prune_storage_takes_a_name_with_a_pattern_as_it_is(tmp_path):
    """`COPY --from=*` names no image, and must not become the names of the files where the script
    runs (pathname expansion of the unquoted list): each name is looked up as written."""
    dockerfile = "FROM registry.example/base:v2\nCOPY --from=* /a /b\nCOPY --from=[bc]?* /c /d\n"
    status, calls, out = run_prune(tmp_path, dockerfile, {"registry.example/base:v2": BASE}, [BASE, OLD])
    assert status == 0, out
    looked_up = [c.rsplit(" ", 1)[1] for c in calls if c.startswith("inspect ")]
    assert looked_up == ["registry.example/base:v2", "*", "[bc]?*"], calls
    assert [c for c in calls if c.startswith("rmi")] == [f"rmi --force sha256:{OLD}"]


def image_refs(tmp_path: Path, dockerfile: str) -> list[str]:
    (tmp_path / "Dockerfile").write_text(dockerfile)
    result = subprocess.run([dash(), "-c", f"set -eu\n{shell_functions()}\nimage_refs \"$0\"", str(tmp_path / "Dockerfile")],
                            capture_output=True, text=True, timeout=30)
    assert result.returncode == 0, result.stderr
    return result.stdout.split()


#: Lines that name images, by Docker's Dockerfile reference (docs.docker.com/reference/dockerfile):
#: "The instruction is not case-sensitive", it may be indented ("leading whitespace before comments
#: (#) and instructions (such as RUN) are ignored"); `FROM [--platform=<platform>] <image> [AS
#: <name>]`; `COPY --from`
#: takes "an image, a build stage, or a named context"; RUN --mount's `from` option is the "build
#: stage, context, or image name for the root of the source", and a RUN may have several --mount.
#: Flags and mount options are lowercase: Dockerfile flags are case-sensitive.
NAMING = {
    "FROM registry.example/upper:1 AS extract": ["registry.example/upper:1"],
    "from registry.example/lower:2": ["registry.example/lower:2"],
    "From registry.example/mixed@sha256:" + "d" * 64: ["registry.example/mixed@sha256:" + "d" * 64],
    "  FROM registry.example/indented:3 AS built": ["registry.example/indented:3"],
    "\tfrom --platform=linux/arm64 registry.example/platform:4 as other": ["registry.example/platform:4"],
    "COPY --from=registry.example/copied:5 /a /b": ["registry.example/copied:5"],
    "copy --chown=0:0 --from=registry.example/copied-lower:6 /c /d": ["registry.example/copied-lower:6"],
    "RUN --mount=type=bind,from=registry.example/m1:7,source=/,target=/x "
    "--mount=type=cache,target=/c,from=registry.example/m2:8 true": ["registry.example/m1:7", "registry.example/m2:8"],
    "run --mount=from=registry.example/m3:9,target=/y true": ["registry.example/m3:9"],
    "RUN --mount=type=bind,from=registry.example/m4:10,target=/z \\\n"
    "    --mount=type=bind,from=registry.example/m5:11,target=/w true": ["registry.example/m4:10", "registry.example/m5:11"],
    # a continued instruction: "\" at the end of a line is the escape character, which joins the
    # next line to it (the reference's "escape" parser directive)
    "COPY \\\n    --from=registry.example/continued:12 /e /f": ["registry.example/continued:12"],
}
#: Lines that name none: a comment, FROM as a word of a command, a mount without `from`.
NAMING_NONE = ["# FROM registry.example/comment:1", "RUN echo FROM registry.example/echoed:2",
               "RUN --mount=type=cache,target=/var/cache true", "COPY ./context/ /dest/"]
#: Stage names that COPY --from may give: no image; buildah inspect finds none, and nothing is kept.
STAGES = {"extract", "built", "other", "0"}


@pytest.mark.parametrize("line", list(NAMING))
def test_image_refs_finds_each_image_a_line_names(tmp_path, line):
    assert image_refs(tmp_path, line + "\n") == NAMING[line]


@pytest.mark.parametrize("line", NAMING_NONE)
def test_image_refs_finds_none_where_a_line_names_none(tmp_path, line):
    assert image_refs(tmp_path, line + "\n") == []


def test_image_refs_of_a_whole_dockerfile(tmp_path):
    """All the lines together, with stage references (`COPY --from=extract`, `--from=0`): every
    image named is found, and nothing but them and stage names."""
    lines = [*NAMING, *NAMING_NONE, "COPY --from=extract /e /f", "copy --from=0 /g /h"]
    found = image_refs(tmp_path, "\n".join(lines) + "\n")
    wanted = {ref for refs in NAMING.values() for ref in refs}
    assert wanted <= set(found) and set(found) - wanted <= STAGES, found


def reflinks(directory: Path) -> tuple[int, str]:
    """reflinks' status as the script's guard reads it (under set -eu, on the left of ||), and what
    it wrote on stderr."""
    program = f"set -eu\n{shell_functions()}\nreflinks \"$0\" && echo status=0 || echo status=$?\n"
    result = subprocess.run([dash(), "-c", program, str(directory)], capture_output=True, text=True, timeout=30)
    assert result.returncode == 0, result.stderr
    return int(re.search(r"^status=(\d+)$", result.stdout, re.M).group(1)), result.stderr


def test_reflinks_says_it_cannot_tell_where_it_cannot_write_its_probe(tmp_path):
    """No probe file there (here a directory that is not, as this test may run as root) is not "no
    reflink" (1): the script would say `vfs without reflink` of a volume it cannot write. A
    directory it can write is checked and left as it was."""
    assert reflinks(tmp_path / "missing") == (2, "")
    status, err = reflinks(tmp_path)
    assert status in (0, 1) and err == "", err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("fails", ["", "unshare"])
def test_native_overlay_removes_its_check_storage_in_buildahs_user_namespace(tmp_path, fails):
    """The check's storage may hold files of buildah's subordinate ids, which uid 1000 cannot
    remove: it goes by `buildah unshare rm -rf`, and by a plain rm where that fails, or a kept
    volume keeps it until the next build."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "buildah").write_text(FAKE_BUILDAH)
    (bindir / "buildah").chmod(0o755)
    log = tmp_path / "calls"
    containers = tmp_path / "volume" / "containers"
    env = dict(os.environ, PATH=f"{bindir}:{os.environ['PATH']}", FAKE_LOG=str(log), FAKE_FAILS=fails)
    program = (f"set -eu\n{shell_functions()}\ngraphroot=$0/storage\nmkdir -p \"$graphroot\"\n"
               "if native_overlay; then echo overlay; else echo vfs; fi\n")
    result = subprocess.run([dash(), "-c", program, str(containers)], env=env, capture_output=True, text=True,
                            timeout=30)
    assert result.returncode == 0 and result.stdout == "overlay\n", result.stderr
    removed = [c for c in log.read_text().splitlines() if c.startswith("unshare rm -rf ")]
    assert len(removed) == 1 and re.fullmatch(rf"unshare rm -rf {containers}/storage\.probe\.\w+", removed[0]), removed
    assert sorted(p.name for p in containers.iterdir()) == ["storage"]


#: A stand-in for buildah that prints $FAKE_OUTPUT (its stdout and stderr in one) and exits with
#: $FAKE_STATUS.
FAKE_FAILING_BUILDAH = r"""#!/bin/sh
printf '%s' "$FAKE_OUTPUT" >&2
exit "${FAKE_STATUS:-1}"
"""

#: rootless buildah where the runtime's seccomp filter denies unshare(CLONE_NEWUSER) (containerd's
#: default, moby's profile, without CAP_SYS_ADMIN): containers/storage's pkg/unshare C code prints
#: its error, then the Go side, through logrus without a terminal, its own about the child it never
#: got; the last line as the real node's pool said it (tests/realnode/test_build_pod.py)
UNSHARE_DENIED = ("Error during unshare(CLONE_NEWUSER): Operation not permitted\n"
                  'time="2026-12-06T23:56:39Z" level=error msg="parsing PID \\"\\": strconv.Atoi: parsing '
                  '\\"\\": invalid syntax"\n'
                  'time="2026-12-06T23:56:39Z" level=error msg="(Unable to determine exit status)"\n')


def buildah_fails(tmp_path: Path, output: str, status: int = 1) -> tuple[str, str]:
    """The script's buildah_ wrapper, as the script calls it (under set -eu, `buildah_ rm --all` on
    its own: a failure ends the script), around a buildah that prints `output` and exits with
    `status`: (the termination message as the kubelet reports it with FallbackToLogsOnError: the
    script's own message, else the tail of the log, stdout and stderr in one; the log)."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "buildah").write_text(FAKE_FAILING_BUILDAH)
    (bindir / "buildah").chmod(0o755)
    termination = tmp_path / "termination-log"
    termination.touch()
    env = dict(os.environ, PATH=f"{bindir}:{os.environ['PATH']}", FAKE_OUTPUT=output, FAKE_STATUS=str(status),
               DIGEST_FILE=str(termination))
    program = f"set -eu\ndriver=vfs\ngraphroot=$0/storage\n{shell_functions()}\nbuildah_ rm --all\necho survived\n"
    result = subprocess.run([dash(), "-c", program, str(tmp_path)], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, timeout=30)
    log = result.stdout
    assert result.returncode == status and "survived" not in log, log
    message = termination.read_text()
    return message or log[-2048:], log        # the kubelet's tail: at most 80 lines or 2048 bytes


def reason(message: str, code: int = 1) -> str:
    """The pool's reason for a build Pod that failed with this termination message and exit code."""
    pod = {"kind": "Pod", "metadata": {"name": "b", "namespace": "ns"}, "status": {
        "phase": "Failed", "containerStatuses": [{"name": pod_builder.CONTAINER, "state": {"terminated": {
            "exitCode": code, "reason": "Error", "message": message}}}]}}
    return pod_builder.read_status(pod).message


def test_a_buildah_error_followed_by_other_lines_is_the_reason(tmp_path):
    """buildah's own error line is the reason, not the lines it prints after it: under containerd's
    default seccomp filter the log's last line is `(Unable to determine exit status)`, which says
    nothing (tests/realnode/test_build_pod.py)."""
    message, log = buildah_fails(tmp_path, UNSHARE_DENIED)
    assert UNSHARE_DENIED.splitlines()[0] in log                      # the log keeps every line
    assert "(Unable to determine exit status)" in log
    assert reason(message) == ("build Pod/ns/b failed (exit code 1): "
                               "Error during unshare(CLONE_NEWUSER): Operation not permitted")


@pytest.mark.parametrize("output, expected", [
    # a failed step: buildah's last line is its error already, and stays the reason
    ('STEP 2/2: RUN exit 3\nerror running container: exit status 3\n'
     'Error: building at STEP "RUN exit 3": while running runtime: exit status 3\n',
     'Error: building at STEP "RUN exit 3": while running runtime: exit status 3'),
    # no error line at all: the last line, as before
    ("Getting image source signatures\nsomething went wrong\n", "something went wrong"),
])
def test_a_buildah_failure_whose_last_line_is_the_error_keeps_it(tmp_path, output, expected):
    message, log = buildah_fails(tmp_path, output, status=3)
    assert reason(message, 3) == f"build Pod/ns/b failed (exit code 3): {expected}"
    assert log.count(expected) == 1, log                            # said once


def test_a_full_storage_is_said_so_whatever_buildah_prints_after_it(tmp_path):
    output = ("Copying blob sha256:abc\nError: writing blob: storing blob to file \"/s/1\": "
              "write /s/1: no space left on device\nERRO[0001] exit status 125\n")
    message, _ = buildah_fails(tmp_path, output, status=125)
    assert message.startswith(f"build storage full (vfs driver, {tmp_path}/storage): Error: writing blob"), message
    assert "no space left on device" in reason(message)
