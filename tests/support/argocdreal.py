"""Argo CD's own controllers beside the real node (issue 54): redis-server (Debian's), and the
application-controller and repo-server roles of the `argocd` binary tests/tools/argocd/build.sh
builds (cmd/main.go picks the role by the binary's name: symlinks), run as host processes against
the node's kube-apiserver. The Application's source is a git repository in a folder, read by the
repo-server through a file:// URL (its git client takes one as it takes a remote).

What an install gets from the release's install.yaml (rendered with our argocd-cm Component under
`namespace: argocd`, as docs/argocd.md says): the CRDs, the ConfigMaps and Secrets. Its Deployments
are what this harness runs as processes. What differs from an in-cluster install, and why:
- the destination is a cluster Secret (Argo CD's declarative cluster) naming the API server on
  127.0.0.1 with the admin token: the in-cluster destination needs a Pod's mounted token;
- argocd-secret gets `server.secretkey` (argocd-server makes it on its first start; none runs here);
- GPG is off (`ARGOCD_GPG_ENABLED=false`: no keyring folder), SSH and TLS data live in the work folder;
- the controller's metrics server listens on 0.0.0.0 (hard-coded in v2.14,
  controller/appcontroller.go): an INPUT rule, first in iptables and ip6tables, drops connections to it that do not come
  from lo, removed by stop(). Everything else listens on 127.0.0.1.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support import factory as F
from tests.support import realserver, waiting

REQUIRE = "OCL_ARGOCD"
GO_MOD = F.ROOT / "tests/tools/argocd/go.mod"
COMPONENT = F.ROOT / "kustomize/overlays/argocd/argocd-cm"
ROLES = ("argocd-application-controller", "argocd-repo-server", "argocd-cmp-server")
NS = "argocd"
APP_PATH = "/apis/argoproj.io/v1alpha1/namespaces/argocd/applications"
CONFIG_KINDS = ("ConfigMap", "Secret")


def cache_dir() -> Path:
    """Where tests/tools/argocd/build.sh puts argocd and install.yaml (keyed by the pinned version)."""
    version = next(p[-1] for p in map(str.split, GO_MOD.read_text().splitlines())
                   if "github.com/argoproj/argo-cd/v2" in p and p[-1].startswith("v"))
    root = Path(os.environ.get("OCL_ARGOCD_CACHE") or Path.home() / ".cache/ocl-reconciler")
    return root / f"argocd-{version}"


def missing(problem: str) -> None:
    if os.environ.get(REQUIRE) == "require":
        pytest.fail(f"{problem}; {REQUIRE}=require makes this a failure")
    pytest.skip(f"{problem}; set {REQUIRE}=require to make this a failure")


def prerequisites() -> Path:
    """The folder of argocd and install.yaml, or skip (fail where required) saying what is missing."""
    folder = cache_dir()
    if not (folder / "argocd").is_file() or not (folder / "install.yaml").is_file():
        missing(f"Argo CD's controllers are the roles of the argocd binary, missing in {folder}: "
                f"`make argocd` builds it from Go modules (needs go and the module proxy)")
    if not shutil.which("redis-server"):
        missing("Argo CD's controllers need redis-server (the Debian package redis-server; .ci/run installs it)")
    if not shutil.which("git"):
        missing("the repo-server needs git")
    return folder


def kustomize_binary() -> Path:
    """The real kustomize the repo-server runs (`make kustomize`)."""
    found = sorted((Path(os.environ.get("OCL_KUSTOMIZE_CACHE") or Path.home() / ".cache/ocl-reconciler"))
                   .glob("kustomize-v*/kustomize"))
    if not found:
        missing("the repo-server runs the kustomize CLI: `make kustomize` builds it")
    return found[-1]


class Argo:
    """redis, repo-server and application-controller for one node's server; stop() undoes start()."""

    def __init__(self, work: Path, api: realserver.RealAPI, admin: str):
        self.work, self.api, self.admin = work, api, admin
        self.folder = prerequisites()
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.redis, self.repo_port, self.metrics = (realserver.free_port() for _ in range(3))
        self.server = api.url
        self._guard: list[str] = []

    # lifecycle --------------------------------------------------------------------------------
    def start(self) -> Argo:
        started = time.monotonic()
        try:
            self._bin()
            self.install()
            self.figures = {"install s": round(time.monotonic() - started, 1)}
            self._start()
        except BaseException:
            self.stop()
            raise
        self.startup_seconds = time.monotonic() - started
        return self

    def _bin(self) -> None:
        bindir = self.work / "bin"
        bindir.mkdir(parents=True)
        for role in ROLES:
            (bindir / role).symlink_to(self.folder / "argocd")
        (bindir / "kustomize").symlink_to(kustomize_binary())
        for sub in ("ssh", "tls", "plugins"):
            (self.work / sub).mkdir()

    def env(self) -> dict[str, str]:
        return {**os.environ, "PATH": f"{self.work / 'bin'}:{os.environ['PATH']}", "HOME": str(self.work),
                "ARGOCD_GPG_ENABLED": "false", "ARGOCD_SSH_DATA_PATH": str(self.work / "ssh"),
                "ARGOCD_TLS_DATA_PATH": str(self.work / "tls"),
                "ARGOCD_PLUGINSOCKFILEPATH": str(self.work / "plugins"), "KUBECONFIG": self.admin}

    def spawn(self, name: str, args: list[str], env: dict[str, str] | None = None) -> None:
        with open(self.work / f"{name}.log", "ab") as log:
            self.procs[name] = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, env=env or self.env(),
                                                start_new_session=True, cwd=self.work)

    def start_cmp(self, config: Path, env: dict[str, str], seconds: float = 60) -> Path:
        """The `argocd-cmp-server` role, as the repo-server's sidecar: the plugin.yaml in folder
        `config` (`--config-dir-path`; /home/argocd/cmp-server/config/ by default), its socket
        `<name>-<version>.sock` in the folder the repo-server reads (ARGOCD_PLUGINSOCKFILEPATH), its
        commands run with `env` (the sidecar's own environment) and the Argo CD variables."""
        (self.work / "cmp").mkdir(exist_ok=True)
        ours = {k: v for k, v in self.env().items() if k.startswith("ARGOCD_")}
        self.spawn("cmp-server", [str(self.work / "bin/argocd-cmp-server"), "--config-dir-path", str(config)],
                   env={**env, **ours, "HOME": str(self.work), "ARGOCD_CMP_WORKDIR": str(self.work / "cmp")})
        return self.wait("the plugin's socket", lambda: next((self.work / "plugins").glob("*.sock"), None), seconds)

    def _start(self) -> None:
        # inserted first in INPUT, for IPv4 and IPv6 both (Go's 0.0.0.0 listener is dual-stack)
        self._guard = ["INPUT", "-p", "tcp", "--dport", str(self.metrics), "!", "-i", "lo", "-j", "DROP"]
        for tables in ("iptables", "ip6tables"):
            subprocess.run([tables, "-I", *self._guard], check=True, capture_output=True, timeout=30)
        self.spawn("redis", ["redis-server", "--port", str(self.redis), "--bind", "127.0.0.1",
                             "--save", "", "--appendonly", "no"])
        self.spawn("repo-server", [
            "argocd-repo-server", "--address", "127.0.0.1", "--port", str(self.repo_port),
            "--metrics-address", "127.0.0.1", "--metrics-port", str(realserver.free_port()),
            "--disable-tls", "--redis", f"127.0.0.1:{self.redis}", "--parallelismlimit", "1"])
        self.spawn("application-controller", [
            "argocd-application-controller", "--kubeconfig", self.admin, "--namespace", NS,
            "--repo-server", f"127.0.0.1:{self.repo_port}", "--repo-server-plaintext",
            "--redis", f"127.0.0.1:{self.redis}", "--metrics-port", str(self.metrics),
            "--status-processors", "2", "--operation-processors", "2", "--kubectl-parallelism-limit", "2"])

    def install(self) -> None:
        """install.yaml's CRDs, ConfigMaps and Secrets (with our Component), the default project and
        the node's server as a cluster."""
        docs = [d for d in yaml.safe_load_all(realserver.kustomize(self._install_kustomization(),
                                                                   self.api.kubectl_path)) if d]
        secret = next(d for d in docs if d["kind"] == "Secret" and d["metadata"]["name"] == "argocd-secret")
        secret["stringData"] = {"server.secretkey": "ocl-tests-only"}
        ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}
        # the node outlives a module: another Argo CD module of the session added them already
        self.api.add_crds([d for d in docs if d["kind"] == "CustomResourceDefinition" and self.api.request(
            "GET", f"{realserver.CRD_PATH}/{d['metadata']['name']}", ok=(404,))[0] == 404])
        self.apply([ns, *(d for d in docs if d["kind"] in CONFIG_KINDS), self._project(), self._cluster()])

    def _install_kustomization(self) -> Path:
        folder = self.work / "install"
        folder.mkdir()
        shutil.copy(self.folder / "install.yaml", folder / "install.yaml")
        (folder / "kustomization.yaml").write_text(yaml.safe_dump({
            "apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization", "namespace": NS,
            "resources": ["install.yaml"], "components": [os.path.relpath(COMPONENT, folder)]}))
        return folder

    @staticmethod
    def _project() -> dict[str, Any]:
        return {"apiVersion": "argoproj.io/v1alpha1", "kind": "AppProject",
                "metadata": {"name": "default", "namespace": NS},
                "spec": {"sourceRepos": ["*"], "destinations": [{"server": "*", "namespace": "*"}],
                         "clusterResourceWhitelist": [{"group": "*", "kind": "*"}]}}

    def _cluster(self) -> dict[str, Any]:
        ca = (self.api.root / "certs/apiserver.crt").read_bytes()
        config = {"bearerToken": realserver.ADMIN_TOKEN,
                  "tlsClientConfig": {"caData": base64.b64encode(ca).decode()}}
        return {"apiVersion": "v1", "kind": "Secret",
                "metadata": {"name": "node", "namespace": NS, "labels": {"argocd.argoproj.io/secret-type": "cluster"}},
                "stringData": {"name": "node", "server": self.server, "config": json.dumps(config)}}

    def apply(self, docs: list[dict[str, Any]]) -> None:
        self.api.kubectl("apply", "--server-side", "-f", "-", kubeconfig=self.admin,
                         input=yaml.safe_dump_all(docs))

    def alive(self) -> None:
        for name, proc in self.procs.items():
            if proc.poll() is not None:
                raise RuntimeError(f"{name} exited {proc.returncode}: {self.tail(name)}")

    def tail(self, name: str, lines: int = 12) -> str:
        path = self.work / f"{name}.log"
        return " | ".join(path.read_text(errors="replace").splitlines()[-lines:]) if path.exists() else ""

    def stop(self) -> None:
        for name in list(self.procs)[::-1]:
            proc = self.procs.pop(name)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        if self._guard:
            for tables in ("iptables", "ip6tables"):
                subprocess.run([tables, "-D", *self._guard], capture_output=True, timeout=30)
            self._guard = []

    # Applications -----------------------------------------------------------------------------
    def create_app(self, name: str, repo: Path, path: str, **spec: Any) -> None:
        self.apply([{"apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
                     "metadata": {"name": name, "namespace": NS},
                     "spec": {"project": "default", "destination": {"server": self.server},
                              "source": {"repoURL": f"file://{repo}", "targetRevision": "main", "path": path},
                              **spec}}])

    def app(self, name: str) -> dict[str, Any]:
        return self.api.request("GET", f"{APP_PATH}/{name}")[1]

    def patch_app(self, name: str, patch: dict[str, Any]) -> None:
        self.api.request("PATCH", f"{APP_PATH}/{name}", patch, content_type="application/merge-patch+json")

    def sync(self, name: str) -> None:
        """What `argocd app sync` asks for: an `operation` on the Application, which the controller runs."""
        self.patch_app(name, {"operation": {"initiatedBy": {"username": "ocl-tests"}, "sync": {"revision": "main"}}})

    def refresh(self, name: str, kind: str = "normal") -> None:
        """`argocd app get --refresh` (or `--hard-refresh`): the annotation the controller takes and removes."""
        self.patch_app(name, {"metadata": {"annotations": {"argocd.argoproj.io/refresh": kind}}})

    def wait(self, what: str, done: Any, seconds: float = 120) -> Any:
        def alive_and_done() -> Any:
            self.alive()
            return done()
        return waiting.until(what, alive_and_done, seconds, every=0.5,
                             why=lambda: f"controller: {self.tail('application-controller', 6)}")


class Repo:
    """A git repository in a folder holding the project's kustomize/ and the test's own paths."""

    def __init__(self, folder: Path):
        self.folder = folder
        folder.mkdir(parents=True)
        self.git("init", "-q", "-b", "main")
        shutil.copytree(F.ROOT / "kustomize", folder / "kustomize")

    def git(self, *args: str) -> str:
        return subprocess.run(["git", "-c", "user.name=ocl-tests", "-c", "user.email=tests@ocl.invalid", *args],
                              cwd=self.folder, check=True, capture_output=True, text=True, timeout=60).stdout

    def write(self, path: str, docs: dict[str, Any] | list[dict[str, Any]]) -> None:
        target = self.folder / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(yaml.safe_dump_all(docs) if isinstance(docs, list) else yaml.safe_dump(docs))

    def commit(self, message: str) -> str:
        self.git("add", "-A")
        self.git("commit", "-q", "-m", message)
        return self.git("rev-parse", "HEAD").strip()
