"""The product as a user installs it: a wheel built from a copy of the checkout, installed (not
editable) in a virtual environment outside the tree, beside the runtime dependencies that the image
pins (requirements.lock, installed as the Containerfile does: `--no-deps -r`).

Every other test imports the work tree through the editable install; that hid a wheel without 21
modules (issue 49). Building needs pip and the package index once (setuptools for the build, the
pinned dependencies into the cache); .ci/run sets OCL_INSTALLED=require, so it fails there when
they cannot be had, and skips elsewhere saying why.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path

from tests.support import factory as F
from tests.support import requirement

REQUIRE = "OCL_INSTALLED"
LOCK = F.ROOT / "requirements.lock"
#: what the work tree holds but the sdist of a clean clone never would
_NOT_SOURCE = shutil.ignore_patterns(".git", ".venv", ".demo", ".installed", "build", "dist", "*.egg-info",
                                     "__pycache__", ".pytest_cache")


#: pip's words when the package index cannot be reached (then skip or, where required, fail)
_UNREACHABLE = re.compile(r"No matching distribution|Could not find a version|NewConnectionError|"
                          r"Max retries exceeded|Temporary failure in name resolution")


def _missing(problem: str) -> None:
    requirement.missing(REQUIRE, problem)


def _pip(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """This interpreter's pip; `--python` points it at another environment."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PIP_REQUIRE_VIRTUALENV")}
    return subprocess.run([sys.executable, "-m", "pip", "--disable-pip-version-check", *args],
                          capture_output=True, text=True, timeout=timeout, env=env)


def _tracked(root: Path) -> list[str]:
    """The checkout's files as a clean clone has them (git's tracked and not-ignored new files)."""
    result = subprocess.run(["git", "-C", str(root), "ls-files", "-z", "--cached", "--others",
                             "--exclude-standard"], capture_output=True, text=True)
    if result.returncode != 0:
        return []
    return [name for name in result.stdout.split("\0") if name and (root / name).is_file()]


def copy_checkout(dst: Path) -> Path:
    """A copy of the checkout to build from, so the build writes nothing into the work tree."""
    names = _tracked(F.ROOT)
    if not names:                                   # not a git checkout: everything but the junk
        shutil.copytree(F.ROOT, dst, ignore=_NOT_SOURCE)
        return dst
    for name in names:
        (dst / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(F.ROOT / name, dst / name)
    return dst


def build_wheel(src: Path, out: Path) -> Path:
    """`pip wheel --no-deps SRC`, as issue 49's steps and the Containerfile's `pip install .` do."""
    result = _pip("wheel", "--no-deps", "--quiet", "-w", str(out), str(src))
    if result.returncode != 0 and _UNREACHABLE.search(result.stderr):
        _missing(f"pip wheel could not get setuptools from the package index: {result.stderr.strip()[-300:]}")
    assert result.returncode == 0, f"pip wheel {src} failed:\n{result.stderr}"
    wheels = sorted(out.glob("ocl_reconciler-*.whl"))
    assert len(wheels) == 1, f"pip wheel made {wheels}"
    return wheels[0]


def locked_dependencies() -> Path:
    """requirements.lock installed once into the cache (`pip install --target`), reused by every run
    until the lock changes. A plain folder: no .pth of its own, so no editable install leaks in."""
    digest = hashlib.sha256(LOCK.read_bytes()).hexdigest()[:12]
    root = Path(os.environ.get("OCL_REALAPI_CACHE") or Path.home() / ".cache/ocl-reconciler")
    target = root / f"lock-{digest}-py{sys.version_info.major}{sys.version_info.minor}"
    if target.is_dir():
        return target
    partial = target.with_name(target.name + f".partial-{os.getpid()}")
    shutil.rmtree(partial, ignore_errors=True)
    result = _pip("install", "--quiet", "--no-deps", "--target", str(partial), "-r", str(LOCK))
    if result.returncode != 0:
        shutil.rmtree(partial, ignore_errors=True)
        _missing(f"installing requirements.lock failed (it needs the package index once): "
                 f"{result.stderr.strip()[-400:]}")
    try:
        partial.rename(target)
    except OSError:                                 # another worker got there first
        shutil.rmtree(partial, ignore_errors=True)
    return target


@dataclass(frozen=True)
class Installed:
    """A virtual environment holding the wheel (not editable) and the locked dependencies."""

    venv: Path

    @property
    def python(self) -> Path:
        return self.venv / "bin/python"

    @property
    def site(self) -> Path:
        return self.venv / sysconfig.get_path("purelib", vars={"base": ".", "platbase": "."})

    def bin(self, name: str) -> Path:
        return self.venv / "bin" / name

    def env(self, now: str = "") -> dict[str, str]:
        """The user's environment, less whatever would bring the work tree back in; `now` pins the
        product's clock (OCL_RECONCILE_NOW)."""
        drop = ("PYTHONPATH", "OCL_MANIFESTS", "VIRTUAL_ENV", "PYTHONHOME", "OCL_RECONCILE_NOW")
        env = {k: v for k, v in os.environ.items() if k not in drop}
        env["PATH"] = f"{self.venv / 'bin'}:{env.get('PATH', '/usr/bin:/bin')}"
        if now:
            env["OCL_RECONCILE_NOW"] = now
        return env

    def run(self, *args: str | Path, cwd: Path, now: str = "",
            timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(a) for a in args], capture_output=True, text=True, cwd=cwd,
                              env=self.env(now), timeout=timeout)


def install(wheel: Path, venv: Path) -> Installed:
    """A new venv (no pip of its own), the wheel installed into it with `--no-deps` as the image does,
    and the cached locked dependencies put on its path by a .pth file."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    done = Installed(venv)
    result = _pip("--python", str(done.python), "install", "--quiet", "--no-deps", str(wheel))
    if result.returncode != 0:
        raise AssertionError(f"pip install {wheel.name} failed: {result.stderr}")
    (done.site / "ocl-locked-dependencies.pth").write_text(f"{locked_dependencies()}\n")
    return done


def pip_check(installed: Installed) -> subprocess.CompletedProcess[str]:
    """pip's own check that what is installed satisfies every declared requirement."""
    return _pip("--python", str(installed.python), "check", timeout=120)
