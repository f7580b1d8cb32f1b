"""A dedicated filesystem for a build's storage, and its peak use while a build runs.

The build storage of the realbuild harness lives on its own filesystem (a loop-mounted ext4 or xfs
image, or a sized tmpfs), so that its use is one statvfs away, with nothing else counted, and so
that a small one runs out of space as a full volume does."""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

MKFS = {"ext4": ["mkfs.ext4", "-q", "-F", "-m", "0"], "xfs": ["mkfs.xfs", "-q", "-f"]}


class Filesystem:
    """`kind` ext4 or xfs: a sparse image file of `size` bytes, loop-mounted at `mount`; tmpfs: a
    tmpfs of that size. Root only. `used()` counts from the empty filesystem."""

    def __init__(self, root: Path, size: int, kind: str = "ext4"):
        self.root, self.kind = root, kind
        self.mount = root / "mnt"
        self.mount.mkdir(parents=True)
        if kind == "tmpfs":
            subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=755", "tmpfs", str(self.mount)],
                           check=True)
        else:
            image = root / "fs.img"
            with open(image, "wb") as f:
                f.truncate(size)
            subprocess.run([*MKFS[kind], str(image)], check=True, capture_output=True)
            subprocess.run(["mount", "-o", "loop", str(image), str(self.mount)], check=True)
        self.empty = self._used()

    def _used(self) -> int:
        st = os.statvfs(self.mount)
        return (st.f_blocks - st.f_bfree) * st.f_frsize

    def used(self) -> int:
        return self._used() - self.empty

    def wipe(self) -> None:
        """An empty filesystem again, as a new emptyDir would be."""
        for entry in self.mount.iterdir():
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry)
            else:
                entry.unlink()

    def reflinks(self) -> bool:
        """Does a copy share extents here (FICLONE: `cp --reflink=always`, as build-pod.sh asks)?"""
        probe = self.mount / ".reflink-probe"
        probe.write_bytes(b"probe")
        try:
            return subprocess.run(["cp", "--reflink=always", str(probe), f"{probe}.copy"],
                                  capture_output=True).returncode == 0
        finally:
            for p in (probe, Path(f"{probe}.copy")):
                p.unlink(missing_ok=True)

    @contextmanager
    def peak(self, every: float = 0.05, also: tuple[Filesystem, ...] = ()) -> Iterator[list[int]]:
        """Samples `used()` (with `also`, the sum over them all) while the block runs; the list holds
        the peak when it ends."""
        def used() -> int:
            return self.used() + sum(f.used() for f in also)
        result, done = [used()], threading.Event()

        def sample() -> None:
            while not done.is_set():
                result[0] = max(result[0], used())
                time.sleep(every)
        thread = threading.Thread(target=sample, daemon=True)
        thread.start()
        try:
            yield result
        finally:
            done.set()
            thread.join()
            result[0] = max(result[0], used())

    def close(self) -> None:
        subprocess.run(["umount", str(self.mount)], check=False, capture_output=True)
        shutil.rmtree(self.root, ignore_errors=True)


def available(kind: str) -> str | None:
    """Why a filesystem of this kind cannot be made here, or None."""
    if os.geteuid() != 0:
        return "needs root (mount)"
    if kind in MKFS and shutil.which(MKFS[kind][0]) is None:
        return f"needs {MKFS[kind][0]} ({'xfsprogs' if kind == 'xfs' else 'e2fsprogs'})"
    return None
