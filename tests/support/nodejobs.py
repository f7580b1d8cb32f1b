"""The product deployed on the real node as shipped (`kustomize/base`, only the image replaced by a
test-only overlay), its Jobs followed as an administrator would with kubectl.

`Deployed.job()` starts a run as `kubectl create job --from=cronjob/ocl-reconciler` does: the
CronJob's own jobTemplate, unchanged. The scenario's objects are seeded as the admin; the cluster's
Build controller is played through the status subresource (OpenShift's cannot run here)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import kubelet  # examples/kubelet.py, on the path by tests/conftest.py
import yaml

from reconcile.contract import annotations as A
from tests.support import factory as F
from tests.support import realnode, realserver, waiting

CRONJOB = "ocl-reconciler"
BUILDER = "openshift-image-builder"     # Builds: the Pod builder's own Pods run in issue 53's tests
BASE = F.ROOT / "kustomize/base"
#: what a scenario leaves in the node's server, cleared between tests (clear()): the node, its
#: ServiceAccounts and the deployed product stay
CLEARED = {"/apis/batch/v1": ("jobs",),
           "/api/v1": ("pods", "configmaps", "secrets", "events", "persistentvolumeclaims"),
           "/apis/coordination.k8s.io/v1": ("leases",), "/apis/build.openshift.io/v1": ("builds",)}
CLUSTER_CLEARED = ("MachineConfigPool", "MachineConfig")


def overlay(folder: Path, image: str) -> Path:
    """The test-only overlay: kustomize/base with its image, and nothing else, replaced."""
    name, _, tag = image.rpartition(":")
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "kustomization.yaml").write_text(yaml.safe_dump({
        "apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization",
        # relative: kustomize takes no absolute root
        "resources": [os.path.relpath(BASE, folder)],
        "images": [{"name": "ocl-reconciler", "newName": name, "newTag": tag}]}))
    return folder


def clear_scenario(api: realserver.RealAPI) -> None:
    """What a scenario left in the node's server (CLEARED, CLUSTER_CLEARED) deleted; the node, the
    ServiceAccounts and the product stay."""
    for prefix, plurals in CLEARED.items():
        for plural in plurals:
            for ns in realserver.SCENARIO_NAMESPACES:
                api.request("DELETE", f"{prefix}/namespaces/{ns}/{plural}?propagationPolicy=Background",
                            {"gracePeriodSeconds": 0}, ok=(404,))
    for kind in CLUSTER_CLEARED:
        for obj in api.list(kind):
            api.request("DELETE", api.path(kind, "", obj["metadata"]["name"]), ok=(404,))
    # gone, not only deleted: a run a failed test left would go on writing into the next test's
    # pool with its token, and a claim (pvc-protection) goes only once no Pod mounts it
    waiting.until("the last scenario's Pods and claims gone", lambda: not any(
        api.request("GET", f"/api/v1/namespaces/{ns}/{plural}")[1]["items"]
        for ns in realserver.SCENARIO_NAMESPACES for plural in ("pods", "persistentvolumeclaims")), seconds=60)


def uninstall(node: realnode.Node) -> None:
    """What kustomize/base ships removed from the node's server, as `kubectl delete -k` would, and
    waited for: a test that installs the product its own way (Argo CD) starts from a server without
    it, whichever realnode test ran before on the worker (Deployed.apply installs it again)."""
    rendered = realserver.kustomize(BASE, node.api.kubectl_path)
    node.api.kubectl("delete", "-f", "-", "--ignore-not-found", "--wait=true", "--timeout=55s",
                     kubeconfig=node.admin, input=rendered)


class Jobs:
    """A run's Job and Pod as an administrator follows them with kubectl; needs `node` and `api`."""

    node: realnode.Node
    api: realserver.RealAPI

    def kubectl(self, *args: str, check: bool = True, input: str | None = None) -> subprocess.CompletedProcess[str]:
        return self.api.kubectl(*args, kubeconfig=self.node.admin, check=check, input=input)

    def job_object(self, name: str) -> dict[str, Any]:
        return self.api.request("GET", f"/apis/batch/v1/namespaces/{F.NS}/jobs/{name}")[1]

    def wait_job(self, name: str, seconds: float = 120) -> str:
        """The Job's end: `Complete` or `Failed` (its condition's type), with the reason."""
        def ended() -> str | None:
            for c in (self.job_object(name).get("status") or {}).get("conditions") or []:
                if c["type"] in ("Complete", "Failed") and c["status"] == "True":
                    return c["type"] if c["type"] == "Complete" else f"Failed/{c.get('reason')}"
            return None
        return waiting.until(f"job {name}'s end", ended, seconds, every=0.5, why=lambda: self.describe(name))

    def scheduled_jobs(self) -> list[str]:
        """The Jobs the CronJob controller started (its scheduled-timestamp annotation, its owner)."""
        jobs = self.api.request("GET", f"/apis/batch/v1/namespaces/{F.NS}/jobs")[1]["items"]
        return sorted(j["metadata"]["name"] for j in jobs
                      if "batch.kubernetes.io/cronjob-scheduled-timestamp" in (j["metadata"].get("annotations") or {})
                      and any(o["kind"] == "CronJob" and o.get("controller") for o in j["metadata"].get("ownerReferences", [])))

    def pods(self, job: str) -> list[dict[str, Any]]:
        return self.api.list("Pod", F.NS, selector=f"job-name={job}")

    def logs(self, job: str) -> str:
        return self.kubectl("logs", f"job/{job}", "-n", F.NS, check=False).stdout

    def terminated(self, job: str) -> dict[str, Any]:
        """The run's container's terminated state (exitCode, reason, message)."""
        (pod,) = self.pods(job)
        (status,) = pod["status"]["containerStatuses"]
        return status["state"].get("terminated") or {}

    def describe(self, job: str) -> str:
        pods = [{"name": p["metadata"]["name"], "node": p["spec"].get("nodeName"),
                 "status": p.get("status")} for p in self.pods(job)]
        return json.dumps({"job": self.job_object(job).get("status"), "pods": pods})[:3000] + \
            f" kubelet: {self.node.tail('kubelet', 4)}"


