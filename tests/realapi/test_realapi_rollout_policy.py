"""The rollout component (kustomize/components/rollout), proven on the real kube-apiserver as the
reconciler's ServiceAccount (its TokenRequest token, no impersonation): the writes of
`rollout: machineconfig` pass; every other MachineConfig write is refused by the
ValidatingAdmissionPolicy, with its message; base alone grants no MachineConfig write (RBAC's 403);
and without the policy's binding the same bad writes pass, so the refusals are the policy's.

The component is installed for this module only (install_rollout / remove_rollout): the
least-privilege proof of tests/realapi/test_realapi_rbac.py runs without it."""

from __future__ import annotations

import time
import urllib.parse
from typing import Any

import pytest

from tests.support import factory as F
from tests.support import realserver

pytestmark = pytest.mark.realapi
MCS = realserver.RealAPI.path("MachineConfig")
ROLE = f"{F.MCO}/role"
MANAGED_BY = "app.kubernetes.io/managed-by"
IMAGE = F.REPO + "@sha256:" + "1" * 64
NEWER = F.REPO + "@sha256:" + "2" * 64
JSON_PATCH = "application/json-patch+json"
DENIED = "ValidatingAdmissionPolicy 'ocl-reconciler-rollout' with binding 'ocl-reconciler-rollout' denied request: "
NAME_RULE = ("ocl-reconciler may write only a MachineConfig named ocl-osimageurl-<pool> labelled "
             "machineconfiguration.openshift.io/role=<pool>: ")
LABEL_RULE = "ocl-reconciler may write only MachineConfigs labelled app.kubernetes.io/managed-by=ocl-reconciler: "
SPEC_RULE = "ocl-reconciler may set nothing but spec.osImageURL in a MachineConfig: "
OLD_RULE = ("only the MachineConfigs it made (named ocl-osimageurl-<pool>, labelled "
            "app.kubernetes.io/managed-by=ocl-reconciler): ")


@pytest.fixture(scope="module")
def installed(server):
    try:
        server.install_rollout()
        yield server
    finally:
        try:
            server.remove_rollout()
        finally:
            server.reset()


@pytest.fixture
def api(installed):
    """A clean cluster with the component installed (a test may have removed part of it), the
    pool `worker` (the owner of our MachineConfig) and the MCO's 00-worker, made by an admin."""
    installed.reset()
    installed.install_rollout()
    installed.create(F.pool("worker"))
    installed.create(admins("00-worker"))
    return installed


def admins(name: str, **labels: str) -> dict[str, Any]:
    mc = F.machineconfig(name, files=1)
    mc["metadata"]["labels"] = {ROLE: "worker", **labels}
    return mc


def ours(server, pool: str = "worker", name: str | None = None, **spec: Any) -> dict[str, Any]:
    """What `rollout: machineconfig` writes for `pool`, or a variant of it."""
    owner = server.get("MachineConfigPool", "", "worker")
    return {"apiVersion": f"{F.MCO}/v1", "kind": "MachineConfig",
            "metadata": {"name": name or f"ocl-osimageurl-{pool}",
                         "labels": {ROLE: pool, MANAGED_BY: "ocl-reconciler", "ocl-reconciler.io/pool": pool},
                         "annotations": {"ocl-reconciler.io/built-config": f"rendered-{pool}-1"},
                         "ownerReferences": [{"apiVersion": f"{F.MCO}/v1", "kind": "MachineConfigPool",
                                              "name": owner["metadata"]["name"],
                                              "uid": owner["metadata"]["uid"], "controller": True,
                                              "blockOwnerDeletion": False}]},
            "spec": {"osImageURL": IMAGE, **spec}}


def as_sa(server, method: str, path: str, body: Any = None, content_type: str = "application/json"):
    """One request with the ServiceAccount's own token; (status, body) whatever the status."""
    return server.request(method, path, body, content_type, token=server.sa_token,
                          ok=(403, 404, 409, 422))


def forbidden(name: str, message: str) -> str:
    return f'machineconfigs.{F.MCO} "{name}" is forbidden: {DENIED}{message}'


