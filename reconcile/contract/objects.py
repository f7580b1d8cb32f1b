"""Small accessors for Kubernetes objects held as plain dicts (the form both clusters return)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

Obj = dict[str, Any]

#: kind -> (apiVersion, namespaced, plural). The kinds this project reads or writes: the one table.
KINDS: dict[str, tuple[str, bool, str]] = {
    "ConfigMap": ("v1", True, "configmaps"),
    "Secret": ("v1", True, "secrets"),
    "Pod": ("v1", True, "pods"),
    "PersistentVolumeClaim": ("v1", True, "persistentvolumeclaims"),
    "StorageClass": ("storage.k8s.io/v1", False, "storageclasses"),
    "Event": ("v1", True, "events"),
    "Lease": ("coordination.k8s.io/v1", True, "leases"),
    "Build": ("build.openshift.io/v1", True, "builds"),
    "MachineConfigPool": ("machineconfiguration.openshift.io/v1", False, "machineconfigpools"),
    "MachineConfig": ("machineconfiguration.openshift.io/v1", False, "machineconfigs"),
    "Proxy": ("config.openshift.io/v1", False, "proxies"),
    "ClusterImagePolicy": ("config.openshift.io/v1", False, "clusterimagepolicies"),
    "Node": ("v1", False, "nodes"),
    "OSImageStream": ("machineconfiguration.openshift.io/v1", False, "osimagestreams"),
    "MachineConfiguration": ("operator.openshift.io/v1", False, "machineconfigurations"),
}


#: The names an API server accepts for most kinds and for a namespace (kubernetes/apimachinery
#: pkg/util/validation: IsDNS1123Subdomain, at most 253; IsDNS1123Label, at most 63).
_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")


def valid_name(value: str) -> bool:
    return len(value) <= 253 and _SUBDOMAIN.fullmatch(value) is not None


def valid_namespace(value: str) -> bool:
    return len(value) <= 63 and _LABEL.fullmatch(value) is not None


def meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


def spec(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    """The object's spec ({} when it is missing or not a map: a live object may hold anything)."""
    value = obj.get("spec")
    return value if isinstance(value, Mapping) else {}


def volumes(obj: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """A Pod's spec.volumes that are maps."""
    found = spec(obj).get("volumes")
    return [v for v in found if isinstance(v, Mapping)] if isinstance(found, list) else []


def name(obj: Mapping[str, Any]) -> str:
    return meta(obj).get("name", "")


def namespace(obj: Mapping[str, Any]) -> str:
    return meta(obj).get("namespace", "") or ""


def labels(obj: Mapping[str, Any]) -> Mapping[str, str]:
    return meta(obj).get("labels") or {}


def annotations(obj: Mapping[str, Any]) -> Mapping[str, str]:
    return meta(obj).get("annotations") or {}


def ref(obj: Mapping[str, Any]) -> str:
    """`Kind/namespace/name` (or `Kind/name` when cluster-scoped): how messages name an object."""
    ns = namespace(obj)
    return f"{obj.get('kind')}/{ns}/{name(obj)}" if ns else f"{obj.get('kind')}/{name(obj)}"


def group(api_version: str) -> str:
    return api_version.rpartition("/")[0] if "/" in api_version else ""


def sort_key(obj: Mapping[str, Any]) -> tuple[str, str, str, str]:
    """Objects sort by group, kind, namespace, name (kubectl and Argo CD order their output so)."""
    return (group(obj.get("apiVersion", "")), obj.get("kind", ""), namespace(obj), name(obj))


class _Absent:
    """Selector value: the label must not exist (`!key`)."""

    def __repr__(self) -> str:
        return "ABSENT"


ABSENT: Any = _Absent()


def matches(selector: Mapping[str, Any], obj_labels: Mapping[str, str]) -> bool:
    """Equality-based label selector; None means "the key exists", ABSENT "it does not"."""
    for key, value in selector.items():
        if value is ABSENT:
            if key in obj_labels:
                return False
            continue
        if key not in obj_labels:
            return False
        if value is not None and obj_labels[key] != value:
            return False
    return True


def selector_string(selector: Mapping[str, Any]) -> str:
    return ",".join(f"!{k}" if v is ABSENT else k if v is None else f"{k}={v}" for k, v in selector.items())


def metadata_only(obj: Mapping[str, Any]) -> dict[str, Any]:
    """What a PartialObjectMetadataList item holds of an object: its type and metadata."""
    return {"apiVersion": obj.get("apiVersion"), "kind": obj.get("kind"), "metadata": dict(meta(obj))}


def parse_selector(text: str) -> dict[str, str | None]:
    """Inverse of selector_string, for `=`/`==` and existence terms."""
    out: dict[str, str | None] = {}
    for term in filter(None, (t.strip() for t in text.split(","))):
        if "==" in term:
            k, _, v = term.partition("==")
        elif "=" in term:
            k, _, v = term.partition("=")
        else:
            out[term] = None
            continue
        out[k.strip()] = v.strip()
    return out


def by_label(objs: Iterable[Obj], key: str) -> dict[str, list[Obj]]:
    out: dict[str, list[Obj]] = {}
    for obj in objs:
        out.setdefault(labels(obj).get(key, ""), []).append(obj)
    return out


def identity(obj: Mapping[str, Any]) -> tuple[str, str, str]:
    """What names an object in a cluster: kind, namespace (for a namespaced kind; "" otherwise), name."""
    kind = str(obj.get("kind", ""))
    namespaced = KINDS.get(kind, ("", True))[1]
    return kind, namespace(obj) if namespaced else "", name(obj)
