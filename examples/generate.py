#!/usr/bin/env python3
"""Writes examples/cluster.yaml: a realistic, deterministic cluster snapshot for `make demo`.

Two opted-in pools (worker, infra) and one that is not (master), and their nodes; the settings
ConfigMaps, the MCO's images ConfigMap and the pull and push secrets (fake credentials); rendered
MachineConfigs shaped like the MCO's, the
worker one ~280 KB of JSON with a CA bundle, scripts and units, as real rendered configs are.
Run `python3 examples/generate.py` to regenerate; the output is the same every time.
"""

from __future__ import annotations

import base64
import hashlib
import json
import sys
import urllib.parse
from pathlib import Path

import yaml

NS = "ocl-reconciler"
MCO_NS = "openshift-machine-config-operator"
MCO = "machineconfiguration.openshift.io"


def prng(seed: str, size: int) -> bytes:
    out, counter = bytearray(), 0
    while len(out) < size:
        out += hashlib.sha256(f"{seed}/{counter}".encode()).digest()
        counter += 1
    return bytes(out[:size])


def certificate(seed: str) -> str:
    body = base64.encodebytes(prng(seed, 1400)).decode().replace("\n", "")
    lines = [body[i:i + 64] for i in range(0, len(body), 64)]
    return "-----BEGIN CERTIFICATE-----\n" + "\n".join(lines) + "\n-----END CERTIFICATE-----\n"


def script(seed: str, lines: int) -> str:
    words = ["nmcli", "conn", "modify", "ovs-vsctl", "br-ex", "ip", "route", "systemctl",
             "restart", "if", "then", "fi", "echo", "$iface", "--", "set", "Interface"]
    rnd = prng(seed, lines * 6)
    return "#!/bin/bash\nset -eux\n" + "".join(
        " ".join(words[b % len(words)] for b in rnd[i * 6:(i + 1) * 6]) + "\n" for i in range(lines))


def data_url(text: str) -> str:
    return "data:," + urllib.parse.quote(text, safe="")


def machineconfig(role: str, rendered: str, ca_certs: int, scripts: int) -> dict:
    files = [
        {"path": "/etc/pki/ca-trust/source/anchors/openshift-config-user-ca-bundle.crt",
         "mode": 420, "overwrite": True,
         "contents": {"source": data_url("".join(certificate(f"{role}-ca-{i}") for i in range(ca_certs)))}},
        {"path": "/etc/kubernetes/kubelet.conf", "mode": 420, "overwrite": True,
         "contents": {"source": data_url(json.dumps({"kind": "KubeletConfiguration", "maxPods": 250,
                                                      "systemReserved": {"cpu": "500m"}}, indent=2))}},
        {"path": "/etc/containers/registries.conf", "mode": 420, "overwrite": True,
         "contents": {"source": data_url(
             'unqualified-search-registries = ["registry.access.redhat.com"]\n')}},
    ]
    files += [{"path": f"/usr/local/bin/{role}-helper-{i}.sh", "mode": 493, "overwrite": True,
               "contents": {"source": data_url(script(f"{role}-{i}", 100))}} for i in range(scripts)]
    units = [{"name": f"{role}-helper-{i}.service", "enabled": True,
              "contents": f"[Unit]\nDescription=Helper {i}\n\n[Service]\nType=oneshot\n"
                          f"ExecStart=/usr/local/bin/{role}-helper-{i}.sh\n\n[Install]\n"
                          "WantedBy=multi-user.target\n"} for i in range(scripts)]
    return {
        "apiVersion": f"{MCO}/v1", "kind": "MachineConfig",
        "metadata": {"name": rendered, "resourceVersion": "4711",
                     "uid": str(hashlib.md5(rendered.encode()).hexdigest()),
                     "creationTimestamp": "2026-11-20T09:00:00Z",
                     "annotations": {f"{MCO}/generated-by-controller-version": "7ff337a4f",
                                     f"{MCO}/release-image-version": "4.16.12"}},
        "spec": {"config": {"ignition": {"version": "3.4.0"},
                            "storage": {"files": files}, "systemd": {"units": units}},
                 "extensions": [], "fips": False, "kernelArguments": [], "kernelType": "default",
                 "osImageURL": "quay.io/openshift-release-dev/ocp-v4.0-art-dev@sha256:" + "ab" * 32},
    }


def machineconfig_selector(name: str) -> dict:
    """As OpenShift 4.18+ admits it (the MCO's ValidatingAdmissionPolicy
    custom-machine-config-pool-selector): a built-in pool selects its own role, a custom pool
    worker's MachineConfigs and its own."""
    if name in ("master", "worker", "arbiter"):
        return {"matchLabels": {f"{MCO}/role": name}}
    return {"matchExpressions": [{"key": f"{MCO}/role", "operator": "In", "values": ["worker", name]}]}


def pool(name: str, rendered: str, opted_in: bool, uid: str) -> dict:
    labels = {f"{MCO}/mco-built-in": "", f"pools.operator.{MCO}/{name}": ""}
    if opted_in:
        labels["ocl-reconciler.io/layering-enabled"] = ""      # our opt-in (the MCO's label is its switch)
    return {
        "apiVersion": f"{MCO}/v1", "kind": "MachineConfigPool",
        "metadata": {"name": name, "uid": uid, "resourceVersion": "1201", "generation": 3,
                     "creationTimestamp": "2026-01-04T14:27:26Z", "labels": labels,
                     "annotations": {"example.com/owner": "platform-team"}},
        "spec": {"configuration": {"name": rendered, "source": [
                    {"apiVersion": f"{MCO}/v1", "kind": "MachineConfig", "name": f"00-{name}"}]},
                 "machineConfigSelector": machineconfig_selector(name),
                 "nodeSelector": {"matchLabels": {f"node-role.kubernetes.io/{name}": ""}},
                 "paused": False},
        "status": {"configuration": {"name": rendered}, "machineCount": 3, "readyMachineCount": 3,
                   "updatedMachineCount": 3, "degradedMachineCount": 0, "observedGeneration": 3,
                   "conditions": [{"type": "Updated", "status": "True",
                                   "lastTransitionTime": "2026-11-20T09:30:00Z"}]},
    }


