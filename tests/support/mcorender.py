"""A test-only imitation of the MCO's render controller: which MachineConfigs a pool selects, how they
merge, how the rendered MachineConfig is named and annotated, and what the controller writes to the
pool. Objects are plain dicts (as a kube-apiserver or a snapshot holds them).

Held to the real controller: tests/unit/test_mcorender_parity.py replays every case of
../shared/reference/mco-render/ (openshift/machine-config-operator @ 7ff337a4, run with fake clients as
`render_controller_test.go` runs it) and compares refusals, merge order, annotations and the merged spec;
where the rules below and those results disagree, the results win.

Followed, in openshift/machine-config-operator (paths of that repository; commits as the search
index returned them):
- The Ignition spec the merge produces is 3.5.0: `InternalMCOIgnitionVersion = "3.5.0"` in
  `pkg/controller/common/constants.go` and `MergeMachineConfigs` merging with the v3_5 `MaxVersion` (HEAD
  7ff337a4 per ../shared/reference/mco-render/README.md; the index holds no helpers.go that new, but its
  tests import `github.com/coreos/ignition/v2/config/v3_5/types`: `pkg/controller/common/helpers_test.go`,
  index id 14008534242, `pkg/controller/render/render_controller_test.go`, index id 14388199467). Configs
  are read if their version is one of `IGNITION_SPECS` (the message is the one results.json.gz shows).
- coreos/ignition `config/merge/merge.go` at 129ef9cd9b4032af9f0c0686e7b25afe68cee965: structs merged field
  by field, a nil child pointer keeps the parent's, keyed lists merged by key. One exception taken from
  issue 28 and the README of the results (no case there exercises it yet, and merge.go alone does not explain
  it): a later file whose `contents` name a `source` without `compression` drops the earlier `gzip`.
- `ValidateMachineConfig` (`pkg/controller/common/helpers.go`, index id 14192847658 for the kernel type and
  `IgnParseWrapper` / `ValidateIgnition`; `validateExtensions` / `SupportedExtensions` in the same file):
  kernelType one of default/realtime/64k-pages; with a spec.config, its Ignition version, absolute paths
  (Ignition's `ErrPathRelative` "path not absolute"), and extensions in the allow list ("invalid extensions
  found: [..]", as openshift-tests' PolarionID 56123 expects, index id 57596058972). Checking extensions
  only when spec.config is set is what the README and results.json.gz (ext-invalid-nocfg) show at 7ff337a4.
- `GetEffectiveOSImageStreamName` (`pkg/controller/common/helpers.go`; its table test
  `TestGetEffectiveOSImageStreamName` in helpers_test.go, index id 14435302651): a pool's own
  spec.osImageStream.name; a custom pool naming none inherits the `worker` pool's; worker and master never
  inherit; "" is the default stream. `getOSImageStreamForPool` / `GetOSImageStreamSetByName` /
  `GetBaseImageContainer` (render_controller.go, index id 13962087397): the stream's osImage and
  osExtensionsImage; with the OSStreams gate off no OSImageStream is read and the ControllerConfig's
  baseOSContainerImage / baseOSExtensionsContainerImage are used.
- The OS-stream refusal, "cannot override MachineConfig osImageURL and set MachineConfigPool
  spec.osImageStream.name simultaneously" (openshift-tests' expectation, index id 52636514246; the
  results): only when the merged osImageURL differs from `GetBaseImageContainer` AND the pool itself names a
  stream (an inherited stream never refuses). Errors from generating are wrapped "could not generate rendered
  MachineConfig: %w" (`syncGeneratedMachineConfig`); "no MachineConfigs found ..." is not.
- `pkg/controller/common/helpers.go` at 19ba3dda6e7a34fe5f15917152271191f9adb655, `MergeMachineConfigs`:
  worker-role first then the others, each group sorted by name (`sort.SliceStable`); Ignition merged in
  that order (`ign3.Merge`), `overwrite` defaulted to true on files; FIPS if any; kernelType: the last
  `realtime`/`64k-pages` wins, else `default`; kernelArguments and extensions concatenated (no dedupe);
  `kernel-devel` refused with a non-default kernel; osImageURL and baseOSExtensionsContainerImage start
  from the base and the last MachineConfig setting one wins. A later stored copy (index id 14192847658,
  the `commonconsts` refactor) has the same body.
- openshift/machine-config-operator PR #5488 (MCO-1961, merged 2025-12): `MergeMachineConfigs` skips
  MachineConfigs carrying `machineconfiguration.openshift.io/generated-by-controller-version` when it
  picks osImageURL and baseOSExtensionsContainerImage. The index holds no helpers.go with that change;
  the rule is taken from the PR's description, and the results hold it for osImageURL
  (generated-mc-sets-osimage; no case yet for the extensions image).
- `pkg/controller/render/render_controller.go`, the stored copy with `OSImageStreamSet` (index id
  13962087397; the index did not give its commit): `syncMachineConfigPool` (empty selector -> event
  "SelectingAll" and nothing else; MachineConfigs listed by selector, sorted by name; none -> "no
  MachineConfigs found matching selector %v"), `syncFailingStatus` / `syncAvailableStatus` (condition
  `RenderDegraded`), `syncGeneratedMachineConfig` (create if absent; pool `spec.configuration.name` and
  `.source`, made by `getMachineConfigRefs`), `generateRenderedMachineConfig` (MCs generated by another
  controller version refused, "ignoring MC ..." in lower case at 7ff337a4 as the results show;
  `ValidateMachineConfig`; owner reference = controller ref to the pool;
  annotations generated-by-controller-version, release-image-version, and os-image-url-overridden
  "true" when osImageURL is not `GetBaseImageContainer`), `getPoolsForMachineConfig` /
  `getMachineConfigsForPool` (nil or empty selector selects nothing).
- `pkg/controller/render/hash.go` at 0d843aa29c6a5ce5aedcd1cb1638d2383ea17e41,
  `getMachineConfigHashedName` / `hashData`: `rendered-<pool>-<hex md5(salt + yaml.Marshal(spec))>`.
- `pkg/controller/common/constants.go` at 410f667da764de8112084b6ffe2bc871d358a262: annotation and
  label keys, kernel types (its `InternalMCOIgnitionVersion` is still 3.4.0 there; 3.5.0 at HEAD, above).
- `pkg/controller/node/status.go` (stored copy, index id 36417010171), `calculateStatus`: machineCount
  = nodes of the pool, updatedMachineCount = nodes done on the pool's target config; status.configuration
  becomes spec.configuration only when every machine is updated, ready and none unavailable; conditions
  Updated / Updating.
- k8s.io/apimachinery `labels` selector semantics (`LabelSelectorAsSelector`): In, NotIn (also true
  when the key is absent), Exists, DoesNotExist; all requirements ANDed.

What this imitation does NOT prove:
- Ignition merging is simplified (see `merge_ignition`): lists keyed as Ignition keys them (files,
  directories, links by path, each kind on its own; units, users, groups by name; dropins by name;
  disks, filesystems by device; resources by source), keyed entries merged field by field with the later
  one winning for scalars, lists of scalars united in order. No spec 2 -> 3 translation (a 2.2 config is
  accepted and merged as it is), no path collisions between files, links and directories, no `replace`,
  no `ExtractIgnitionKargsFor4_13`-era Ignition kernelArguments. The gzip rule above is unverified by any
  case. Ignition's validation is only the version and absolute paths; the wording of a refusal after its
  first clause (Go's report format) is ours.
- The rendered name follows upstream's algorithm, but Python's YAML is not go-yaml's: the bytes hashed
  (quoting, wrapping of long strings) can differ, so the names differ from a real cluster's. They are a
  deterministic function of the merged spec alone.
- Not imitated: the ControllerConfig checks (version annotation, completion), waiting for the
  kubelet/containerruntime sub-controllers, the reconcilability check against the current rendered config
  (`generateAndValidateRenderedMachineConfig`), garbage collection, events and metrics, the runc/RHEL 10
  image check (skipped by upstream without an inspector, and in the results), an OSStreams gate that is on
  with no OSImageStream `cluster` (the imitation then uses the ControllerConfig), the wording of an unknown
  stream's error, and the MCO-generated MachineConfigs of a real cluster (00-worker, 01-worker-kubelet,
  97/98/99-*-generated-*: only what the test puts in exists).
- Nothing about roll-out: that is tests/support/mconode.py (the node controller and the daemon's
  annotations, with what they do not prove). `roll_out` only writes the counts a finished or partial
  roll-out would show, for tests without Nodes.
"""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Iterable
from typing import Any

