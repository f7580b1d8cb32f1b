"""Every lifecycle transition, through the CLI on snapshots: run, play the kubelet, run again."""

from __future__ import annotations

import copy
import re

import kubelet  # examples/kubelet.py
import pytest

from reconcile.contract import annotations as A
from reconcile.imagebuild import encoding
from tests.conftest import ApiCli
from tests.support import factory as F

pytestmark = pytest.mark.usefixtures("builder")        # every scenario, for both image builders


def ann(items, pool="worker"):
    return F.the_pool(items, pool)["metadata"]["annotations"]


def build_pod(items, pool="worker"):
    pods = [o for o in F.owned(items, pool) if o["kind"] == F.BUILD_KINDS[F.BUILDER]]
    assert len(pods) == 1, pods
    return pods[0]


def new_rendered_config(items, name="rendered-worker-2"):
    """The MCO rendered a new config for the worker pool."""
    changed = copy.deepcopy(items)
    F.the_pool(changed)["spec"]["configuration"]["name"] = name
    return changed + [F.machineconfig(name)]


def started(any_cli, *pools):
    code, items, _ = any_cli.run(F.cluster(*(pools or (F.pool(),))))
    assert code == 0
    return items


def finish(items, pool, phase, **kw):
    items = copy.deepcopy(items)
    for obj in F.owned(items, pool):
        if obj["kind"] in ("Pod", "Build"):
            kubelet.set_phase(obj, phase, **kw)
    return items


def test_opt_in_creates_configmaps_and_build_and_records_pending(any_cli, builder):
    items = started(any_cli)
    mine = F.owned(items, "worker")
    assert sorted(o["kind"] for o in mine) == sorted(["ConfigMap", "ConfigMap", builder])
    pool = F.the_pool(items)
    for obj in mine:
        labels = obj["metadata"]["labels"]
        assert labels["app.kubernetes.io/managed-by"] == "ocl-reconciler"
        assert labels["ocl-reconciler.io/pool"] == "worker"
        assert labels["ocl-reconciler.io/build-id"] in obj["metadata"]["name"]
        (owner,) = obj["metadata"]["ownerReferences"]
        assert (owner["kind"], owner["name"], owner["uid"]) == (
            "MachineConfigPool", "worker", pool["metadata"]["uid"])
        assert obj["metadata"]["uid"] and obj["metadata"]["resourceVersion"]
        assert obj["metadata"]["creationTimestamp"] == "2026-11-29T12:00:00Z"
    a = ann(items)
    assert a[A.STATE] == A.PENDING
    assert a[A.RENDERED] == "rendered-worker-1"
    assert a[A.BUILD] == f"{build_pod(items)['kind']}/{F.NS}/{build_pod(items)['metadata']['name']}"
    assert a[A.MESSAGE] == ""
    assert a[A.TRANSITION] == "2026-11-29T12:00:00Z"
    assert a["example.com/keep"] == "theirs"
    assert A.IMAGE not in a
    mc_cm = next(o for o in mine if "machineconfig.json.gz" in o.get("data", {}))
    decoded = encoding.decode(mc_cm["data"]["machineconfig.json.gz"])
    assert decoded["spec"] == F.machineconfig("rendered-worker-1")["spec"]
    assert decoded["metadata"]["name"] == "rendered-worker-1"


def test_pending_pod_stays_pending_with_no_writes(any_cli):
    items = started(any_cli)
    code, again, _ = any_cli.run(items)
    assert code == 0
    assert again == items


@pytest.mark.parametrize("phase, state", [("Pending", A.PENDING), ("Running", A.BUILDING)])
def test_pod_phase_maps_to_state(any_cli, phase, state):
    items = finish(started(any_cli), "worker", phase)
    code, after, _ = any_cli.run(items)
    assert code == 0
    assert ann(after)[A.STATE] == state
    assert len(F.owned(after, "worker")) == 3


def test_success_records_digested_image_and_cleans_up(any_cli):
    items = started(any_cli)
    pod_name = build_pod(items)["metadata"]["name"]
    running = finish(items, "worker", "Running")
    _, building, _ = any_cli.run(running)
    assert ann(building)[A.STATE] == A.BUILDING
    assert ann(building)[A.TRANSITION] == "2026-11-29T12:00:00Z"
    code, done, _ = any_cli.run(finish(building, "worker", "Succeeded"))
    assert code == 0
    a = ann(done)
    assert a[A.STATE] == A.SUCCEEDED
    assert a[A.IMAGE] == f"{F.REPO}@{kubelet.digest_for(pod_name)}"
    assert a[A.BUILT_CONFIG] == "rendered-worker-1"
    assert a[A.MESSAGE] == ""
    assert F.owned(done) == []
    # converged: the next run writes nothing
    code, again, _ = any_cli.run(done)
    assert (code, again) == (0, done)


