"""The product image built from the Containerfile runs the product as the CronJob runs it (issue 52).

The image is built by tests/support/productimage.py as `make image` builds it: buildah, offline
(`--network none`), the wheels of requirements.lock hash-checked from a read-only /wheels, on a
Debian base made with mmdebstrap (no registry is reachable here). It runs under runc as uid 1001
with a read-only root and /tmp a tmpfs, no capability and no new privileges, as
kustomize/base/cronjob.yaml's securityContext says. Expected values come from the Containerfile and
the CronJob, and the CLI's output from the work tree's own CLI.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import factory as F
from tests.support import installed as I
from tests.support import productimage as P

NOW = "2026-12-06T12:00:00Z"
SNAPSHOT = F.ROOT / "examples/cluster.yaml"
#: argparse wraps its help at COLUMNS: the same width in the container and in the work tree
COLUMNS = "100"
pytestmark = pytest.mark.realnode


@pytest.fixture(scope="module")
def image(request: pytest.FixtureRequest) -> P.ProductImage:
    built = P.product_image()
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")
    capture = request.config.pluginmanager.get_plugin("capturemanager")
    if reporter is not None and capture is not None:
        with capture.global_and_fixture_disabled():
            reporter.write_line(f"\nproduct image: {built.report()}")
    return built


def containerfile() -> list[tuple[str, str]]:
    """(INSTRUCTION, the rest) of the Containerfile, continuation lines joined, comments dropped."""
    text = re.sub(r"\\\n", " ", (F.ROOT / "Containerfile").read_text())
    return [(line.split(None, 1)[0].upper(), line.split(None, 1)[1].strip()) for line in text.splitlines()
            if line.strip() and not line.lstrip().startswith("#")]


def declared(instruction: str) -> str:
    return [rest for name, rest in containerfile() if name == instruction][-1]


def work_tree(*args: str) -> subprocess.CompletedProcess[str]:
    """The same verb through the work tree (the reference the tests trust)."""
    return subprocess.run([sys.executable, "-m", "reconcile", *args], capture_output=True, text=True,
                          cwd=F.ROOT, timeout=120, env=dict(os.environ, OCL_RECONCILE_NOW=NOW, COLUMNS=COLUMNS))


def test_the_config_says_a_numeric_non_root_user_and_the_entrypoint(image: P.ProductImage) -> None:
    config = image.config()
    user = declared("USER")
    # runAsNonRoot (the CronJob): the kubelet accepts only a numeric, non-zero USER it can check
    assert P.cronjob_policy().run_as_non_root and user.isdigit() and int(user) != 0
    assert config["User"] == user == "1001"
    assert config["Entrypoint"] == json.loads(declared("ENTRYPOINT")) == ["ocl-reconcile"]
    assert config["Cmd"] == json.loads(declared("CMD"))


def test_it_runs_as_the_cronjobs_security_context_says(image: P.ProductImage) -> None:
    """uid 1001, gid 0, the root read-only, /tmp (the emptyDir) writable, no capability, no new privileges."""
    probe = ("import os\n"
             "print(os.getuid(), os.getgid())\n"
             "for path in ('/opt/ocl-reconciler/x', '/tmp/x'):\n"
             "    try:\n        open(path, 'w').close(); print(path, 'writable')\n"
             "    except OSError as e:\n        print(path, e.strerror)\n"
             "status = dict(l.split(':', 1) for l in open('/proc/self/status'))\n"
             "print(status['CapEff'].strip(), status['NoNewPrivs'].strip())\n")
    result = P.run(image, "-c", probe, entrypoint=["python3"])
    assert result.returncode == 0, result.stderr
    policy = P.cronjob_policy()
    assert policy.read_only_root and policy.empty_dirs == ("/tmp",) and policy.dropped == ("ALL",)
    assert policy.no_new_privileges
    assert result.stdout.splitlines() == [
        f"{declared('USER')} 0",
        "/opt/ocl-reconciler/x Read-only file system",
        "/tmp/x writable",
        "0000000000000000 1",
    ]


@pytest.mark.parametrize("args", [("--version",), ("--help",), ("render", "--help")], ids=" ".join)
def test_the_cli_prints_what_the_work_tree_prints(image: P.ProductImage, args: tuple[str, ...]) -> None:
    result = P.run(image, *args, env={"COLUMNS": COLUMNS})
    reference = work_tree(*args)
    assert reference.returncode == 0, reference.stderr
    assert (result.returncode, result.stdout) == (0, reference.stdout), result.stderr


def test_render_of_the_bundled_snapshot_matches_the_work_tree(image: P.ProductImage) -> None:
    """A verb on real input, read from a read-only mount, as in the installed suite."""
    result = P.run(image, "render", "--snapshot", "/snapshot/cluster.yaml",
                   env={"OCL_RECONCILE_NOW": NOW, "COLUMNS": COLUMNS}, binds={SNAPSHOT.parent: "/snapshot"})
    reference = work_tree("render", "--snapshot", str(SNAPSHOT))
    assert reference.returncode == 0, reference.stderr
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    assert result.stdout == reference.stdout.replace(str(SNAPSHOT), "/snapshot/cluster.yaml")


def test_pip_check_is_clean_inside(image: P.ProductImage) -> None:
    result = P.run(image, "check", entrypoint=["pip"])
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.strip() == "No broken requirements found."


def test_the_build_had_no_network_and_installed_from_the_wheels(image: P.ProductImage, tmp_path: Path) -> None:
    """The Containerfile's dependency steps, built again now (no layer reused) with the product's
    options: a RUN there sees only the loopback interface, and pip took every locked file of both
    locks from /wheels, setuptools included."""
    containerfile = (F.ROOT / "Containerfile").read_text()
    dependencies = containerfile[:containerfile.index("# setup.py discovers")]
    (tmp_path / "Containerfile").write_text(
        dependencies + "RUN python3 -c 'import socket; print(\"interfaces:\", [n for _, n in socket.if_nameindex()])'\n")
    locks = ("requirements.lock", "requirements-build.lock")
    for lock in locks:
        shutil.copy(F.ROOT / lock, tmp_path / lock)
    probe = P.bud(tmp_path, f"{P.NAME}:probe-{os.getpid()}", image.base, image.wheels, "--layers=false")
    P.sh("buildah", "rmi", f"{P.NAME}:probe-{os.getpid()}", check=False)
    assert probe.returncode == 0, probe.stdout[-2000:] + probe.stderr[-2000:]
    assert "interfaces: ['lo']" in probe.stdout
    pins = [line.split("==")[0] for lock in locks for line in (F.ROOT / lock).read_text().splitlines()
            if "==" in line and not line.startswith("#")]
    wheels = re.findall(r"^Processing /wheels/(\S+)", probe.stdout, re.M)
    norm = [re.sub(r"[-_.]+", "_", w.split("-")[0]).lower() for w in wheels]
    assert sorted(norm) == sorted(re.sub(r"[-_.]+", "_", p).lower() for p in pins)


def test_a_lock_entry_with_an_altered_hash_fails_the_build(image: P.ProductImage, tmp_path: Path) -> None:
    context = I.copy_checkout(tmp_path / "src")
    lock = context / "requirements.lock"
    entries = re.split(r"\n(?=\S)", lock.read_text())
    index = next(i for i, e in enumerate(entries) if "==" in e and not e.startswith("#"))
    # every hash of the entry: a compiled package lists one per architecture
    entries[index] = re.sub(r"(sha256:[0-9a-f]{63})([0-9a-f])",
                            lambda m: m.group(1) + ("0" if m.group(2) != "0" else "1"), entries[index])
    lock.write_text("\n".join(entries))
    tag = f"{P.NAME}:badhash-{os.getpid()}"
    result = P.bud(context, tag, image.base, image.wheels)
    output = result.stdout + result.stderr
    assert result.returncode != 0, output[-2000:]
    assert "THESE PACKAGES DO NOT MATCH THE HASHES" in output, output[-2000:]
    assert entries[index].split("==")[0] in output
    assert P.image_digest(tag) == ""


def test_the_archive_holds_the_image_by_its_name(image: P.ProductImage) -> None:
    """What the node tests import into containerd: a docker archive tagged with the image's name."""
    assert re.fullmatch(r"localhost/ocl-reconciler:test-[0-9a-f]{12}", image.name)
    assert image.name.endswith(P.checkout_hash())
    listing = subprocess.run(["tar", "-xOf", str(image.archive), "manifest.json"], capture_output=True,
                             text=True, check=True).stdout
    (manifest,) = json.loads(listing)
    assert manifest["RepoTags"] == [image.name]
    if shutil.which("skopeo"):
        inspected = json.loads(P.sh("skopeo", "inspect", "--config", f"docker-archive:{image.archive}").stdout)
        assert inspected["config"]["User"] == declared("USER")
