"""Taking a real node down (tests/support/realnode.py `Node.stop`): what containerd and the kubelet
leave when they are killed (Pods' processes and shims, network namespaces, mounts, cgroups)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tests.support.realnode import Node


def pod_netns(node: Node) -> list[str]:
    """The network namespaces containerd made for our Pods (bind mounts under /run/netns)."""
    if "containerd" not in node.procs:
        return []
    found = []
    listed = node.ctr("containers", "ls", "-q", check=False, timeout=30).stdout.split()
    for cid in listed:
        info = node.ctr("containers", "info", cid, check=False, timeout=30).stdout
        with contextlib.suppress(ValueError, KeyError, TypeError):
            for ns in json.loads(info)["Spec"]["linux"]["namespaces"]:
                if ns.get("type") == "network" and ns.get("path", "").startswith("/var/run/netns/"):
                    found.append(ns["path"].rsplit("/", 1)[1])
    return sorted(set(found))

def kill_containers(node: Node) -> None:
    """Every process of our Pods (in our cgroup root), then every shim of our containerd."""
    for _ in range(3):
        for procs in Path("/sys/fs/cgroup/pids").glob(f"{node.name}/**/cgroup.procs"):
            for pid in procs.read_text().split():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(int(pid), signal.SIGKILL)
        time.sleep(0.2)
    sock = str(node.root / "containerd/containerd.sock")
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        with contextlib.suppress(OSError):
            args = cmdline.read_bytes().split(b"\0")
            if b"containerd-shim" in args[0] and sock.encode() in args:
                os.kill(int(cmdline.parent.name), signal.SIGKILL)

def unmount(node: Node) -> None:
    mounts = [line.split()[4] for line in Path("/proc/self/mountinfo").read_text().splitlines()]
    for point in sorted((m for m in mounts if m.startswith(str(node.root))), key=len, reverse=True):
        subprocess.run(["umount", "-l", point], capture_output=True, timeout=30)

def remove_cgroups(node: Node) -> None:
    for controller in Path("/sys/fs/cgroup").iterdir():
        top = controller / node.name
        if top.is_dir():
            for sub in sorted((p for p in top.rglob("*") if p.is_dir()), key=lambda p: len(p.parts),
                              reverse=True):
                with contextlib.suppress(OSError):
                    sub.rmdir()
            with contextlib.suppress(OSError):
                top.rmdir()
