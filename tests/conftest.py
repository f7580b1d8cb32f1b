from __future__ import annotations

import gc
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from reconcile import cli
from reconcile.cluster import snapshot
from tests.support import factory, realserver
from tests.support.apiserver import APIServer

sys.path.insert(0, str(factory.ROOT / "examples"))


class Cli:
    """Runs `ocl-reconcile` in-process on snapshots in a temporary folder."""

    def __init__(self, tmp: Path, capsys: pytest.CaptureFixture[str]):
        self.tmp, self.capsys, self.count = tmp, capsys, 0

    def write(self, items: list[dict[str, Any]]) -> Path:
        self.count += 1
        path = self.tmp / f"snap-{self.count}.yaml"
        snapshot.write(str(path), items)
        return path

    def __call__(self, *args: str) -> tuple[int, str, str]:
        self.capsys.readouterr()
        code = cli.main(list(args))
        out, err = self.capsys.readouterr()
        return code, out, err

    def run(self, items: list[dict[str, Any]], *extra: str) -> tuple[int, list[dict[str, Any]], str]:
        """`run --snapshot IN --write-snapshot OUT`; returns (exit code, OUT's objects, stderr)."""
        src = self.write(items)
        out = self.tmp / f"out-{self.count}.yaml"
        code, _, err = self("run", "--snapshot", str(src), "--write-snapshot", str(out), *extra)
        return code, (snapshot.load(str(out)) if out.exists() else []), err

    def on(self, items: list[dict[str, Any]], *args: str) -> tuple[int, str, str]:
        """Any command (`explain worker`, ...) with `--snapshot` of these objects."""
        return self(*args, "--snapshot", str(self.write(items)))


class ApiCli(Cli):
    """The same, but each `run` goes through the official client to a test API server that
    holds the objects, with a kubeconfig file."""

    def run(self, items: list[dict[str, Any]], *extra: str) -> tuple[int, list[dict[str, Any]], str]:
        self.count += 1
        with APIServer(items, clock=lambda: factory.NOW) as server:
            kubeconfig = server.kubeconfig(self.tmp / f"kubeconfig-{self.count}")
            code, _, err = self("run", "--kubeconfig", kubeconfig, "--timeout", "20", *extra)
            self.server = server
            return code, server.items(), err

    def on(self, items: list[dict[str, Any]], *args: str) -> tuple[int, str, str]:
        """The same on a test API server holding them; `self.server` keeps its request log."""
        self.count += 1
        with APIServer(items, clock=lambda: factory.NOW) as server:
            kubeconfig = server.kubeconfig(self.tmp / f"kubeconfig-{self.count}")
            self.server = server
            return self(*args, "--kubeconfig", kubeconfig, "--timeout", "20")


@pytest.fixture(autouse=True)
def no_base_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    """A live run asks the registry for the base image's size (cluster/observe.py); the tests' base
    images are in no registry, so every test gets the same answer without a network request, and
    builds are sized by the defaults. A test that serves the base sets `registry.Client.image_size`
    back (`base_registry`)."""
    from reconcile.cluster import registry

    def not_asked(self, image: str, arch: str = "") -> int:
        raise registry.RegistryError(f"{image}: the tests ask no registry for the base image")
    monkeypatch.setattr(registry.Client, "image_size", not_asked)
    monkeypatch.setattr(registry.Client, "resolve", not_asked)


@pytest.fixture
def base_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    from reconcile.cluster import registry
    monkeypatch.setattr(registry.Client, "image_size", ORIGINAL_IMAGE_SIZE)
    monkeypatch.setattr(registry.Client, "resolve", ORIGINAL_RESOLVE)


def _original_image_size():
    from reconcile.cluster import registry
    return registry.Client.image_size


ORIGINAL_IMAGE_SIZE = _original_image_size()


def _original_resolve():
    from reconcile.cluster import registry
    return registry.Client.resolve


ORIGINAL_RESOLVE = _original_resolve()


@pytest.fixture(params=["snapshot", "api"])
def any_cli(request: pytest.FixtureRequest, tmp_path: Path, capsys: pytest.CaptureFixture[str],
            monkeypatch: pytest.MonkeyPatch) -> Cli:
    """Runs a scenario against both cluster implementations: snapshot files and the live API."""
    monkeypatch.setenv("OCL_RECONCILE_NOW", "2026-11-29T12:00:00Z")
    return (ApiCli if request.param == "api" else Cli)(tmp_path, capsys)


