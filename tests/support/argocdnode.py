"""The real node's scenario under Argo CD's controllers (tests/realnode/test_argocd_*.py): what the
admin has before the first sync, the module's clean end, whatever Applications it made, and the
product installed by Argo CD from git (`synced`: test_argocd_sync.py, test_argocd_failed_run.py).

`synced` serves one module: the node, redis, the repo-server and the application-controller
(tests/support/argocdreal.py), a git repository holding the project's kustomize/ and a test overlay
of overlays/argocd that sets, as docs/argocd.md tells a user to, the image (the one built from the
Containerfile) and the settings ConfigMap (the scenario's: Builds of `openshift-image-builder`,
played through their status as OpenShift's build controller would). The overlay also suspends the
CronJob: its `*/5` tick would start a run beside the hook's (the Lease would skip one of them), as
in test_cronjob.py. A second Application manages the pool `worker` from the same repository, as
docs/argocd.md's "When an Argo CD Application manages the MachineConfigPools" says: its health is
our Lua check, judged by the controller. Both are synced once, the hook's Build played to
Succeeded, before the module's first test (`Setup.first`: the product's operation state)."""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterator
from typing import Any

import pytest

from reconcile.contract import annotations as A
from tests.support import argocdreal, nodejobs, productimage, realserver
from tests.support import factory as F
from tests.support.nodejobs import build_of

PRODUCT, POOLS = "ocl-reconciler", "ocl-pools"
OVERLAY = "kustomize/overlays/test-argocd"
HOOK = "ocl-reconciler-postsync"
#: what the test overlay sets on the CronJob by default (see above)
SUSPENDED = {"suspend": True}


def seed(node: Any, settings: bool = False) -> None:
    """What the admin has before the first sync (docs/admin.md): the namespace and the Secrets the
    settings name, the MCO's objects, and the pool with the real node as its member; with
    `settings`, the settings ConfigMap too (where no Application ships it)."""
    node.api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": F.NS}})
    node.api.load([o for o in nodejobs.scenario() if settings or o["metadata"]["name"] != "on-cluster-build-config"])
    node.api.kubectl("label", "node", node.name, "node-role.kubernetes.io/worker=", "--overwrite",
                     kubeconfig=node.admin)


def teardown(node: Any, argo: argocdreal.Argo, apps: tuple[str, ...]) -> None:
    """The Applications deleted (without cascade: the namespace goes below), Argo CD stopped, and
    what seed() and the runs left removed."""
    api = node.api
    try:
        for name in apps:
            if api.request("GET", f"{argocdreal.APP_PATH}/{name}", ok=(404,))[0] == 200:
                api.request("DELETE", f"{argocdreal.APP_PATH}/{name}")
    finally:
        argo.stop()
        api.request("DELETE", f"/api/v1/namespaces/{F.NS}", ok=(404,))
        api.kubectl("label", "node", node.name, "node-role.kubernetes.io/worker-", kubeconfig=node.admin, check=False)
        for kind in nodejobs.CLUSTER_CLEARED:
            for obj in api.list(kind):
                api.request("DELETE", api.path(kind, "", obj["metadata"]["name"]), ok=(404,))
        wait_gone(api, f"/api/v1/namespaces/{F.NS}")


def wait_gone(api: realserver.RealAPI, path: str, seconds: float = 90) -> None:
    deadline = time.monotonic() + seconds
    while api.request("GET", path, ok=(404,))[0] != 404:
        if time.monotonic() > deadline:
            raise AssertionError(f"{path} is still there after {seconds} s")
        time.sleep(0.5)


def settings(**changes: str) -> dict[str, str]:
    return {**nodejobs.settings()["data"], **changes}


def overlay(image: str, data: dict[str, str], cronjob: dict[str, Any] = SUSPENDED) -> dict[str, Any]:
    """The user's overlay docs/argocd.md asks for: overlays/argocd, their image and their settings;
    `cronjob`: the CronJob's spec fields the test sets (suspended by default)."""
    name, _, tag = image.rpartition(":")
    return {"apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization",
            "resources": ["../argocd"],
            "images": [{"name": "quay.io/ocl-reconciler/ocl-reconciler", "newName": name, "newTag": tag}],
            "patches": [{"target": {"kind": "ConfigMap", "name": "on-cluster-build-config"},
                         "patch": json.dumps([_add("/data", data)])},
                        {"target": {"kind": "CronJob", "name": nodejobs.CRONJOB},
                         "patch": json.dumps([_add(f"/spec/{k}", v) for k, v in cronjob.items()])}]}


def _add(path: str, value: Any) -> dict[str, Any]:
    return {"op": "add", "path": path, "value": value}


def pool_in_git(pool: dict[str, Any]) -> dict[str, Any]:
    """The pool as its owner keeps it in git: no server fields, none of our annotations."""
    meta = pool["metadata"]
    return {"apiVersion": pool["apiVersion"], "kind": pool["kind"],
            "metadata": {"name": meta["name"], "labels": meta["labels"]}, "spec": pool["spec"]}