def bad_creates(server) -> dict[str, tuple[dict[str, Any], str]]:
    """Creates the policy refuses: object, the policy's message."""
    ignition = {"ignition": {"version": "3.4.0"}, "storage": {"files": [
        {"path": "/etc/ssh/sshd_config.d/99-open.conf", "mode": 420,
         "contents": {"source": "data:,PermitRootLogin%20yes"}}]}}
    unlabelled = ours(server)
    del unlabelled["metadata"]["labels"][MANAGED_BY]
    no_role = ours(server)
    del no_role["metadata"]["labels"][ROLE]
    no_image = ours(server)
    no_image["spec"] = {}
    return {
        "ignition-file": (ours(server, config=ignition), SPEC_RULE + "ocl-osimageurl-worker sets spec.config"),
        "kernel-arguments": (ours(server, kernelArguments=["nosmt"], kernelType="realtime"),
                             SPEC_RULE + "ocl-osimageurl-worker sets spec.kernelArguments, spec.kernelType"),
        "another-name": (ours(server, name="99-worker-ssh"), NAME_RULE + "99-worker-ssh has role worker"),
        "another-pools-name": (ours(server, name="ocl-osimageurl-infra"),
                               NAME_RULE + "ocl-osimageurl-infra has role worker"),
        "no-role": (no_role, NAME_RULE + "ocl-osimageurl-worker has no role label"),
        "no-image": (no_image, SPEC_RULE + "ocl-osimageurl-worker has no spec.osImageURL"),
        "without-our-label": (unlabelled, LABEL_RULE + "ocl-osimageurl-worker is not"),
        "a-tag": (ours(server, osImageURL=F.REPO + ":latest"),
                  "ocl-reconciler may set spec.osImageURL only to an image by digest (<repo>@sha256:<64 hex>): "
                  f"ocl-osimageurl-worker sets {F.REPO}:latest"),
    }


def add_our_label() -> list[dict[str, Any]]:
    return [{"op": "add", "path": "/metadata/labels/app.kubernetes.io~1managed-by", "value": "ocl-reconciler"}]


def selector() -> str:
    return "?labelSelector=" + urllib.parse.quote(f"{MANAGED_BY}=ocl-reconciler")


def test_the_reconcilers_writes_pass(api):
    mark = api.audit_mark()
    status, page = as_sa(api, "GET", MCS + selector())
    assert status == 200 and page["items"] == []

    status, made = as_sa(api, "POST", MCS, ours(api))
    assert status == 201, made
    assert made["spec"] == {"osImageURL": IMAGE}
    assert made["metadata"]["ownerReferences"][0]["kind"] == "MachineConfigPool"
    status, page = as_sa(api, "GET", MCS + selector())
    assert [o["metadata"]["name"] for o in page["items"]] == ["ocl-osimageurl-worker"]     # not 00-worker

    rv = made["metadata"]["resourceVersion"]
    patch = [{"op": "test", "path": "/metadata/resourceVersion", "value": rv},
             {"op": "replace", "path": "/spec/osImageURL", "value": NEWER},
             {"op": "replace", "path": "/metadata/annotations/ocl-reconciler.io~1built-config",
              "value": "rendered-worker-2"}]
    status, patched = as_sa(api, "PATCH", MCS + "/ocl-osimageurl-worker", patch, JSON_PATCH)
    assert status == 200, patched
    assert patched["spec"] == {"osImageURL": NEWER}
    assert patched["metadata"]["annotations"]["ocl-reconciler.io/built-config"] == "rendered-worker-2"
    # the same patch again: its resourceVersion test fails (a foreign write in between), not the policy
    status, stale = as_sa(api, "PATCH", MCS + "/ocl-osimageurl-worker", patch, JSON_PATCH)
    assert status == 422 and "ValidatingAdmissionPolicy" not in stale["message"], stale

    wrong_uid = {"apiVersion": "v1", "kind": "DeleteOptions", "propagationPolicy": "Background",
                 "preconditions": {"uid": "00000000-0000-0000-0000-000000000000"}}
    status, conflict = as_sa(api, "DELETE", MCS + "/ocl-osimageurl-worker", wrong_uid)
    assert status == 409 and "the UID in the precondition" in conflict["message"], conflict
    status, gone = as_sa(api, "DELETE", MCS + "/ocl-osimageurl-worker",
                         dict(wrong_uid, preconditions={"uid": made["metadata"]["uid"]}))
    assert status == 200, gone
    assert api.get("MachineConfig", "", "ocl-osimageurl-worker") is None

    # made by the ServiceAccount itself, authenticated by its token (not an impersonating admin)
    writes = [e for e in api.audit(mark) if e["objectRef"].get("resource") == "machineconfigs"
              and e["verb"] != "get"]           # the admin's get above is the only other request
    assert sorted((e["verb"], e["responseStatus"]["code"]) for e in writes) == [
        ("create", 201), ("delete", 200), ("delete", 409), ("list", 200), ("list", 200), ("patch", 200),
        ("patch", 422)]
    assert {e["user"]["username"] for e in writes} == {realserver.RECONCILER}
    assert not any("impersonatedUser" in e for e in writes)


