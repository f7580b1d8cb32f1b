"""Builders of the cluster objects the tests feed the reconciler (small, explicit, no magic)."""

from __future__ import annotations

import base64
import copy
import hashlib
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from reconcile.contract import annotations as A

#: Our namespace (the default of -n) and the MCO's, where only what it publishes is read.
NS = "ocl-reconciler"
MCO_NS = "openshift-machine-config-operator"
MCO = "machineconfiguration.openshift.io"
NOW = datetime(2026, 11, 29, 12, 0, 0, tzinfo=UTC)
#: imageBuilderType of build_config(); suites run for both builders by patching it.
BUILDER = "custom-pod-builder"
BUILD_KINDS = {"custom-pod-builder": "Pod", "openshift-image-builder": "Build"}
REPO = "registry.example.com:5000/ocl/os-image"
BASE = "quay.io/ocp/base@sha256:" + "a" * 64
ROOT = Path(__file__).resolve().parent.parent.parent
SHARED = ROOT.parent / "shared"


def configmap(name: str, data: dict[str, str], namespace: str = NS) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": namespace, "uid": f"uid-cm-{name}",
                         "resourceVersion": "10"}, "data": dict(data)}


#: The test world's `buildStorage`: emptyDir, so that the suites written before build storage keep
#: what they count and print (a volume, or the Event that says there is none, per build). The
#: default, `persistent` (build_config(buildStorage=None)), is tested in tests/unit/test_storage.py,
#: test_upgrade_storage.py, the RBAC scenarios, tests/standin/test_live.py and the demo.
BUILD_STORAGE = "emptyDir"


def build_config(**overrides: str | None) -> dict[str, Any]:
    data = {"baseImagePullSecretName": "pull-secret", "finalImagePushSecretName": "push-secret",
            "finalImagePullspec": f"{REPO}:latest", "imageBuilderType": BUILDER,
            "buildStorage": BUILD_STORAGE}
    data.update(overrides)
    return configmap("on-cluster-build-config", {k: v for k, v in data.items() if v is not None})


def osimageurl(**overrides: str | None) -> dict[str, Any]:
    data = {"baseOSContainerImage": BASE, "baseOSExtensionsContainerImage": "",
            "releaseVersion": "4.16.0"}
    data.update(overrides)
    return configmap("machine-config-osimageurl", {k: v for k, v in data.items() if v is not None},
                     MCO_NS)


def secret(name: str, payload: Any = None, type_: str = "kubernetes.io/dockerconfigjson",
           key: str = ".dockerconfigjson") -> dict[str, Any]:
    if payload is None:
        payload = {"auths": {"registry.example.com:5000": {"auth": "dXNlcjpzM2NyM3QtdmFsdWU="}}}
    raw = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    return {"apiVersion": "v1", "kind": "Secret", "type": type_,
            "metadata": {"name": name, "namespace": NS, "uid": f"uid-secret-{name}",
                         "resourceVersion": "11"},
            "data": {key: base64.b64encode(raw).decode()}}


#: The roles the MCO's admission policy lets a pool select alone (../shared/schemas/mco-policies/
#: custom-machine-config-pool-selector-validatingadmissionpolicy.yaml)
ROLES = ("master", "worker", "arbiter")


def machineconfig_selector(name: str) -> dict[str, Any]:
    """A pool's spec.machineConfigSelector as OpenShift 4.18+ admits it: a built-in pool selects its
    own role; a custom pool selects worker's MachineConfigs and its own (the MCO's policy
    custom-machine-config-pool-selector refuses any other)."""
    if name in ROLES:
        return {"matchLabels": {f"{MCO}/role": name}}
    return {"matchExpressions": [{"key": f"{MCO}/role", "operator": "In", "values": ["worker", name]}]}


def pool(name: str = "worker", rendered: str | None = None, opted_in: bool = True,
         annotations: dict[str, str] | None = None) -> dict[str, Any]:
    labels = {f"{MCO}/mco-built-in": ""}
    if opted_in:
        labels[A.LAYERING_LABEL] = ""
    return {"apiVersion": f"{MCO}/v1", "kind": "MachineConfigPool",
            "metadata": {"name": name, "uid": f"uid-pool-{name}", "resourceVersion": "20",
                         "labels": labels,
                         "annotations": {"example.com/keep": "theirs", **(annotations or {})}},
            "spec": {"configuration": {"name": rendered or f"rendered-{name}-1"},
                     "machineConfigSelector": machineconfig_selector(name),
                     "nodeSelector": {"matchLabels": {f"node-role.kubernetes.io/{name}": ""}}},
            "status": {"machineCount": 3}}


def stream_images(stream: str) -> tuple[str, str]:
    """(osImage, osExtensionsImage) of a stream as osimagestream() lists it: digested, as the CRD
    requires (`@sha256:` and 64 hex digits)."""
    digest = hashlib.sha256(stream.encode()).hexdigest()
    return (f"quay.io/ocp/{stream}-coreos@sha256:{digest}",
            f"quay.io/ocp/{stream}-coreos-extensions@sha256:{digest}")


