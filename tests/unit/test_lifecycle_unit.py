"""The pure planner, without any cluster: which writes each situation yields, and their shape."""

from __future__ import annotations

import copy

import kubelet
import pytest

from reconcile.cluster import apply, observe
from reconcile.cluster.memory import MemoryCluster
from reconcile.cluster.planner import Planner
from reconcile.contract import annotations as A
from reconcile.contract import naming, objects
from reconcile.core import lifecycle
from reconcile.imagebuild import settings
from reconcile.imagebuild.platform import clusterfacts
from tests.support import factory as F

OURS = ("/metadata/annotations/ocl-reconciler.io~1",
        "/metadata/annotations/machineconfiguration.openshift.io~1newestImageEquivalentConfig")


def good_settings() -> settings.Settings:
    return settings.read(F.NS, {"on-cluster-build-config": F.build_config(),
                                "machine-config-osimageurl": F.osimageurl()})


def decide(pool, owned=(), s=None):
    rendered = pool["spec"]["configuration"]["name"]
    return lifecycle.decide_pool(s or good_settings(), pool, list(owned), {rendered: F.machineconfig(rendered)})


def plan(pool, owned=(), mc=None, s=None):
    return lifecycle.act(decide(pool, owned, s), F.NOW, mc)


def start(pool):
    d = decide(pool)
    assert d.transition is lifecycle.Transition.START and d.needs_build
    return lifecycle.act(d, F.NOW, F.machineconfig(d.inputs.rendered_config))


def converge(items, rounds=1):
    cluster = MemoryCluster(items, clock=lambda: F.NOW)
    for _ in range(rounds):
        seen = observe.observe(cluster, F.NS)
        apply.execute(cluster, Planner(cluster, seen, F.NOW).plan(), F.NOW)
    return cluster


def test_new_build_plan_order_creates_before_recording():
    p = start(F.pool())
    assert [(a.verb, a.obj["kind"]) for a in p.actions] == [
        ("create", "ConfigMap"), ("create", "ConfigMap"), ("create", "Pod"),
        ("create", "Event"), ("patch", "MachineConfigPool")]
    assert (p.state_before, p.state_after) == (None, A.PENDING)
    event = p.actions[3].obj
    assert (event["reason"], event["type"], event["involvedObject"]["name"]) == ("BuildStarted", "Normal", "worker")
    assert event["metadata"]["name"] == start(F.pool()).actions[3].obj["metadata"]["name"]   # deterministic


def test_pool_patches_touch_only_our_keys():
    pool = F.pool(annotations={A.REBUILD: "x", "other.io/key": "v"})
    for action in start(pool).actions:
        if action.verb == "patch":
            assert action.patch and all(op["path"].startswith(OURS) for op in action.patch)
            assert objects.annotations(action.after)["other.io/key"] == "v"


def test_pool_without_annotations_gets_one_guarded_add():
    """`add /metadata/annotations` replaces a map written meanwhile (RFC 6902): it must be guarded."""
    pool = F.pool()
    del pool["metadata"]["annotations"]
    (patch,) = [a for a in start(pool).actions if a.verb == "patch"]
    assert [op["op"] for op in patch.patch] == ["test", "add"]
    assert patch.patch[0] == {"op": "test", "path": "/metadata/resourceVersion",
                              "value": pool["metadata"]["resourceVersion"]}
    assert patch.patch[1]["path"] == "/metadata/annotations"