class Deployed(Jobs):
    """kustomize/base through the overlay, applied to the node's server as the admin."""

    def __init__(self, node: realnode.Node, image: str, folder: Path):
        self.node, self.api, self.image = node, node.api, image
        self.rendered = realserver.kustomize(overlay(folder, image), self.api.kubectl_path)
        self.apply()

    def apply(self) -> None:
        """The rendered overlay applied, and the CronJob suspended: its `*/5` tick would start runs
        in other tests (a test of the controller itself resumes it)."""
        self.kubectl("apply", "-f", "-", input=self.rendered)
        self.kubectl("patch", "cronjob", CRONJOB, "-n", F.NS, "--type", "merge", "-p", '{"spec":{"suspend":true}}')

    # a scenario -------------------------------------------------------------------------------
    def seed(self, items: list[dict[str, Any]]) -> None:
        """The scenario's objects; the pools select the real node (labelled their role)."""
        self.api.load(items)
        for pool in F.find(items, "MachineConfigPool"):
            role = pool["metadata"]["name"]
            self.kubectl("label", "node", self.node.name, f"node-role.kubernetes.io/{role}=", "--overwrite")

    def clear(self) -> None:
        clear_scenario(self.api)
        self.apply()                        # a test may have changed the product

    def pool(self, name: str = "worker") -> dict[str, Any]:
        return self.api.get("MachineConfigPool", "", name)

    def ann(self, name: str = "worker") -> dict[str, str]:
        return self.pool(name)["metadata"].get("annotations") or {}

    # runs -------------------------------------------------------------------------------------
    def job(self, name: str) -> str:
        """A run started from the CronJob's jobTemplate (`kubectl create job --from`)."""
        self.kubectl("create", "job", name, f"--from=cronjob/{CRONJOB}", "-n", F.NS)
        return name

    def cronjob_events(self, reason: str) -> list[dict[str, Any]]:
        return [e for e in self.api.list("Event", F.NS)
                if e.get("reason") == reason and e["involvedObject"].get("kind") == "CronJob"]

    def wait_running(self, job: str, seconds: float = 90) -> dict[str, Any]:
        return waiting.until(f"a running Pod of job {job}", lambda: next(
            (p for p in self.pods(job) if (p.get("status") or {}).get("phase") == "Running"), None),
            seconds, why=lambda: self.describe(job))

    def wait_for(self, what: str, done: Any, seconds: float = 90) -> Any:
        return waiting.until(what, done, seconds)



def settings() -> dict[str, Any]:
    """The scenario's settings ConfigMap: the pool is built by an OpenShift Build."""
    return F.build_config(imageBuilderType=BUILDER)


def scenario() -> list[dict[str, Any]]:
    """One opted-in pool (worker), built by an OpenShift Build; no Node object (the real node is
    the pool's, labelled by Deployed.seed)."""
    return F.cluster(nodes=False, settings=[settings(), F.osimageurl(), F.secret("pull-secret"), F.secret("push-secret")])


def build_of(d: Deployed) -> dict[str, Any] | None:
    """The newest Build in our namespace (a run starts at most one at a time)."""
    builds = sorted(d.api.list("Build", F.NS), key=lambda b: (b["metadata"]["creationTimestamp"], b["metadata"]["name"]))
    return builds[-1] if builds else None


def finish_build(api: realserver.RealAPI, build: dict[str, Any], phase: str) -> dict[str, Any]:
    """The Build's status as OpenShift's build controller writes it (examples/kubelet.py)."""
    kubelet.set_phase(build, phase)
    return api.write_status(build)


def finish(d: Deployed, phase: str) -> dict[str, Any]:
    return finish_build(d.api, build_of(d), phase)


def recorded_image(d: Deployed) -> str:
    """The image the build of the pool's recorded build name pushed (examples/kubelet.py's digest)."""
    return f"{F.REPO}@{kubelet.digest_for(d.ann()[A.BUILD].rsplit('/', 1)[1])}"
