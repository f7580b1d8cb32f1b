"""The pool policy (kustomize/components/pool-policy, in overlays/openshift), proven on the real
kube-apiserver as the reconciler's ServiceAccount (its TokenRequest token, no impersonation): the
reconciler's pool writes pass (its own annotation patches, spec.paused, whole runs); every other
change of a pool is refused by the ValidatingAdmissionPolicy, with its message; the same changes by
the admin pass (the policy binds only us); without the policy's binding they pass for the
ServiceAccount too, so the refusals are the policy's; and the MCO's two pool policies, installed for
the whole suite, keep working beside it.

The policy is installed for this module only (install_pool_policy / remove_pool_policy): the other
realapi modules run kustomize/base alone."""

from __future__ import annotations

import copy
import time
from typing import Any

import pytest

from reconcile.contract import annotations as A
from reconcile.core import patches
from reconcile.core.rollout import hold
from tests.support import factory as F
from tests.support import realserver

pytestmark = pytest.mark.realapi
POOLS = realserver.RealAPI.path("MachineConfigPool")
JSON_PATCH = "application/json-patch+json"
POLICY = realserver.POOL_POLICY
DENIED = f"ValidatingAdmissionPolicy '{POLICY}' with binding '{POLICY}' denied request: "
SPEC_RULE = "ocl-reconciler may change no field of a MachineConfigPool's spec but spec.paused: "
LABEL_RULE = "ocl-reconciler may not change the metadata.labels of a MachineConfigPool: "
ANNOTATION_RULE = ("ocl-reconciler may change only ocl-reconciler.io/* and newestImageEquivalentConfig in the "
                   "metadata.annotations of a MachineConfigPool: ")
IMAGE_RULE = (f"ocl-reconciler may set the annotation {A.IMAGE} of a MachineConfigPool only to an image by digest "
              "(<repo>@sha256:<64 hex>): ")
IMAGE = F.REPO + "@sha256:" + "1" * 64
OWNER_RULE = "ocl-reconciler may not change the metadata.ownerReferences of a MachineConfigPool: "
FINALIZER_RULE = "ocl-reconciler may not change the metadata.finalizers of a MachineConfigPool: "
PAUSE_RULE = ("ocl-reconciler may pause or unpause only a MachineConfigPool labelled "
              f"{A.LAYERING_LABEL}, or release one it holds ({A.GATE}=held): ")
GATE_RULE = f"ocl-reconciler may set {A.GATE}=held only on a MachineConfigPool labelled {A.LAYERING_LABEL}: "
BUILT_IN = f"{F.MCO}/mco-built-in"
#: an owner the garbage collector would delete the pool with
OWNER = {"apiVersion": "v1", "kind": "ConfigMap", "name": "anything", "uid": "00000000-0000-0000-0000-000000000001"}


@pytest.fixture(scope="module")
def installed(server):
    try:
        server.install_pool_policy()
        yield server
    finally:
        try:
            server.remove_pool_policy()
        finally:
            server.reset()


@pytest.fixture
def api(installed):
    """A clean cluster with the policy installed (a test may have unbound it), the OS streams rhel-9
    and rhel-10 listed (so that the MCO's stream policy admits either), and the pool `worker` as
    F.pool makes it (another owner's annotation example.com/keep, the opt-in label), made by an admin."""
    installed.reset()
    installed.install_pool_policy()
    installed.write_streams(F.osimagestream("rhel-9", "rhel-10"))
    installed.create(F.pool("worker"))
    yield installed
    drop_pool(installed)           # a case may have left a finalizer, which would keep reset() from deleting it


def as_sa(server, method: str, path: str, body: Any = None, content_type: str = JSON_PATCH):
    """One request with the ServiceAccount's own token; (status, body) whatever the status."""
    return server.request(method, path, body, content_type, token=server.sa_token, ok=(403, 404, 409, 422))


def forbidden(name: str, message: str) -> str:
    return f'machineconfigpools.{F.MCO} "{name}" is forbidden: {DENIED}{message}'


def ann(key: str) -> str:
    return patches.pointer("metadata", "annotations", key)


def label(key: str) -> str:
    return patches.pointer("metadata", "labels", key)


