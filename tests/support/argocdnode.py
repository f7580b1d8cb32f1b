"""The real node's scenario under Argo CD's controllers (tests/realnode/test_argocd_*.py): what the
admin has before the first sync, and the module's clean end, whatever Applications it made."""

from __future__ import annotations

import time
from typing import Any

from tests.support import argocdreal, nodejobs, realserver
from tests.support import factory as F


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
