"""`render` (the Argo CD Config Management Plugin's generate command) prints exactly the build
objects the current plan keeps or creates (issue 15): checked on every lifecycle state, for both
builders, against what `run` leaves in the cluster; and a loop of Argo CD auto-sync (render,
apply) with runs and the kubelet converges instead of rebuilding forever."""

from __future__ import annotations

import copy

import kubelet  # examples/kubelet.py
import pytest

from reconcile.contract import annotations as A
from reconcile.contract import yamlio
from tests.support import factory as F

pytestmark = pytest.mark.usefixtures("builder")


def key(obj):
    return obj["kind"], obj["metadata"]["name"]


def rendered(cli, items):
    code, out, err = cli("render", "--snapshot", str(cli.write(items)))
    return code, yamlio.load_all(out) if out.strip() else [], err


def phase(name):
    def step(items):
        for obj in F.owned(items):
            if obj["kind"] in ("Pod", "Build"):
                kubelet.set_phase(obj, name)
    return step


def new_config(items):
    F.the_pool(items)["spec"]["configuration"]["name"] = "rendered-worker-2"
    items.append(F.machineconfig("rendered-worker-2"))


def back_to_first(items):
    F.the_pool(items)["spec"]["configuration"]["name"] = "rendered-worker-1"


def opt_out(items):
    del F.the_pool(items)["metadata"]["labels"][A.LAYERING_LABEL]


def break_settings(items):
    items[:] = [o for o in items if o["metadata"]["name"] != "machine-config-osimageurl"]


#: Each scenario visits lifecycle states in turn: START, PROGRESS, SUCCEED, BUILT, FAIL,
#: STAY_FAILED, RETRY, GIVE_UP (after three evictions), REUSE, OPT_OUT, BLOCKED.
SCENARIOS = {
    "success": [None, phase("Running"), phase("Succeeded"), None],
    "failure": [None, phase("Failed"), None, new_config],
    "evictions": [None, phase("Evicted"), phase("Evicted"), phase("Evicted"), None],
    "rollback": [None, phase("Succeeded"), new_config, phase("Succeeded"), back_to_first, None],
    "opt-out": [None, phase("Running"), opt_out, None],
    "blocked": [None, break_settings, None],
}


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_render_prints_what_the_run_keeps_or_creates(run_cli, scenario):
    items = F.cluster()
    seen = []
    for step in SCENARIOS[scenario]:
        items = copy.deepcopy(items)
        if step:
            step(items)
        code, docs, err = rendered(run_cli, items)
        run_code, after, _ = run_cli.run(items)
        state = F.the_pool(after)["metadata"]["annotations"].get(A.STATE)
        ours = {key(o): o for o in F.owned(after) if o["kind"] != "Secret"}
        if state == A.BLOCKED:                 # nothing for a Blocked pool (its objects stay, unsynced)
            ours = {}
        assert {key(d) for d in docs} == set(ours), (scenario, step and step.__name__)
        for doc in docs:                       # the desired form of what the run made or kept
            live = ours[key(doc)]
            assert doc.get("data") == live.get("data") and doc.get("spec") == live.get("spec")
            assert doc["metadata"]["annotations"]["argocd.argoproj.io/sync-wave"] == \
                live["metadata"]["annotations"]["argocd.argoproj.io/sync-wave"]
        assert (code == 2) == (state == A.BLOCKED) == (run_code == 2), err
        seen.append((state, len(docs)))
        items = after
    if scenario in ("success", "rollback"):
        assert seen[-1] == (A.SUCCEEDED, 0)                    # built: nothing to sync
    if scenario == "failure":
        assert seen[1] == (A.FAILED, 3) and seen[2] == (A.FAILED, 3)   # kept for debugging
    if scenario == "evictions":
        assert seen[-1][0] == A.FAILED and "failed after 3 attempts" in \
            F.the_pool(items)["metadata"]["annotations"][A.MESSAGE]


def argocd_sync(items, docs):
    """What an auto-syncing Application does with render's output: create what is missing,
    apply what is there (the rendered form over the live one; Prune=false keeps the rest)."""
    out = copy.deepcopy(items)
    index = {key(o): i for i, o in enumerate(out) if o["kind"] not in ("Event",)}
    for doc in docs:
        if key(doc) in index:
            live = out[index[key(doc)]]
            live.update({k: v for k, v in doc.items() if k != "metadata"})
        else:
            out.append(copy.deepcopy(doc))
    return out


def test_argocd_auto_sync_with_runs_converges_and_never_rebuilds(run_cli):
    """render -> apply -> run -> kubelet -> run, again and again: one build, then nothing."""
    items = F.cluster()
    builds = set()
    for _ in range(6):
        _, docs, _ = rendered(run_cli, items)
        items = argocd_sync(items, docs)
        items = run_cli.run(items)[1]
        builds |= {o["metadata"]["name"] for o in F.owned(items) if o["kind"] in ("Pod", "Build")}
        phase("Succeeded")(items)
        items = run_cli.run(items)[1]
    a = F.the_pool(items)["metadata"]["annotations"]
    assert a[A.STATE] == A.SUCCEEDED and len(builds) == 1
    assert F.owned(items) == [] and rendered(run_cli, items)[1] == []