import yaml

MCO = "machineconfiguration.openshift.io"
MCO_V1 = f"{MCO}/v1"
ROLE_LABEL = f"{MCO}/role"                                           # MachineConfigRoleLabel
#: GeneratedByControllerVersionAnnotationKey
GENERATED_BY = f"{MCO}/generated-by-controller-version"
RELEASE_IMAGE_VERSION = f"{MCO}/release-image-version"               # ReleaseImageVersionAnnotationKey
OS_IMAGE_URL_OVERRIDDEN = f"{MCO}/os-image-url-overridden"           # OSImageURLOverriddenKey
WORKER = "worker"                                                    # MachineConfigPoolWorker
KERNEL_DEFAULT, KERNEL_REALTIME, KERNEL_64K = "default", "realtime", "64k-pages"
IGNITION_VERSION = "3.5.0"                                           # InternalMCOIgnitionVersion
#: what `ParseAndConvertConfig` / `IgnParseWrapper` (v3_5 `ParseCompatibleVersion`, spec 2.2 translated) read
IGNITION_SPECS = ("2.2", "3.0", "3.1", "3.2", "3.3", "3.4", "3.5")
#: `SupportedExtensions` (pkg/controller/common/helpers.go)
SUPPORTED_EXTENSIONS = ("wasm", "ipsec", "usbguard", "kerberos", "kernel-devel", "sandboxed-containers",
                        "sysstat")