def osimagestream(default: str = "rhel-9", *streams: str) -> dict[str, Any]:
    """The singleton OSImageStream `cluster` as the MCO fills it (openshift/api
    machineconfiguration/v1 types_osimagestream.go; ../shared/schemas/osimagestreams.crd.yaml):
    spec.defaultStream, and status.availableStreams with each stream's images."""
    names = list(dict.fromkeys((default, *streams)))
    return {"apiVersion": f"{MCO}/v1", "kind": "OSImageStream",
            "metadata": {"name": "cluster", "resourceVersion": "7"},
            "spec": {"defaultStream": default},
            "status": {"defaultStream": default, "availableStreams": [
                {"name": n, "osImage": stream_images(n)[0], "osExtensionsImage": stream_images(n)[1]}
                for n in names]}}


def node(name: str, pool: str = "worker", arch: str = "amd64", **labels: str) -> dict[str, Any]:
    """A Node of the pool (the role label its nodeSelector matches), with the labels the kubelet
    sets (kubernetes.io/arch, kubernetes.io/os); arch "" leaves the arch label out."""
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "resourceVersion": "5",
                         "labels": {f"node-role.kubernetes.io/{pool}": "", "kubernetes.io/os": "linux",
                                    **({"kubernetes.io/arch": arch} if arch else {}), **labels}}}


def machineconfig(name: str, files: int = 3, content: str | None = None) -> dict[str, Any]:
    """A rendered MachineConfig. As the MCO names a rendered config by a hash of its content, two
    names hold different content (a file holds `content`, by default the name) unless a test
    gives them the same `content` on purpose."""
    return {"apiVersion": f"{MCO}/v1", "kind": "MachineConfig",
            "metadata": {"name": name, "uid": f"uid-mc-{name}", "resourceVersion": "30"},
            "spec": {"config": {"ignition": {"version": "3.4.0"}, "storage": {"files": [
                {"path": f"/etc/example-{i}.conf", "mode": 420,
                 "contents": {"source": f"data:,file%20{i}"}} for i in range(files)] + [
                {"path": "/etc/example-content.conf", "mode": 420,
                 "contents": {"source": f"data:,{content if content is not None else name}"}}]}},
                     "kernelType": "default", "extensions": []}}


def cluster(*pools: dict[str, Any], extra: list[dict[str, Any]] | None = None,
            settings: list[dict[str, Any]] | None = None, nodes: bool = True) -> list[dict[str, Any]]:
    """A complete, valid cluster: settings, secrets, the pools and their rendered configs, and
    (with `nodes`) one amd64 node per pool."""
    pools = pools or (pool(),)
    items = settings if settings is not None else [
        build_config(), osimageurl(), secret("pull-secret"), secret("push-secret")]
    items = [copy.deepcopy(o) for o in items] + [copy.deepcopy(p) for p in pools]
    items += [machineconfig(p["spec"]["configuration"]["name"]) for p in pools]
    items += [node(f"{p['metadata']['name']}-0", p["metadata"]["name"]) for p in pools] if nodes else []
    return items + (extra or [])


def find(items: list[dict[str, Any]], kind: str, name: str | None = None) -> list[dict[str, Any]]:
    return [o for o in items if o.get("kind") == kind
            and (name is None or o["metadata"]["name"] == name)]


def the_pool(items: list[dict[str, Any]], name: str = "worker") -> dict[str, Any]:
    (found,) = find(items, "MachineConfigPool", name)
    return found


def owned(items: list[dict[str, Any]], pool_name: str | None = None) -> list[dict[str, Any]]:
    """Our build objects (Events, records of transitions, are not among them)."""
    return [o for o in items if o["kind"] not in ("Event", "Lease")
            and (o["metadata"].get("labels") or {}).get("app.kubernetes.io/managed-by") == "ocl-reconciler"
            and (pool_name is None
                 or o["metadata"]["labels"].get("ocl-reconciler.io/pool") == pool_name)]


def content(pool: dict[str, Any]) -> str:
    """The image content digest of the pool's rendered config as machineconfig() makes it."""
    from reconcile.imagebuild import imagecontent
    return imagecontent.digest(machineconfig(pool["spec"]["configuration"]["name"]))


#: BuildInputs fields versions before the platform (issue 20) did not have.
PLATFORM_FIELDS = ("arch", "os_stream", "builder_image")


def _old_id(inputs: Any, drop: tuple[str, ...], **then: str) -> str:
    """A build id as an earlier version computed it: a hash of every input of BuildInputs as it
    was then (sorted compact JSON, sha256, 12 hex digits), `then` the values it had."""
    import dataclasses
    fields = {k: v for k, v in dataclasses.asdict(inputs).items() if k not in drop} | then
    canonical = json.dumps(fields, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()[:12]


def build_id_before_platform(inputs: Any, **then: str) -> str:
    """The version before the platform fields: the content digest, not the rendered config's name;
    the base and extensions images of the ConfigMap (`then`)."""
    return _old_id(inputs, ("rendered_config", *PLATFORM_FIELDS), **then)


def build_id_before_content(inputs: Any) -> str:
    """Versions before the content digest: the rendered config's name among the inputs."""
    return _old_id(inputs, ("content", *PLATFORM_FIELDS))
