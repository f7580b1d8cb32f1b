"""The administrator's procedures are tests (issue 29): every ```sh block of docs/admin.md runs, in
the order of the page, against a real kube-apiserver of its own (tests/support/realserver.py: the
page installs and uninstalls the product, so it gets a server no other test shares), with the real
kubectl as `oc` for the subcommands they share (a shim on the PATH: any other `oc` subcommand fails
the block), the real `kustomize` (tests/tools/kustomize) and `ocl-reconcile` from the checkout's
.venv, as a laptop user runs it. The placeholders the docs name are filled in (SUBSTITUTIONS); the
internal registry and "another registry" are a real docker-registry with TLS (a CA made here) and
htpasswd.

What no process plays here is played between the blocks, by the test, as the cluster would:
- the Job controller and the kubelet for a Job (`oc create job --from=cronjob/...`): the Job's
  container args run as `ocl-reconcile` with the ServiceAccount's token, its ConfigMap volumes
  materialised at their mount paths (paths in the args pointed there); its output is the log
  `oc logs job/NAME` prints (the shim: no kubelet serves logs here); the Job's status is written;
- the CronJob's ticks (the same, named as the CronJob controller would);
- the kubelet finishing a build Pod (an image pushed to the registry, the Pod's status);
- the MCO (tests/support/mcorender.py renders; the daemon is played by node annotations);
- the namespace controller, while the install is deleted.

A block that cannot run here is marked in the page, on the line before it, with
`<!-- not-run-here: WHY -->`; NOT_RUN_HERE lists every such block (so none is skipped silently),
and an unmarked block that fails, fails the test. Each procedure's Verification is asserted from
what the docs claim; the install's objects are compared before and after each `oc apply` a page
tells to run, and only the change the page describes may happen."""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from reconcile.cluster.live import api_prefix
from reconcile.contract import annotations as A
from reconcile.core.rollout import hold
from tests.realapi.test_realapi_preflight import PASSWORD, USER, _htpasswd
from tests.support import factory as F
from tests.support import mcorender, realbuild, realserver
from tests.unit.test_rollout import mco_pool, source_mc

pytestmark = pytest.mark.realapi
DOCS = F.ROOT / "docs"
#: the pages with administrator procedures, in the order they run
PAGES = ("admin.md", "rollout-permissions.md", "namespace.md", "rollout.md", "argocd.md")
MARK = re.compile(r"^\s*<!-- not-run-here: (.+?) -->\s*$")
#: every block marked not-run-here: (page, its first line) -> a word of the reason
NOT_RUN_HERE = {
    ("admin.md", "podman build -f Containerfile -t registry.example.com/infra/ocl-reconciler:v0.1.0 ."): "podman",
    ("admin.md", "podman push registry.example.com/infra/ocl-reconciler:v0.1.0"): "podman",
    ("admin.md", "oc create imagestream os-image -n ocl-reconciler"): "OpenShift",
    ("admin.md", "oc create secret docker-registry builder-push-secret -n ocl-reconciler \\"): "OpenShift",
    ("admin.md", "oc policy add-role-to-user system:image-puller \\"): "OpenShift",
    ("admin.md", "oc get secret/pull-secret -n openshift-config --template='{{index .data \".dockerconfigjson\" | "
                 "base64decode}}' > pull.json"): "OpenShift",
    ("admin.md", "oc get co machine-config"): "OpenShift",
    ("admin.md", "oc logs -n ocl-reconciler pod/ocl-build-worker-<id>          # custom-pod-builder"): "kubelet",
    ("admin.md", "oc debug node/<node> -- chroot /host rpm-ostree status"): "OpenShift",
    ("admin.md", "python3 -m venv ~/.venvs/ocl && ~/.venvs/ocl/bin/pip install -r ocl-reconciler/requirements.lock"): "pip",
    ("admin.md", "podman run --rm --userns=keep-id:uid=1001 -v \"$HOME/.kube/config:/kubeconfig:ro,Z\" \\"): "podman",
    ("namespace.md", "oc policy add-role-to-user system:image-puller \\"): "OpenShift",
    ("argocd.md", "oc -n argocd get configmap argocd-cm -o yaml > argocd-cm.yaml        # or the argocd-cm "
                  "document of"): "Argo CD",
}
IMAGE = "registry.example.com/infra/ocl-reconciler"
KUSTOMIZE_VERSION = "v5.7.1"
#: the `oc` subcommands kubectl shares, with the same flags as the docs use them
SHARED_SUBCOMMANDS = ("get", "create", "apply", "delete", "label", "annotate", "wait", "patch", "describe")
OC_SHIM = """#!/usr/bin/env bash
# `oc` for the doc test: the real kubectl for the subcommands they share; `oc logs job/NAME` prints
# the log of the Job as the test played it (no kubelet serves logs here); anything else fails.
sub="" skip=""
for arg in "$@"; do                  # the subcommand: the first word that is no flag nor a flag's value
  if [ -n "$skip" ]; then skip=""; continue; fi
  case "$arg" in -n|--namespace|--context|--kubeconfig) skip=1 ;; -*) ;; *) sub="$arg"; break ;; esac
done
case "$sub" in
  {shared}) exec "$OCL_DOC_KUBECTL" "$@" ;;
  logs)
    for arg in "$@"; do
      case "$arg" in job/*) exec cat "$OCL_DOC_LOGS/${{arg#job/}}.log" ;; esac
    done ;;
esac
echo "oc shim: 'oc $*' is not a subcommand kubectl shares (mark the block not-run-here)" >&2
exit 97
"""
#: what no object of an install carries between two applies
VOLATILE = ("resourceVersion", "uid", "creationTimestamp", "managedFields", "generation")