#: `GetEffectiveOSImageStreamName`: pools that never inherit worker's stream
STANDARD_POOLS = ("worker", "master")
#: hash.go: "80 random bytes ... Do not change it."
SALT = bytes([
    16, 124, 206, 228, 139, 56, 175, 175, 79, 229, 134, 118, 157, 154, 211, 110,
    25, 93, 47, 253, 172, 106, 37, 7, 174, 13, 160, 185, 110, 17, 87, 52,
    219, 131, 12, 206, 218, 141, 116, 135, 188, 181, 192, 151, 233, 62, 126, 165,
    64, 83, 179, 119, 15, 168, 208, 197, 146, 107, 58, 227, 133, 188, 238, 26,
    33, 26, 235, 202, 32, 173, 31, 234, 41, 144, 148, 79, 6, 206, 23, 22,
])
EPOCH = "1970-01-01T00:00:00Z"


class RenderError(Exception):
    """The render controller refuses. `message` is the error `syncFailingStatus` puts in RenderDegraded
    after "Failed to render configuration for pool <pool>: "."""

    def __init__(self, message: str, selecting_all: bool = False):
        super().__init__(message)
        self.message = message
        #: the pool selects everything: upstream only records an event and changes nothing
        self.selecting_all = selecting_all


# selection -------------------------------------------------------------------------------------
def _requirements(selector: dict[str, Any]) -> list[tuple[str, str, list[str]]]:
    """`metav1.LabelSelectorAsSelector`: matchLabels as `In` of one value, then matchExpressions."""
    reqs = [(k, "In", [v]) for k, v in (selector.get("matchLabels") or {}).items()]
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr.get("key", ""), expr.get("operator", ""), list(expr.get("values") or [])
        if op in ("In", "NotIn") and not values:
            raise RenderError("values: Invalid value: []: for 'in', 'notin' operators, "
                              "values set can't be empty")
        if op in ("Exists", "DoesNotExist") and values:
            raise RenderError(f"values: Invalid value: {values}: values set must be empty for exists and "
                              f"does not exist")
        if op not in ("In", "NotIn", "Exists", "DoesNotExist"):
            raise RenderError(f"{op!r} is not a valid label selector operator")
        reqs.append((key, op, values))
    return sorted(reqs, key=lambda r: r[0])       # the internal selector sorts requirements by key


def selector_string(selector: dict[str, Any] | None) -> str:
    """How `labels.Selector.String()` prints it (used in "no MachineConfigs found matching selector")."""
    parts = []
    for key, op, values in _requirements(selector or {}):
        if op == "In" and len(values) == 1:
            parts.append(f"{key}={values[0]}")
        elif op in ("In", "NotIn"):
            parts.append(f"{key} {op.lower()} ({','.join(sorted(values))})")
        else:
            parts.append(key if op == "Exists" else f"!{key}")
    return ",".join(parts)


