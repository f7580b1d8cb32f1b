"""The build Pod on the real node (issue 53): the product, run in-process on the host as its
ServiceAccount, creates the build Pod from its own template (manifests/pod-buildah.yaml.j2 and
build-pod.sh, unchanged); the real scheduler and kubelet run it on the builder image made here
(tests/support/builderimage.py), with the pool's build storage claim bound by kube-controller-
manager to a `local` PersistentVolume this module provides.

The registry is realbuild's docker-registry on 127.0.0.1, reachable from the node's Pods at
`node.gateway:port` (Node.expose): the settings name that address (the base, the pushed image);
the host reads the same registry at 127.0.0.1. Plain HTTP, made insecure for the build by the
rendered MachineConfig's /etc/containers/registries.conf, as image.config.openshift.io
`insecureRegistries` would write it (the realbuild suite does the same)."""

from __future__ import annotations

import contextlib
import io
import json
import threading
import time
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reconcile import cli
from reconcile.contract import annotations as A
from tests.support import builderimage, realnode, signing
from tests.support import factory as F
from tests.support import realbuild as R

STORAGE_CLASS = "ocl-local"
BUILDER = "custom-pod-builder"


def registries_conf(*hosts: str) -> str:
    return "".join(f'[[registry]]\nlocation = "{h}"\ninsecure = true\n' for h in hosts)


def machineconfig(name: str, registry: str, content: str | None = None) -> dict[str, Any]:
    """A rendered config (factory's) with the nodes' registries.conf listing the test registry as
    insecure (its address as the Pods see it)."""
    mc = F.machineconfig(name, content=content)
    mc["spec"]["config"]["storage"]["files"].append({
        "path": "/etc/containers/registries.conf", "mode": 420,
        "contents": {"source": "data:," + urllib.parse.quote(registries_conf(registry))}})
    return mc


@dataclass
class World:
    """The registry, its address for Pods, the base image there, and the builder image on the node;
    with `front`, the Pods reach the registry through it (signing.Refusing), the host directly;
    with `ca`, the registry serves TLS with a certificate of that CA for 127.0.0.1 and the gateway."""

    node: realnode.Node
    root: Path
    registry: R.Registry
    host: R.Host
    pods_registry: str          # gateway:port
    builder: builderimage.BuilderImage
    front: signing.Refusing | None = None
    ca: R.TestCA | None = None

    @property
    def base(self) -> str:
        return f"{self.pods_registry}/ocl/base:latest"

    def inspect(self, ref: str) -> dict[str, Any]:
        """skopeo inspect of `repo@digest` or `repo:tag` (a path in the registry) at 127.0.0.1."""
        return json.loads(self.host.run("skopeo", "inspect", "--tls-verify=false",
                                        f"docker://{self.registry.host}/{ref}").stdout)

    def base_blob_gets(self, since: int = 0) -> int:
        """How many base blobs the registry served (GET, 200) after request number `since`."""
        return sum(1 for r in self.registry.requests()[since:]
                   if r["method"] == "GET" and r["uri"].startswith("/v2/ocl/base/blobs/") and r["status"] == 200)

    def stop(self) -> None:
        if self.front is not None:
            self.front.stop()
        self.registry.stop()


def world(node: realnode.Node, root: Path, refuse: Callable[[str, str], bool] | None = None,
          tls: bool = False) -> World:
    """A registry (its access log on) with the small base pushed (realbuild.build_base_image), on
    the node (on_node); with `refuse`, behind a front that refuses (or holds) what it picks; with
    `tls`, serving HTTPS with a test CA's certificate, as the internal registry serves one the
    service CA signed (the settings then carry that CA as the cluster's service CA)."""
    ca = R.TestCA(root / "ca", ips=(node.gateway,)) if tls else None
    registry = R.Registry(root, tls=ca, access_log=True)
    front = signing.Refusing(registry, refuse) if refuse is not None else None
    try:
        host = R.Host(root, registry)
        R.build_base_image(host, f"{registry.host}/ocl/base:latest")
        made = on_node(node, root, registry, host, front)
        made.ca = ca
        return made
    except BaseException:
        if front is not None:
            front.stop()
        registry.stop()
        raise