@dataclass
class Block:
    page: str
    line: int               # of the opening fence
    text: str               # dedented
    not_run: str            # the marker's reason, "" when it runs
    section: str = ""       # the heading or bold entry it is under

    @property
    def first(self) -> str:
        return self.text.splitlines()[0]


def blocks(page: str) -> list[Block]:
    lines = (DOCS / page).read_text().splitlines()
    out, i = [], 0
    while i < len(lines):
        fence = re.match(r"^(\s*)```sh\s*$", lines[i])
        if not fence:
            i += 1
            continue
        indent, start, body = len(fence.group(1)), i, []
        i += 1
        while not re.match(r"^\s*```\s*$", lines[i]):
            body.append(lines[i][indent:] if lines[i][:indent].strip() == "" else lines[i])
            i += 1
        before = next((line for line in reversed(lines[:start]) if line.strip()), "")
        marked = MARK.match(before)
        section = next((line for line in reversed(lines[:start]) if line.startswith(("#", "**"))), "")
        out.append(Block(page, start + 1, "\n".join(body) + "\n", marked.group(1) if marked else "", section))
        i += 1
    return out


def yaml_after(page: str, sentence: str) -> str:
    """The ```yaml block that follows `sentence` in the page, dedented."""
    text = (DOCS / page).read_text()
    at = text.index(sentence)
    match = re.search(r"\n(\s*)```yaml\n(.*?)\n\s*```", text[at:], re.S)
    assert match, f"no yaml block after {sentence!r} in {page}"
    indent = len(match.group(1).strip("\n"))
    return "\n".join(line[indent:] for line in match.group(2).splitlines()) + "\n"


def in_page(page: str, text: str) -> str:
    """A command the page shows inline (a Verification step): it must be there, word for word."""
    assert text in (DOCS / page).read_text().replace("\n  ", " "), f"{page} no longer says {text!r}"
    return text


