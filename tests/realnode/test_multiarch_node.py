"""A pool of mixed architectures on the real node (issue 55 item 7): the real (amd64) node and an
arm64 Node in one pool, the arm64 one registered by a kubelet that then never reported again
(nodebuild.arm64_node). The product, run on the host as its ServiceAccount as test_build_pod.py
runs it, makes one build Pod per architecture from its own template, each with its own build
storage volume (the default, persistent; local volumes provided here); the real scheduler places
the amd64 one on the real node, where the real kubelet runs the build and pushes to the registry,
and cannot place the arm64 one. While arm64 waits, no image index is pushed and the pool records no
image. Then the arm64 Node leaves and the pool's status.machineCount follows, as the MCO counts
it: the next run reads the nodes again and records the amd64 image alone, the same digest, with
nothing built or pushed again, and deletes both Pods and the arm64 volume.

The registry serves TLS (`REGISTRY_TLS`): before it makes an index, the run reads each
architecture's image from the registry, and its client speaks plain HTTP to a loopback registry
only (docs/contract.md), never to the node's gateway. Its CA is the cluster's service CA
(`openshift-service-ca.crt`, nodebuild.settings) for the build Pod and --registry-ca for the run.

Expected values come from outside the product: the digest and architecture the registry serves for
the amd64 tag (skopeo), the registry's access log for what was pushed, the PV controller's binding,
and the scheduler's own PodScheduled condition, whose message is built here from
kubernetes/kubernetes v1.34.2 pkg/scheduler:
- framework/types.go, FitError.Error: "0/N nodes are available:", then each node's reason with its
  count of nodes, sorted, joined by ", " and ended by "."; then the PostFilter plugins' message;
- each node's reason is its first failing filter in the default plugins' order
  (apis/config/v1/default_plugins.go): TaintToleration before NodeAffinity, so the arm64 Node
  (tainted not-ready) says framework/plugins/tainttoleration/taint_toleration.go's "node(s) had
  untolerated taint(s)", the real node framework/plugins/nodeaffinity/node_affinity.go's ErrReasonPod;
- the PostFilter plugins' reasons joined by ", " (framework/runtime/framework.go,
  RunPostFilterPlugins; k8s.io/kube-scheduler framework Status.Message): DynamicResources first
  (default_plugins.go, applyDynamicResources) with "no new claims to deallocate" for a Pod without
  claims (framework/plugins/dynamicresources/dynamicresources.go), then DefaultPreemption's
  "preemption: " and its own FitError: both nodes UnschedulableAndUnresolvable, no candidate, each
  "Preemption is not helpful for scheduling" (framework/preemption/preemption.go,
  framework/plugins/defaultpreemption/default_preemption.go)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from reconcile.contract import annotations as A
from tests.support import factory as F
from tests.support import nodebuild as NB

pytestmark = pytest.mark.realnode

REGISTRY_TLS = True                                     # the realnode conftest's `w`
ARM = "ocl-multiarch-arm64"
CONFIG = "rendered-worker-1"
VOLUMES = ("ocl-multiarch-1", "ocl-multiarch-2")
AFFINITY = "node(s) didn't match Pod's node affinity/selector"
TAINT = "node(s) had untolerated taint(s)"


def schedulers_message(nodes: int, affinity: int, taint: int) -> str:
    """The scheduler's message on a Pod no node takes, each node failing on `affinity` or `taint`."""
    reasons = sorted(f"{n} {why}" for n, why in ((affinity, AFFINITY), (taint, TAINT)) if n)
    return (f"0/{nodes} nodes are available: {', '.join(reasons)}. no new claims to deallocate, "
            f"preemption: 0/{nodes} nodes are available: {nodes} Preemption is not helpful for scheduling.")


def pod_of(d, arch: str) -> dict[str, Any] | None:
    """The build Pod whose nodeSelector names `arch`."""
    return next((p for p in NB.build_pods(d.api)
                 if (p["spec"].get("nodeSelector") or {}).get("kubernetes.io/arch") == arch), None)


def succeeded_pod(d, arch: str, seconds: float = 240) -> dict[str, Any]:
    def done() -> dict[str, Any] | None:
        pod = pod_of(d, arch)
        return pod if pod is not None and (pod.get("status") or {}).get("phase") == "Succeeded" else None
    return d.wait_for(f"the {arch} build Pod Succeeded", done, seconds)


def pushed(w, since: int = 0) -> list[str]:
    """What our repository took after request `since`: each manifest's reference (PUT, 201) and
    "blob" for each blob upload started (POST)."""
    out = []
    for r in w.registry.requests()[since:]:
        if r["uri"].startswith("/v2/ocl/os-image/manifests/") and (r["method"], r["status"]) == ("PUT", 201):
            out.append(r["uri"].rsplit("/", 1)[1])
        elif r["uri"].startswith("/v2/ocl/os-image/blobs/uploads/") and r["method"] == "POST":
            out.append("blob")
    return out


def explained(w, kubeconfig: str) -> dict[str, Any]:
    code, out, err = NB.command("explain", "worker", "-o", "json", "--kubeconfig", kubeconfig,
                                "--registry-ca", str(w.ca.ca))
    assert code == 0, err[-3000:]
    return json.loads(out)


def claims(d) -> list[str]:
    return sorted(f"PersistentVolumeClaim/{c['metadata']['name']}" for c in d.api.list("PersistentVolumeClaim", F.NS))


