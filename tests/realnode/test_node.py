"""The real node itself (tests/support/realnode.py): Ready at the kube-apiserver's release, with the
controllers our objects need acting (ServiceAccounts, PersistentVolume binding, the garbage
collector), and nothing left behind once stopped."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from tests.support import nodeteardown, realnode, realserver
from tests.support.waiting import until as wait

pytestmark = pytest.mark.realnode


def test_the_node_is_ready_at_the_release_of_the_api_server(node):
    status = node.api.get("Node", "", node.name)["status"]
    version = node.api.request("GET", "/version")[1]["gitVersion"]
    pinned = realserver.cache_dir().name.split("-")[1]             # k8s-<the go.mod's k8s.io/kubernetes>-etcd-...
    assert status["nodeInfo"]["kubeletVersion"] == version == pinned
    containerd = subprocess.run(["containerd", "--version"], capture_output=True, text=True).stdout.split()[2].split("~")[0]   # the CRI's, without Debian's suffix
    assert status["nodeInfo"]["containerRuntimeVersion"] == f"containerd://{containerd}"
    assert {"type": "InternalIP", "address": node.gateway} in status["addresses"]


def test_the_controllers_our_objects_need_act(node, tmp_path):
    api = node.api
    ns = "ocl-node-controllers"
    api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    try:
        # the ServiceAccount controller gives a new namespace its `default`, the publisher its root CA
        wait("the default ServiceAccount", lambda: api.request(
            "GET", f"/api/v1/namespaces/{ns}/serviceaccounts/default", ok=(404,))[0] == 200)
        wait("kube-root-ca.crt", lambda: api.request(
            "GET", f"/api/v1/namespaces/{ns}/configmaps/kube-root-ca.crt", ok=(404,))[0] == 200)
        # the PersistentVolume binder binds a claim to a matching volume
        api.request("POST", "/api/v1/persistentvolumes", {
            "apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": f"{ns}-pv"},
            "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "storageClassName": "",
                     "hostPath": {"path": str(tmp_path)}}})
        api.request("POST", f"/api/v1/namespaces/{ns}/persistentvolumeclaims", {
            "apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "claim"},
            "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "", "volumeName": "",
                     "resources": {"requests": {"storage": "1Gi"}}}})
        wait("the claim Bound", lambda: (api.request(
            "GET", f"/api/v1/namespaces/{ns}/persistentvolumeclaims/claim")[1].get("status") or {}).get("phase")
             == "Bound")
        # the garbage collector deletes what an owner that is gone owned
        owner = api.request("POST", f"/api/v1/namespaces/{ns}/configmaps",
                            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "owner"}})[1]
        api.request("POST", f"/api/v1/namespaces/{ns}/configmaps", {
            "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "owned", "ownerReferences": [
                {"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": owner["metadata"]["uid"]}]}})
        api.request("DELETE", f"/api/v1/namespaces/{ns}/configmaps/owner")
        wait("the owned ConfigMap collected", lambda: api.request(
            "GET", f"/api/v1/namespaces/{ns}/configmaps/owned", ok=(404,))[0] == 404)
    finally:
        api.request("DELETE", f"/api/v1/namespaces/{ns}", ok=(404,))
        api.request("DELETE", f"/api/v1/persistentvolumes/{ns}-pv", ok=(404,))


def leftovers(index: int, root: Path, netns: list[str]) -> list[str]:
    name, bridge = f"ocl-node-{index}", f"oclbr{index}"
    found = [f"cgroup {p}" for p in Path("/sys/fs/cgroup").glob(f"*/{name}")]
    found += [f"mount {line.split()[4]}" for line in Path("/proc/self/mountinfo").read_text().splitlines()
              if line.split()[4].startswith(str(root))]
    found += [f"process {c.parent.name}" for c in Path("/proc").glob("[0-9]*/cmdline")
              if _reads(c) and str(root).encode() in _reads(c)]
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    found += [f"bridge {bridge}"] if f" {bridge}:" in links else []
    rules = subprocess.run(["iptables", "-t", "nat", "-S"], capture_output=True, text=True).stdout
    found += [f"rule {r}" for r in rules.splitlines() if f"--comment {name} " in f"{r} " or bridge in r]
    namespaces = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    found += [f"netns {ns}" for ns in netns if ns in namespaces]
    return found


def _reads(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError:
        return b""


def test_a_node_stopped_with_a_pod_running_leaves_nothing_behind():
    index = int(os.environ.get("OCL_REALNODE_OFFSET") or 0) + 9      # beside the workers' nodes
    # a short root: containerd's socket path must stay under 104 characters
    root = Path(tempfile.mkdtemp(prefix="ocl-node-"))
    second = realnode.Node(root, realnode.prerequisites(), index)
    try:
        second.start()
        second.api.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "sleeper", "namespace": "default"},
                           "spec": {"containers": [{"name": "c", "image": realnode.PAUSE}]}})
        wait("the Pod running", lambda: (second.api.get("Pod", "default", "sleeper").get("status") or {})
             .get("phase") == "Running")
        netns = nodeteardown.pod_netns(second)
        assert netns and leftovers(index, root, netns)          # the probe sees a live node
    finally:
        second.stop()
    assert leftovers(index, root, netns) == []
    shutil.rmtree(root)