class Cluster:
    """The server, the registry, the shell the blocks run in, and what the test plays."""

    def __init__(self, api: realserver.RealAPI, reg: realbuild.Registry, ca: realbuild.TestCA, work: Path,
                 kustomize: Path):
        self.api, self.reg, self.ca, self.work = api, reg, ca, work
        self.logs, self.pods, self.bin = work / "joblogs", work / "pods", work / "bin"
        for d in (self.logs, self.pods, self.bin, work / "home"):
            d.mkdir()
        (self.bin / "oc").write_text(OC_SHIM.format(shared="|".join(SHARED_SUBCOMMANDS)))
        (self.bin / "oc").chmod(0o755)
        (self.bin / "kubectl").symlink_to(api.kubectl_path)
        (self.bin / "kustomize").symlink_to(kustomize)
        (self.bin / "ocl-reconcile").symlink_to(F.ROOT / ".venv/bin/ocl-reconcile")
        self.admin = api.kubeconfig(work / "admin.kubeconfig")
        self.cwd = work / "cwd"
        self.cwd.write_text(str(work))
        self.env = {"PATH": f"{self.bin}:/usr/bin:/bin", "HOME": str(work / "home"), "KUBECONFIG": self.admin,
                    "OCL_DOC_KUBECTL": api.kubectl_path, "OCL_DOC_LOGS": str(self.logs), "LANG": "C.UTF-8"}
        self.played: set[str] = set()
        self.sa_kubeconfig = ""
        self.ticks = 0

    # the shell ----------------------------------------------------------------------------------
    def sh(self, block: Block, text: str, want: int = 0) -> tuple[int, str, str]:
        script = self.work / "block.sh"
        script.write_text(text)
        wrapper = (f'trap \'pwd > "{self.cwd}"\' EXIT; cd "$(cat "{self.cwd}")"; set -e -o pipefail; '
                   f'. "{script}"')
        # the Job controller and kubelet play while the block runs: it may wait for its own Job
        stop = threading.Event()
        player = threading.Thread(target=self._play_until, args=(stop,), daemon=True)
        player.start()
        try:
            proc = subprocess.run(["bash", "-c", wrapper], env=self.env, capture_output=True, text=True,
                                  timeout=240)
        finally:
            stop.set()
            player.join()
        assert proc.returncode == want, (f"{block.page}:{block.line} exited {proc.returncode}, not {want}:\n{text}\n"
                                         f"--- stdout\n{proc.stdout}\n--- stderr\n{proc.stderr}")
        return proc.returncode, proc.stdout, proc.stderr

    def kubectl(self, *args: str, check: bool = True, input: str | None = None) -> str:
        return self.api.kubectl(*args, kubeconfig=self.admin, check=check, input=input).stdout

    # what the cluster plays --------------------------------------------------------------------
    def _play_until(self, stop: threading.Event) -> None:
        while not stop.wait(0.2):
            self.settle()

    def settle(self) -> None:
        """The Job controller and kubelet: every Job not played yet runs now."""
        for job in self.api.request("GET", f"/apis/batch/v1/namespaces/{F.NS}/jobs")[1]["items"]:
            if job["metadata"]["name"] not in self.played:
                self.play(job)

    def play(self, job: dict[str, Any]) -> int:
        name = job["metadata"]["name"]
        self.played.add(name)
        if not self.sa_kubeconfig:
            token = self.api.service_account_token(F.NS, "ocl-reconciler")
            self.sa_kubeconfig = self.api.kubeconfig(self.work / "sa.kubeconfig", token, "ocl-reconciler")
        spec = job["spec"]["template"]["spec"]
        assert spec["serviceAccountName"] == "ocl-reconciler", spec
        (container,) = spec["containers"]
        root = self.pods / name
        mounts = {}
        for mount in container.get("volumeMounts") or []:
            volume = next(v for v in spec["volumes"] if v["name"] == mount["name"])
            if "configMap" not in volume:
                continue
            cm = self.api.get("ConfigMap", F.NS, volume["configMap"]["name"])
            if cm is None:
                assert volume["configMap"].get("optional"), f"Job {name}: ConfigMap {volume['configMap']} missing"
                continue
            items = volume["configMap"].get("items") or [{"key": k, "path": k} for k in cm.get("data") or {}]
            target = root / mount["mountPath"].lstrip("/")
            target.mkdir(parents=True)
            for item in items:
                (target / item["path"]).write_text(cm["data"][item["key"]])
            mounts[mount["mountPath"]] = str(target)
        args = []
        for arg in container["args"]:
            for path, real in mounts.items():
                arg = arg.replace(path + "/", real + "/")
            args.append(arg)
        proc = subprocess.run([str(F.ROOT / ".venv/bin/ocl-reconcile"), *args, "--kubeconfig", self.sa_kubeconfig],
                              capture_output=True, text=True, timeout=150,
                              env={"PATH": "/usr/bin:/bin", "HOME": str(root)})
        (self.logs / f"{name}.log").write_text(proc.stdout + proc.stderr)
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        done = [("SuccessCriteriaMet", "Complete")] if proc.returncode == 0 else [("FailureTarget", "Failed")]
        job = self.api.request("GET", f"/apis/batch/v1/namespaces/{F.NS}/jobs/{name}")[1]
        job["status"] = {"startTime": now, "active": 0, "ready": 0, **(
            {"succeeded": 1, "completionTime": now} if proc.returncode == 0 else {"failed": 1}),
            "conditions": [{"type": t, "status": "True", "lastProbeTime": now, "lastTransitionTime": now,
                            "reason": "BackoffLimitExceeded" if proc.returncode else "CompletionsReached",
                            "message": ""} for t in done[0]]}
        self.api.request("PUT", f"/apis/batch/v1/namespaces/{F.NS}/jobs/{name}/status", job)
        return proc.returncode

    def tick(self) -> tuple[int, str]:
        """The CronJob's next tick: a Job from its template, run."""
        self.ticks += 1
        name = f"ocl-reconciler-tick-{self.ticks}"
        self.kubectl("create", "job", name, "--from=cronjob/ocl-reconciler", "-n", F.NS)
        job = self.api.request("GET", f"/apis/batch/v1/namespaces/{F.NS}/jobs/{name}")[1]
        code = self.play(job)
        return code, (self.logs / f"{name}.log").read_text()

    def pool(self) -> dict[str, Any]:
        return self.api.get("MachineConfigPool", "", "worker")

    def ann(self) -> dict[str, str]:
        return self.pool()["metadata"].get("annotations") or {}

    def build_pod(self) -> dict[str, Any]:
        (pod,) = [p for p in F.owned(self.api.list("Pod", F.NS), "worker")]
        return pod

    def finish_build(self) -> None:
        """The kubelet: the build Pod pushed its image and succeeded."""
        import kubelet  # examples/kubelet.py
        pod = self.build_pod()
        name = pod["metadata"]["name"]
        digest = push(self.reg, f"{F.NS}/os-image", name)
        self.api.write_status(kubelet.set_phase(pod, "Succeeded", digest=digest))

    def built(self) -> str:
        """Ticks until the pool is Succeeded (Pending, the kubelet, Succeeded); its image."""
        code, log = self.tick()
        assert code == 0 and self.ann()[A.STATE] == A.PENDING, log
        self.finish_build()
        code, log = self.tick()
        assert code == 0 and self.ann()[A.STATE] == A.SUCCEEDED, log
        return self.ann()[A.IMAGE]

    def mco(self) -> None:
        """The render controller, then the daemons: every node of the pool on its rendered config."""
        mcorender.sync_api(self.api, "worker", F.BASE)
        pool = self.pool()
        rendered = pool["spec"]["configuration"]["name"]
        for node in self.api.list("Node"):
            node["metadata"].setdefault("annotations", {}).update({
                f"{F.MCO}/currentConfig": rendered, f"{F.MCO}/desiredConfig": rendered, f"{F.MCO}/state": "Done"})
            self.api.request("PUT", self.api.path("Node", "", node["metadata"]["name"]), node)
        self.api.request("PUT", self.api.path("MachineConfigPool", "", "worker") + "/status",
                         mcorender.roll_out(pool, 1, 1))

    # the install's objects, to compare around an apply -----------------------------------------
    def installed(self) -> dict[tuple[str, str, str], Any]:
        rendered = subprocess.run([self.api.kubectl_path, "kustomize", str(self.work / "site/ocl-reconciler")],
                                  capture_output=True, text=True, check=True).stdout
        out = {}
        for doc in yaml.safe_load_all(rendered):
            md = doc["metadata"]
            # the test's own view, read with its client (a kubectl process per object cost 0.2 s of CPU)
            status, obj = self.api.request("GET", rest_path(doc), ok=(404,))
            if status == 404:        # the object is not there; a wrong path would be "404 page not found"
                assert isinstance(obj, dict) and obj.get("reason") == "NotFound", (doc["kind"], obj)
                obj = None
            if obj:
                for key in VOLATILE:
                    obj["metadata"].pop(key, None)
                (obj["metadata"].get("annotations") or {}).pop("kubectl.kubernetes.io/last-applied-configuration", None)
                obj.pop("status", None)
            out[(doc["kind"], md.get("namespace", ""), md["name"])] = obj
        return out


