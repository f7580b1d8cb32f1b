"""Crash-consistency matrix: every write of every lifecycle scenario, for both builders, fails in
each of three ways (500; connection reset before the server applies it; applied but the response
lost); runs without faults then converge (at most 3) to the cluster a fault-free history gives:
compared once converged with the fault-free cluster after that step's run, and where it differs, the
later steps are run on it and the end compared with the fault-free end. A case on the fault-free
cluster after its step has converged where a run on that cluster writes nothing (run once a step):
the run that would confirm it is that run. Most faulted runs get there themselves (they retry)."""

from __future__ import annotations

import copy

import kubelet
import pytest

from reconcile import cli
from reconcile.contract import annotations as A
from tests.support import factory as F
from tests.support.apiserver import APIServer, Fault

MODES = {"500": dict(action="status", code=500), "reset": dict(action="reset"),
         "lost-response": dict(action="drop-response")}


def phase(name):
    def step(items):
        for obj in items:
            if obj["kind"] in ("Pod", "Build"):
                kubelet.set_phase(obj, name)
    step.__name__ = name
    return step


def rebuild(items):
    F.the_pool(items)["metadata"]["annotations"][A.REBUILD] = "again"


def new_config(items):
    F.the_pool(items)["spec"]["configuration"]["name"] = "rendered-worker-2"
    items.append(F.machineconfig("rendered-worker-2"))


def opt_out(items):
    del F.the_pool(items)["metadata"]["labels"][A.LAYERING_LABEL]


def roll_out(items):
    """rollout: machineconfig (the success then writes the pool's osImageURL MachineConfig)."""
    next(o for o in items if o["metadata"]["name"] == "on-cluster-build-config")["data"]["rollout"] = "machineconfig"


def render_ours(items):
    """The MCO renders our MachineConfig into the pool: a new rendered config of the same content
    with our osImageURL, our MachineConfig among its sources (the rollout check reads it)."""
    ours = next(o for o in items if o["kind"] == "MachineConfig" and o["metadata"]["name"] == "ocl-osimageurl-worker")
    rendered = F.machineconfig("rendered-worker-ours", content="rendered-worker-1")
    rendered["spec"]["osImageURL"] = ours["spec"]["osImageURL"]
    items.append(rendered)
    F.the_pool(items)["spec"]["configuration"] = {"name": "rendered-worker-ours", "source": [
        {"apiVersion": f"{F.MCO}/v1", "kind": "MachineConfig", "name": "ocl-osimageurl-worker"}]}


def rolled_out(items):
    """The MCO rolled the pool's rendered config out to every machine."""
    pool = F.the_pool(items)
    pool["status"].update(configuration={"name": pool["spec"]["configuration"]["name"]},
                          updatedMachineCount=pool["status"].get("machineCount", 0))


SCENARIOS = {
    # the rollout gate (rolloutGate: hold, the default): paused, built, handed over, rendered,
    # unpaused to roll out, paused again once rolled out; a kill anywhere leaves no pause unrecorded
    "gate-holds-rolls-and-holds-again": [roll_out, phase("Succeeded"), render_ours, rolled_out],
    "build-succeeds": [None, phase("Running"), phase("Succeeded"), None],
    "rollout-then-opt-out": [roll_out, phase("Succeeded"), opt_out],
    "fails-then-rebuilt": [None, phase("Failed"), rebuild, phase("Succeeded")],
    "new-config-mid-build": [None, phase("Running"), new_config, phase("Succeeded")],
    "opt-out": [None, phase("Running"), opt_out],
    "evicted-then-retried": [None, phase("Evicted"), phase("Succeeded")],
}


def history(steps, run_once):
    """The fault-free history of a scenario: the cluster before each step's run, how many writes
    each run made, the cluster after each run (comparable) and the final cluster. `run_once(items)`
    returns (items after, writes)."""
    before_step, writes, after = [], [], []
    items = F.cluster()
    for step in steps:
        items = copy.deepcopy(items)
        if step:
            step(items)
        before_step.append(copy.deepcopy(items))
        items, count = run_once(items)
        writes.append(count)
        after.append(comparable(items))
    return before_step, writes, after, items


