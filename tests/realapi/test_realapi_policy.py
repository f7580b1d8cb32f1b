"""The MCO's own admission policies for pools (issue 28), on the real kube-apiserver: both installed
unchanged from ../shared/schemas/mco-policies/ for the whole suite (tests/support/realserver.py). A
pool created with the old selector shape before the policy existed can never record its state: the
run reports it alone, once, and goes on; preflight says how to fix it; a pool of the 4.18 shape goes
through the lifecycle. What is expected comes from the policy files and the server's answers."""

from __future__ import annotations

import json

import pytest
import yaml

from reconcile.contract import admission
from reconcile.contract import annotations as A
from tests.realapi.test_realapi_preflight import by_check, preflight
from tests.support import factory as F
from tests.support import realserver
from tests.unit.test_admission import CASES, with_selector

pytestmark = pytest.mark.realapi
SELECTOR_FILE = realserver.MCO_POLICIES / "custom-machine-config-pool-selector-validatingadmissionpolicy.yaml"
BINDING_FILE = realserver.MCO_POLICIES / "custom-machine-config-pool-selector-validatingadmissionpolicybinding.yaml"
BINDINGS = "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings"


def policy_message() -> str:
    (validation,) = yaml.safe_load(SELECTOR_FILE.read_text())["spec"]["validations"]
    return validation["message"]


def old_shape(name: str = "infra") -> dict:
    """A custom pool as OpenShift before 4.18 let one be made: it selects only its own role."""
    pool = F.pool(name)
    pool["spec"]["machineConfigSelector"] = {"matchLabels": {f"{F.MCO}/role": name}}
    return pool


def create_before_the_policy(server, pool: dict) -> None:
    """Create `pool` while the selector policy is unbound (as before the upgrade to 4.18 that
    brought it), then bind it again, unchanged, and wait until it is enforced."""
    binding = yaml.safe_load(BINDING_FILE.read_text())
    name = binding["metadata"]["name"]
    server.request("DELETE", f"{BINDINGS}/{name}")
    try:
        server.wait_admission(server.probe_pool(old_shape("probe-old")), "")
        server.create(pool)
    finally:
        server.request("POST", BINDINGS, binding)
        server.wait_admission(server.probe_pool(old_shape("probe-old")),
                              f"ValidatingAdmissionPolicy '{realserver.SELECTOR_POLICY}'")


def test_the_policies_are_enforced_as_the_mco_deploys_them(real, server):
    """The harness's premise: the server refuses a pool of the old shape with the policy's own
    message, and admits the 4.18 shape (`real` resets the server first: a pool `infra` that an
    earlier test left would answer the admitted dry run 409, issue 57)."""
    status, body = server.request("POST", server.path("MachineConfigPool") + "?dryRun=All",
                                  server.probe_pool(old_shape()), ok=(403, 422))
    assert status == 422 and body["reason"] == "Invalid", body
    assert f"ValidatingAdmissionPolicy '{realserver.SELECTOR_POLICY}' with binding " in body["message"]
    assert body["message"].endswith(f"denied request: {policy_message()}"), body
    status, _ = server.request("POST", server.path("MachineConfigPool") + "?dryRun=All",
                               server.probe_pool(F.pool("infra")))
    assert status == 201


def test_a_pool_the_policy_refuses_is_reported_alone_once_and_the_others_go_on(real, server):
    real.seed(F.cluster(F.pool(), extra=[F.machineconfig("rendered-infra-1"), F.node("infra-0", "infra")]))
    create_before_the_policy(server, old_shape())
    metrics = real.tmp / "m.prom"
    mark = server.audit_mark()
    code, err = real.run("--metrics-file", str(metrics))
    assert code == 2, err
    # the other pool goes on normally
    assert real.ann("worker")[A.STATE] == A.PENDING and real.owned("worker")
    # the refused pool: nothing recorded, one line naming it, the policy and its message, and the fix
    assert not any(A.owned(k) for k in real.ann("infra"))
    lines = [line for line in err.splitlines() if "infra" in line and line.startswith("ERROR")]
    assert len(lines) == 1, err
    (line,) = lines
    assert line.startswith("ERROR pool infra: patch ") and realserver.SELECTOR_POLICY in line, line
    assert policy_message() in line, line
    assert f"matchExpressions: [{{key: {F.MCO}/role, operator: In, values: [worker, infra]}}]" in line, line
    # the denied write was sent once: no re-plan, no Blocked recorded on top
    audit = server.audit(mark, realserver.RECONCILER)
    patches = [e["responseStatus"]["code"] for e in audit if e["verb"] == "patch"
               and e["objectRef"]["resource"] == "machineconfigpools" and e["objectRef"]["name"] == "infra"]
    assert patches == [422], patches
    assert 'ocl_errors_total{reason="admission"} 1.0' in metrics.read_text()
    # and the next run says the same, once again
    code, err = real.run()
    assert code == 2 and len([x for x in err.splitlines() if x.startswith("ERROR pool infra")]) == 1, err


def test_preflight_fails_on_a_pool_the_policy_refuses_with_the_fix(real, server):
    real.seed(F.cluster(F.pool(), extra=[F.machineconfig("rendered-infra-1"), F.node("infra-0", "infra")]))
    create_before_the_policy(server, old_shape())
    code, lines = preflight(real, None)
    assert code == 2, lines
    found = [line for line in by_check(lines)["pool-admission"] if line["result"] == "fail"]
    assert len(found) == 1, lines
    (line,) = found
    assert "MachineConfigPool infra" in line["message"] and realserver.SELECTOR_POLICY in line["message"]
    assert "served here" in line["message"], line
    assert "values: [worker, infra]" in line["hint"], line
    assert "worker" not in line["message"].replace("the worker role", ""), line


@pytest.mark.parametrize("builder", sorted(F.BUILD_KINDS))
def test_a_custom_pool_of_the_4_18_shape_goes_through_the_lifecycle(real, builder):
    pools = (F.pool(), F.pool("infra"))
    real.seed(F.cluster(*pools, settings=[F.build_config(imageBuilderType=builder), F.osimageurl(),
                                          F.secret("pull-secret"), F.secret("push-secret")]))
    assert real.pool("infra")["spec"]["machineConfigSelector"] == {"matchExpressions": [
        {"key": f"{F.MCO}/role", "operator": "In", "values": ["worker", "infra"]}]}
    code, err = real.run()
    assert code == 0, err
    assert real.ann("infra")[A.STATE] == A.PENDING
    real.finish("Succeeded", "infra")
    code, err = real.run()
    assert code == 0, err
    a = real.ann("infra")
    assert a[A.STATE] == A.SUCCEEDED and a[A.IMAGE].startswith(F.REPO + "@sha256:"), json.dumps(a)


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_mirror_of_the_selector_policy_agrees_with_the_real_server(server, case):
    """contract/admission.py's reading of the CEL, held to the server's verdict on a dry-run create."""
    pool = server.probe_pool(with_selector(CASES[case][0], "probe-mirror"))
    status, body = server.request("POST", server.path("MachineConfigPool") + "?dryRun=All", pool,
                                  ok=(400, 403, 422))
    denied = status >= 400 and f"ValidatingAdmissionPolicy '{realserver.SELECTOR_POLICY}'" in str(body.get("message"))
    assert status in (201, 422) and admission.admits_selector(pool)[0] is not denied, (status, body)