@pytest.mark.parametrize("case", ["ignition-file", "kernel-arguments", "another-name", "another-pools-name",
                                  "no-role", "no-image", "without-our-label", "a-tag"])
def test_the_policy_refuses_any_other_create(api, case):
    obj, message = bad_creates(api)[case]
    status, body = as_sa(api, "POST", MCS, obj)
    assert (status, body["reason"], body["message"]) == (403, "Forbidden", forbidden(obj["metadata"]["name"], message))
    assert api.get("MachineConfig", "", obj["metadata"]["name"]) is None


def test_the_policy_refuses_changing_or_deleting_what_is_not_ours(api):
    # the MCO's 00-worker: no adding our label to take it over, no deleting it
    status, body = as_sa(api, "PATCH", MCS + "/00-worker", add_our_label(), JSON_PATCH)
    assert (status, body["message"]) == (403, forbidden("00-worker", "ocl-reconciler may change " + OLD_RULE +
                                                        "00-worker is not one")), body
    status, body = as_sa(api, "DELETE", MCS + "/00-worker", {"propagationPolicy": "Background"})
    assert (status, body["message"]) == (403, forbidden("00-worker", "ocl-reconciler may delete " + OLD_RULE +
                                                        "00-worker is not one")), body
    # an administrator's object with our name: the result would pass every other rule, but the
    # object was not ours before the write
    theirs = ours(api)
    del theirs["metadata"]["labels"][MANAGED_BY]
    api.create(theirs)
    status, body = as_sa(api, "PATCH", MCS + "/ocl-osimageurl-worker", add_our_label(), JSON_PATCH)
    assert (status, body["message"]) == (403, forbidden("ocl-osimageurl-worker", "ocl-reconciler may change " +
                                                        OLD_RULE + "ocl-osimageurl-worker is not one")), body
    status, body = as_sa(api, "DELETE", MCS + "/ocl-osimageurl-worker")
    assert status == 403 and body["message"].endswith("ocl-osimageurl-worker is not one"), body
    assert api.get("MachineConfig", "", "00-worker")["metadata"]["labels"] == {ROLE: "worker"}
    assert api.get("MachineConfig", "", "ocl-osimageurl-worker") is not None