def comparable(items):
    out = []
    for obj in copy.deepcopy(items):
        md = obj["metadata"]
        for key in ("uid", "resourceVersion", "creationTimestamp", "generation"):
            md.pop(key, None)
        for ref in md.get("ownerReferences", []):
            ref.pop("uid", None)
        out.append(obj)
    return sorted(out, key=lambda o: (o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"]))


class Runner:
    def __init__(self, tmp_path):
        self.tmp = tmp_path

    def run(self, items, fault=None):
        """One `run` against a server holding `items`; (items after, writes made, exit code)."""
        with APIServer(items, clock=lambda: F.NOW) as server:
            if fault:
                server.faults.append(fault)
            code = cli.main(["run", "--kubeconfig", server.kubeconfig(self.tmp / "kc"), "--timeout", "30"])
            writes = [w for w in server.writes() if w.resource != "leases"]
            return server.items(), len(server.writes()), writes, code


@pytest.fixture(autouse=True)
def quick(monkeypatch, capsys):
    monkeypatch.setenv("OCL_RECONCILE_NOW", "2026-11-29T12:00:00Z")
    monkeypatch.setattr("reconcile.cluster.live.time.sleep", lambda s: None)


@pytest.mark.parametrize("builder", sorted(F.BUILD_KINDS))
@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_every_write_fails_three_ways_and_runs_converge(tmp_path, monkeypatch, capsys, builder, scenario):
    monkeypatch.setattr(F, "BUILDER", builder)
    runner = Runner(tmp_path)
    steps = SCENARIOS[scenario]
    ran = []

    def fault_free(items):
        after, count, _, code = runner.run(items)
        assert code == 0
        ran.append(after)
        return after, count

    before_step, write_counts, after, final = history(steps, fault_free)
    expected = comparable(final)
    # whether a run on the fault-free cluster after each step writes nothing: a case that reaches
    # that cluster has converged, and its confirming run would be that run (runs are deterministic)
    quiet = [not runner.run(copy.deepcopy(items))[2] for items in ran]
    covered = rejoined = confirmed = 0
    for index, start in enumerate(before_step):
        for nth in range(1, write_counts[index] + 1):
            for mode, spec in MODES.items():
                state, _, _, _ = runner.run(copy.deepcopy(start), Fault(nth_write=nth, **spec))
                clean = 0
                # converge without faults (at most 3 runs); on the quiet fault-free cluster it has
                while not (quiet[index] and comparable(state) == after[index]):
                    if clean == 3:
                        pytest.fail(f"{scenario}/{builder}: step {index} write {nth} {mode}: no convergence")
                    state, _, writes, code = runner.run(state)
                    clean += 1
                    if not writes:
                        break
                confirmed += clean > 0
                covered += 1
                if comparable(state) == after[index]:
                    # back on the fault-free history: the later steps' runs are that history's (runs
                    # are deterministic), which ends in `expected`
                    rejoined += 1
                    continue
                for step in steps[index + 1:]:
                    state = copy.deepcopy(state)
                    if step:
                        step(state)
                    state, _, _, _ = runner.run(state)
                assert comparable(state) == expected, (scenario, builder, index, nth, mode)
    assert covered == 3 * sum(write_counts)
    with capsys.disabled():
        print(f" [fault matrix {scenario}/{builder}: {covered} cases = {sum(write_counts)} writes x 3 ways; "
              f"{rejoined} back on the fault-free history once converged; {covered - confirmed} of them "
              f"there after the faulted run, a quiet cluster]", end="")


def test_the_gate_scenario_goes_through_each_of_its_moves(tmp_path, monkeypatch):
    """The matrix above is only as good as its scenario: the gate pauses, unpauses and pauses again."""
    runner = Runner(tmp_path)
    seen = []

    def once(items):
        after, count, _, code = runner.run(items)
        pool = F.the_pool(after)
        seen.append((pool["spec"].get("paused"), pool["metadata"]["annotations"].get(A.GATE)))
        return after, count
    history(SCENARIOS["gate-holds-rolls-and-holds-again"], once)
    assert seen == [(True, "held"), (True, "held"), (False, "rolling"), (True, "held")]