def test_success_without_digest_is_failed_and_keeps_objects(any_cli):
    items = finish(started(any_cli), "worker", "Succeeded", digest="no digest here")
    code, after, _ = any_cli.run(items)
    assert code == 0
    assert ann(after)[A.STATE] == A.FAILED
    assert "without a sha256 digest" in ann(after)[A.MESSAGE]
    assert len(F.owned(after, "worker")) == 3


def test_failure_reason_is_last_log_line_and_no_recreation(any_cli):
    items = finish(started(any_cli), "worker", "Failed", log="step 1\nstep 2\nError: boom at STEP 3\n\n")
    code, failed, _ = any_cli.run(items)
    assert code == 0                                   # a failed build is a recorded outcome
    a = ann(failed)
    assert a[A.STATE] == A.FAILED
    assert a[A.MESSAGE].endswith(": Error: boom at STEP 3")
    assert "\n" not in a[A.MESSAGE]
    assert len(F.owned(failed, "worker")) == 3         # kept for debugging
    code, again, _ = any_cli.run(failed)
    assert (code, again) == (0, failed)                # not re-created for the same inputs


def test_new_rendered_config_mid_build_interrupts_and_starts_new_build(any_cli):
    building = any_cli.run(finish(started(any_cli), "worker", "Running"))[1]
    old_ref = ann(building)[A.BUILD]
    changed = new_rendered_config(building)
    code, after, _ = any_cli.run(changed)
    assert code == 0
    a = ann(after)
    assert a[A.STATE] == A.PENDING
    assert a[A.RENDERED] == "rendered-worker-2"
    assert a[A.BUILD] != old_ref
    assert a[A.MESSAGE] == f"interrupted {old_ref}: build inputs changed"
    mine = F.owned(after, "worker")
    assert len(mine) == 3
    assert all(o["metadata"]["annotations"][A.RENDERED] == "rendered-worker-2" for o in mine)


def test_newer_build_removes_older_failed_build(any_cli):
    failed = any_cli.run(finish(started(any_cli), "worker", "Failed"))[1]
    assert ann(failed)[A.STATE] == A.FAILED
    changed = new_rendered_config(failed)
    after = any_cli.run(changed)[1]
    assert ann(after)[A.STATE] == A.PENDING
    assert ann(after)[A.MESSAGE] == ""
    assert {o["metadata"]["labels"]["ocl-reconciler.io/build-id"] for o in F.owned(after)} == {
        ann(after)[A.BUILD].rsplit("-", 1)[1]}


def test_a_failed_pool_records_an_equivalent_rendered_config_so_later_runs_read_no_machineconfig(any_cli):
    """A kernel argument gives the pool a new rendered config with the same image content
    (docs/contract.md, "The build id"): the failure stands (STAY_FAILED), and the run records the
    new rendered config and its content (`ocl-reconciler.io/content`), which is what lets the next
    run skip the MachineConfig GET ("a steady run never reads the MachineConfig")."""
    failed = any_cli.run(finish(started(any_cli), "worker", "Failed"))[1]
    before = ann(failed)
    assert before[A.STATE] == A.FAILED and before[A.CONTENT].startswith("rendered-worker-1=")
    digest = before[A.CONTENT].split("=", 1)[1]
    changed = copy.deepcopy(failed)
    F.the_pool(changed)["spec"]["configuration"]["name"] = "rendered-worker-2"
    kargs = F.machineconfig("rendered-worker-2", content="rendered-worker-1")
    kargs["spec"]["kernelArguments"] = ["nosmt"]
    code, after, err = any_cli.run(changed + [kargs])
    assert code == 0, err
    a = ann(after)
    assert (a[A.STATE], a[A.BUILD], a[A.MESSAGE]) == (A.FAILED, before[A.BUILD], before[A.MESSAGE])
    assert a[A.RENDERED] == "rendered-worker-2"
    assert a[A.CONTENT] == f"rendered-worker-2={digest}"          # the same content, under the new name
    code, again, err = any_cli.run(after)
    assert (code, again) == (0, after), err
    if isinstance(any_cli, ApiCli):
        assert [r.name for r in any_cli.server.log if r.resource == "machineconfigs" and r.verb == "get"] == []