def test_the_policy_refuses_patching_ours_into_something_else(api):
    """Updates are checked like creates (a JSON patch on the CRD: the patched object is what the
    policy sees)."""
    made = as_sa(api, "POST", MCS, ours(api))[1]
    cases = {
        "kernel-arguments": ([{"op": "add", "path": "/spec/kernelArguments", "value": ["nosmt"]}],
                             SPEC_RULE + "ocl-osimageurl-worker sets spec.kernelArguments"),
        "ignition-unit": ([{"op": "add", "path": "/spec/config", "value": {
            "ignition": {"version": "3.4.0"}, "systemd": {"units": [{"name": "x.service", "enabled": True}]}}}],
            SPEC_RULE + "ocl-osimageurl-worker sets spec.config"),
        "another-role": ([{"op": "replace", "path": "/metadata/labels/machineconfiguration.openshift.io~1role",
                           "value": "master"}], NAME_RULE + "ocl-osimageurl-worker has role master"),
        "drop-our-label": ([{"op": "remove", "path": "/metadata/labels/app.kubernetes.io~1managed-by"}],
                           LABEL_RULE + "ocl-osimageurl-worker is not"),
    }
    for case, (patch, message) in cases.items():
        status, body = as_sa(api, "PATCH", MCS + "/ocl-osimageurl-worker", patch, JSON_PATCH)
        assert (status, body["message"]) == (403, forbidden("ocl-osimageurl-worker", message)), case
    now = api.get("MachineConfig", "", "ocl-osimageurl-worker")
    assert now["metadata"]["resourceVersion"] == made["metadata"]["resourceVersion"]
    assert now["spec"] == {"osImageURL": IMAGE}


def test_base_alone_grants_no_machineconfig_write(api):
    """Without the component (only kustomize/base), RBAC refuses every write: 403 before admission."""
    api.remove_rollout()
    try:
        for obj in api.rollout_objects():
            assert api.request("GET", realserver.object_path(obj), ok=(404,))[0] == 404
        attempts = {"create": ("POST", MCS, ours(api), "application/json"),
                    "list": ("GET", MCS + selector(), None, "application/json"),
                    "patch": ("PATCH", MCS + "/00-worker", [{"op": "replace", "path": "/spec/osImageURL",
                                                            "value": IMAGE}], JSON_PATCH),
                    "delete": ("DELETE", MCS + "/00-worker", None, "application/json")}
        for verb, (method, path, body, content_type) in attempts.items():
            status, answer = as_sa(api, method, path, body, content_type)
            assert status == 403 and answer["reason"] == "Forbidden", (verb, answer)
            assert f'cannot {verb} resource "machineconfigs"' in answer["message"], (verb, answer)
            assert "ValidatingAdmissionPolicy" not in answer["message"]
        assert as_sa(api, "GET", MCS + "/00-worker")[0] == 200        # base's `get` stays
    finally:
        api.install_rollout()


def test_without_the_policy_binding_the_same_writes_pass(api):
    """The refusals above are the policy's: with RBAC alone, every one of those writes succeeds."""
    binding = f"{realserver.ROLLOUT_PATHS['ValidatingAdmissionPolicyBinding']}/{realserver.ROLLOUT_POLICY}"
    api.request("DELETE", binding)
    try:
        api.wait_rollout("unbound", lambda status, message: status == 201)
        for case, (obj, _) in bad_creates(api).items():
            status, body = as_sa(api, "POST", MCS, obj)
            assert status == 201, (case, body)
            api.request("DELETE", MCS + "/" + obj["metadata"]["name"])
        status, body = as_sa(api, "PATCH", MCS + "/00-worker", add_our_label(), JSON_PATCH)
        assert status == 200 and body["metadata"]["labels"][MANAGED_BY] == "ocl-reconciler", body
        status, body = as_sa(api, "DELETE", MCS + "/00-worker")
        assert status == 200, body
    finally:
        api.install_rollout()
    # and bound again, refused again
    obj, message = bad_creates(api)["kernel-arguments"]
    status, body = as_sa(api, "POST", MCS, obj)
    assert (status, body["message"]) == (403, forbidden(obj["metadata"]["name"], message))


def test_reset_clears_machineconfigs_and_keeps_the_installed_component(api):
    assert as_sa(api, "POST", MCS, ours(api))[0] == 201
    api.reset()
    assert api.list("MachineConfig") == []
    for obj in api.rollout_objects():
        live = api.request("GET", realserver.object_path(obj))[1]
        assert live["metadata"]["labels"] == obj["metadata"]["labels"]



# the parameter (kustomize/components/rollout/params.yaml): our repository and pools (issue 31 item 1)
PARAMS = "ConfigMap openshift-config/ocl-reconciler-rollout"
POOL_RULE = f"ocl-reconciler may write only a MachineConfig for a pool listed in data.pools of {PARAMS} "
REPO_RULE = ("ocl-reconciler may set spec.osImageURL only to an image of the repository in data.repository of "
             f"{PARAMS} ")
