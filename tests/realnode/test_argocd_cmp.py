"""Argo CD's Config Management Plugin runs `ocl-reconcile render` (issue 54 item 5).

The `argocd-cmp-server` role of the same `argocd` binary runs beside the repo-server
(tests/support/argocdreal.py), with our kustomize/overlays/argocd/cmp/plugin.yaml unchanged (its
folder given as `--config-dir-path`, where a sidecar mounts it at /home/argocd/cmp-server/config/),
its socket in the folder the repo-server reads. `ocl-reconcile` on the cmp-server's PATH is the
product as a user installs it: the wheel built from the checkout, installed in a venv outside the
tree (tests/support/installed.py), with the work tree off the path. It reads the real node's server
with the admin's kubeconfig (render never writes).

Expected values: what the installed `ocl-reconcile render --pool worker` prints, run by the test
itself against the same cluster, and Argo CD's own states (operationState.phase, sync.status, the
resources it lists, the last-applied configuration its kubectl writes with client-side apply). The
pool `worker` has no build yet, so render prints its first build's objects; nothing runs them (no
CronJob: the settings, the Secrets and the pool are seeded as the admin)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from tests.support import argocdnode, argocdreal, nodejobs
from tests.support import factory as F
from tests.support import installed as I

pytestmark = pytest.mark.realnode

PLUGIN = F.ROOT / "kustomize/overlays/argocd/cmp/plugin.yaml"
APP = "ocl-render"
#: a second opted-in pool (no nodes): render prints its build too unless the plugin's OCL_POOL limits it
OTHER = F.pool("infra")
TRACKING = "app.kubernetes.io/instance"                  # Argo CD 2.14's default tracking label
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


def plugin_name() -> str:
    """What an Application names in spec.source.plugin.name: `<name>-<version>` when plugin.yaml
    has a version (argo-cd cmpserver/plugin/config.go Address(): the socket's name)."""
    doc = yaml.safe_load(PLUGIN.read_text())
    version = doc["spec"].get("version")
    return f"{doc['metadata']['name']}-{version}" if version else doc["metadata"]["name"]


def discovery_file() -> str:
    return yaml.safe_load(PLUGIN.read_text())["spec"]["discover"]["fileName"]


class Cmp:
    def __init__(self, node: Any, argo: argocdreal.Argo, repo: argocdreal.Repo, product: I.Installed):
        self.node, self.api, self.argo, self.repo, self.product = node, node.api, argo, repo, product

    def render(self, *pools: str) -> list[dict[str, Any]]:
        """What the installed render prints (for `pools`, else every pool), as a user runs it."""
        result = self.product.run("ocl-reconcile", "render", *(f"--pool={p}" for p in pools),
                                  "--kubeconfig", self.node.admin, cwd=self.argo.work)
        assert result.returncode == 0, result.stderr
        return [d for d in yaml.safe_load_all(result.stdout) if d]

    def app(self, app: str, path: str, **plugin: Any) -> None:
        """An Application whose source is the plugin (`plugin` adds its name), limited to `worker`."""
        self.argo.create_app(app, self.repo.folder, path,
                             source={"repoURL": f"file://{self.repo.folder}", "targetRevision": "main", "path": path,
                                     "plugin": {"env": [{"name": "OCL_POOL", "value": "worker"}], **plugin}})

    def status(self, name: str = APP) -> dict[str, Any]:
        return self.argo.app(name).get("status") or {}


@pytest.fixture(scope="module")
def cmp(node, tmp_path_factory) -> Iterator[Cmp]:
    where = tmp_path_factory.mktemp("cmp")
    product = I.install(I.build_wheel(I.copy_checkout(where / "src"), where / "dist"), where / "venv")
    argo = argocdreal.Argo(where / "argo", node.api, node.admin)
    repo = argocdreal.Repo(where / "repo")
    (repo.folder / "cmp").mkdir()
    (repo.folder / "cmp" / discovery_file()).write_text("# rendered by the ocl-reconciler plugin\n")
    (repo.folder / "nofile").mkdir()
    (repo.folder / "nofile" / "README").write_text("a path without the plugin's discovery file\n")
    repo.commit("paths for the plugin")
    nodejobs.clear_scenario(node.api)        # as test_argocd_sync.py: whatever realnode test ran before
    nodejobs.uninstall(node)
    try:
        argocdnode.seed(node, settings=True)
        node.api.load([OTHER, F.machineconfig(OTHER["spec"]["configuration"]["name"])])
        argo.start()
        env = {**product.env(), "KUBECONFIG": node.admin}
        assert shutil.which("ocl-reconcile", path=env["PATH"]) == str(product.bin("ocl-reconcile"))
        argo.start_cmp(PLUGIN.parent, env)
        yield Cmp(node, argo, repo, product)
    finally:
        argocdnode.teardown(node, argo, (APP, "ocl-discovered", "ocl-named-no-file"))


def key(doc: dict[str, Any]) -> tuple[str, str, str]:
    return doc["kind"], doc["metadata"].get("namespace", ""), doc["metadata"]["name"]


def applied(cmp: Cmp, doc: dict[str, Any]) -> dict[str, Any]:
    """What Argo CD's kubectl applied to the live object (client-side apply records it), without
    the tracking label Argo CD adds to every manifest it applies."""
    live = cmp.api.get(doc["kind"], doc["metadata"].get("namespace", ""), doc["metadata"]["name"])
    assert live, f"{key(doc)} was not applied"
    config = json.loads(live["metadata"]["annotations"][LAST_APPLIED])
    labels = config["metadata"].get("labels") or {}
    assert labels.pop(TRACKING) == APP, config["metadata"]
    if not labels:
        config["metadata"].pop("labels")
    return config


def test_the_repo_server_has_the_cmp_server_render_and_the_controller_applies_what_render_prints(cmp):
    expected = cmp.render("worker")
    assert {d["kind"] for d in expected} >= {"Build"}, expected      # the first build's objects
    everything = sorted(map(key, cmp.render()))
    assert any(name.startswith("ocl-build-infra-") for _, _, name in everything), everything
    cmp.app(APP, "cmp", name=plugin_name())
    cmp.argo.sync(APP)

    def done() -> dict[str, Any] | None:
        s = cmp.status()
        op = s.get("operationState") or {}
        if op.get("phase") in ("Failed", "Error"):
            raise AssertionError(f"the sync ended {op['phase']}: {op.get('message')}; cmp-server: "
                                 f"{cmp.argo.tail('cmp-server')}")
        return s if op.get("phase") == "Succeeded" and s["sync"]["status"] == "Synced" else None
    status = cmp.argo.wait("the plugin's Application Synced", done)
    assert sorted((r["kind"], r.get("namespace", ""), r["name"]) for r in status["resources"]) == \
        sorted(map(key, expected))
    assert all(r["status"] == "Synced" for r in status["resources"]), status["resources"]
    for doc in expected:
        assert applied(cmp, doc) == doc
    # the cmp-server ran plugin.yaml's generate command (its log names each command it runs)
    assert "ocl-reconcile render" in (cmp.argo.work / "cmp-server.log").read_text(), cmp.argo.tail("cmp-server")


def test_the_plugin_is_found_by_its_discovery_file_and_a_named_plugin_still_needs_it(cmp):
    """argo-cd util/app/discovery: without a name the repo-server asks every plugin's socket, and
    ours matches a path holding its `discover.fileName`; with a name, a plugin that configures
    discovery still answers only for such a path ("couldn't find cmp-server plugin")."""
    expected = sorted(map(key, cmp.render("worker")))
    cmp.app("ocl-discovered", "cmp")
    cmp.app("ocl-named-no-file", "nofile", name=plugin_name())

    seen: list[Any] = []

    def compared(name: str, field: str) -> dict[str, Any] | None:
        s = cmp.status(name)
        seen.append(s.get("conditions"))
        return s if s.get(field) else None
    found = cmp.argo.wait(f"the discovered plugin's manifests (conditions seen: {seen})",
                          lambda: compared("ocl-discovered", "resources"))
    assert sorted((r["kind"], r.get("namespace", ""), r["name"]) for r in found["resources"]) == expected
    refused = cmp.argo.wait("the named plugin's refusal", lambda: compared("ocl-named-no-file", "conditions"))
    (condition,) = refused["conditions"]
    assert condition["type"] == "ComparisonError", condition
    assert f'couldn\'t find cmp-server plugin with name "{plugin_name()}"' in condition["message"], condition
