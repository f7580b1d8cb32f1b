"""bench/suite_time.py's pytest plugin: each test's worker, wall time, the worker's own CPU seconds,
and the CPU seconds of the worker with every process under it (the kube-apiserver and etcd it
started, the MCO's harness, kubectl, buildah...), one JSON line a test, in
$SUITE_TIME_DIR/<worker>.jsonl. A server started by a fixture is counted in the test that started
it, and from then on in the test during which it worked."""

import json
import os
import time
from pathlib import Path

import pytest

_out = None
_TICK = os.sysconf("SC_CLK_TCK")


def tree_cpu(root: int) -> float:
    """CPU seconds of `root`, its reaped children, and every live process under it, each with its
    own reaped children (/proc/PID/stat utime, stime, cutime, cstime): a process is counted once,
    live or in the parent that reaped it."""
    stats: dict[int, tuple[int, float]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        stats[int(entry.name)] = (int(fields[1]), sum(int(x) for x in fields[11:15]) / _TICK)
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in stats.items():
        children.setdefault(ppid, []).append(pid)
    total, todo = 0.0, [root]
    while todo:
        pid = todo.pop()
        total += stats.get(pid, (0, 0.0))[1]
        todo.extend(children.get(pid, ()))
    return total


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    global _out
    # the scans of /proc (about 5 ms each) stay outside what is measured, before and after
    k0 = tree_cpu(os.getpid())
    t0, c0 = time.time(), time.process_time()
    yield
    t1, c1 = time.time(), time.process_time()
    tree = tree_cpu(os.getpid()) - k0 - (time.process_time() - c1)
    if _out is None:
        worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
        _out = open(os.path.join(os.environ["SUITE_TIME_DIR"], worker + ".jsonl"), "a")
    _out.write(json.dumps({"id": item.nodeid, "w": os.environ.get("PYTEST_XDIST_WORKER", "main"),
                           "start": t0, "end": t1, "cpu": c1 - c0, "tree": tree}) + "\n")
    _out.flush()


def _mark(name: str) -> None:
    """The run's moments, in the process that runs pytest (its workers too): $SUITE_TIME_DIR/moments."""
    with open(os.path.join(os.environ["SUITE_TIME_DIR"], "moments"), "a") as out:
        out.write(json.dumps({"w": os.environ.get("PYTEST_XDIST_WORKER", "main"), "what": name,
                              "at": time.time()}) + "\n")


def pytest_sessionstart(session):
    _mark("sessionstart")


def pytest_collection_finish(session):
    _mark("collected")


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session):
    _mark("sessionfinish")


def pytest_unconfigure(config):
    _mark("unconfigure")
