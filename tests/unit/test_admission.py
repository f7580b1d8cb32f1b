"""The MCO's admission policies for pools (reconcile/contract/admission.py): the selector policy's
CEL mirrored in Python, case by case from its file (../shared/schemas/mco-policies/
custom-machine-config-pool-selector-validatingadmissionpolicy.yaml; tests/realapi/test_realapi_policy.py
holds the mirror to the real server's verdicts); a denial read from the real server's Status; a
denied write is the pool's error, sent once, never re-planned, never recorded on the pool."""

from __future__ import annotations

import json
import logging

import pytest

from reconcile.cluster import Denied, apply, live, observe
from reconcile.cluster.memory import MemoryCluster
from reconcile.cluster.planner import Planner
from reconcile.contract import admission
from reconcile.contract import annotations as A
from reconcile.output import metrics
from tests.support import factory as F

ROLE = admission.ROLE
#: (selector, admitted): each branch of the CEL, and the keys it reads that may be absent (an
#: evaluation error, which denies unless the other branch holds)
CASES = {
    "no selector": (None, False),
    "empty selector": ({}, False),
    "matchLabels worker": ({"matchLabels": {ROLE: "worker"}}, True),
    "matchLabels master": ({"matchLabels": {ROLE: "master"}}, True),
    "matchLabels arbiter": ({"matchLabels": {ROLE: "arbiter"}}, True),
    "matchLabels infra (before 4.18)": ({"matchLabels": {ROLE: "infra"}}, False),
    "matchLabels without the role key": ({"matchLabels": {"team": "a"}}, False),
    "In worker, infra (4.18)": ({"matchExpressions": [{"key": ROLE, "operator": "In",
                                                       "values": ["worker", "infra"]}]}, True),
    "In infra": ({"matchExpressions": [{"key": ROLE, "operator": "In", "values": ["infra"]}]}, False),
    "NotIn master": ({"matchExpressions": [{"key": ROLE, "operator": "NotIn", "values": ["master"]}]}, True),
    "NotIn worker": ({"matchExpressions": [{"key": ROLE, "operator": "NotIn", "values": ["worker"]}]}, False),
    "Exists": ({"matchExpressions": [{"key": ROLE, "operator": "Exists"}]}, False),
    "In worker on another key": ({"matchExpressions": [{"key": "team", "operator": "In",
                                                        "values": ["worker"]}]}, False),
    "matchLabels without the role key, In worker": (
        {"matchLabels": {"team": "a"},
         "matchExpressions": [{"key": ROLE, "operator": "In", "values": ["worker", "infra"]}]}, True),
    "matchLabels infra, In worker": (
        {"matchLabels": {ROLE: "infra"},
         "matchExpressions": [{"key": ROLE, "operator": "In", "values": ["worker"]}]}, True),
}


def with_selector(selector, name="infra"):
    pool = F.pool(name)
    if selector is None:
        del pool["spec"]["machineConfigSelector"]
    else:
        pool["spec"]["machineConfigSelector"] = selector
    return pool


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_selector_policy_mirrored(case):
    selector, admitted = CASES[case]
    ok, why = admission.admits_selector(with_selector(selector))
    assert ok is admitted and bool(why) is not admitted


def test_the_factory_pools_are_what_4_18_admits():
    for name in ("worker", "master", "infra", "a-custom-pool"):
        assert admission.admits_selector(F.pool(name)) == (True, "")


#: the real kube-apiserver's (v1.34) answer to a JSON patch of a pool the policy denies
#: (tests/realapi/test_realapi_policy.py shows it)
DENIED_BODY = {
    "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "reason": "Invalid", "code": 422,
    "message": 'machineconfigpools.machineconfiguration.openshift.io "infra" is forbidden: '
               "ValidatingAdmissionPolicy 'custom-machine-config-pool-selector' with binding "
               "'custom-machine-config-pool-selector-binding' denied request: All custom MachineConfigPools "
               "must inherit from the worker pool and must have a machineConfigSelector that matches for a "
               "'machineconfiguration.openshift.io/role: worker' label"}


def test_a_denial_is_read_from_the_servers_status():
    err = live._error(422, json.dumps(DENIED_BODY).encode(), "PATCH", "/apis/x")
    assert isinstance(err, Denied) and err.status == 422
    assert err.policy == admission.SELECTOR_POLICY
    assert err.reason.startswith("All custom MachineConfigPools must inherit from the worker pool")
    other = dict(DENIED_BODY, message='pools "infra" is invalid: spec: Required value')
    assert not isinstance(live._error(422, json.dumps(other).encode(), "PATCH", "/apis/x"), Denied)


class Refusing(MemoryCluster):
    """An in-memory cluster whose admission denies every write of the pools named, as the policy
    denies a pool of the old shape."""

    def __init__(self, items, refused):
        super().__init__(items, clock=lambda: F.NOW)
        self.refused, self.sent = refused, []

    def patch(self, kind, namespace, name, ops):
        self.sent.append((kind, name))
        if kind == "MachineConfigPool" and name in self.refused:
            raise Denied("422 Invalid: ...", 422, admission.SELECTOR_POLICY, "All custom MachineConfigPools ...")
        return super().patch(kind, namespace, name, ops)


def test_a_denied_pool_write_is_the_pools_error_sent_once_and_the_others_go_on(caplog):
    cluster = Refusing(F.cluster(F.pool(), F.pool("infra")), {"infra"})
    seen = observe.observe(cluster, F.NS)
    planner = Planner(cluster, seen, F.NOW)
    with caplog.at_level(logging.INFO, logger="reconcile"):
        result = apply.execute(cluster, planner.plan(), F.NOW, planner)
    assert result.failed
    infra = next(o for o in result.outcomes if o.plan.pool == "infra")
    worker = next(o for o in result.outcomes if o.plan.pool == "worker")
    assert infra.error_reason == "admission" and not worker.error
    assert cluster.sent.count(("MachineConfigPool", "infra")) == 1          # no re-plan, no Blocked on top
    assert F.the_pool(cluster.items(), "worker")["metadata"]["annotations"][A.STATE] == A.PENDING
    assert A.STATE not in F.the_pool(cluster.items(), "infra")["metadata"]["annotations"]
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1 and errors[0].startswith("pool infra: patch MachineConfigPool/infra: "
                                                     f"ValidatingAdmissionPolicy {admission.SELECTOR_POLICY}")
    assert "values: [worker, infra]" in errors[0]
    registry = metrics.collect(result, {}, 0.1, {}, F.NOW)
    assert registry.get_sample_value("ocl_errors_total", {"reason": "admission"}) == 1.0