@pytest.fixture(params=sorted(factory.BUILD_KINDS))
def builder(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """The scenario runs for both image builders; the value is the build object's kind."""
    monkeypatch.setattr(factory, "BUILDER", request.param)
    return factory.BUILD_KINDS[request.param]


@pytest.fixture
def run_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> Cli:
    monkeypatch.setenv("OCL_RECONCILE_NOW", "2026-11-29T12:00:00Z")
    return Cli(tmp_path, capsys)


# --- the realapi suite: one real kube-apiserver and etcd per session -----------------------------

@pytest.fixture(scope="session")
def server(tmp_path_factory):
    api = realserver.start_installed(tmp_path_factory.mktemp("realapi"))
    try:
        yield api
    finally:
        api.stop()


@pytest.fixture
def real(server, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("OCL_RECONCILE_NOW", "2026-11-29T12:00:00Z")
    server.reset()
    return realserver.Real(server, tmp_path, capsys)




# --- the realnode suite: one real node (kubelet, containerd) and its own server per worker ----------

@pytest.fixture(scope="session")
def node(tmp_path_factory):
    """tests/support/realnode.py: started once per worker, on the first realnode test it runs. Its
    index (bridge, subnet, cgroup root) is the worker's number, plus OCL_REALNODE_OFFSET where
    two test sessions run on one machine."""
    from tests.support import realnode
    bindir = realnode.prerequisites()
    worker = int(os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw") or 0)
    index = worker + int(os.environ.get("OCL_REALNODE_OFFSET") or 0)
    started = realnode.Node(tmp_path_factory.mktemp("realnode"), bindir, index).start()
    try:
        yield started
    finally:
        started.stop()


# --- the MCO's own render and node controllers on that server (tests/support/mcoreal.py) ---------

@pytest.fixture(scope="session")
def mco_installed(server):
    """What the controllers read, installed once per server (the objects survive reset())."""
    from tests.support import mcoreal
    return mcoreal.Installed(server, mcoreal.harness())


@pytest.fixture
def mco(mco_installed, real, tmp_path, monkeypatch):
    """The real controllers for one test, started after `real` reset the server and always stopped
    (a failing test too). One process per test, not per worker: reset() deletes every pool, Node and
    MachineConfig under a running controller, and the other realapi modules of the worker must not
    have it acting on their pools."""
    from tests.support import mcoreal
    mco_installed.streams()
    create = type(real.api).create
    monkeypatch.setattr(type(real.api), "create", lambda api, obj: create(api, mcoreal.as_created(obj)))
    controllers = mcoreal.Controllers(mco_installed, tmp_path).start()
    try:
        yield mcoreal.Cluster(controllers, mcoreal.Daemon(mco_installed, tmp_path))
    finally:
        controllers.stop()


# --- the order in which pytest-xdist hands tests out ---------------------------------------------

#: tests of a minute or more on 2 cores (the `--durations` of `make test`), handed out first: xdist
#: gives tests out in collection order, and one of these handed out last would end the run alone
LONG_FIRST = ("tests/realapi/test_admin_docs.py", "tests/unit/test_fuzz.py::test_mutated_snapshots_fail_cleanly",
              "tests/realapi/test_realapi_gate.py", "tests/standin/test_fault_matrix.py",
              "tests/realapi/test_realapi_live_table.py", "tests/realtools/test_live_table.py",
              "tests/realapi/test_realapi_rbac.py", "tests/realapi/test_realapi_wait_held.py",
              # the real node's: mostly waiting for Pods and ticks, so best begun early beside the rest
              "tests/realnode/")


def pytest_collection_modifyitems(session, config, items):
    items.sort(key=lambda item: not item.nodeid.startswith(LONG_FIRST))     # stable: otherwise as collected



def pytest_collection_finish(session):
    """The collected tests, fixtures and modules live as long as the process: frozen out of the
    garbage collector's reach, and its young generation collected every 20,000 allocations, not
    700. The tests build and copy many short-lived trees of objects, and the collector walked the
    whole heap for them: 9% of the CPU of the CPU-bound files (test_fuzz, test_live_change,
    test_gate, the stand-in RBAC matrix: 89 s against 80 s). Collections still happen; a test that
    needs one calls gc.collect() (test_memory_pass)."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(20_000, 20, 20)