def rest_path(doc: dict[str, Any]) -> str:
    """The REST path of a rendered object: its kind's plural is the lower-case kind with English's
    -y/-ies (every kind the overlays render: a Policy's is policies)."""
    kind, md = doc["kind"].lower(), doc["metadata"]
    plural = kind[:-1] + "ies" if kind.endswith("y") else kind + "s"
    where = f"/namespaces/{md['namespace']}" if md.get("namespace") else ""
    return f"{api_prefix(doc['apiVersion'])}{where}/{plural}/{md['name']}"


def push(reg: realbuild.Registry, repo: str, tag: str) -> str:
    """realbuild.push_image with the registry's basic auth."""
    with realbuild.basic_auth(USER, PASSWORD):
        return realbuild.push_image(reg, repo, tag)


def changed(before: dict, after: dict) -> set[tuple[str, str, str]]:
    return {key for key in before.keys() | after.keys() if before.get(key) != after.get(key)}


def namespace_controller(api: realserver.RealAPI, stop: threading.Event) -> None:
    """kube-controller-manager's namespace controller, which does not run here: a namespace being
    deleted loses its objects, then its finalizer. Like the real one it is driven by a watch, so it
    empties the namespace within milliseconds, while `oc delete -f -` is still deleting the objects
    listed after the Namespace (a poll every 0.2 s lost that race only when the machine was busy)."""
    for event in api.watch(f"/api/v1/namespaces?fieldSelector=metadata.name%3D{F.NS}", stop):
        ns = event["object"]
        if event["type"] == "DELETED" or not ns["metadata"].get("deletionTimestamp"):
            continue
        for path in (f"/apis/batch/v1/namespaces/{F.NS}/jobs", f"/apis/batch/v1/namespaces/{F.NS}/cronjobs",
                     f"/api/v1/namespaces/{F.NS}/configmaps", f"/api/v1/namespaces/{F.NS}/secrets",
                     f"/api/v1/namespaces/{F.NS}/serviceaccounts", f"/api/v1/namespaces/{F.NS}/pods",
                     f"/apis/coordination.k8s.io/v1/namespaces/{F.NS}/leases",
                     f"/apis/rbac.authorization.k8s.io/v1/namespaces/{F.NS}/roles",
                     f"/apis/rbac.authorization.k8s.io/v1/namespaces/{F.NS}/rolebindings",
                     f"/apis/monitoring.coreos.com/v1/namespaces/{F.NS}/prometheusrules"):
            api.request("DELETE", path, ok=(404,))
        ns["spec"]["finalizers"] = []
        api.request("PUT", f"/api/v1/namespaces/{F.NS}/finalize", ns, ok=(404, 409))


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """A server of its own, bootstrapped as an OpenShift cluster is before the install: the MCO's
    CRDs and published ConfigMap, OpenShift's admission (imitated), the global pull secret, a
    worker pool rendered by the MCO with one node; and the registry."""
    realbuild.require_registry()
    kustomize = realserver.cache_dir().parent / f"kustomize-{KUSTOMIZE_VERSION}/kustomize"
    if not kustomize.is_file():
        message = f"the doc test needs {kustomize}: `make kustomize` builds it"
        if os.environ.get(realserver.REQUIRE) == "require":
            pytest.fail(message)
        pytest.skip(message)
    root = tmp_path_factory.mktemp("admin-docs")
    api = realserver.RealAPI(root / "server", realserver.binaries())
    (root / "server").mkdir()
    api.start()
    ca = realbuild.TestCA(root / "ca")
    reg = realbuild.Registry(root, tls=ca, htpasswd=_htpasswd(root / "htpasswd"))
    try:
        api.add_crds([realserver.PROMETHEUSRULE_CRD])
        api.kubectl("create", "-f", str(realserver.HERE / "openshift-admission.yaml"),
                    kubeconfig=api.kubeconfig(root / "boot.kubeconfig"))
        pull = F.secret("pull-secret", {"auths": {"quay.io": {"auth": base64.b64encode(b"u:p").decode()}}})
        pull["metadata"]["namespace"] = "openshift-config"
        worker = mco_pool("worker", ("worker",), opted_in=False)
        worker["status"] = {"machineCount": 1, "updatedMachineCount": 1}
        api.load([F.osimageurl(), pull, worker, F.node("worker-0", "worker"),
                  source_mc("00-worker", "worker", {"/etc/base": "base"}, generated=True)])
        mcorender.sync_api(api, "worker", F.BASE)
        work = root / "work"
        work.mkdir()
        shutil.copytree(F.ROOT / "kustomize", work / "ocl-reconciler/kustomize")
        yield Cluster(api, reg, ca, work, kustomize)
    finally:
        reg.stop()
        api.stop()