#: changes of `worker` that are not the reconciler's: JSON patch, the policy's message. Each is one
#: the MCO's own policies admit (the selector still selects worker, rhel-10 is listed), so that only
#: ours can refuse it, and each is a row of issue 31's table or of the brief (issue 30 item 4).
BAD = {
    "machineConfigSelector": (
        [{"op": "replace", "path": "/spec/machineConfigSelector", "value": {"matchExpressions": [
            {"key": f"{F.MCO}/role", "operator": "In", "values": ["worker", "master"]}]}}],
        SPEC_RULE + "worker changes spec.machineConfigSelector"),
    "nodeSelector": (
        [{"op": "replace", "path": "/spec/nodeSelector",
          "value": {"matchLabels": {"node-role.kubernetes.io/master": ""}}}],
        SPEC_RULE + "worker changes spec.nodeSelector"),
    "nodeSelector-removed": ([{"op": "remove", "path": "/spec/nodeSelector"}],
                             SPEC_RULE + "worker changes spec.nodeSelector"),
    "maxUnavailable": ([{"op": "add", "path": "/spec/maxUnavailable", "value": "100%"}],
                       SPEC_RULE + "worker changes spec.maxUnavailable"),
    "osImageStream": ([{"op": "add", "path": "/spec/osImageStream", "value": {"name": "rhel-10"}}],
                      SPEC_RULE + "worker changes spec.osImageStream"),
    "paused-and-maxUnavailable": (
        [{"op": "add", "path": "/spec/paused", "value": True},
         {"op": "add", "path": "/spec/maxUnavailable", "value": 3}],
        SPEC_RULE + "worker changes spec.maxUnavailable"),
    "label-added": ([{"op": "add", "path": label("node-role.kubernetes.io/infra"), "value": ""}],
                    LABEL_RULE + "worker adds node-role.kubernetes.io/infra"),
    "label-changed": ([{"op": "replace", "path": label(BUILT_IN), "value": "no"}],
                      LABEL_RULE + f"worker changes {BUILT_IN}"),
    "label-removed": ([{"op": "remove", "path": label(A.LAYERING_LABEL)}],
                      LABEL_RULE + f"worker removes {A.LAYERING_LABEL}"),
    "our-prefix-as-a-label": ([{"op": "add", "path": label("ocl-reconciler.io/state"), "value": "x"}],
                              LABEL_RULE + "worker adds ocl-reconciler.io/state"),
    "annotation-added": ([{"op": "add", "path": ann("example.com/other"), "value": "x"}],
                         ANNOTATION_RULE + "worker adds example.com/other"),
    "annotation-changed": ([{"op": "replace", "path": ann("example.com/keep"), "value": "ours now"}],
                           ANNOTATION_RULE + "worker changes example.com/keep"),
    "annotation-removed": ([{"op": "remove", "path": ann("example.com/keep")}],
                           ANNOTATION_RULE + "worker removes example.com/keep"),
    # the whole map replaced by ours: what the guarded add would do on a pool that has annotations
    "annotations-replaced": ([{"op": "add", "path": "/metadata/annotations", "value": {A.STATE: A.PENDING}}],
                             ANNOTATION_RULE + "worker removes example.com/keep"),
    "a-prefix-lookalike": ([{"op": "add", "path": ann("ocl-reconciler.io.evil.com/x"), "value": "x"}],
                           ANNOTATION_RULE + "worker adds ocl-reconciler.io.evil.com/x"),
    "image-by-tag": ([{"op": "add", "path": ann(A.IMAGE), "value": F.REPO + ":latest"}],
                     IMAGE_RULE + f"worker sets {F.REPO}:latest"),
    # a digest that is not sha256's 64 lower-case hex digits (issue 42 item 4): too short, too long,
    # upper case, another algorithm, two of them
    **{f"image-digest-{why}": ([{"op": "add", "path": ann(A.IMAGE), "value": F.REPO + digest}],
                               IMAGE_RULE + f"worker sets {F.REPO}{digest}")
       for why, digest in (("short", "@sha256:abc"), ("long", "@sha256:" + "1" * 65),
                           ("upper-case", "@sha256:" + "A" * 64), ("sha512", "@sha512:" + "1" * 128),
                           ("twice", "@sha256:" + "1" * 64 + "@sha256:" + "1" * 64))},
    "finalizers": ([{"op": "add", "path": "/metadata/finalizers", "value": ["example.com/hold"]}],
                   FINALIZER_RULE + "worker"),
}


def drop_pool(api, name: str = "worker") -> None:
    """Delete the pool as the admin, its finalizers first, and wait until it is gone."""
    if api.get("MachineConfigPool", "", name) is None:
        return
    api.request("PATCH", f"{POOLS}/{name}", {"metadata": {"finalizers": None}}, "application/merge-patch+json")
    api.request("DELETE", f"{POOLS}/{name}", ok=(404,))
    deadline = time.monotonic() + 10
    while api.get("MachineConfigPool", "", name) is not None:
        assert time.monotonic() < deadline, f"pool {name} is not deleted"
        time.sleep(0.05)