def test_an_edited_configmap_of_ours_is_replaced_never_patched():
    """Ours are immutable and content-addressed: someone recreated one with other content (an
    immutable one cannot be edited), and metadata alone shows it: delete (uid precondition), create."""
    cluster = converge(F.cluster())
    cm = next(o for o in cluster.list("ConfigMap", F.NS) if "Dockerfile" in o.get("data", {}))
    assert cm["immutable"] is True and cm["metadata"]["annotations"][naming.CONTENT_HASH] == naming.content_hash(cm)
    with pytest.raises(Exception, match="field is immutable"):
        cluster.patch("ConfigMap", F.NS, cm["metadata"]["name"],
                      [{"op": "replace", "path": "/data/Dockerfile", "value": "FROM evil"}])
    pod = next(iter(cluster.list("Pod", F.NS)))
    cluster.delete("Pod", F.NS, pod["metadata"]["name"])
    cluster.delete("ConfigMap", F.NS, cm["metadata"]["name"])
    edited = copy.deepcopy(cm)
    edited["data"]["Dockerfile"] = "FROM evil"
    edited["metadata"]["annotations"][naming.CONTENT_HASH] = naming.content_hash(edited)
    cluster.create(edited)
    pool = cluster.get("MachineConfigPool", "", "worker")
    # the run that created it was killed before recording: pretend the pool was never annotated
    pool["metadata"]["annotations"] = {"example.com/keep": "theirs"}
    owned = cluster.list("ConfigMap", F.NS, naming.SELECTOR, metadata_only=True)
    assert all("data" not in o for o in owned)
    facts = clusterfacts.ClusterFacts(nodes=tuple(cluster.list("Node", None)))      # as a run reads them then
    d = lifecycle.decide_pool(good_settings(), pool, owned, {"rendered-worker-1": F.machineconfig("rendered-worker-1")},
                              facts=facts)
    p = lifecycle.act(d, F.NOW, F.machineconfig("rendered-worker-1"))
    verbs = [(a.verb, a.obj["kind"], a.obj["metadata"]["name"]) for a in p.actions if a.obj["kind"] != "Event"]
    name = cm["metadata"]["name"]
    assert verbs.index(("delete", "ConfigMap", name)) + 1 == verbs.index(("create", "ConfigMap", name))
    assert not [a for a in p.actions if a.verb == "patch" and a.obj["kind"] in ("ConfigMap", "Secret")]
    created = next(a.obj for a in p.actions if a.verb == "create" and a.obj["metadata"]["name"] == name)
    assert created["data"]["Dockerfile"] != "FROM evil" and created["immutable"] is True


def test_converged_cluster_plans_nothing():
    cluster = converge(F.cluster(F.pool("worker"), F.pool("infra")))
    cluster.writes.clear()
    seen = observe.observe(cluster, F.NS)
    plans = Planner(cluster, seen, F.NOW).plan()
    assert all(not p.actions for p in plans)
    assert [p.state_after for p in plans] == [A.PENDING, A.PENDING]


@pytest.mark.parametrize("phase", ["Pending", "Running", "Succeeded", "Failed"])
def test_steady_state_after_each_phase_writes_nothing(phase):
    cluster = converge(F.cluster())
    for pod in cluster.list("Pod", F.NS):
        cluster.store[("Pod", F.NS, pod["metadata"]["name"])] = kubelet.set_phase(pod, phase)
    converge_more = converge(cluster.items(), rounds=1)
    converge_more.writes.clear()
    seen = observe.observe(converge_more, F.NS)
    apply.execute(converge_more, Planner(converge_more, seen, F.NOW).plan(), F.NOW)
    assert converge_more.writes == []


def test_builds_are_named_by_inputs():
    pool = F.pool()
    a = start(pool).actions[2].obj["metadata"]["name"]
    assert start(copy.deepcopy(pool)).actions[2].obj["metadata"]["name"] == a
    other = F.pool(rendered="rendered-worker-2")
    assert start(other).actions[2].obj["metadata"]["name"] != a
    rebuilt = F.pool(annotations={A.REBUILD: "t"})
    assert start(rebuilt).actions[2].obj["metadata"]["name"] != a


@pytest.mark.parametrize("field, value", [
    ("base_image", "quay.io/x/y:1"), ("extensions_image", "quay.io/x/ext:1"),
    ("release_version", "9.9"), ("pullspec", "quay.io/x/out:1"), ("pull_secret", "p2"),
    ("push_secret", "q2"), ("custom_dockerfiles", {"worker": "RUN true"}),
])
def test_every_settings_input_changes_the_build_id(field, value):
    import dataclasses
    base = good_settings()
    pool = F.pool()
    from reconcile.core import desired
    before = desired.inputs(base, pool, F.content(pool)).build_id
    after = desired.inputs(dataclasses.replace(base, **{field: value}), pool, F.content(pool)).build_id
    assert before != after