class Setup(nodejobs.Jobs):
    """The node, Argo CD, the repository and the two Applications; `first` is the first sync's record."""

    def __init__(self, node: Any, argo: argocdreal.Argo, repo: argocdreal.Repo, image: str):
        self.node, self.api, self.argo, self.repo, self.image = node, node.api, argo, repo, image
        self.figures: dict[str, float] = {}
        self.builds: list[str] = []          # the Builds played to their end, in order
        self.first: dict[str, Any] = {}

    def app(self, name: str = PRODUCT) -> dict[str, Any]:
        return self.argo.app(name)

    def status(self, name: str = PRODUCT) -> dict[str, Any]:
        return self.app(name).get("status") or {}

    def resource(self, kind: str, name: str, app: str = POOLS) -> dict[str, Any]:
        return next((r for r in self.status(app).get("resources") or []
                     if r["kind"] == kind and r["name"] == name), {})

    def pool_health(self) -> dict[str, Any]:
        return self.resource("MachineConfigPool", "worker").get("health") or {}

    def ann(self) -> dict[str, str]:
        return self.api.get("MachineConfigPool", "", "worker")["metadata"].get("annotations") or {}

    def finish_build(self, phase: str, after: str | None = None) -> dict[str, Any]:
        """The Build the run started (another than `after`), played to `phase` as OpenShift would."""
        build = self.argo.wait("the run's Build", lambda: build_of_named(self, after), seconds=90)
        self.builds.append(build["metadata"]["name"])
        return nodejobs.finish_build(self.api, build, phase)

    def sync_and_settle(self, name: str = PRODUCT, build: str | None = None, after: str | None = None) -> dict[str, Any]:
        """A sync asked for, the run's Build played to `build` (if one is awaited), then the
        operation's end and Synced + Healthy; returns the operation state."""
        started = self.operation_started(name)
        self.argo.sync(name)
        self.argo.wait("the sync to start", lambda: self.operation_started(name) != started)
        if build:
            self.finish_build(build, after)
        return self.settled(name)

    def operation_started(self, name: str) -> str:
        return (self.status(name).get("operationState") or {}).get("startedAt", "")

    def settled(self, name: str = PRODUCT) -> dict[str, Any]:
        def done() -> dict[str, Any] | None:
            s = self.status(name)
            op = s.get("operationState") or {}
            if op.get("phase") in ("Failed", "Error"):
                raise AssertionError(f"the sync of {name} ended {op['phase']}: {op.get('message')}")
            if op.get("phase") == "Succeeded" and s["sync"]["status"] == "Synced" and \
                    s["health"]["status"] == "Healthy" and "operation" not in self.app(name):
                return op
            return None
        return self.argo.wait(f"{name} Synced and Healthy", done, seconds=150)

    def refreshed(self, name: str, kind: str = "normal") -> dict[str, Any]:
        """A refresh (`normal` or `hard`) asked for and taken: the controller removes its annotation
        once it has compared the Application again; returns the status it wrote."""
        self.argo.refresh(name, kind)
        self.argo.wait(f"the {kind} refresh of {name}", lambda: "argocd.argoproj.io/refresh" not in
                       (self.app(name)["metadata"].get("annotations") or {}))
        return self.status(name)


def build_of_named(setup: Setup, after: str | None) -> dict[str, Any] | None:
    build = build_of(setup)
    return build if build and build["metadata"]["name"] != after else None


def health_is(setup: Setup, status: str) -> dict[str, Any] | None:
    """The pool's health in the pools Application, once it and the Application's are `status`."""
    health = setup.pool_health()
    return health if health.get("status") == status and setup.status(POOLS)["health"]["status"] == status else None


def documented_message(ann: dict[str, str]) -> str:
    """docs/argocd.md: `STATE: MESSAGE`, or `Layered OS image build STATE` without a message."""
    state, message = ann[A.STATE], ann.get(A.MESSAGE)
    return f"{state}: {message}" if message else f"Layered OS image build {state}"


@contextlib.contextmanager
def synced(node: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    """A module's Argo CD, its repository and both Applications synced (see above); torn down after."""
    image = productimage.product_image()
    node.import_image(image.archive)
    work = tmp_path_factory.mktemp("argocd")
    argo = argocdreal.Argo(work / "argo", node.api, node.admin)
    with node.api.serving([realserver.PROMETHEUSRULE_CRD]):
        nodejobs.clear_scenario(node.api)    # another realnode test of the worker may have left its
        nodejobs.uninstall(node)             # scenario, and installed the product
        seed(node)
        repo = argocdreal.Repo(work / "repo")
        repo.write(f"{OVERLAY}/kustomization.yaml", overlay(image.name, settings()))
        repo.write("pools/worker.yaml", pool_in_git(F.pool()))
        argo.start()
        s = Setup(node, argo, repo, image.name)
        try:
            first_sync(s)
            yield s
        finally:
            teardown(node, argo, (PRODUCT, POOLS))
            print(f"argocd figures: {s.figures}")


def first_sync(s: Setup) -> None:
    s.argo.create_app(POOLS, s.repo.folder, "pools")
    s.repo.commit("the product and the pool")
    committed = time.monotonic()
    s.argo.create_app(PRODUCT, s.repo.folder, OVERLAY)
    s.figures["argo startup s"] = round(s.argo.startup_seconds, 1)
    s.sync_and_settle(POOLS)
    s.first = s.sync_and_settle(PRODUCT, build="Succeeded")
    s.figures["first sync: commit to Synced+Healthy s"] = round(time.monotonic() - committed, 1)