def node(name: str, roles: tuple[str, ...], arch: str = "amd64") -> dict:
    """A Node as `oc get node -o yaml` shows its metadata (the kubelet's labels, the role labels)."""
    labels = {"kubernetes.io/arch": arch, "kubernetes.io/os": "linux", "kubernetes.io/hostname": name,
              "beta.kubernetes.io/arch": arch, "beta.kubernetes.io/os": "linux",
              "node.openshift.io/os_id": "rhcos", **{f"node-role.kubernetes.io/{r}": "" for r in roles}}
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "resourceVersion": "1400", "labels": labels,
                         "uid": hashlib.md5(name.encode()).hexdigest()},
            "status": {"nodeInfo": {"architecture": arch, "osImage": "Red Hat Enterprise Linux CoreOS 416"}}}


def dockerconfig(name: str, registry: str, user: str) -> dict:
    auth = base64.b64encode(f"{user}:fake-password-not-a-secret".encode()).decode()
    cfg = json.dumps({"auths": {registry: {"auth": auth}}})
    return {"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/dockerconfigjson",
            "metadata": {"name": name, "namespace": NS, "resourceVersion": "900",
                         "uid": hashlib.md5(name.encode()).hexdigest()},
            "data": {".dockerconfigjson": base64.b64encode(cfg.encode()).decode()}}


def configmap(name: str, data: dict, namespace: str = NS) -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": namespace, "resourceVersion": "950",
                         "uid": hashlib.md5(name.encode()).hexdigest()}, "data": data}


def snapshot() -> dict:
    worker = "rendered-worker-" + hashlib.md5(b"worker").hexdigest()
    infra = "rendered-infra-" + hashlib.md5(b"infra").hexdigest()
    master = "rendered-master-" + hashlib.md5(b"master").hexdigest()
    registry = "image-registry.openshift-image-registry.svc:5000"
    items = [
        configmap("on-cluster-build-config", {
            "baseImagePullSecretName": "global-pull-secret-copy",
            "finalImagePushSecretName": "builder-push-secret",
            "finalImagePullspec": f"{registry}/{NS}/os-image:latest",
            "imageBuilderType": "custom-pod-builder"}),
        configmap("machine-config-osimageurl", {
            "baseOSContainerImage": "quay.io/openshift-release-dev/ocp-v4.0-art-dev@sha256:" + "ab" * 32,
            "baseOSExtensionsContainerImage":
                "quay.io/openshift-release-dev/ocp-v4.0-art-dev@sha256:" + "cd" * 32,
            "releaseVersion": "4.16.12", "osImageURL": ""}, MCO_NS),
        configmap("on-cluster-build-custom-dockerfile", {
            "infra": "FROM configs AS final\nRUN rpm-ostree install tmux && ostree container commit\n"}),
        dockerconfig("global-pull-secret-copy", "quay.io", "pull-robot"),
        dockerconfig("builder-push-secret", registry, "builder"),
        pool("infra", infra, True, "4b1a6f2e-0000-4000-8000-000000000002"),
        pool("master", master, False, "4b1a6f2e-0000-4000-8000-000000000003"),
        pool("worker", worker, True, "4b1a6f2e-0000-4000-8000-000000000001"),
        machineconfig("infra", infra, ca_certs=30, scripts=10),
        machineconfig("master", master, ca_certs=10, scripts=5),
        machineconfig("worker", worker, ca_certs=75, scripts=25),
        # the MCO's images of the release: the build Pod runs in its machineConfigOperator image
        configmap("machine-config-operator-images", {"images.json": json.dumps({
            "releaseVersion": "4.16.12",
            "machineConfigOperator": "quay.io/openshift-release-dev/ocp-v4.0-art-dev@sha256:" + "ef" * 32,
            "infraImage": "quay.io/openshift-release-dev/ocp-v4.0-art-dev@sha256:" + "01" * 32}, indent=2)},
            MCO_NS),
        # the cluster's default StorageClass (an AWS install's): the pools' build storage
        # (`buildStorage` unset: persistent) is provisioned from it
        {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
         "metadata": {"name": "gp3-csi",
                      "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}},
         "provisioner": "ebs.csi.aws.com", "volumeBindingMode": "WaitForFirstConsumer",
         "parameters": {"type": "gp3", "encrypted": "true"}},
        *(node(f"master-{i}", ("master",)) for i in range(3)),
        *(node(f"worker-{i}", ("worker",)) for i in range(3)),
        # infra nodes keep the worker role too: they belong to infra (pkg/helpers/helpers.go)
        *(node(f"infra-{i}", ("infra", "worker")) for i in range(2)),
    ]
    return {"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""}, "items": items}


def main() -> int:
    if len(sys.argv) > 2 or (len(sys.argv) == 2 and sys.argv[1].startswith("-")):
        print("usage: python3 examples/generate.py [OUT.yaml]  (default: examples/cluster.yaml)",
              file=sys.stderr)
        return 2
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).with_name("cluster.yaml")
    text = ("# Example cluster snapshot for `make demo` (generated by examples/generate.py; fake "
            "credentials).\n" + yaml.safe_dump(snapshot(), sort_keys=False, width=100))
    out.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
