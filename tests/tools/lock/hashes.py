"""Hashes for requirements.lock and requirements-build.lock (`make lock`), and the wheels an offline
image build installs (`make image`, tests/support/productimage.py).

    python tests/tools/lock/hashes.py lock PINS   PINS: `pip freeze` of a fresh install of the product
    python tests/tools/lock/hashes.py wheels DIR  the locked wheels of this machine's architecture

`lock` writes requirements.lock with every pin's `--hash=sha256:` lines (pip's hash-checking mode:
the image's `pip install -r requirements.lock` then refuses any file whose hash is not listed). The
hashes are those of the files pip picks, fetched with `pip download`, for CPython 3.11 on Linux
x86_64 and aarch64 at glibc 2.34 (UBI 9, the default base) and 2.36 (Debian 12, the tests' base):
platform wheels, pure wheels and, where a package has no wheel, its sdist. Another Python or
operating system picks other files, whose hashes are not listed. requirements-build.lock pins the
setuptools that `pip install .` builds the product with (pyproject.toml's build-system), hashed alike.

`wheels` downloads both lock files' files for this machine's architecture at glibc 2.34 (which both
bases run) into DIR, hash-checked: the find-links of `buildah bud --network none`.
"""

from __future__ import annotations

import hashlib
import platform
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
LOCK = ROOT / "requirements.lock"
BUILD_LOCK = ROOT / "requirements-build.lock"
#: (architecture, glibc) pairs a lock must serve: UBI 9 has glibc 2.34, Debian 12 glibc 2.36
TARGETS = [(arch, glibc) for arch in ("x86_64", "aarch64") for glibc in ("2_34", "2_36")]
HEADER = """# Runtime dependencies of ocl-reconciler, pinned for the container image (Containerfile), each with
# the sha256 of the files pip installs on CPython 3.11, Linux x86_64 and aarch64 (hash-checking mode).
# Regenerate: make lock (pip install . in a fresh venv, pip freeze, tests/tools/lock/hashes.py).
"""
BUILD_HEADER = """# What the Containerfile's `pip install --no-deps .` builds with (pyproject.toml's build-system), pinned
# and hashed as requirements.lock is; the offline build finds it among the wheels (make image).
# Regenerate: make lock.
"""


def pip(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "pip", "--disable-pip-version-check", *args], check=True)


def platform_args(arch: str, glibc: str) -> list[str]:
    """pip's options for one target: every platform tag such a system accepts, best first, as pip's own
    tag list orders them (pip 23 does not expand `manylinux_2_34` to the older tags by itself)."""
    minor = int(glibc.split("_")[1])
    legacy = {17: "manylinux2014", 12: "manylinux2010", 5: "manylinux1"}
    tags = []
    for version in range(minor, 4, -1):
        tags.append(f"manylinux_2_{version}_{arch}")
        if version in legacy and (arch == "x86_64" or version == 17):
            tags.append(f"{legacy[version]}_{arch}")
    tags.append(f"linux_{arch}")
    return [*(arg for tag in tags for arg in ("--platform", tag)), "--python-version", "3.11",
            "--implementation", "cp", "--abi", "cp311"]


def project(filename: str) -> str:
    """The normalized project name of a wheel or sdist file name."""
    stem = re.sub(r"(\.tar\.gz|\.zip|\.whl)$", "", filename)
    return re.sub(r"[-_.]+", "-", stem.split("-")[0]).lower() if filename.endswith(".whl") \
        else re.sub(r"[-_.]+", "-", stem.rsplit("-", 1)[0]).lower()


def normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def hashes(pins: list[str], where: Path) -> dict[str, set[str]]:
    """{project: sha256s} of the files `pip download` picks for each target."""
    found: dict[str, set[str]] = {}
    where.mkdir(parents=True, exist_ok=True)
    listing = where / "pins.txt"
    listing.write_text("".join(f"{p}\n" for p in pins))
    for arch, glibc in TARGETS:
        dest = where / f"{arch}-{glibc}"
        pip("download", "--quiet", "--no-deps", "--dest", str(dest), *platform_args(arch, glibc), "-r", str(listing))
        for file in dest.iterdir():
            found.setdefault(project(file.name), set()).add(hashlib.sha256(file.read_bytes()).hexdigest())
    return found


def render(header: str, pins: list[str], found: dict[str, set[str]]) -> str:
    lines = [header.rstrip("\n")]
    for pin in pins:
        digests = sorted(found.get(normalized(pin.split("==")[0]), ()))
        if not digests:
            raise SystemExit(f"pip download fetched no file for {pin}")
        lines.append(" \\\n".join([pin, *(f"    --hash=sha256:{d}" for d in digests)]))
    return "\n".join(lines) + "\n"


def lock(frozen: Path) -> None:
    pins = sorted((line.split()[0] for line in frozen.read_text().splitlines()
                   if "==" in line and not line.startswith("#")), key=str.lower)
    with tempfile.TemporaryDirectory() as tmp:
        LOCK.write_text(render(HEADER, pins, hashes(pins, Path(tmp) / "runtime")))
        setuptools = Path(tmp) / "setuptools"
        pip("download", "--quiet", "--no-deps", "--only-binary=:all:", "--dest", str(setuptools), "setuptools>=61")
        (wheel,) = setuptools.glob("setuptools-*.whl")
        pin = f"setuptools=={wheel.name.split('-')[1]}"
        BUILD_LOCK.write_text(render(BUILD_HEADER, [pin], hashes([pin], Path(tmp) / "build")))


def machine() -> str:
    arch = platform.machine()
    return {"amd64": "x86_64", "arm64": "aarch64"}.get(arch.lower(), arch)


def wheels(dest: Path) -> None:
    """Both lock files' files for this architecture (glibc 2.34, which UBI 9 and Debian 12 run), every
    hash checked by pip (--require-hashes)."""
    pip("download", "--quiet", "--no-deps", "--require-hashes", "--dest", str(dest),
        *platform_args(machine(), "2_34"), "-r", str(LOCK), "-r", str(BUILD_LOCK))


def main(argv: list[str]) -> None:
    if len(argv) != 2 or argv[0] not in ("lock", "wheels"):
        raise SystemExit(__doc__)
    (lock if argv[0] == "lock" else wheels)(Path(argv[1]))


if __name__ == "__main__":
    main(sys.argv[1:])