def test_image_is_kept_until_a_newer_success(any_cli):
    done = any_cli.run(finish(started(any_cli), "worker", "Succeeded"))[1]
    image = ann(done)[A.IMAGE]
    changed = new_rendered_config(done)
    pending = any_cli.run(changed)[1]
    assert ann(pending)[A.STATE] == A.PENDING
    assert (ann(pending)[A.IMAGE], ann(pending)[A.BUILT_CONFIG]) == (image, "rendered-worker-1")
    new = any_cli.run(finish(pending, "worker", "Succeeded"))[1]
    assert ann(new)[A.IMAGE] != image
    assert ann(new)[A.BUILT_CONFIG] == "rendered-worker-2"


def test_rebuild_request_starts_fresh_build_once(any_cli):
    done = any_cli.run(finish(started(any_cli), "worker", "Succeeded"))[1]
    requested = copy.deepcopy(done)
    F.the_pool(requested)["metadata"]["annotations"][A.REBUILD] = "please-1"
    after = any_cli.run(requested)[1]
    assert ann(after)[A.STATE] == A.PENDING
    assert ann(after)[A.REBUILD_HANDLED] == "please-1"
    assert ann(after)[A.REBUILD] == "please-1"          # the user's key is left alone
    assert len(F.owned(after)) == 3
    built = any_cli.run(finish(after, "worker", "Succeeded"))[1]
    assert ann(built)[A.STATE] == A.SUCCEEDED
    # idempotent: the same token again, or the request removed, starts nothing
    assert any_cli.run(built)[1] == built
    removed = copy.deepcopy(built)
    del F.the_pool(removed)["metadata"]["annotations"][A.REBUILD]
    assert any_cli.run(removed)[1] == removed


def test_rebuild_request_after_failure_builds_again(any_cli):
    failed = any_cli.run(finish(started(any_cli), "worker", "Failed"))[1]
    F.the_pool(failed)["metadata"]["annotations"][A.REBUILD] = "retry"
    after = any_cli.run(failed)[1]
    assert ann(after)[A.STATE] == A.PENDING
    assert len(F.owned(after)) == 3                    # the failed build's objects were replaced


def test_build_deleted_while_building_is_retried_then_fails_after_three_attempts(any_cli, builder):
    items = any_cli.run(finish(started(any_cli), "worker", "Running"))[1]
    first = ann(items)[A.BUILD]
    for attempt in (2, 3):
        gone = [o for o in items if o["kind"] != builder]
        code, items, _ = any_cli.run(gone)
        assert code == 0
        a = ann(items)
        assert (a[A.STATE], a[A.ATTEMPT]) == (A.PENDING, str(attempt))
        assert a[A.MESSAGE].startswith(f"attempt {attempt} of 3 after: attempt 1: {first} was deleted")
        assert a[A.BUILD] != first and build_pod(items)["metadata"]["name"] == a[A.BUILD].rsplit("/", 1)[1]
    code, items, _ = any_cli.run([o for o in items if o["kind"] != builder])
    a = ann(items)
    assert (a[A.STATE], a[A.ATTEMPT]) == (A.FAILED, "3")
    assert a[A.MESSAGE].startswith("failed after 3 attempts: attempt 1: ")
    assert a[A.MESSAGE].count("was deleted before it finished") == 3
    assert any_cli.run(items)[1] == items                 # terminal until asked


def test_evicted_build_is_retried_and_then_succeeds(any_cli, builder):
    items = any_cli.run(finish(started(any_cli), "worker", "Evicted"))[1]
    a = ann(items)
    assert (a[A.STATE], a[A.ATTEMPT]) == (A.PENDING, "2")
    assert "attempt 2 of 3 after: attempt 1: build " in a[A.MESSAGE] and "evicted" in a[A.MESSAGE].lower()
    assert len([o for o in F.owned(items) if o["kind"] == builder]) == 1      # the evicted one is gone
    done = any_cli.run(finish(items, "worker", "Succeeded"))[1]
    assert ann(done)[A.STATE] == A.SUCCEEDED and F.owned(done) == []


def test_registry_5xx_during_push_is_retried_but_a_failed_step_is_not(any_cli, builder):
    push_error = ("Copying blob sha256:abc\nError: pushing image: writing blob: received unexpected HTTP "
                  "status: 503 Service Unavailable\n")
    items = any_cli.run(finish(started(any_cli), "worker", "Failed", log=push_error))[1]
    assert (ann(items)[A.STATE], ann(items)[A.ATTEMPT]) == (A.PENDING, "2")
    step_error = 'Error: building at STEP "RUN rpm-ostree install x": exit status 1\n'
    failed = any_cli.run(finish(items, "worker", "Failed", log=step_error))[1]
    assert (ann(failed)[A.STATE], ann(failed)[A.ATTEMPT]) == (A.FAILED, "2")