def fresh_pool(api) -> dict[str, Any]:
    """`worker` made again by the admin, as the api fixture makes it."""
    drop_pool(api)
    return api.create(F.pool("worker"))


def test_the_reconcilers_writes_pass(api):
    """Our annotation patches as reconcile/core/patches.py makes them (add, change, remove; the
    guarded `add /metadata/annotations` on a pool with none), and spec.paused true and false."""
    mark = api.audit_mark()
    live = api.get("MachineConfigPool", "", "worker")
    for change in ({A.STATE: A.PENDING, A.MESSAGE: "building"},      # added
                   {A.STATE: A.BUILDING},                           # changed
                   {A.MESSAGE: None, A.IMAGE: IMAGE},               # removed; the image recorded
                   {A.IMAGE: None}):                                # and removed (opt-out)
        status, body = as_sa(api, "PATCH", POOLS + "/worker", patches.annotation_ops(live, change))
        assert status == 200, (change, body)
        live = body
    assert live["metadata"]["annotations"] == {"example.com/keep": "theirs", A.STATE: A.BUILDING}

    for paused in (True, False, True):
        status, body = as_sa(api, "PATCH", POOLS + "/worker", [{"op": "add", "path": "/spec/paused", "value": paused}])
        assert status == 200 and body["spec"]["paused"] is paused, body
    status, body = as_sa(api, "PATCH", POOLS + "/worker", [{"op": "remove", "path": "/spec/paused"}])
    assert status == 200 and "paused" not in body["spec"], body
    # our annotations and the pause together, in one merge patch
    status, body = as_sa(api, "PATCH", POOLS + "/worker", {"metadata": {"annotations": {A.STATE: A.SUCCEEDED}},
                                                           "spec": {"paused": True}},
                         "application/merge-patch+json")
    assert status == 200 and body["metadata"]["annotations"][A.STATE] == A.SUCCEEDED, body

    # a pool without annotations: the whole map is added, guarded by a resourceVersion test
    bare = F.pool("worker")
    del bare["metadata"]["annotations"]
    drop_pool(api)
    live = api.create(bare)
    assert "annotations" not in live["metadata"]
    ops = patches.annotation_ops(live, {A.STATE: A.PENDING})
    assert [op["op"] for op in ops] == ["test", "add"] and ops[1]["path"] == "/metadata/annotations"
    status, body = as_sa(api, "PATCH", POOLS + "/worker", ops)
    assert status == 200 and body["metadata"]["annotations"] == {A.STATE: A.PENDING}, body
    # and every one of ours removed again: back to no annotations at all
    status, body = as_sa(api, "PATCH", POOLS + "/worker", patches.annotation_ops(body, {A.STATE: None}))
    assert status == 200 and not body["metadata"].get("annotations"), body

    writes = [e for e in api.audit(mark, realserver.RECONCILER) if e["verb"] == "patch"]
    assert [e["responseStatus"]["code"] for e in writes] == [200] * 11
    assert not any("impersonatedUser" in e for e in writes)


@pytest.mark.parametrize("builder", sorted(F.BUILD_KINDS))
def test_a_reconcile_run_passes_the_policy(api, real, builder):
    """Whole runs as the ServiceAccount: a build to success, then the opt-out that removes our
    annotations; every pool patch admitted."""
    real.seed(F.cluster(settings=[F.build_config(imageBuilderType=builder), F.osimageurl(),
                                  F.secret("pull-secret"), F.secret("push-secret")]))
    mark = api.audit_mark()
    code, err = real.run()
    assert code == 0, err
    assert real.ann()[A.STATE] == A.PENDING
    real.finish("Succeeded")
    code, err = real.run()
    assert code == 0, err
    assert real.ann()[A.STATE] == A.SUCCEEDED and real.ann()["example.com/keep"] == "theirs"
    api.request("PATCH", POOLS + "/worker", [{"op": "remove", "path": label(A.LAYERING_LABEL)}], JSON_PATCH)
    code, err = real.run()
    assert code == 0, err
    assert real.ann() == {"example.com/keep": "theirs"}
    pool_writes = [e for e in api.audit(mark, realserver.RECONCILER) if e["verb"] == "patch"
                   and e["objectRef"].get("resource") == "machineconfigpools"]
    assert len(pool_writes) >= 3 and {e["responseStatus"]["code"] for e in pool_writes} == {200}
    assert "ValidatingAdmissionPolicy" not in "".join(real.stderr)


