"""The MCO's built-in node disruption policies, as its operator publishes them merged in the
MachineConfiguration `cluster` (`status.nodeDisruptionPolicyStatus.clusterPolicies`): transcribed
from `defaultClusterPolicies`, openshift/machine-config-operator @ 7ff337a4
`pkg/apihelpers/apihelpers.go`, with the paths of `pkg/daemon/constants/constants.go`
(`KubeletAuthFile`, `GPGNoRebootPath`, `ContainerRegistryPolicyPath`, `ContainerRegistryConfPath`,
`SigstoreRegistriesConfigDir`, `CrioPoliciesDir`, `OpenShiftNMStateConfigDir`, `UserCABundlePath`,
`KubernetesCredentialProvidersDir`, `KubeletCrioImageCredProviderConfPath`; the IRI registry's
entries left out), and `MergeClusterPolicies`' rule for an administrator's entry (same path: it
replaces the default; else it is added). Test data: the product reads the operator's status."""

from __future__ import annotations

import copy
from typing import Any

from tests.support import factory as F


def _reload(service: str) -> dict[str, Any]:
    return {"type": "Reload", "reload": {"serviceName": service}}


def _restart(service: str) -> dict[str, Any]:
    return {"type": "Restart", "restart": {"serviceName": service}}


NONE = {"type": "None"}
DEFAULTS: dict[str, Any] = {
    "files": [
        {"path": "/var/lib/kubelet/config.json", "actions": [NONE]},
        {"path": "/etc/machine-config-daemon/no-reboot/containers-gpg.pub", "actions": [_reload("crio.service")]},
        {"path": "/etc/containers/policy.json", "actions": [_reload("crio.service")]},
        {"path": "/etc/containers/registries.conf", "actions": [{"type": "Special"}]},
        {"path": "/etc/containers/registries.d", "actions": [_reload("crio.service")]},
        {"path": "/etc/crio/policies", "actions": [_reload("crio.service")]},
        {"path": "/etc/nmstate/openshift", "actions": [NONE]},
        {"path": "/etc/pki/ca-trust/source/anchors/openshift-config-user-ca-bundle.crt",
         "actions": [_restart("coreos-update-ca-trust.service"), _restart("crio.service")]},
        {"path": "/etc/kubernetes/credential-providers", "actions": [_restart("kubelet.service")]},
        {"path": "/etc/systemd/system/kubelet.service.d/40-kubelet-crio-image-credential-provider.conf",
         "actions": [{"type": "DaemonReload"}, _restart("kubelet.service")]},
    ],
    "units": [],
    "sshkey": {"actions": [NONE]},
}


def merged(files: list[dict[str, Any]] = (), units: list[dict[str, Any]] = ()) -> dict[str, Any]:
    """`MergeClusterPolicies`: the defaults with an administrator's file and unit entries."""
    out = copy.deepcopy(DEFAULTS)
    for entry in files:
        same = [i for i, f in enumerate(out["files"]) if f["path"] == entry["path"]]
        if same:
            out["files"][same[0]] = entry
        else:
            out["files"].append(entry)
    out["units"] += list(units)
    return out


def machineconfiguration(policies: dict[str, Any] | None = None, observed: bool = True) -> dict[str, Any]:
    """The MachineConfiguration `cluster` as the operator leaves it (generation 1: what a server
    gives a new object)."""
    return {"apiVersion": "operator.openshift.io/v1", "kind": "MachineConfiguration",
            "metadata": {"name": "cluster", "generation": 1, "resourceVersion": "7", "uid": "uid-mcop"},
            "spec": {"managementState": "Managed"},
            "status": {"observedGeneration": 1 if observed else 0,
                       "nodeDisruptionPolicyStatus": {"clusterPolicies": policies or DEFAULTS}}}


def with_release(items: list[dict[str, Any]], release: str) -> list[dict[str, Any]]:
    items = copy.deepcopy(items)
    F.find(items, "ConfigMap", "machine-config-osimageurl")[0]["data"]["releaseVersion"] = release
    return items