def on_node(node: realnode.Node, root: Path, registry: R.Registry, host: R.Host,
            front: signing.Refusing | None = None) -> World:
    """The registry (or its front) exposed to the node's Pods, and the builder image imported into
    its containerd."""
    builder = builderimage.builder_image()
    node.import_image(builder.archive)
    port = int(front.host.rsplit(":", 1)[1]) if front is not None else registry.port
    return World(node, root, registry, host, node.expose(port), builder, front)


class Hold:
    """As a front's `refuse`: holds the first request `matches(method, path)` picks until
    released (then hands it on), refusing none; a build stopped at a known point (its base's
    pull) while a test does something to it. Armed again by arm()."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.matches: Callable[[str, str], bool] = lambda method, path: False
        self.held, self.released = threading.Event(), threading.Event()

    def arm(self, matches: Callable[[str, str], bool]) -> None:
        self.held.clear()
        self.released.clear()
        self.matches = matches

    def __call__(self, method: str, path: str) -> bool:
        with self.lock:
            hold = self.matches(method, path) and not self.held.is_set()
            if hold:
                self.held.set()
        if hold:
            self.released.wait(180)
        return False


def settings(w: World, base: str = "", extensions: str = "", **build: str) -> list[dict[str, Any]]:
    """The settings a cluster's admin would write for this registry and builder image, with the
    pool's build storage persistent (the buildah Pod's default) on our StorageClass (unless
    `buildStorage` or `buildStorageClass` says otherwise). With a TLS registry, its CA as OpenShift
    publishes the service CA in every namespace (`openshift-service-ca.crt`): the build Pod gives it
    to buildah (--cert-dir), and run(registry_ca=) to the run's registry client."""
    repo = f"{w.pods_registry}/ocl/os-image"
    service_ca = [F.configmap("openshift-service-ca.crt", {"service-ca.crt": w.ca.ca.read_text()})] if w.ca else []
    return [*service_ca, F.build_config(imageBuilderType=BUILDER, finalImagePullspec=f"{repo}:latest",
                           buildahImage=w.builder.name, buildStorage=build.pop("buildStorage", "persistent"),
                           buildStorageClass=build.pop("buildStorageClass", STORAGE_CLASS), **build),
            F.osimageurl(baseOSContainerImage=base or w.base, baseOSExtensionsContainerImage=extensions),
            F.secret("pull-secret", payload=R.auth_for(w.pods_registry, "puller")),
            F.secret("push-secret", payload=R.auth_for(w.pods_registry, "pusher"))]


def scenario(w: World, mc: dict[str, Any], **kw: str) -> list[dict[str, Any]]:
    """settings(**kw), one opted-in pool and its rendered config `mc`."""
    return [*settings(w, **kw), F.pool("worker", rendered=mc["metadata"]["name"]), mc]


def switch_config(node: realnode.Node, mc: dict[str, Any], pool: str = "worker") -> None:
    """A new rendered config for the pool, as the MCO's render controller would write it."""
    node.api.load([mc])
    node.api.kubectl("patch", "machineconfigpool", pool, "--type", "merge", "-p",
                     json.dumps({"spec": {"configuration": {"name": mc["metadata"]["name"]}}}),
                     kubeconfig=node.admin)


# build storage: a local PersistentVolume the PV controller binds to the product's claim ----------

def storage_class() -> dict[str, Any]:
    return {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": STORAGE_CLASS},
            "provisioner": "kubernetes.io/no-provisioner", "volumeBindingMode": "Immediate",
            "reclaimPolicy": "Retain"}


