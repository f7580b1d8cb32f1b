"""The MCO's own admission policies for MachineConfigPools, and what their refusals mean.

Since OpenShift 4.18 the MCO deploys the ValidatingAdmissionPolicy
`custom-machine-config-pool-selector` (openshift/machine-config-operator
`manifests/machineconfigcontroller/custom-machine-config-pool-selector-validatingadmissionpolicy.yaml`,
a copy in ../shared/schemas/mco-policies/): every CREATE and UPDATE of a pool whose
`machineConfigSelector` does not select the worker role (or master, or arbiter) is denied, a
metadata-only patch of our annotations included, so such a pool can never record its state. With the
OSStreams feature gate, `machineconfigpool-osimagestream-reference-validation` (same folder)
denies a pool that names a stream the `OSImageStream` `cluster` does not list, and every pool
write while that singleton is missing.

kube-apiserver answers a denial 422 Invalid (a policy's validation without `reason`) whose message
is `<resource> "<name>" is forbidden: ValidatingAdmissionPolicy '<policy>' with binding '<binding>'
denied request: <the policy's message>` (kubernetes/kubernetes
`staging/src/k8s.io/apiserver/pkg/admission/plugin/policy/validating/dispatcher.go`; seen in
tests/realapi/test_realapi_policy.py). The same write is denied again until the pool changes, so a
denied write is never retried.

Pure: a Status message -> the denial; a pool -> whether the selector policy admits it."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

SELECTOR_POLICY = "custom-machine-config-pool-selector"
STREAM_POLICY = "machineconfigpool-osimagestream-reference-validation"
ROLE = "machineconfiguration.openshift.io/role"
#: the roles a pool may select alone: the policy's `matchLabels` branch
ROLES = ("master", "worker", "arbiter")

_DENIAL = re.compile(r"ValidatingAdmissionPolicy '([^']+)' with binding '([^']*)' denied request: (.*)$",
                     re.S)


@dataclass(frozen=True)
class Denial:
    policy: str
    binding: str
    message: str


def denial(message: str) -> Denial | None:
    """The policy, binding and message of a ValidatingAdmissionPolicy's refusal, or None."""
    found = _DENIAL.search(message)
    if found is None:
        return None
    return Denial(found.group(1), found.group(2), " ".join(found.group(3).split()))


def selector_fix(pool: str) -> str:
    """What to set on a pool the selector policy refuses: select worker's MachineConfigs too."""
    return (f"give MachineConfigPool {pool} a machineConfigSelector that also selects worker, e.g. "
            f"matchExpressions: [{{key: {ROLE}, operator: In, values: [worker, {pool}]}}] "
            "(oc edit mcp/" + pool + ")")


def fix(policy: str, pool: str) -> str:
    """What to do about a pool this policy refuses."""
    if policy == SELECTOR_POLICY:
        return selector_fix(pool)
    if policy == STREAM_POLICY:
        return (f"name a stream that OSImageStream cluster lists in spec.osImageStream of MachineConfigPool "
                f"{pool}, or remove it (oc get osimagestream cluster -o yaml); the singleton must exist")
    return f"change MachineConfigPool {pool} so that ValidatingAdmissionPolicy {policy} admits it"


def admits_selector(pool: Mapping[str, Any]) -> tuple[bool, str]:
    """Does `custom-machine-config-pool-selector` admit a write of this pool? (admitted, why not).

    Its CEL, branch by branch (../shared/schemas/mco-policies/
    custom-machine-config-pool-selector-validatingadmissionpolicy.yaml):
    `has(sel.matchLabels) && matchLabels[role] in (master, worker, arbiter)`, or
    `has(sel.matchExpressions) && (exists e: key == role && operator == In && "worker" in values
    || exists e: key == role && operator == NotIn && !("worker" in values))`.
    A key the CEL reads that is absent (no machineConfigSelector; matchLabels without the role key)
    is an evaluation error, and with failurePolicy Fail a branch in error denies unless the other
    branch holds (CEL's `||` absorbs an error only next to true)."""
    spec = pool.get("spec")
    sel = spec.get("machineConfigSelector") if isinstance(spec, Mapping) else None
    if not isinstance(sel, Mapping):
        return False, "it has no spec.machineConfigSelector"
    labels, exprs = sel.get("matchLabels"), sel.get("matchExpressions")
    if isinstance(labels, Mapping) and labels.get(ROLE) in ROLES:
        return True, ""
    if isinstance(exprs, list):
        for e in exprs:
            if not isinstance(e, Mapping) or e.get("key") != ROLE:
                continue
            values = e.get("values")
            if not isinstance(values, list):        # `e.values` absent: an error, not a match
                continue
            if (e.get("operator") == "In" and "worker" in values) or \
                    (e.get("operator") == "NotIn" and "worker" not in values):
                return True, ""
    return False, "its machineConfigSelector does not select the worker role (nor master or arbiter)"
