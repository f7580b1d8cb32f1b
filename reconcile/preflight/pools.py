"""The pools: what the next run would do for each opted-in pool, stray MachineConfigs, the MCO's
admission of every pool, and the rollout policy's parameter."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from reconcile.contract import admission, objects
from reconcile.contract import annotations as A
from reconcile.core import decision, mcolabel, rollout
from reconcile.core.rollout import hold
from reconcile.imagebuild.settings import Settings
from reconcile.preflight.facts import Facts
from reconcile.preflight.report import FAIL, OK, WARN, Line


def check_pools(f: Facts) -> list[Line]:
    """Every opted-in pool: what the next run would do, or Blocked with the lifecycle's own reason
    (the rollout's selector checks among them), and which pools roll its image out."""
    s = f.settings
    if not isinstance(s, Settings):
        return []
    if f.plan_error:
        return [(FAIL, f"cannot plan: {f.plan_error}",
                 "run preflight as a user who may read the pools and MachineConfigs")]
    foreign = sorted((p for p in f.pools if mcolabel.carries(p)), key=objects.name)
    out: list[Line] = [(FAIL, mcolabel.problem(objects.name(p), s.release_version),
                        " && ".join(mcolabel.commands(objects.name(p)))) for p in foreign]
    opted = sorted((p for p in f.pools if decision.opted_in(p) and not mcolabel.carries(p)),
                   key=objects.name)
    if not opted and not foreign:
        return [(WARN, f"no MachineConfigPool is labelled {A.LAYERING_LABEL}: nothing is built",
                 f"label a pool to start: oc label mcp/worker {A.LAYERING_LABEL}=")]
    view = decision.rollout_view(s, f.pools, f.owned)
    for pool in opted:
        name = objects.name(pool)
        transition, problem = f.decisions.get(name, ("", ""))
        if problem:
            out.append((FAIL, f"MachineConfigPool {name} would be Blocked: {problem}",
                        "fix what the message names (docs/rollout.md for selectors and OS streams)"))
            continue
        rolls = "rollout: annotation writes no MachineConfig"
        if view is not None:
            selecting = view.selecting(name)        # valid: the decision checked them
            heirs = [objects.name(p) for p in selecting if objects.name(p) not in view.built]
            early = [objects.name(p) for p in selecting
                     if objects.name(p) in view.built and objects.name(p) not in view.ours]
            rolls = (f"MachineConfig {rollout.name(name)} rolls its image out to {', '.join([name, *heirs])}"
                     + (f" ({', '.join(heirs)} inherit it)" if heirs else "")
                     + (f"; written once {', '.join(early)} have their own" if early else ""))
        out.append((OK, f"MachineConfigPool {name}: the next run's lifecycle row is {transition}; {rolls}"))
        if s.holds and hold.REQUIRED_FOR_UPGRADE in objects.labels(pool):
            held = hold.waiting(pool)
            now = "holds a change back from it now" if held else "pauses it between rollouts"
            out.append((WARN if held else OK,
                        f"MachineConfigPool {name} is required for upgrades and the rollout gate {now}: the "
                        f"MCO then reports 'the required MachineConfigPool {name} is paused and cannot sync "
                        f"until it is unpaused' and an upgrade waits for its build, at most holdTimeout "
                        f"({s.hold_timeout}s)",
                        "nothing to do unless an upgrade must not wait: rolloutGate: none, or leave this "
                        "pool out (docs/rollout.md, section 3)" if held else ""))
        if name in f.rollouts:
            out.append((WARN, f"MachineConfigPool {name}: its nodes do not get our image: {f.rollouts[name]}",
                        "docs/admin.md, \"Troubleshooting\": overridden, render failed"))
    return out


def check_strays(f: Facts) -> list[Line]:
    """MachineConfigs named like ours that we did not write (core/rollout/ `strays`): from what a
    run reads too (the labelled LIST of ours, the metadata-only LIST of every MachineConfig, the
    pools' rendered sources)."""
    if not isinstance(f.settings, Settings) or not f.settings.machineconfig_rollout:
        return [(OK, "not checked: with rollout: annotation the reconciler lists no MachineConfigs "
                     "(kustomize/base grants no list) and writes none")]
    found = rollout.strays(f.pools, f.owned, f.settings.repo, f.named)
    if not found:
        return [(OK, f"no stray MachineConfig named {rollout.PREFIX}*")]
    return [(FAIL, s.line(), f"find who wrote it (docs/rollout-permissions.md, \"Stray MachineConfigs\"), "
                             f"then oc delete machineconfig {s.name}") for s in found]


def check_pool_admission(f: Facts) -> list[Line]:
    """Every opted-in pool as the MCO's policy custom-machine-config-pool-selector judges it
    (contract/admission.py mirrors its CEL): a pool it refuses can never record its state, since
    every write of it is denied. A failure where the server serves the policy, or where that cannot
    be read; a warning where it is not served (before 4.18): an upgrade brings it."""
    policy = f"ValidatingAdmissionPolicy {admission.SELECTOR_POLICY}"
    if f.selector_policy is None:
        served, result = f"whether this cluster serves it cannot be read: {f.selector_policy_error}", FAIL
    elif f.selector_policy:
        served, result = "served here", FAIL
    else:
        served, result = "not served here; OpenShift 4.18 and later deploy it", WARN
    out: list[Line] = []
    opted = sorted((p for p in f.pools if decision.opted_in(p)), key=objects.name)
    for pool in opted:
        admitted, why = admission.admits_selector(pool)
        if not admitted:
            out.append((result, f"MachineConfigPool {objects.name(pool)}: {policy} ({served}) denies every "
                                f"write of it, so no run can record its state: {why}",
                        admission.selector_fix(objects.name(pool))))
    if out or not opted:
        return out
    return [(OK, f"every opted-in pool selects the worker role (or master or arbiter), as {policy} requires "
                 f"({served})")]


#: The parameter of ValidatingAdmissionPolicy ocl-reconciler-rollout
#: (kustomize/components/rollout/params.yaml): the repository and the pools our ServiceAccount may
#: write MachineConfigs for.
ROLLOUT_PARAMS_NS, ROLLOUT_PARAMS = "openshift-config", "ocl-reconciler-rollout"


def listed_pools(params: Mapping[str, Any] | None) -> list[str]:
    """data.pools as the policy reads it: comma-separated, blanks around a name ignored."""
    raw = str(((params or {}).get("data") or {}).get("pools") or "")
    return [p.strip() for p in raw.split(",") if p.strip()]


def params_patch(repository: str, pools: list[str]) -> str:
    """The one command that makes the parameter agree (docs/admin.md)."""
    body = json.dumps({"data": {"repository": repository, "pools": ",".join(pools)}}, separators=(",", ":"))
    return f"oc patch configmap {ROLLOUT_PARAMS} -n {ROLLOUT_PARAMS_NS} --type merge -p '{body}'"


def params_create(repository: str, pools: list[str]) -> str:
    return (f"oc create configmap {ROLLOUT_PARAMS} -n {ROLLOUT_PARAMS_NS} "
            f"--from-literal=repository={repository} --from-literal=pools={','.join(pools)} "
            "--dry-run=client -o yaml | oc apply -f -")


def check_rollout_params(f: Facts) -> list[Line]:
    """With `rollout: machineconfig`: the policy's parameter names the settings' repository and
    every opted-in pool (else the policy refuses our MachineConfig for them), and no other pool
    (our ServiceAccount could write one for it)."""
    s = f.settings
    if not isinstance(s, Settings) or not s.machineconfig_rollout or not f.rollout_params_read:
        return []
    where = (f"ConfigMap {ROLLOUT_PARAMS_NS}/{ROLLOUT_PARAMS} (the parameter of ValidatingAdmissionPolicy "
             "ocl-reconciler-rollout)")
    opted = sorted(objects.name(p) for p in f.pools if decision.opted_in(p))
    fix = params_patch(s.repo, opted)
    if f.rollout_params_error:
        return [(WARN, f"cannot read {where}: {f.rollout_params_error}",
                 "run preflight as an administrator to check it (our ServiceAccount may not read it)")]
    if f.rollout_params is None:
        return [(FAIL, f"{where} not found: the policy denies every MachineConfig write of ours",
                 params_create(s.repo, opted))]
    repository = str((f.rollout_params.get("data") or {}).get("repository") or "").strip()
    listed = listed_pools(f.rollout_params)
    problems = []
    if repository != s.repo:
        problems.append(f"data.repository is {repository or 'not set'}, the settings' is {s.repo}")
    missing = [p for p in opted if p not in listed]
    if missing:
        problems.append(f"data.pools ({', '.join(listed) or 'none'}) does not list the opted-in "
                        f"{', '.join(missing)}")
    if problems:
        return [(FAIL, f"{where}: {'; '.join(problems)}: the policy refuses our MachineConfig writes", fix)]
    extra = [p for p in listed if p not in opted]
    if extra:
        return [(WARN, f"{where} lists {', '.join(extra)}, not opted in: our ServiceAccount may write a "
                       "MachineConfig for it", fix)]
    return [(OK, f"{where} names {s.repo} and the opted-in pools ({', '.join(opted) or 'none'})")]