def local_volume(node: realnode.Node, name: str, path: Path, capacity: str = "1Ti") -> dict[str, Any]:
    """A `local` PersistentVolume on the node (a directory of the host), of our StorageClass. A
    `local` volume, not hostPath: the kubelet applies the Pod's fsGroup to it (hostPath it never
    does), as to the CSI volumes of a cluster's StorageClass."""
    path.mkdir(parents=True, exist_ok=True)
    return {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": name},
            "spec": {"capacity": {"storage": capacity}, "accessModes": ["ReadWriteOnce"],
                     "persistentVolumeReclaimPolicy": "Retain", "storageClassName": STORAGE_CLASS,
                     "volumeMode": "Filesystem", "local": {"path": str(path)},
                     "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                         {"key": "kubernetes.io/hostname", "operator": "In", "values": [node.name]}]}]}}}}


def provide_storage(node: realnode.Node, path: Path, name: str) -> None:
    """Our StorageClass and a fresh local volume of it, applied as the admin."""
    listed = {"apiVersion": "v1", "kind": "List", "items": [storage_class(), local_volume(node, name, path)]}
    node.api.kubectl("apply", "-f", "-", kubeconfig=node.admin, input=json.dumps(listed))


# running the product as its ServiceAccount, on the host ------------------------------------------

def run(node: realnode.Node, kubeconfig: str, wait: float = 300, registry_ca: Path | None = None
        ) -> tuple[int, str]:
    """`ocl-reconcile run --wait` as the ServiceAccount `ocl-reconciler`: (exit code, stderr);
    `registry_ca`: a TLS registry's CA (--registry-ca, as the CronJob mounts the service CA)."""
    ca = ("--registry-ca", str(registry_ca)) if registry_ca else ()
    code, _, err = command("run", "--kubeconfig", kubeconfig, "--timeout", "30", "--wait", str(wait), *ca)
    return code, err


def command(*args: str) -> tuple[int, str, str]:
    """`ocl-reconcile ARGS` in-process: (exit code, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
        code = cli.main(list(args))
    return code, out.getvalue(), err.getvalue()


def sa_kubeconfig(node: realnode.Node, path: Path) -> str:
    token = node.api.service_account_token(F.NS, "ocl-reconciler")
    return node.api.kubeconfig(path, token, "ocl-reconciler")


# build Pods the scheduler cannot place -------------------------------------------------------

def build_pods(api: Any) -> list[dict[str, Any]]:
    """The product's build Pods in our namespace (realserver.RealAPI `api`)."""
    return [p for p in api.list("Pod", F.NS) if p["metadata"]["name"].startswith("ocl-build-")]


def arm64_node(name: str, pool: str) -> dict[str, Any]:
    """A Node of the pool that says arm64, registered by its kubelet, which then never reported
    again (kubernetes/kubernetes v1.34.2):
    - tainted `node.kubernetes.io/not-ready:NoSchedule` at its creation, as the kube-apiserver's
      TaintNodesByCondition admission does (plugin/pkg/admission/nodetaint/admission.go);
    - with the status the kubelet posts at registration before its runtime answered: Ready False,
      `KubeletNotReady` (pkg/kubelet/nodestatus/setters.go, ReadyCondition; the message is
      pkg/kubelet/runtime.go's), its capacity. A Ready condition is what keeps the taint:
      kube-controller-manager's node lifecycle controller makes a Node's NoSchedule taints those of
      its conditions (pkg/controller/nodelifecycle, doNoScheduleTaintingPass), so a Node with none
      loses it at once, and this one's turns into `unreachable` once Ready goes Unknown (50 s
      without a heartbeat): untolerated all the same."""
    node = F.node(name, pool, arch="arm64")
    node["spec"] = {"taints": [{"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}]}
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    capacity = {"cpu": "2", "memory": "8Gi", "pods": "110", "ephemeral-storage": "100Gi"}
    node["status"] = {
        "capacity": capacity, "allocatable": capacity,
        "conditions": [{"type": "Ready", "status": "False", "reason": "KubeletNotReady",
                        "message": "container runtime status check may not have completed yet",
                        "lastHeartbeatTime": now, "lastTransitionTime": now}],
        "nodeInfo": {"architecture": "arm64", "operatingSystem": "linux", "kubeletVersion": "v1.34.2",
                     "machineID": "", "systemUUID": "", "bootID": "", "kernelVersion": "", "osImage": "",
                     "containerRuntimeVersion": "", "kubeProxyVersion": ""}}
    return node


def unschedulable(pod: dict[str, Any]) -> str | None:
    """The scheduler's message on a Pod it could not place (PodScheduled False, Unschedulable)."""
    for c in (pod.get("status") or {}).get("conditions") or []:
        if c["type"] == "PodScheduled" and c["status"] == "False" and c.get("reason") == "Unschedulable":
            return c["message"]
    return None


def recorded(node: realnode.Node, pool: str = "worker") -> dict[str, str]:
    return node.api.get("MachineConfigPool", "", pool)["metadata"].get("annotations") or {}


def digest_of(annotations: dict[str, str]) -> str:
    return annotations[A.IMAGE].rsplit("@", 1)[1]