def test_the_amd64_build_runs_on_the_real_node_and_the_arm64_one_stays_pending_with_its_reason(
        d, w, kubeconfig, tmp_path):
    paths = {name: tmp_path / name for name in VOLUMES}
    for name, path in paths.items():                   # one for each architecture's claim
        NB.provide_storage(d.node, path, name)
    pool = F.pool("worker", rendered=CONFIG)
    pool["status"] = {"machineCount": 2}                # as the MCO counts the real node and the arm64 one
    # the rendered config lists no insecure registry: buildah trusts the registry by the service CA
    d.seed([*NB.settings(w), pool, F.machineconfig(CONFIG), NB.arm64_node(ARM, "worker")])
    try:
        nodes = sorted(n["metadata"]["name"] for n in d.api.list("Node"))
        assert nodes == sorted([d.node.name, ARM]), nodes

        # the run makes one build Pod per architecture; the scheduler places the amd64 one alone
        code, err = NB.run(d.node, kubeconfig, wait=0, registry_ca=w.ca.ca)
        assert (code, d.ann().get(A.STATE)) == (0, A.PENDING), (d.ann(), err[-3000:])
        amd64 = succeeded_pod(d, "amd64")
        assert amd64["spec"]["nodeName"] == d.node.name, amd64["spec"]
        said = d.wait_for("the scheduler's Unschedulable", lambda: NB.unschedulable(pod_of(d, "arm64") or {}), 60)
        assert said == schedulers_message(2, affinity=1, taint=1), said
        arm64 = pod_of(d, "arm64")
        assert not arm64["spec"].get("nodeName") and arm64["status"]["phase"] == "Pending", arm64
        assert len(NB.build_pods(d.api)) == 2

        # the amd64 image as the registry has it, under the pool's tag with its architecture
        image = w.inspect(f"ocl/os-image:{CONFIG}-amd64")
        assert image["Architecture"] == "amd64", image
        repo, digest = f"{w.pods_registry}/ocl/os-image", image["Digest"]

        # the next run reads both: amd64 built, arm64 waiting with the scheduler's reason; no index
        # is pushed and the pool records no image
        mark = len(w.registry.requests())
        code, err = NB.run(d.node, kubeconfig, wait=0, registry_ca=w.ca.ca)
        a = d.ann()
        reason = f"is Pending: not scheduled: Unschedulable: {said.rstrip('.')}"
        built = f"amd64: built {repo}@{digest}"
        waits = f"arm64: build Pod/{F.NS}/{arm64['metadata']['name']} {reason}"
        assert (code, a.get(A.STATE), a.get(A.MESSAGE)) == (0, A.BUILDING, f"{built}; {waits}"), (a, err[-3000:])
        assert a[A.ARCH] == "amd64,arm64" and A.IMAGE not in a and A.IMAGES not in a, a
        assert pushed(w, mark) == [] and f"{CONFIG}-amd64" in pushed(w) and CONFIG not in pushed(w)
        # each architecture has its own volume; the amd64 build kept buildah's store on its own
        storage = dict(entry.split("=", 1) for entry in a[A.BUILD_STORAGE].split())
        assert sorted(storage) == ["amd64", "arm64"] and sorted(storage.values()) == claims(d), (a, claims(d))
        (claim,) = [v["persistentVolumeClaim"]["claimName"] for v in amd64["spec"]["volumes"]
                    if "persistentVolumeClaim" in v]
        assert storage["amd64"] == f"PersistentVolumeClaim/{claim}", (storage, claim)
        volume = d.api.get("PersistentVolumeClaim", F.NS, claim)["spec"]["volumeName"]
        assert any((paths[volume] / "containers/storage").glob("*-images")), volume

        parts = {p["architecture"]: p for p in explained(w, kubeconfig)["architectures"]}
        fields = ("object", "phase", "state", "image")
        assert {arch: tuple(p[k] for k in fields) for arch, p in parts.items()} == {
            "amd64": (f"Pod/{F.NS}/{amd64['metadata']['name']}", "Succeeded", A.SUCCEEDED, f"{repo}@{digest}"),
            "arm64": (f"Pod/{F.NS}/{arm64['metadata']['name']}", "Pending", A.PENDING, None)}, parts
        assert parts["arm64"]["message"] == f"build Pod/{F.NS}/{arm64['metadata']['name']} {reason}", parts

        code, out, err = NB.command("status", "-o", "wide", "--kubeconfig", kubeconfig)
        (row,) = [line for line in out.splitlines() if line.split()[:1] == ["worker"]]
        assert " amd64,arm64 " in row and row.endswith(f"{built}; {waits}"), out

        # the arm64 Node leaves and the MCO counts one machine: the next run reads the nodes again
        # and records the amd64 build alone (its kept Pod's digest), nothing built or pushed again
        d.api.request("DELETE", d.api.path("Node", "", ARM))
        d.api.write_status(dict(d.pool(), status=dict(d.pool()["status"], machineCount=1)))
        assert explained(w, kubeconfig)["transition"]["row"] == "SUCCEED"
        mark = len(w.registry.requests())
        code, err = NB.run(d.node, kubeconfig, wait=0, registry_ca=w.ca.ca)
        a = d.ann()
        assert (code, a.get(A.STATE), a.get(A.IMAGE), a.get(A.ARCH), a.get(A.ARCH_NODES), a.get(A.BUILD)) == \
            (0, A.SUCCEEDED, f"{repo}@{digest}", "amd64", "1", f"Pod/{F.NS}/{amd64['metadata']['name']}"), \
            (a, err[-3000:])
        assert pushed(w, mark) == []
        # the amd64 volume recorded as a pool of one records it; both build Pods deleted and none
        # made in their place; the arm64 volume deleted
        assert a.get(A.BUILD_STORAGE) == storage["amd64"], a
        d.wait_for("the build Pods gone", lambda: not NB.build_pods(d.api), 60)
        d.wait_for("the arm64 volume gone", lambda: claims(d) == [storage["amd64"]], 60)
    finally:
        d.api.request("DELETE", d.api.path("Node", "", ARM), ok=(404,))