def test_invalid_pool_name_is_blocked_and_long_one_is_shortened():
    p = plan(F.pool("bad name with spaces"))
    assert p.state_after == A.BLOCKED and "cannot be a label value" in p.message
    long_name = "x" * 64
    p = start(F.pool(long_name))
    assert p.state_after == A.PENDING
    label = naming.pool_label(long_name)
    assert label != long_name and len(label) <= 63          # a label value is at most 63 characters
    for action in p.actions:
        if action.verb == "create" and action.obj["kind"] != "Event":
            assert action.obj["metadata"]["labels"][naming.POOL_LABEL] == label
            assert len(action.obj["metadata"]["name"]) <= 253
    assert naming.pool_label("x" * 65) != label             # two long names never share a value


def test_long_pool_name_still_gives_valid_object_names():
    from reconcile.contract import naming
    name = naming.object_name("dockerfile", "p" * 63, "0123456789ab")
    assert len(name) <= 253 and name.endswith("-0123456789ab")
    long = naming.object_name("dockerfile", "p" * 300, "0123456789ab")
    assert len(long) == 253


def test_message_is_one_line_and_bounded():
    assert A.one_line("a\nb\r\n  c") == "a b c"
    assert len(A.one_line("x" * 5000)) == 512


def _live_build(pool, phase=None):
    """The pool as the first run leaves it (annotated Pending) and its live objects, Pod at `phase`."""
    cluster = converge(F.cluster(pool))
    if phase:
        for pod in cluster.list("Pod", F.NS):
            cluster.store[("Pod", F.NS, pod["metadata"]["name"])] = kubelet.set_phase(pod, phase)
    return (cluster.get("MachineConfigPool", "", objects.name(pool)),
            cluster.list("ConfigMap", F.NS, naming.SELECTOR) + cluster.list("Pod", F.NS, naming.SELECTOR))


@pytest.mark.parametrize("phase, state, verbs", [
    (None, A.PENDING, []),
    ("Pending", A.PENDING, []),
    ("Running", A.BUILDING, ["patch"]),
    ("Succeeded", A.SUCCEEDED, ["patch", "delete", "delete", "delete"]),
    ("Failed", A.FAILED, ["patch"]),
])
def test_state_machine_table(phase, state, verbs):
    pool, live = _live_build(F.pool(), phase)
    p = plan(pool, live)
    assert p.state_after == state
    assert [a.verb for a in p.actions if a.obj["kind"] != "Event"] == verbs
    reasons = [a.obj["reason"] for a in p.actions if a.obj["kind"] == "Event"]
    assert reasons == ([] if state == A.PENDING else
                       [{A.BUILDING: "BuildRunning", A.SUCCEEDED: "BuildSucceeded", A.FAILED: "BuildFailed"}[state]])
    if state == A.SUCCEEDED:
        assert [a.obj["kind"] for a in p.actions[:2]] == ["Event", "MachineConfigPool"]  # before deleting
        assert objects.annotations(p.actions[1].after)[A.IMAGE].startswith(F.REPO + "@sha256:")


T = lifecycle.Transition


@pytest.mark.parametrize("state, at_ref, pod, transition, expect", [
    (A.SUCCEEDED, True, False, T.BUILT, (A.SUCCEEDED, ["delete", "delete"])),   # leftovers of a killed run
    (A.FAILED, True, True, T.STAY_FAILED, (A.FAILED, [])),
    (A.INTERRUPTED, True, False, T.STAY_FAILED, (A.INTERRUPTED, [])),      # written by older versions
    (A.BUILDING, True, False, T.RETRY, None),         # vanished: another attempt needs the MC
    (A.BUILDING, False, False, T.START, None),        # new inputs: a MachineConfig is needed
    (A.BLOCKED, True, True, T.PROGRESS, (A.PENDING, ["patch"])),   # unblocked: the live Pod is followed again
])
def test_recorded_state_decides_next_step(state, at_ref, pod, transition, expect):
    pool, live = _live_build(F.pool(), "Pending")
    a = pool["metadata"]["annotations"]
    a[A.STATE] = state
    a[A.IMAGE] = F.REPO + "@sha256:" + "0" * 64
    if not at_ref:
        a[A.BUILD] = "Pod/ns/some-older-build"
    if not pod:
        live = [o for o in live if o["kind"] != "Pod"]
    d = decide(pool, live)
    assert d.transition is transition and d.needs_build == (expect is None)
    if expect is not None:
        p = lifecycle.act(d, F.NOW)
        assert (p.state_after, [x.verb for x in p.actions if x.obj["kind"] != "Event"]) == expect