@pytest.mark.parametrize("case", sorted(BAD))
def test_the_policy_refuses_any_other_change(api, case):
    patch, message = BAD[case]
    before = api.get("MachineConfigPool", "", "worker")
    status, body = as_sa(api, "PATCH", POOLS + "/worker", patch)
    assert (status, body["reason"], body["message"]) == (403, "Forbidden", forbidden("worker", message))
    assert api.get("MachineConfigPool", "", "worker")["metadata"]["resourceVersion"] == \
        before["metadata"]["resourceVersion"]


def test_the_pause_is_ours_only_on_a_pool_we_build(api):
    """spec.paused changes only on a pool labelled ocl-reconciler.io/layering-enabled, or to release
    one the gate held that was opted out since: the gate's own releases (core/rollout/hold.py) pass. Not an
    administrator's pause of a pool we do not build, nor after writing our hold record on it first
    (issue 31 row 2: rows 2a, 2b and 2h of tests/realapi/test_realapi_attacks.py try master)."""
    for move in (hold.Move.RELEASE, hold.Move.RELEASE_TIMEOUT):
        drop_pool(api, "infra")
        held = F.pool("infra", opted_in=False, annotations={A.GATE: hold.HELD, A.GATE_SINCE: "2026-11-29T10:00:00Z"})
        held["spec"]["paused"] = True
        live = api.create(held)
        ops = hold.ops_on(live, hold.Gate(move, "released"), "2026-11-29T12:00:00Z")
        status, body = as_sa(api, "PATCH", POOLS + "/infra", ops)
        assert status == 200 and body["spec"]["paused"] is False, (move, body)
    assert body["metadata"]["annotations"][A.GATE] == hold.RELEASED
    for patch, message in (
            ([{"op": "add", "path": "/spec/paused", "value": True}], PAUSE_RULE + "infra sets spec.paused to true"),
            ([{"op": "add", "path": ann(A.GATE), "value": hold.HELD}], GATE_RULE + "infra")):
        status, body = as_sa(api, "PATCH", POOLS + "/infra", patch)
        assert (status, body.get("message")) == (403, forbidden("infra", message)), body
    api.request("PATCH", POOLS + "/infra", {"spec": {"paused": True}}, "application/merge-patch+json")
    status, body = as_sa(api, "PATCH", POOLS + "/infra", [{"op": "replace", "path": "/spec/paused", "value": False}])
    assert (status, body.get("message")) == (403, forbidden("infra", PAUSE_RULE + "infra sets spec.paused to false"))
    # the administrator may; so may we once the pool is opted in
    assert api.request("PATCH", POOLS + "/infra?dryRun=All", [{"op": "replace", "path": "/spec/paused", "value": False}],
                       JSON_PATCH)[0] == 200
    api.request("PATCH", POOLS + "/infra", [{"op": "add", "path": label(A.LAYERING_LABEL), "value": ""}], JSON_PATCH)
    status, body = as_sa(api, "PATCH", POOLS + "/infra", [{"op": "replace", "path": "/spec/paused", "value": False},
                                                          {"op": "add", "path": ann(A.GATE), "value": hold.HELD}])
    assert status == 200, body
    drop_pool(api, "infra")


def test_a_pool_we_no_longer_build_is_not_paused_again_by_its_old_hold_record(api):
    """Issue 42 item 3: a pool the gate held, then opted out and unpaused by an administrator
    before our next run, still carries ocl-reconciler.io/gate=held. That record lets us release it
    (test_the_pause_is_ours_only_on_a_pool_we_build), never pause it: the pause is refused, with the
    record's own patch (hold.ops_on's HOLD) and as a bare spec.paused, and the pool stays unpaused."""
    drop_pool(api, "infra")
    held = F.pool("infra", opted_in=False, annotations={A.GATE: hold.HELD, A.GATE_CONFIG: "rendered-infra-1",
                                                        A.GATE_SINCE: "2026-11-29T10:00:00Z"})
    held["spec"]["paused"] = False                      # the administrator unpaused it
    live = api.create(held)
    refused = forbidden("infra", PAUSE_RULE + "infra sets spec.paused to true")
    for patch in (hold.ops_on(live, hold.Gate(hold.Move.HOLD), "2026-11-29T12:00:00Z"),
                  [{"op": "replace", "path": "/spec/paused", "value": True}]):
        assert any(op.get("path") == "/spec/paused" and op.get("value") is True for op in patch), patch
        status, body = as_sa(api, "PATCH", POOLS + "/infra", patch)
        assert (status, body.get("message")) == (403, refused), body
    after = api.get("MachineConfigPool", "", "infra")
    assert after["spec"]["paused"] is False and after["metadata"]["resourceVersion"] == live["metadata"]["resourceVersion"]
    drop_pool(api, "infra")


