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
    return status, calls, result.stdout + result.stderr


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