def test_label_removed_cleans_objects_and_our_annotations(any_cli):
    done = any_cli.run(finish(started(any_cli), "worker", "Succeeded"))[1]
    building = started(any_cli)
    for items in (done, building):
        out = copy.deepcopy(items)
        pool = F.the_pool(out)
        del pool["metadata"]["labels"][A.LAYERING_LABEL]
        pool["metadata"]["annotations"][A.REBUILD] = "user-token"
        code, after, _ = any_cli.run(out)
        assert code == 0
        assert F.owned(after) == []
        assert ann(after) == {"example.com/keep": "theirs"}
        assert F.the_pool(after)["metadata"]["labels"] == {f"{F.MCO}/mco-built-in": ""}
        assert any_cli.run(after)[1] == after


def test_deleted_pool_leaves_no_orphans(any_cli):
    items = started(any_cli)
    without_pool = [o for o in items if o["kind"] != "MachineConfigPool"]
    after = any_cli.run(without_pool)[1]
    assert F.owned(after) == []


def test_not_opted_in_pool_is_untouched(any_cli):
    items = F.cluster(F.pool("worker"), F.pool("master", opted_in=False))
    code, after, _ = any_cli.run(items)
    assert code == 0
    assert F.the_pool(after, "master") == F.the_pool(items, "master")
    assert F.owned(after, "master") == []


def test_custom_dockerfile_change_is_a_new_build(any_cli):
    items = started(any_cli)
    first = ann(items)[A.BUILD]
    changed = copy.deepcopy(items)
    changed.append(F.configmap("on-cluster-build-custom-dockerfile",
                               {"worker": "FROM configs AS final\nRUN echo hi\n"}))
    after = any_cli.run(changed)[1]
    assert ann(after)[A.BUILD] != first
    dockerfile = next(o for o in F.owned(after) if "Dockerfile" in o.get("data", {}))
    assert dockerfile["data"]["Dockerfile"].rstrip().endswith("FROM configs AS final\nRUN echo hi")


def test_pool_filter_only_touches_named_pools(any_cli):
    items = F.cluster(F.pool("worker"), F.pool("infra"))
    code, after, _ = any_cli.run(items, "--pool", "infra")
    assert code == 0
    assert A.STATE not in ann(after, "worker")
    assert ann(after, "infra")[A.STATE] == A.PENDING
    assert F.owned(after, "worker") == []


def test_changing_builder_type_mid_build_interrupts_and_starts_the_other(any_cli, builder):
    building = any_cli.run(finish(started(any_cli), "worker", "Running"))[1]
    old_ref = ann(building)[A.BUILD]
    other = next(t for t, k in F.BUILD_KINDS.items() if k != builder)
    switched = copy.deepcopy(building)
    F.find(switched, "ConfigMap", "on-cluster-build-config")[0]["data"]["imageBuilderType"] = other
    code, after, _ = any_cli.run(switched)
    assert code == 0
    a = ann(after)
    assert a[A.STATE] == A.PENDING and a[A.MESSAGE] == f"interrupted {old_ref}: build inputs changed"
    assert a[A.BUILD].startswith(f"{F.BUILD_KINDS[other]}/")
    assert sorted(o["kind"] for o in F.owned(after)) == sorted(["ConfigMap", "ConfigMap", F.BUILD_KINDS[other]])


def test_events_on_each_state_change_once(any_cli):
    items = started(any_cli)
    events = [o for o in items if o["kind"] == "Event"]
    assert [(e["reason"], e["involvedObject"]["name"], e["type"]) for e in events] == [("BuildStarted", "worker", "Normal")]
    again = any_cli.run(items)[1]
    assert [o for o in again if o["kind"] == "Event"] == events          # a rerun adds none
    failed = any_cli.run(finish(again, "worker", "Failed"))[1]
    reasons = sorted(e["reason"] for e in failed if e["kind"] == "Event")
    assert reasons == ["BuildFailed", "BuildStarted"]
    warning = next(e for e in failed if e["kind"] == "Event" and e["reason"] == "BuildFailed")
    assert warning["type"] == "Warning" and warning["message"] == ann(failed)[A.MESSAGE]


def test_run_ends_with_a_one_line_summary(any_cli):
    items = [o for o in F.cluster(F.pool("worker"), F.pool("infra", rendered="rendered-missing"))
             if o["metadata"]["name"] != "rendered-missing"]
    code, _, err = any_cli.run(items)
    last = err.strip().splitlines()[-1]
    assert code == 2
    assert "run done: pools 1 Blocked, 1 Pending; 3 created, 2 patched, 0 deleted, 0 images deleted; " in last
    assert last.endswith("s") and re.search(r" \d+ requests( \(\d+ KiB read\))?; \d+\.\d\ds$", last), last
    assert isinstance(any_cli, ApiCli) == (" KiB read)" in last)        # what a live API server sent