def test_a_change_hidden_next_to_ours_is_refused(api):
    """Our annotation in the same patch does not carry a foreign change through; an UPDATE (PUT)
    is checked like a patch (the ServiceAccount has no `update`: RBAC refuses it first)."""
    patch = patches.annotation_ops(api.get("MachineConfigPool", "", "worker"), {A.STATE: A.PENDING}) + \
        BAD["maxUnavailable"][0]
    status, body = as_sa(api, "PATCH", POOLS + "/worker", patch)
    assert (status, body["message"]) == (403, forbidden("worker", BAD["maxUnavailable"][1])), body
    live = api.get("MachineConfigPool", "", "worker")
    live["spec"]["maxUnavailable"] = "100%"
    status, body = as_sa(api, "PUT", POOLS + "/worker", live, "application/json")
    assert status == 403 and 'cannot update resource "machineconfigpools"' in body["message"], body


def test_ownerreferences_are_refused_by_the_server_before_the_policy(api):
    """Setting an owner needs `delete` on the pool (kube-apiserver's OwnerReferencesPermissionEnforcement,
    which OpenShift enables): the ServiceAccount has none, so that plugin refuses before our policy;
    test_with_wider_rbac_the_policy_still_refuses shows ours refusing it too."""
    patch = [{"op": "add", "path": "/metadata/ownerReferences", "value": [OWNER]}]
    status, body = as_sa(api, "PATCH", POOLS + "/worker", patch)
    assert status == 403 and "cannot set an ownerRef on a resource you can't delete" in body["message"], body["message"]


def test_with_wider_rbac_the_policy_still_refuses(api):
    """If someone grants our ServiceAccount create, delete (or anything more) on pools, the policy
    still refuses: no CREATE, no DELETE, no owner. Base alone: RBAC's 403 for CREATE and DELETE."""
    for verb, method, path, body in (("create", "POST", POOLS, api.probe_pool(F.pool("infra"))),
                                     ("delete", "DELETE", POOLS + "/worker", None)):
        status, answer = as_sa(api, method, path, body, "application/json")
        assert status == 403 and f'cannot {verb} resource "machineconfigpools"' in answer["message"], answer
    role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": "test-wider-pools"},
            "rules": [{"apiGroups": [F.MCO], "resources": ["machineconfigpools"], "verbs": ["create", "delete"]}]}
    binding = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
               "metadata": {"name": "test-wider-pools"},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "test-wider-pools"},
               "subjects": [{"kind": "ServiceAccount", "name": "ocl-reconciler", "namespace": F.NS}]}
    roles, bindings = realserver.ROLLOUT_PATHS["ClusterRole"], realserver.ROLLOUT_PATHS["ClusterRoleBinding"]
    api.request("POST", roles, role)
    api.request("POST", bindings, binding)
    try:
        infra = api.probe_pool(F.pool("infra"))
        deadline = time.monotonic() + 20            # RBAC changes reach the authorizer asynchronously
        while "cannot create" in as_sa(api, "POST", POOLS + "?dryRun=All", infra, "application/json")[1]["message"]:
            assert time.monotonic() < deadline, "the wider ClusterRole never took effect"
            time.sleep(0.1)
        status, answer = as_sa(api, "POST", POOLS, infra, "application/json")
        assert (status, answer["message"]) == (403, forbidden(
            "infra", "ocl-reconciler may not create a MachineConfigPool: infra")), answer
        status, answer = as_sa(api, "DELETE", POOLS + "/worker", None, "application/json")
        assert (status, answer["message"]) == (403, forbidden(
            "worker", "ocl-reconciler may not delete a MachineConfigPool: worker")), answer
        status, answer = as_sa(api, "PATCH", POOLS + "/worker",
                               [{"op": "add", "path": "/metadata/ownerReferences", "value": [OWNER]}])
        assert (status, answer["message"]) == (403, forbidden("worker", OWNER_RULE + "worker")), answer
        assert api.get("MachineConfigPool", "", "infra") is None
        assert not api.get("MachineConfigPool", "", "worker")["metadata"].get("ownerReferences")
    finally:
        api.request("DELETE", f"{bindings}/test-wider-pools", ok=(404,))
        api.request("DELETE", f"{roles}/test-wider-pools", ok=(404,))