LABELS_RULE = ("ocl-reconciler may label a MachineConfig only machineconfiguration.openshift.io/role=<pool>, "
               "app.kubernetes.io/managed-by=ocl-reconciler and ocl-reconciler.io/pool=<pool>: ")
GENERATED_BY = f"{F.MCO}/generated-by-controller-version"


def pinned_creates(server) -> dict[str, tuple[dict[str, Any], str]]:
    """Writes of the right shape the parameter refuses (worker and infra listed, F.REPO)."""
    listed = f"({', '.join(realserver.ROLLOUT_POOLS)}): "
    evil = "evil.example.com/pwn/os@sha256:" + "6" * 64
    extra_label = ours(server)
    extra_label["metadata"]["labels"][f"{F.MCO}/mco-built-in"] = ""
    wrong_pool_label = ours(server)
    wrong_pool_label["metadata"]["labels"]["ocl-reconciler.io/pool"] = "infra"
    no_pool_label = ours(server)
    del no_pool_label["metadata"]["labels"]["ocl-reconciler.io/pool"]
    finalizer = ours(server)
    finalizer["metadata"]["finalizers"] = ["example.com/keep"]
    foreign_owner = ours(server)
    foreign_owner["metadata"]["ownerReferences"].append(
        {"apiVersion": "v1", "kind": "ConfigMap", "name": "x", "uid": "00000000-0000-0000-0000-000000000001"})
    other_pool_owner = ours(server, "infra")
    generated = ours(server)
    generated["metadata"]["annotations"][GENERATED_BY] = "4.19.0"
    return {
        "master-not-listed": (ours(server, "master"), POOL_RULE + listed + "ocl-osimageurl-master is for pool master"),
        "pool-not-listed": (ours(server, "nosuchpool"),
                            POOL_RULE + listed + "ocl-osimageurl-nosuchpool is for pool nosuchpool"),
        "another-repository": (ours(server, "worker", osImageURL=evil),
                               REPO_RULE + f"({F.REPO}): ocl-osimageurl-worker sets {evil}"),
        "a-longer-repository": (ours(server, "worker", osImageURL=F.REPO + "-x@sha256:" + "6" * 64),
                                REPO_RULE + f"({F.REPO}): ocl-osimageurl-worker sets {F.REPO}-x@sha256:" + "6" * 64),
        "another-label": (extra_label, LABELS_RULE + f"ocl-osimageurl-worker sets {F.MCO}/mco-built-in"),
        "wrong-pool-label": (wrong_pool_label, LABELS_RULE + "ocl-osimageurl-worker has ocl-reconciler.io/pool=infra"),
        "no-pool-label": (no_pool_label, LABELS_RULE + "ocl-osimageurl-worker has no ocl-reconciler.io/pool label"),
        "a-finalizer": (finalizer, "ocl-reconciler may set no finalizers on a MachineConfig: ocl-osimageurl-worker "
                                   "sets example.com/keep"),
        "a-foreign-owner": (foreign_owner, "ocl-reconciler may make a MachineConfig owned only by its "
                                           "MachineConfigPool worker: ocl-osimageurl-worker names ConfigMap x"),
        "another-pools-owner": (other_pool_owner, "ocl-reconciler may make a MachineConfig owned only by its "
                                                  "MachineConfigPool infra: ocl-osimageurl-infra names "
                                                  "MachineConfigPool worker"),
        "generated-by": (generated, f"ocl-reconciler may not set the annotation {GENERATED_BY}: "
                                    "ocl-osimageurl-worker sets it"),
    }


@pytest.mark.parametrize("case", ["master-not-listed", "pool-not-listed", "another-repository",
                                  "a-longer-repository", "another-label", "wrong-pool-label", "no-pool-label",
                                  "a-finalizer", "a-foreign-owner", "another-pools-owner", "generated-by"])