def test_decide_is_one_match_over_what_was_observed():
    """Every row of the transition table from an Observation alone, no cluster."""
    from reconcile.imagebuild.builders.base import BuildStatus
    obs = lifecycle.Observation
    failed = BuildStatus(A.FAILED, message="x")
    transient = BuildStatus(A.FAILED, message="evicted", transient=True)
    cases = [
        (obs(None, False, False, None, True), T.START),
        (obs(A.PENDING, True, False, BuildStatus(A.PENDING), True), T.PROGRESS),
        (obs(A.PENDING, True, False, BuildStatus(A.BUILDING), True), T.PROGRESS),
        (obs(A.BUILDING, True, False, BuildStatus(A.SUCCEEDED, digest="sha256:" + "1" * 64), True), T.SUCCEED),
        (obs(A.BUILDING, True, False, failed, True), T.FAIL),
        (obs(A.FAILED, True, False, failed, True), T.STAY_FAILED),
        (obs(A.BUILDING, True, False, transient, True), T.RETRY),
        (obs(A.BUILDING, True, False, None, True), T.RETRY),
        (obs(A.BUILDING, True, False, transient, False), T.GIVE_UP),
        (obs(A.PENDING, True, False, None, False), T.GIVE_UP),
        (obs(A.SUCCEEDED, True, True, None, True), T.BUILT),
        (obs(A.SUCCEEDED, False, True, None, True), T.START),           # new inputs after a success
    ]
    for observed, expected in cases:
        assert lifecycle.decide(observed) is expected, observed


def test_the_contract_lifecycle_table_is_the_transition_table():
    """docs/contract.md "## Lifecycle": one row per Transition, `| NAME | situation | outcome |`."""
    text = (F.ROOT / "docs" / "contract.md").read_text()
    section = text.split("## Lifecycle", 1)[1].split("\n## ", 1)[0]
    rows = [line.split(" | ") for line in section.splitlines() if line.startswith("| `")]
    table = {r[0].strip("| `"): (r[1], r[2].rstrip(" |")) for r in rows}
    assert table == {t.name: (t.situation, t.outcome) for t in T}
    assert set(lifecycle.ACTIONS) == set(T)


def test_opt_out_plan_deletes_objects_then_drops_annotations():
    pool, live = _live_build(F.pool(), "Running")
    pool["metadata"]["labels"].pop(A.LAYERING_LABEL)
    (p,) = lifecycle.plan_cluster(good_settings(), [pool], live, F.NOW)
    assert [a.verb for a in p.actions] == ["delete"] * 3 + ["patch"]
    assert all(op["op"] == "remove" for op in p.actions[-1].patch)
    assert objects.annotations(p.actions[-1].after) == {"example.com/keep": "theirs"}


def test_objects_without_our_labels_are_never_touched():
    foreign = F.configmap("not-ours", {"k": "v"})
    half = F.configmap("half", {"k": "v"})
    half["metadata"]["labels"] = {"ocl-reconciler.io/pool": "worker"}       # no managed-by
    plans = lifecycle.plan_cluster(good_settings(), [], [foreign, half], F.NOW)
    assert plans == []


def test_an_events_name_is_the_transition_not_the_time():
    """The same transition planned at two times is one Event (a rerun never repeats it); another
    build's transition to the same state is another Event (never swallowed as already told)."""
    from datetime import timedelta
    d = decide(F.pool())
    mc = F.machineconfig(d.inputs.rendered_config)

    def event_names(decision, now):
        return [a.obj["metadata"]["name"] for a in lifecycle.act(decision, now, mc).actions
                if a.obj["kind"] == "Event"]
    first = event_names(d, F.NOW)
    assert len(first) == 1 and first == event_names(d, F.NOW + timedelta(hours=3))
    other = decide(F.pool(annotations={A.REBUILD: "again"}))      # another build id, same pool
    assert other.inputs.build_id != d.inputs.build_id
    second = event_names(other, F.NOW)
    assert len(second) == 1 and second != first