def _matches(reqs: list[tuple[str, str, list[str]]], labels: dict[str, str]) -> bool:
    for key, op, values in reqs:
        has = key in labels
        if op == "In" and not (has and labels[key] in values):
            return False
        if op == "NotIn" and has and labels[key] in values:
            return False
        if op == "Exists" and not has:
            return False
        if op == "DoesNotExist" and has:
            return False
    return True


def select(pool: dict[str, Any], machineconfigs: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """The MachineConfigs `spec.machineConfigSelector` selects, sorted by name as
    `syncMachineConfigPool` sorts them. A nil or empty selector selects nothing
    (`getPoolsForMachineConfig`, `getMachineConfigsForPool`).

    The controller filters nothing else out: rendered MachineConfigs are never selected because
    `MergeMachineConfigs` returns them without labels, and generated ones (with
    generated-by-controller-version) are merged like any other, except for osImageURL (see `merge`)."""
    selector = (pool.get("spec") or {}).get("machineConfigSelector")
    if not selector:
        return []
    reqs = _requirements(selector)
    if not reqs:
        return []
    out = [mc for mc in machineconfigs
           if _matches(reqs, (mc.get("metadata") or {}).get("labels") or {})]
    return sorted(out, key=lambda mc: mc["metadata"]["name"])     # stable, like sort.SliceStable


# merging ---------------------------------------------------------------------------------------
#: list name -> the field Ignition keys its entries by (simplified; see the module docstring)
LIST_KEYS = {"files": "path", "directories": "path", "links": "path", "units": "name", "dropins": "name",
             "users": "name", "groups": "name", "disks": "device", "filesystems": "device",
             "raid": "name", "luks": "name", "partitions": "label", "merge": "source",
             "certificateAuthorities": "source"}


def _merge_value(parent: Any, child: Any, field: str = "") -> Any:
    if child is None:
        return copy.deepcopy(parent)
    if isinstance(parent, dict) and isinstance(child, dict):
        out = copy.deepcopy(parent)
        for key, value in child.items():
            out[key] = _merge_value(parent.get(key), value, key) if key in parent else copy.deepcopy(value)
        return out
    if isinstance(parent, list) and isinstance(child, list):
        key = LIST_KEYS.get(field)
        if key:
            out = [copy.deepcopy(e) for e in parent]
            for entry in child:
                at = next((i for i, e in enumerate(out) if isinstance(e, dict) and isinstance(entry, dict)
                           and e.get(key) == entry.get(key)), None)
                if at is None:
                    out.append(copy.deepcopy(entry))
                else:
                    out[at] = _merge_value(_rewritten(out[at], entry) if field == "files" else out[at], entry)
            return out
        if all(not isinstance(e, (dict, list)) for e in parent + child):
            return parent + [e for e in child if e not in parent]       # keyed by value
        return copy.deepcopy(parent) + copy.deepcopy(child)
    return copy.deepcopy(child)


def _rewritten(parent: dict[str, Any], child: dict[str, Any]) -> dict[str, Any]:
    """A later file whose contents name a source without `compression` is written uncompressed: the
    earlier entry's `compression` does not survive (issue 28; see the module docstring)."""
    contents = child.get("contents")
    if isinstance(contents, dict) and contents.get("source") is not None and "compression" not in contents:
        parent = copy.deepcopy(parent)
        (parent.get("contents") or {}).pop("compression", None)
    return parent


def merge_ignition(configs: Iterable[dict[str, Any] | None]) -> dict[str, Any]:
    """`MergeMachineConfigs`' Ignition part, simplified: start from an empty config of the internal
    version, merge each config in order (later wins), then default `overwrite` to true on files."""
    out: dict[str, Any] = {"ignition": {"version": IGNITION_VERSION}}
    for cfg in configs:
        if not cfg:
            continue
        out = _merge_value(out, cfg)
    out.setdefault("ignition", {})["version"] = IGNITION_VERSION   # ParseAndConvertConfig converts
    for f in (out.get("storage") or {}).get("files") or []:
        if f.get("overwrite") is None:
            f["overwrite"] = True
    return out


def merge_order(selected: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """`MergeMachineConfigs`: role-worker MachineConfigs by name, then all others by name."""
    workers, others = [], []
    for mc in selected:
        md = mc.get("metadata") or {}
        if md.get("labels") is None:
            raise RenderError(f"Cannot find label in MachineConfig {md.get('name')}")
        (workers if md["labels"].get(ROLE_LABEL) == WORKER else others).append(mc)
    return (sorted(workers, key=lambda m: m["metadata"]["name"])
            + sorted(others, key=lambda m: m["metadata"]["name"]))


def _generated(mc: dict[str, Any]) -> bool:
    return GENERATED_BY in ((mc.get("metadata") or {}).get("annotations") or {})


def merge(pool: dict[str, Any], selected: Iterable[dict[str, Any]], base_image: str,
          base_extensions_image: str = "") -> dict[str, Any]:
    """The merged `spec` (`MergeMachineConfigs`). `pool` is not used by upstream's merge; it is here
    for the signature's symmetry with `render`."""
    del pool
    configs = merge_order(selected)
    if not configs:
        raise RenderError("no MachineConfigs to merge")
    specs = [mc.get("spec") or {} for mc in configs]
    fips, kernel_type = False, ""
    for spec in specs:
        fips = fips or bool(spec.get("fips"))
        if spec.get("kernelType") in (KERNEL_REALTIME, KERNEL_64K):
            kernel_type = spec["kernelType"]
    kernel_type = kernel_type or KERNEL_DEFAULT
    kargs = [a for spec in specs for a in spec.get("kernelArguments") or []]
    extensions = [e for spec in specs for e in spec.get("extensions") or []]
    if kernel_type != KERNEL_DEFAULT and "kernel-devel" in extensions:
        raise RenderError("installing kernel-devel extension is not supported with kernelType: "
                          f"{kernel_type}")
    os_image, ext_image = base_image, base_extensions_image
    for mc, spec in zip(configs, specs, strict=True):
        if _generated(mc):                       # PR #5488
            continue
        os_image = spec.get("osImageURL") or os_image
        ext_image = spec.get("baseOSExtensionsContainerImage") or ext_image
    return {"osImageURL": os_image, "baseOSExtensionsContainerImage": ext_image,
            "config": merge_ignition(spec.get("config") for spec in specs),
            "kernelArguments": kargs, "fips": fips, "kernelType": kernel_type, "extensions": extensions}


# naming and rendering --------------------------------------------------------------------------
def spec_bytes(merged: dict[str, Any]) -> bytes:
    """`yaml.Marshal(config.Spec)` of ghodss/yaml: JSON turned into YAML with sorted keys. Python's
    emitter stands in for go-yaml's (see the module docstring)."""
    return yaml.safe_dump(merged, sort_keys=True, default_flow_style=False, allow_unicode=True,
                          width=1 << 30).encode()


def rendered_name(pool_name: str, merged: dict[str, Any]) -> str:
    """`getMachineConfigHashedName`: rendered-<pool>-<md5(salt + spec yaml)>."""
    return f"rendered-{pool_name}-{hashlib.md5(SALT + spec_bytes(merged)).hexdigest()}"


def _generated_by_another(mcs: Iterable[dict[str, Any]], controller_version: str) -> None:
    """generateRenderedMachineConfig: every component MC generated by another controller version refuses."""
    for mc in mcs:
        md = mc.get("metadata") or {}
        version = (md.get("annotations") or {}).get(GENERATED_BY, "")
        if version and version != controller_version:
            raise RenderError(f"ignoring MC {md.get('name')} generated by older version {version} "
                              f"(my version: {controller_version})")


def validate_machineconfig(spec: dict[str, Any]) -> None:
    """`ValidateMachineConfig`: the kernel type; and when the MachineConfig has a spec.config, its Ignition
    version, Ignition's own validation (here only: absolute paths) and the extensions allow list."""
    kernel = spec.get("kernelType") or ""
    if kernel not in ("", KERNEL_DEFAULT, KERNEL_REALTIME, KERNEL_64K):
        raise RenderError(f"kernelType={kernel} is invalid")
    cfg = spec.get("config")
    if cfg is None:
        return
    version = str(((cfg.get("ignition") if isinstance(cfg, dict) else None) or {}).get("version") or "")
    if ".".join(version.split(".")[:2]) not in IGNITION_SPECS or version.count(".") != 2:
        raise RenderError("parsing Ignition config failed: unknown version. Supported spec versions: "
                          + ",".join(IGNITION_SPECS))
    storage = cfg.get("storage") or {}
    for kind in ("files", "directories", "links"):
        for i, node in enumerate(storage.get(kind) or []):
            if not str(node.get("path", "")).startswith("/"):
                raise RenderError(f"invalid ignition V3 config found: error at $.storage.{kind}.{i}.path: "
                                  "path not absolute")
    invalid = [e for e in spec.get("extensions") or [] if e not in SUPPORTED_EXTENSIONS]
    if invalid:
        raise RenderError(f"invalid extensions found: [{' '.join(invalid)}]")


def _render(pool: dict[str, Any], machineconfigs: Iterable[dict[str, Any]], base_image: str,
            controller_version: str, release_version: str,
            base_extensions_image: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    md = pool.get("metadata") or {}
    name = md.get("name", "")
    selector = (pool.get("spec") or {}).get("machineConfigSelector")
    if selector == {}:
        raise RenderError("This machineconfigpool is selecting all machineconfigs. "
                          "A non-empty selector is required.", selecting_all=True)
    selected = select(pool, machineconfigs)
    if not selected:
        raise RenderError(f"no MachineConfigs found matching selector {selector_string(selector)}")
    try:
        _generated_by_another(selected, controller_version)
        for mc in selected:
            validate_machineconfig(mc.get("spec") or {})
        ordered = merge_order(selected)
        spec = merge(pool, ordered, base_image, base_extensions_image)
        if spec["osImageURL"] != base_image and pool_stream(pool):
            raise RenderError("cannot override MachineConfig osImageURL and set MachineConfigPool "
                              "spec.osImageStream.name simultaneously")
    except RenderError as err:                   # syncGeneratedMachineConfig wraps what generating returns
        raise RenderError(f"could not generate rendered MachineConfig: {err.message}") from err
    annotations = {GENERATED_BY: controller_version, RELEASE_IMAGE_VERSION: release_version}
    if spec["osImageURL"] != base_image:
        annotations[OS_IMAGE_URL_OVERRIDDEN] = "true"
    rendered = {
        "apiVersion": MCO_V1, "kind": "MachineConfig",
        "metadata": {"name": rendered_name(name, spec), "annotations": annotations,
                     "ownerReferences": [{"apiVersion": MCO_V1, "kind": "MachineConfigPool", "name": name,
                                          "uid": md.get("uid", ""), "controller": True,
                                          "blockOwnerDeletion": True}]},
        "spec": spec}
    return rendered, ordered


def render(pool: dict[str, Any], machineconfigs: Iterable[dict[str, Any]], base_image: str,
           controller_version: str = "ocl-test", release_version: str = "",
           base_extensions_image: str = "") -> dict[str, Any]:
    """The rendered MachineConfig `generateRenderedMachineConfig` makes, or `RenderError`.
    `base_image` is what `GetBaseImageContainer` returns for the pool (its stream's osImage, else the
    ControllerConfig's baseOSContainerImage)."""
    return _render(pool, machineconfigs, base_image, controller_version, release_version,
                   base_extensions_image)[0]


def sources(ordered: Iterable[dict[str, Any]]) -> list[dict[str, str]]:
    """`getMachineConfigRefs`. `syncGeneratedMachineConfig` calls it after `MergeMachineConfigs`
    reordered the same slice in place (`configs = append(configs[:0], ...)`), so the sources come in
    merge order: worker-role first."""
    return [{"apiVersion": MCO_V1, "kind": "MachineConfig", "name": mc["metadata"]["name"]} for mc in ordered]


# pool status -----------------------------------------------------------------------------------
def set_condition(status: dict[str, Any], ctype: str, value: str, reason: str = "", message: str = "",
                  now: str = EPOCH) -> None:
    """`apihelpers.SetMachineConfigPoolCondition`: replace by type, keep the transition time when the
    status does not change."""
    conditions = status.setdefault("conditions", [])
    old = next((c for c in conditions if c.get("type") == ctype), None)
    new = {"type": ctype, "status": value, "reason": reason, "message": message,
           "lastTransitionTime": old["lastTransitionTime"]
           if old and old.get("status") == value and old.get("lastTransitionTime") else now}
    status["conditions"] = [c for c in conditions if c.get("type") != ctype] + [new]


def _failing(pool: dict[str, Any], err: RenderError, now: str) -> None:
    name = pool["metadata"]["name"]
    set_condition(pool.setdefault("status", {}), "RenderDegraded", "True",
                  message=f"Failed to render configuration for pool {name}: {err.message}", now=now)


def _target(pool: dict[str, Any], rendered: dict[str, Any], ordered: list[dict[str, Any]]) -> None:
    cfg = pool.setdefault("spec", {}).setdefault("configuration", {})
    cfg["name"] = rendered["metadata"]["name"]
    cfg["source"] = sources(ordered)


def update_conditions(pool: dict[str, Any], status: dict[str, Any], all_updated: bool,
                      now: str = EPOCH) -> None:
    """The `Updated` / `Updating` conditions and status.configuration as `calculateStatus`
    (node/status.go) sets them on `status` for a non-layered pool: all updated -> Updated True ("All
    nodes are updated with MachineConfig <target>", `getPoolUpdateLine`), Updating False, and
    status.configuration becomes spec.configuration; else Updated False and Updating False with "Pool is
    paused; will not update to ..." when spec.paused, True with "All nodes are updating to ..." when not.
    tests/support/mconode.py computes `all_updated` from the nodes; `roll_out` from counts."""
    target = (pool.get("spec") or {}).get("configuration") or {}
    line = f"MachineConfig {target.get('name', '')}"          # getPoolUpdateLine
    if all_updated:
        set_condition(status, "Updated", "True", message=f"All nodes are updated with {line}", now=now)
        set_condition(status, "Updating", "False", now=now)
        status["configuration"] = copy.deepcopy(target)
    else:
        set_condition(status, "Updated", "False", now=now)
        if (pool.get("spec") or {}).get("paused"):
            set_condition(status, "Updating", "False",
                          message=f"Pool is paused; will not update to {line}", now=now)
        else:
            set_condition(status, "Updating", "True",
                          message=f"All nodes are updating to {line}", now=now)


def roll_out(pool: dict[str, Any], updated: int, machines: int | None = None,
             now: str = EPOCH) -> dict[str, Any]:
    """A copy of the pool with the status `calculateStatus` (node/status.go) writes once `updated` of
    its `machines` (default: status.machineCount) are done on spec.configuration: the counts, and
    status.configuration = spec.configuration only when all are. For tests without Nodes; with Nodes,
    tests/support/mconode.py computes the same from their annotations."""
    out = copy.deepcopy(pool)
    status = out.setdefault("status", {})
    total = machines if machines is not None else int(status.get("machineCount", updated))
    if not 0 <= updated <= total:
        raise ValueError(f"updated={updated} is not within 0..{total}")
    status.update(machineCount=total, updatedMachineCount=updated, readyMachineCount=updated,
                  unavailableMachineCount=0 if updated == total else status.get("unavailableMachineCount", 0),
                  degradedMachineCount=0)
    update_conditions(out, status, updated == total, now)
    return out


# whole snapshots and a live API ----------------------------------------------------------------
def pool_stream(pool: dict[str, Any]) -> str:
    """The stream the pool itself names (spec.osImageStream.name), "" when none."""
    return str((((pool.get("spec") or {}).get("osImageStream")) or {}).get("name") or "")


def effective_stream(pool: dict[str, Any], pools: Iterable[dict[str, Any]]) -> str:
    """`GetEffectiveOSImageStreamName`: the pool's own stream; a custom pool naming none inherits worker's
    (spec.osImageStream.name of the pool `worker`); "" means the default stream."""
    own = pool_stream(pool)
    if own or (pool.get("metadata") or {}).get("name") in STANDARD_POOLS:
        return own
    worker = next((p for p in pools if (p.get("metadata") or {}).get("name") == WORKER), None)
    return pool_stream(worker) if worker else ""


def stream_images(pool: dict[str, Any], pools: Iterable[dict[str, Any]], os_image_stream: dict[str, Any] | None,
                  base_image: str, base_extensions_image: str = "") -> tuple[str, str]:
    """(`GetBaseImageContainer`, the extensions image) for the pool: with an OSImageStream (the OSStreams
    gate on, `getOSImageStreamForPool`), the `osImage` / `osExtensionsImage` of the stream
    `GetOSImageStreamSetByName` picks for the effective name ("" = status.defaultStream); without one, the
    ControllerConfig's baseOSContainerImage / baseOSExtensionsContainerImage."""
    if os_image_stream is None:
        return base_image, base_extensions_image
    status = os_image_stream.get("status") or {}
    want = effective_stream(pool, pools) or status.get("defaultStream") or ""
    for stream in status.get("availableStreams") or []:
        if stream.get("name") == want:
            return stream.get("osImage") or "", stream.get("osExtensionsImage") or ""
    raise RenderError(f"could not get OSImageStreamSet for pool {(pool.get('metadata') or {}).get('name')}: "
                      f"stream {want!r} not found")                       # wording ours


def images_for(pool: dict[str, Any], items: Iterable[dict[str, Any]]) -> tuple[str, str]:
    """`stream_images` from a snapshot: the OSImageStream `cluster` if any, the ControllerConfig
    `machine-config-controller`; ("", "") when neither names an image."""
    items = list(items)
    stream = next((o for o in items if o.get("kind") == "OSImageStream" and o["metadata"]["name"] == "cluster"),
                  None)
    cc = next((o for o in items if o.get("kind") == "ControllerConfig"
               and o["metadata"]["name"] == "machine-config-controller"), None)
    spec = (cc or {}).get("spec") or {}
    pools = [o for o in items if o.get("kind") == "MachineConfigPool"]
    return stream_images(pool, pools, stream, spec.get("baseOSContainerImage") or "",
                         spec.get("baseOSExtensionsContainerImage") or "")


def base_image_for(pool: dict[str, Any], items: Iterable[dict[str, Any]]) -> str | None:
    """`GetBaseImageContainer` from a snapshot (`images_for`), None when nothing names one."""
    try:
        return images_for(pool, items)[0] or None
    except RenderError:
        return None


def sync(items: list[dict[str, Any]], base_image: str | None = None, controller_version: str = "ocl-test",
         release_version: str = "", now: str = EPOCH) -> list[dict[str, Any]]:
    """One pass of the render controller over a snapshot; returns new items. For every pool (images from
    `images_for`, `base_image` overriding the OS image): render,
    add the rendered MachineConfig if absent, set spec.configuration (name and source) and
    RenderDegraded False; on refusal set RenderDegraded True and leave spec.configuration; a pool
    selecting everything is left as it is. `base_image` overrides `base_image_for`."""
    out = copy.deepcopy(items)
    mcs = [o for o in out if o.get("kind") == "MachineConfig"]
    names = {mc["metadata"]["name"] for mc in mcs}
    for pool in [o for o in out if o.get("kind") == "MachineConfigPool"]:
        try:
            base, extensions = images_for(pool, out)
            base = base_image or base
            if not base:
                raise RenderError("no base OS image: pass base_image or add a ControllerConfig/OSImageStream")
            rendered, ordered = _render(pool, mcs, base, controller_version, release_version, extensions)
        except RenderError as err:
            if not err.selecting_all:
                _failing(pool, err, now)
            continue
        if rendered["metadata"]["name"] not in names:
            out.append(rendered)
            mcs.append(rendered)
            names.add(rendered["metadata"]["name"])
        _target(pool, rendered, ordered)
        set_condition(pool.setdefault("status", {}), "RenderDegraded", "False", now=now)
    return out


def sync_api(api: Any, pool_name: str, base_image: str, controller_version: str = "ocl-test",
             release_version: str = "", now: str = EPOCH) -> dict[str, Any]:
    """The same for one pool on a client like tests/support/realserver.py's `RealAPI`: create the rendered
    MachineConfig if absent, PUT the pool's spec.configuration, write RenderDegraded through the status
    subresource. Returns the rendered MachineConfig; raises `RenderError` after recording it."""
    pool = api.get("MachineConfigPool", "", pool_name)
    if pool is None:
        raise RenderError(f"MachineConfigPool {pool_name} not found")
    path = api.path("MachineConfigPool", "", pool_name)
    try:
        rendered, ordered = _render(pool, api.list("MachineConfig"), base_image, controller_version,
                                    release_version, "")
    except RenderError as err:
        if not err.selecting_all:
            _failing(pool, err, now)
            api.request("PUT", path + "/status", pool)
        raise
    if api.get("MachineConfig", "", rendered["metadata"]["name"]) is None:
        api.create(rendered)
    _target(pool, rendered, ordered)
    _, pool = api.request("PUT", path, pool)
    set_condition(pool.setdefault("status", {}), "RenderDegraded", "False", now=now)
    api.request("PUT", path + "/status", pool)
    return rendered