def test_the_administrators_procedures_run_as_written(cluster):
    c = cluster
    started = time.monotonic()
    pages = {page: blocks(page) for page in PAGES}
    marked = {(b.page, b.first): b.not_run for bs in pages.values() for b in bs if b.not_run}
    assert set(marked) == set(NOT_RUN_HERE), "the blocks marked not-run-here changed: update NOT_RUN_HERE"
    for key, word in NOT_RUN_HERE.items():
        assert word in marked[key], (key, marked[key])
    print("not run here:", *(f"{p}: {first}  <- {why}" for (p, first), why in marked.items()), sep="\n  ")

    subst = {"image-registry.openshift-image-registry.svc:5000": c.reg.host, "quay.example.com": c.reg.host,
             "--docker-username=USER": f"--docker-username={USER}",
             "--docker-password=PASSWORD": f"--docker-password={PASSWORD}",
             "/path/to/registry-ca.crt": str(c.ca.ca)}
    ran: list[Block] = []
    state: dict[str, Any] = {}

    def run(block: Block, want: int = 0, **placeholders: str) -> tuple[int, str, str]:
        text = block.text
        for old, new in {**subst, **placeholders}.items():
            text = text.replace(old, new)
        ran.append(block)
        result = c.sh(block, text, want)
        c.settle()
        return result

    def find(page: str, first: str) -> Block:
        (block,) = [b for b in pages[page] if b.first == first and not b.not_run]
        return block

    for block in pages["admin.md"]:
        if block.not_run:
            continue
        first = block.first
        if first.startswith("mkdir -p site/ocl-reconciler"):
            run(block)
        elif first.startswith("kustomize edit set image") and first.endswith(":v0.1.0"):
            run(block)
            shown = yaml_after("admin.md", "Your `kustomization.yaml` is then:")
            assert yaml.safe_load((c.work / "site/ocl-reconciler/kustomization.yaml").read_text()) == \
                yaml.safe_load(shown)
        elif first.startswith("kubectl kustomize . | grep"):
            _, out, _ = run(block)
            # "Every line shows your image"
            assert out.split() == ["image:", f"{IMAGE}:v0.1.0"], out
        elif first == "kubectl kustomize . | oc apply -f -" and "install" not in state:
            state["install"] = True
            run(block)
            after = c.installed()
            assert all(after.values()), [k for k, v in after.items() if not v]
            # kube-controller-manager would give the new namespace its `default` ServiceAccount
            c.api.create({"apiVersion": "v1", "kind": "ServiceAccount",
                          "metadata": {"name": "default", "namespace": F.NS}})
            out = c.kubectl(*in_page("admin.md", "oc get cronjob/ocl-reconciler serviceaccount/ocl-reconciler "
                                     "serviceaccount/ocl-builder -n ocl-reconciler").split()[1:])
            listed = [line.split()[0] for line in out.splitlines() if line.strip() and not line.startswith("NAME")]
            assert listed == ["cronjob.batch/ocl-reconciler", "serviceaccount/ocl-reconciler",
                              "serviceaccount/ocl-builder"], out                  # "lists all three"
            out = c.kubectl(*in_page("admin.md", "oc get namespace ocl-reconciler --show-labels").split()[1:])
            assert "pod-security.kubernetes.io/enforce=baseline" in out
            assert "security.openshift.io/scc.podSecurityLabelSync=false" in out
        elif first.startswith("oc create secret docker-registry builder-push-secret"):
            run(block)
        elif first.startswith("oc create configmap on-cluster-build-config"):
            run(block)
            # the CronJob's runs follow their changes (--wait 540); here no kubelet plays a build Pod
            # while a Job runs, so the settings key shortens the wait to what the story needs (the run
            # ends with its build Pending, as the procedure shows)
            settings = c.api.get("ConfigMap", F.NS, "on-cluster-build-config")
            settings["data"]["waitDeadline"] = "3s"
            c.api.request("PUT", c.api.path("ConfigMap", F.NS, "on-cluster-build-config"), settings)
        elif first.startswith("oc create configmap registry-ca"):
            before = c.installed()
            run(block)
            after = c.installed()
            assert changed(before, after) == {("CronJob", F.NS, "ocl-reconciler")}, changed(before, after)
            pod = after[("CronJob", F.NS, "ocl-reconciler")]["spec"]["jobTemplate"]["spec"]["template"]["spec"]
            assert pod["containers"][0]["args"][-1] == "--registry-ca=/etc/ocl/registry-ca/ca.crt"
            # "Verification: ... diff from a laptop exits 0 while no pool is labelled"
            assert subprocess.run([str(c.bin / "ocl-reconcile"), "diff", "--registry-ca", str(c.ca.ca)],
                                  env=c.env, capture_output=True).returncode == 0
        elif first == "ocl-reconcile preflight":
            proc = subprocess.run(["bash", "-c", block.text], env=c.env, capture_output=True, text=True,
                                  cwd=c.work)
            ran.append(block)
            lines = proc.stdout.splitlines()
            results = [line.split()[0] for line in lines[:-1]]
            # "Each check is one line, ok, warn or fail"; "Exit code 0: every check is ok; 1: warnings
            # only; 2: a check failed" (from a laptop the registry's CA is not given: it fails)
            assert set(results) <= {"ok", "warn", "fail"} and results, proc.stdout
            assert lines[-1].startswith("preflight: "), proc.stdout
            assert proc.returncode == (2 if "fail" in results else 1 if "warn" in results else 0), proc.stdout
            state["laptop-preflight"] = proc.stdout
        elif first.startswith("oc create job ocl-preflight"):
            _, out, _ = run(block)
            lines = {line.split()[1]: line for line in out.splitlines() if line.split()[:1] in (["ok"], ["warn"],
                                                                                                  ["fail"])}
            assert lines["permissions"].startswith("ok") and "(you are it)" in lines["permissions"], out
            assert lines["registry"].startswith("ok"), out          # the CronJob's --registry-ca
            assert "fail" not in [line.split()[0] for line in lines.values()], out
            assert c.api.request("GET", f"/apis/batch/v1/namespaces/{F.NS}/jobs/ocl-preflight", ok=(404,))[0] == 404
        elif block.text == "oc label mcp/worker ocl-reconciler.io/layering-enabled=\n":
            run(block)
            assert A.LAYERING_LABEL in c.pool()["metadata"]["labels"]
            # "Before the next run, ocl-reconcile diff --pool worker shows what it will create (exit 1)"
            assert subprocess.run([str(c.bin / "ocl-reconcile"), "diff", "--pool", "worker"], env=c.env,
                                  capture_output=True).returncode == 1
        elif first == "oc create job --from=cronjob/ocl-reconciler -n ocl-reconciler ocl-run-1":
            run(block)
        elif first.startswith("oc wait --for=condition=complete job/ocl-run-1"):
            _, out, _ = run(block)
            last = json.loads(out.strip().splitlines()[-1])["msg"]
            assert re.fullmatch(r"run done: pools 1 Pending; \d+ created, \d+ patched, 0 deleted, 0 images deleted; "
                                r"\d+ requests \(\d+ KiB read\); [\d.]+s", last), last
        elif first == "ocl-reconcile status":
            _, out, _ = run(block)
            lines = out.splitlines()
            at = next(i for i, line in enumerate(lines) if line.startswith("NAME "))
            status, columns = lines[:at], [line.split(None, 2) for line in lines[at:]]
            assert status[0].split()[:3] == ["POOL", "RENDERED", "STATE"], out
            assert status[1].split()[0] == "worker" and status[1].split()[2] == A.PENDING, out
            # the custom-columns: the pool's state and message, as recorded
            assert columns == [["NAME", "STATE", "MESSAGE"], ["worker", A.PENDING, *c.ann()[A.MESSAGE].split(None, 0)]], out
        elif first.startswith("oc get mcp worker -o jsonpath='{.metadata.annotations.ocl-reconciler"):
            _, out, _ = run(block)
            assert out == c.ann()[A.BUILD] and out.startswith(f"Pod/{F.NS}/ocl-build-worker-"), out
            # the kubelet: the build Pod pushed its image; the CronJob's next tick records it
            c.finish_build()
            code, log = c.tick()
            assert code == 0 and c.ann()[A.STATE] == A.SUCCEEDED, log
        elif first.startswith("oc get mcp worker -o jsonpath='{.metadata.annotations.machineconfiguration"):
            _, out, _ = run(block)
            newest, url = out[:len(out) // 2], out[len(out) // 2:]
            # "Both print the same <repository>@sha256:..."
            assert newest == url == c.ann()[A.IMAGE] and url.startswith(f"{c.reg.host}/{F.NS}/os-image@sha256:"), out
        elif first == "oc wait mcp/worker --for=condition=Updated --timeout=60m" and "uninstall" not in state:
            c.mco()
            run(block)
            assert c.tick()[0] == 0             # a tick while the MCO rolled out records the new rendered config
        elif first.startswith("oc get nodes -l node-role.kubernetes.io/worker"):
            _, out, _ = run(block)
            (header, row) = [line.split() for line in out.strip().splitlines()]
            assert header == ["NAME", "CURRENT", "DESIRED", "STATE"], out
            rendered = c.pool()["spec"]["configuration"]["name"]
            # "CURRENT and DESIRED are the pool's spec.configuration.name, STATE is Done"
            assert row == ["worker-0", rendered, rendered, "Done"], out
        elif first.startswith("oc get cm openshift-service-ca.crt"):
            # OpenShift publishes the service CA in every namespace; here the test CA plays it
            c.api.create(F.configmap("openshift-service-ca.crt", {"service-ca.crt": c.ca.ca.read_text()}))
            run(block)
        elif first == "ocl-reconcile explain worker":
            _, out, _ = run(block)
            assert "decision" in out
        elif first == "NS=ocl-reconciler":
            run(block)
            assert (c.work / "site/ocl-reconciler/cluster.yaml").stat().st_size > 0
        elif first == "ocl-reconcile diff --snapshot cluster.yaml":
            _, out, _ = run(block)
            # "diff --snapshot cluster.yaml and diff on the live cluster print the same plan"
            live = subprocess.run([str(c.bin / "ocl-reconcile"), "diff"], env=c.env, capture_output=True, text=True,
                                  cwd=c.work / "site/ocl-reconciler")
            assert live.returncode == 0 and out.startswith(live.stdout), (live.stdout, out)
            assert json.loads(out[len(live.stdout):])["pool"] == "worker"    # then explain -o json
        elif block.section.startswith("**`Blocked`: `create Pod/...: 403 Forbidden"):
            # the troubleshooting entry "Blocked: create Pod/...: 403 Forbidden": the SCC RoleBinding lost
            state["scc"] = True
            c.kubectl("delete", "rolebinding/ocl-builder-anyuid", "-n", F.NS)
            c.kubectl("annotate", "mcp/worker", f"{A.REBUILD}=scc-lost", "--overwrite")
            code, log = c.tick()
            assert code == 2 and c.ann()[A.STATE] == A.BLOCKED, log
            assert "403" in c.ann()[A.MESSAGE] and "security context constraint" in c.ann()[A.MESSAGE]
            assert not F.owned(c.api.list("Pod", F.NS), "worker")       # no Pod to describe
            before = c.installed()
            run(block)
            after = c.installed()
            # re-applying the overlay restores the binding and changes nothing else
            assert changed(before, after) == {("RoleBinding", F.NS, "ocl-builder-anyuid")}, changed(before, after)
            assert before[("RoleBinding", F.NS, "ocl-builder-anyuid")] is None
            code, log = c.tick()
            assert code == 0 and c.ann()[A.STATE] == A.PENDING, log
            c.finish_build()
            assert c.tick()[0] == 0 and c.ann()[A.STATE] == A.SUCCEEDED
            c.mco()
        elif first.startswith("oc annotate mcp/worker ocl-reconciler.io/rebuild="):
            build = c.ann()[A.BUILD]
            run(block)
            # "The next run records Pending for a new build id"
            assert c.tick()[0] == 0 and c.ann()[A.STATE] == A.PENDING and c.ann()[A.BUILD] != build
            c.finish_build()
            assert c.tick()[0] == 0 and c.ann()[A.STATE] == A.SUCCEEDED
            c.mco()
        elif first.startswith("oc get mc <MachineConfig> -o yaml > mc.yaml"):
            # the troubleshooting entry "ROLLOUT says overridden by": zz-os sets osImageURL after ours
            zz = source_mc("zz-os", "worker", osImageURL="quay.io/other/os@sha256:" + "b" * 64)
            c.api.create(zz)
            c.mco()
            run(block, **{"<MachineConfig>": "zz-os", "<pool>": "worker"})
            assert "osImageURL" not in c.api.get("MachineConfig", "", "zz-os")["spec"]
            c.api.request("DELETE", c.api.path("MachineConfig", "", "zz-os"))
            c.mco()
        elif first.startswith("oc get mcp/<pool> -o jsonpath"):
            _, out, _ = run(block, **{"<pool>": "worker"})
            assert out == "", out                                       # not RenderDegraded
        elif first.startswith("oc get jobs -n ocl-reconciler --sort-by"):
            jobs = c.api.request("GET", f"/apis/batch/v1/namespaces/{F.NS}/jobs")[1]["items"]
            last = max(jobs, key=lambda j: j["metadata"]["creationTimestamp"])["metadata"]["name"]
            _, out, _ = run(block, **{"<the last one>": last})
            assert out.strip().splitlines()[-1] == (c.logs / f"{last}.log").read_text().strip().splitlines()[-1]
        elif first.startswith("kustomize edit set image") and first.endswith(":v0.2.0"):
            state["before-upgrade"] = c.installed()
            run(block)
        elif first == "kubectl kustomize . | oc apply -f -":
            run(block)
            before, after = state.pop("before-upgrade"), c.installed()
            assert changed(before, after) == {("CronJob", F.NS, "ocl-reconciler")}, changed(before, after)
            out = c.kubectl(*in_page("admin.md", "oc get cronjob ocl-reconciler -n ocl-reconciler -o jsonpath="
                                     "'{.spec.jobTemplate.spec.template.spec.containers[0].image}'")
                            .replace("'", "").split()[1:])
            assert out == f"{IMAGE}:v0.2.0", out                         # "shows the new tag"
            # the old install put the MCO's label on the pool, not ours; a run reports it and keeps all
            state["image"] = c.ann()[A.IMAGE]
            c.kubectl("label", "mcp/worker", f"{A.MCO_LAYERING_LABEL}=", f"{A.LAYERING_LABEL}-")
            code, log = c.tick()
            assert code == 2 and A.MCO_LABEL in c.ann(), log
        elif first == "oc get mcp -l machineconfiguration.openshift.io/layering-enabled -o name":
            _, out, _ = run(block)
            assert out.split() == ["machineconfigpool.machineconfiguration.openshift.io/worker"], out
        elif block.text == find("rollout.md", "oc label mcp/worker ocl-reconciler.io/layering-enabled=").text:
            run(block)
        elif first == "oc create job --from=cronjob/ocl-reconciler -n ocl-reconciler ocl-relabel":
            run(block)
            log = (c.logs / "ocl-relabel.log").read_text()
            # "the run's run done: line says 0 created, 1 patched, 0 deleted"
            assert "0 created, 1 patched, 0 deleted" in log.strip().splitlines()[-1], log
            assert c.ann()[A.IMAGE] == state["image"] and A.MCO_LABEL not in c.ann()
            # docs/rollout.md gives the same two commands: once more, from the MCO's label
            c.kubectl("label", "mcp/worker", f"{A.MCO_LAYERING_LABEL}=", f"{A.LAYERING_LABEL}-")
            run(find("rollout.md", "oc label mcp/worker ocl-reconciler.io/layering-enabled="))
            labels = c.pool()["metadata"]["labels"]
            assert A.LAYERING_LABEL in labels and A.MCO_LAYERING_LABEL not in labels
            # docs/rollout.md section 3: the gate holds the pool between rollouts; an administrator who
            # unpauses it releases it (`gate: admin`) until the hand-back annotation is removed
            c.tick()
            assert c.pool()["spec"].get("paused") is True and c.ann()[A.GATE] == hold.HELD, c.ann()
            c.kubectl("patch", "mcp/worker", "--type=merge", "-p", '{"spec":{"paused":false}}')
            c.tick()
            assert c.ann()[A.GATE] == hold.ADMIN and c.pool()["spec"]["paused"] is False
            c.tick()
            assert c.pool()["spec"]["paused"] is False                   # not paused again on its own
            run(find("rollout.md", "oc annotate mcp/worker ocl-reconciler.io/gate-"))
            c.tick()
            assert c.pool()["spec"]["paused"] is True and c.ann()[A.GATE] == hold.HELD
        elif first == "oc label mcp/worker ocl-reconciler.io/layering-enabled-":
            state["uninstall"] = True
            run(block)
        elif first == "oc create job --from=cronjob/ocl-reconciler -n ocl-reconciler ocl-cleanup":
            state["rendered-with-ours"] = [mc["metadata"]["name"] for mc in c.api.list("MachineConfig")
                                           if mc["metadata"]["name"].startswith("rendered-")
                                           and mc["spec"].get("osImageURL") == c.ann()[A.IMAGE]]
            run(block)
        elif first == "oc wait mcp/worker --for=condition=Updated --timeout=60m":
            c.mco()
            run(block)
            assert c.api.get("MachineConfig", "", c.pool()["spec"]["configuration"]["name"])["spec"][
                "osImageURL"] == F.BASE                                   # back to the release's image
        elif first.startswith("oc get mcp -o json | jq"):
            _, out, err = run(block)
            # "each prints nothing, or No resources found"
            assert out == "" and set(err.splitlines()) <= {"No resources found", f"No resources found in {F.NS} "
                                                           "namespace."}, (out, err)
        elif first == "kubectl kustomize . | oc delete --ignore-not-found -f -":
            stop = threading.Event()
            thread = threading.Thread(target=namespace_controller, args=(c.api, stop), daemon=True)
            thread.start()
            try:
                run(block)
            finally:
                stop.set()
                thread.join()
            left = c.installed()
            assert not any(left.values()), [k for k, v in left.items() if v]
            # the leftover the table names: rendered configs that still carry our osImageURL
            names = {mc["metadata"]["name"] for mc in c.api.list("MachineConfig")}
            assert state["rendered-with-ours"] and set(state["rendered-with-ours"]) <= names
        elif first.startswith("oc patch configmap ocl-reconciler-rollout -n openshift-config"):
            # the rollout policy's parameter (issue 31 item 1): at install, and when a pool is opted in
            run(block)
            data = c.api.get("ConfigMap", "openshift-config", "ocl-reconciler-rollout")["data"]
            assert data == {"repository": f"{c.reg.host}/ocl-reconciler/os-image", "pools": "worker"}, data
        elif first.startswith("oc patch mcp/infra --type=merge -p"):
            # the troubleshooting entry for a pool the MCO's selector policy refuses: a custom pool made
            # with the old shape gets the 4.18 shape, which selects worker's MachineConfigs and its own
            old = F.pool("infra", opted_in=False)
            old["spec"]["machineConfigSelector"] = {"matchLabels": {f"{F.MCO}/role": "infra"}}
            old.pop("status", None)
            c.api.create(old)
            run(block)
            patched = c.api.get("MachineConfigPool", "", "infra")
            chosen = patched["spec"]["machineConfigSelector"]
            assert chosen == {"matchExpressions": [{"key": f"{F.MCO}/role", "operator": "In",
                                                    "values": ["worker", "infra"]}]}, chosen
            from reconcile.contract import admission
            assert admission.admits_selector(patched)[0]           # as the MCO's policy's CEL has it
            c.api.request("DELETE", c.api.path("MachineConfigPool", "", "infra"))
        else:
            pytest.fail(f"admin.md:{block.line}: a block the test does not know: {first!r}")

    for page in PAGES[1:]:
        for block in pages[page]:
            if block.not_run or block in ran:
                continue
            if page == "namespace.md" and block.first.startswith("OLD="):
                run(block)                        # two shell variables for the steps after it
            elif page == "rollout-permissions.md":
                # the same command as admin.md's re-apply of your overlay, run above with its comparison
                assert block.text in {b.text for b in ran if b.page == "admin.md"}, block.text
                ran.append(block)
            else:
                pytest.fail(f"{page}:{block.line}: a block the test does not run: {block.first!r}")
    unrun = [(b.page, b.line) for bs in pages.values() for b in bs if not b.not_run and b not in ran]
    assert not unrun, unrun
    print(f"{len(ran)} blocks run, {len(marked)} not run here, in {time.monotonic() - started:.1f}s")