def test_the_admin_makes_every_one_of_those_changes(api):
    """The policy binds only our ServiceAccount: each refused change passes for the admin (and for
    the MCO, an administrator's GitOps tool, ...); so does an owner."""
    cases = dict(BAD, ownerReferences=([{"op": "add", "path": "/metadata/ownerReferences", "value": [OWNER]}], ""))
    for case, (patch, _) in sorted(cases.items()):
        fresh_pool(api)
        status, body = api.request("PATCH", POOLS + "/worker", patch, JSON_PATCH, ok=(403, 422))
        assert status == 200, (case, body)


def test_without_the_policy_binding_the_same_changes_pass(api):
    """The refusals are the policy's: with base's RBAC alone, the ServiceAccount makes each of them."""
    binding = f"{realserver.ROLLOUT_PATHS['ValidatingAdmissionPolicyBinding']}/{POLICY}"
    api.request("DELETE", binding)
    try:
        api.wait_pool_policy("unbound", lambda status, message: status == 200)
        for case, (patch, _) in sorted(BAD.items()):
            fresh_pool(api)
            status, body = as_sa(api, "PATCH", POOLS + "/worker", patch)
            assert status == 200, (case, body)
    finally:
        api.install_pool_policy()
    fresh_pool(api)
    patch, message = BAD["maxUnavailable"]
    assert as_sa(api, "PATCH", POOLS + "/worker", patch)[1]["message"] == forbidden("worker", message)


def test_the_mco_policies_keep_working_beside_ours(api):
    """All four policies are served; the MCO's refuse for everyone what they refused before (a
    selector without worker, an unlisted stream), for the admin and for our ServiceAccount alike,
    and ours passes what the MCO's pass."""
    names = {p["metadata"]["name"] for p in api.request(
        "GET", realserver.ROLLOUT_PATHS["ValidatingAdmissionPolicy"])[1]["items"]}
    assert {POLICY, realserver.SELECTOR_POLICY, realserver.STREAM_POLICY} <= names
    not_worker = [{"op": "replace", "path": "/spec/machineConfigSelector",
                   "value": {"matchLabels": {f"{F.MCO}/role": "infra"}}}]
    unlisted = [{"op": "add", "path": "/spec/osImageStream", "value": {"name": "rhel-8"}}]
    for patch, policy in ((not_worker, realserver.SELECTOR_POLICY), (unlisted, realserver.STREAM_POLICY)):
        status, body = api.request("PATCH", POOLS + "/worker", patch, JSON_PATCH, ok=(403, 422))
        assert status == 422 and f"ValidatingAdmissionPolicy '{policy}'" in body["message"], body
        status, body = as_sa(api, "PATCH", POOLS + "/worker", patch)
        assert status in (403, 422) and "ValidatingAdmissionPolicy" in body["message"], body
    # a pool the MCO's selector policy refuses refuses our annotation too (docs/admin.md): not ours
    binding = "custom-machine-config-pool-selector-binding"
    old = copy.deepcopy(F.pool("infra"))
    old["spec"]["machineConfigSelector"] = {"matchLabels": {f"{F.MCO}/role": "infra"}}
    bindings = realserver.ROLLOUT_PATHS["ValidatingAdmissionPolicyBinding"]
    saved = api.request("GET", f"{bindings}/{binding}")[1]
    api.request("DELETE", f"{bindings}/{binding}")
    try:
        api.wait_admission(api.probe_pool(old), "")
        api.create(old)
    finally:
        api.request("POST", bindings, {k: saved[k] for k in ("apiVersion", "kind", "spec")} |
                    {"metadata": {"name": binding}})
        api.wait_admission(api.probe_pool(dict(old, metadata={"name": "probe-old"})),
                           f"ValidatingAdmissionPolicy '{realserver.SELECTOR_POLICY}'")
    live = api.get("MachineConfigPool", "", "infra")
    status, body = as_sa(api, "PATCH", POOLS + "/infra", patches.annotation_ops(live, {A.STATE: A.PENDING}))
    assert status == 422 and f"ValidatingAdmissionPolicy '{realserver.SELECTOR_POLICY}'" in body["message"], body
