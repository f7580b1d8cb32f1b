"""`ocl-reconcile explain POOL` through the CLI, on snapshots and on the stand-in API: the row it
names is the one the lifecycle table (docs/contract.md) gives the situation, the facts are the
run's own (the build it creates is the one explain named), following its advice changes the
outcome, and it writes nothing while reading what `diff --pool POOL` reads."""

from __future__ import annotations

import base64
import copy
import json

import kubelet  # examples/kubelet.py
import pytest

from reconcile.contract import annotations as A
from tests.standin.test_lifecycle_cli import ann, build_pod, finish, new_rendered_config, started
from tests.support import factory as F

pytestmark = pytest.mark.usefixtures("builder")        # both image builders


def explain(cli, items, pool="worker", *extra):
    code, out, err = cli.on(items, "explain", pool, "-o", "json", *extra)
    assert code == 0, err
    return json.loads(out)


def test_a_new_pool_starts_the_build_explain_names(any_cli, builder):
    items = F.cluster()
    report = explain(any_cli, items)
    assert report["transition"]["row"] == "START"
    assert report["recorded"]["state"] is None and report["liveBuild"] is None
    assert "the pool records no build yet" in report["transition"]["because"]
    # the build the run then creates is the one explain named, with the same id and the same writes
    code, after, _ = any_cli.run(items)
    assert code == 0
    pod = build_pod(after)
    assert report["build"]["name"] == pod["metadata"]["name"]
    assert report["build"]["ref"] == ann(after)[A.BUILD]
    assert report["build"]["buildId"] == pod["metadata"]["labels"]["ocl-reconciler.io/build-id"]
    assert report["thisRun"]["stateAfter"] == A.PENDING
    created = [line for line in report["thisRun"]["actions"] if line.startswith("create ")]
    assert len(created) == len(F.owned(after, "worker"))
    assert report["renderedConfig"]["name"] == "rendered-worker-1"


@pytest.mark.parametrize("phase", ["Pending", "Running"])
def test_a_build_in_progress_says_it_is_still_running(any_cli, builder, phase):
    items = finish(started(any_cli), "worker", phase)
    report = explain(any_cli, items)
    assert report["transition"]["row"] == "PROGRESS"
    live = phase if builder == "Pod" else kubelet.BUILD_PHASES[phase]     # a Build waits as `New`
    assert report["liveBuild"]["phase"] == live
    assert report["liveBuild"]["kind"] == builder
    assert f"the {builder} is still {live}" in report["wouldChange"][0]


def test_a_failure_stays_failed_until_the_rebuild_token_explain_suggests(any_cli):
    failed = any_cli.run(finish(started(any_cli), "worker", "Failed", log="Error: boom at STEP 3\n"))[1]
    report = explain(any_cli, failed)
    assert report["transition"]["row"] == "STAY_FAILED"
    assert report["recorded"]["state"] == A.FAILED
    assert report["recorded"]["message"].endswith("Error: boom at STEP 3")
    assert report["thisRun"]["actions"] == []
    advice = next(line for line in report["wouldChange"] if A.REBUILD in line)
    assert f"oc annotate mcp worker {A.REBUILD}=" in advice
    # follow the advice (the token oc annotate would set): the next run starts a new build
    F.the_pool(failed)["metadata"]["annotations"][A.REBUILD] = "1764583200"
    again = explain(any_cli, failed)
    assert again["transition"]["row"] == "START"
    assert "a new rebuild token '1764583200' was set" in again["transition"]["because"]
    assert any_cli.run(failed)[1] != failed


def test_built_and_a_new_rendered_config(any_cli):
    done = any_cli.run(finish(started(any_cli), "worker", "Succeeded"))[1]
    report = explain(any_cli, done)
    assert report["transition"]["row"] == "BUILT"
    assert report["recorded"]["image"] == ann(done)[A.IMAGE]
    assert [h["image"] for h in report["imageHistory"]] == [ann(done)[A.IMAGE]]
    assert report["thisRun"]["actions"] == []
    changed = explain(any_cli, new_rendered_config(done))
    assert changed["transition"]["row"] == "START"
    assert "the rendered config changed from rendered-worker-1 to rendered-worker-2" \
        in changed["transition"]["because"]


def test_opted_out_not_opted_in_blocked_and_missing(any_cli):
    done = any_cli.run(finish(started(any_cli), "worker", "Succeeded"))[1]
    out = copy.deepcopy(done)
    del F.the_pool(out)["metadata"]["labels"][A.LAYERING_LABEL]
    assert explain(any_cli, out)["transition"]["row"] == "OPT_OUT"
    plain = explain(any_cli, F.cluster(F.pool(opted_in=False)))
    assert (plain["transition"]["row"], plain["optedIn"]) == ("NOT_OPTED_IN", False)
    assert f"oc label mcp worker {A.LAYERING_LABEL}=" in plain["wouldChange"][0]
    unset = [o for o in F.cluster() if o["metadata"]["name"] != "on-cluster-build-config"]
    blocked = explain(any_cli, unset)
    assert blocked["transition"]["row"] == "BLOCKED"
    assert "on-cluster-build-config" in blocked["transition"]["because"]
    code, out_, err = any_cli.on(F.cluster(), "explain", "nosuch")
    assert (code, out_) == (2, "")
    assert err.strip() == "error: no MachineConfigPool nosuch (and nothing of ours labelled for it)"


def test_text_output_has_each_part_and_no_secret_value(any_cli):
    items = F.cluster()
    code, out, _ = any_cli.on(items, "explain", "worker")
    assert code == 0
    for heading in ("pool worker", "recorded on the pool", "the build for the current inputs",
                    "decision: START", "this run would:", "what would change the outcome"):
        assert heading in out
    auth = json.loads(base64.b64decode(F.secret("push-secret")["data"][".dockerconfigjson"]))
    token = auth["auths"]["registry.example.com:5000"]["auth"]
    assert token not in out and base64.b64decode(token).decode().split(":")[1] not in out


def test_explain_writes_nothing_and_reads_what_diff_reads(api_cli):
    items = finish(api_cli.run(F.cluster(F.pool(), F.pool("infra")))[1], "worker", "Running")
    explain(api_cli, items)
    explained = api_cli.server
    assert explained.writes() == []
    code, _, _ = api_cli.on(items, "diff", "--pool", "worker")
    assert code == 1                                  # Pending -> Building: a change to show
    diffed = api_cli.server
    reads = [[(r.verb, r.resource, r.namespace, r.name) for r in s.log] for s in (explained, diffed)]
    assert reads[0] == reads[1]


@pytest.fixture
def api_cli(tmp_path, capsys, monkeypatch):
    from tests.conftest import ApiCli
    monkeypatch.setenv("OCL_RECONCILE_NOW", "2026-11-29T12:00:00Z")
    return ApiCli(tmp_path, capsys)