def test_the_parameter_pins_our_repository_and_pools(api, case):
    obj, message = pinned_creates(api)[case]
    status, body = as_sa(api, "POST", MCS, obj)
    assert (status, body["reason"], body["message"]) == (403, "Forbidden", forbidden(obj["metadata"]["name"], message))
    assert api.get("MachineConfig", "", obj["metadata"]["name"]) is None
    # server-side apply is checked the same
    status, body = as_sa(api, "PATCH", MCS + "/" + obj["metadata"]["name"] + "?fieldManager=ocl-reconciler",
                         obj, "application/apply-patch+yaml")
    assert (status, body["message"]) == (403, forbidden(obj["metadata"]["name"], message)), body
    # the administrator is not matched: the same object is theirs to make
    assert api.request("POST", MCS + "?dryRun=All", obj)[0] == 201


def test_patching_ours_to_another_repository_or_a_generated_by_annotation_is_refused(api):
    made = as_sa(api, "POST", MCS, ours(api))[1]
    evil = "evil.example.com/pwn/os@sha256:" + "6" * 64
    cases = {
        "another-repository": ([{"op": "replace", "path": "/spec/osImageURL", "value": evil}],
                               REPO_RULE + f"({F.REPO}): ocl-osimageurl-worker sets {evil}"),
        "generated-by": ([{"op": "add", "path": "/metadata/annotations/" + GENERATED_BY.replace("/", "~1"),
                           "value": "4.19.0"}],
                         f"ocl-reconciler may not set the annotation {GENERATED_BY}: ocl-osimageurl-worker sets it"),
        "a-finalizer": ([{"op": "add", "path": "/metadata/finalizers", "value": ["example.com/keep"]}],
                        "ocl-reconciler may set no finalizers on a MachineConfig: ocl-osimageurl-worker sets "
                        "example.com/keep"),
    }
    for case, (patch, message) in cases.items():
        status, body = as_sa(api, "PATCH", MCS + "/ocl-osimageurl-worker", patch, JSON_PATCH)
        assert (status, body["message"]) == (403, forbidden("ocl-osimageurl-worker", message)), case
    assert api.get("MachineConfig", "", "ocl-osimageurl-worker")["metadata"]["resourceVersion"] == \
        made["metadata"]["resourceVersion"]


def test_master_only_when_an_administrator_lists_it(api):
    api.create(F.pool("master"))
    mc = ours(api, "master")
    mc["metadata"]["ownerReferences"][0]["name"] = "master"
    mc["metadata"]["ownerReferences"][0]["uid"] = api.get("MachineConfigPool", "", "master")["metadata"]["uid"]
    assert as_sa(api, "POST", MCS + "?dryRun=All", mc)[0] == 403
    try:
        api.write_rollout_params(F.REPO, ["master", "worker"])
        status, body = as_sa(api, "POST", MCS, mc)
        assert status == 201, body
        # and the pool no longer listed: no more writes, but its own object may still be deleted
        api.write_rollout_params(F.REPO, ["worker"])
        status, body = as_sa(api, "PATCH", MCS + "/ocl-osimageurl-master",
                             [{"op": "replace", "path": "/spec/osImageURL", "value": NEWER}], JSON_PATCH)
        assert status == 403 and POOL_RULE + "(worker): " in body["message"], body
        assert as_sa(api, "DELETE", MCS + "/ocl-osimageurl-master")[0] == 200
    finally:
        api.write_rollout_params(F.REPO, realserver.ROLLOUT_POOLS)


def test_without_the_parameter_every_write_is_denied(api):
    """parameterNotFoundAction: Deny (the server answers 422, the binding named)."""
    api.request("DELETE", realserver.object_path(realserver.rollout_params()))
    try:
        deadline = time.monotonic() + 20
        while True:
            status, body = as_sa(api, "POST", MCS + "?dryRun=All", ours(api))
            if status != 201 or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        assert (status, body["message"]) == (422, forbidden("ocl-osimageurl-worker", "failed to configure binding: "
                                             "no params found for policy binding with `Deny` "
                                             "parameterNotFoundAction")), body
    finally:
        api.write_rollout_params(F.REPO, realserver.ROLLOUT_POOLS)
    assert as_sa(api, "POST", MCS + "?dryRun=All", ours(api))[0] == 201
