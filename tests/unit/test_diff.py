"""`diff`: golden outputs, each normalisation rule, kubectl conventions (exit codes, masking,
KUBECTL_EXTERNAL_DIFF, colour) and `-o json`."""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path

import jsonpatch
import kubelet
import pytest

from reconcile.contract import annotations as A
from reconcile.core import patches
from reconcile.core.actions import PoolPlan
from reconcile.core.actions import Write as Action
from reconcile.diff import view
from tests.support import factory as F
from tests.unit.test_builders import dockercfg_secret

GOLDEN = Path(__file__).parent.parent / "golden"


def golden(name: str, text: str) -> None:
    path = GOLDEN / f"diff-{name}.txt"
    if os.environ.get("UPDATE_GOLDEN"):
        path.write_text(text)
    assert text == path.read_text()


def diff(run_cli, items, *extra):
    return run_cli("diff", "--snapshot", str(run_cli.write(items)), "--color", "never", *extra)


def scenario(run_cli, name):
    """Clusters whose diff is golden: each shows one kind of change."""
    if name == "create":
        settings = [F.build_config(), F.osimageurl(),
                    dockercfg_secret("pull-secret", {"quay.io": {"auth": "c2VjcmV0LXB1bGw="}}),
                    F.secret("push-secret")]
        return F.cluster(settings=settings)
    started = run_cli.run(F.cluster())[1]
    if name == "state-change":
        return [kubelet.set_phase(o, "Running") if o["kind"] == "Pod" else o for o in started]
    if name == "patch-and-delete":
        done = [kubelet.set_phase(o, "Succeeded") if o["kind"] == "Pod" else o for o in started]
        return done
    if name == "opt-out":
        out = copy.deepcopy(started)
        del F.the_pool(out)["metadata"]["labels"][A.LAYERING_LABEL]
        return out
    raise ValueError(name)


@pytest.mark.parametrize("name", ["create", "state-change", "patch-and-delete", "opt-out"])
def test_golden_diffs(run_cli, name):
    code, out, err = diff(run_cli, scenario(run_cli, name))
    assert code == 1, err
    golden(name, out)


def test_golden_secret_change():
    old = F.secret("ocl-pull-worker-0123456789ab", payload={"auths": {"a": {"auth": "b2xkLXZhbHVl"}}})
    new = F.secret("ocl-pull-worker-0123456789ab", payload={"auths": {"a": {"auth": "bmV3LXZhbHVl"}}})
    old["metadata"]["annotations"] = {"kubectl.kubernetes.io/last-applied-configuration": json.dumps(old["data"]),
                                      "note": "not secret"}
    new["metadata"]["annotations"] = dict(old["metadata"]["annotations"])
    ops = patches.guarded(old, jsonpatch.make_patch(old, new).patch)
    plan = PoolPlan("worker", A.PENDING, A.PENDING, actions=[Action("patch", old, tuple(ops), patches.apply(old, ops))])
    text = view.unified([plan])
    for value in (old["data"][".dockerconfigjson"], new["data"][".dockerconfigjson"], "b2xkLXZhbHVl", "bmV3LXZhbHVl"):
        assert value not in text
    golden("secret-change", text)
    as_json = view.as_json([plan])
    assert "b2xkLXZhbHVl" not in as_json and "bmV3LXZhbHVl" not in as_json and '"***"' in as_json


def test_diff_after_run_is_empty(run_cli):
    after = run_cli.run(F.cluster(F.pool("worker"), F.pool("infra")))[1]
    assert diff(run_cli, after) == (0, "", "")


# --- normalisation rules ---------------------------------------------------------------------------
def _configmap_pair():
    desired = F.configmap("x", {"Dockerfile": "FROM a"})
    desired["metadata"] = {"name": "x", "namespace": F.NS, "labels": {"a": "b"}}
    return copy.deepcopy(desired), desired


@pytest.mark.parametrize("field, value", [
    ("status", {"phase": "whatever"}), ("metadata.uid", "other"), ("metadata.resourceVersion", "99"),
    ("metadata.managedFields", [{"manager": "kubectl"}]), ("metadata.creationTimestamp", "2020-01-01T00:00:00Z"),
    ("metadata.generation", 7),
])
def test_server_populated_fields_never_differ(field, value):
    live, desired = _configmap_pair()
    node = live
    *parents, leaf = field.split(".")
    for part in parents:
        node = node.setdefault(part, {})
    node[leaf] = value
    before, after = view.sides(Action("patch", live, (), desired))
    assert view.change_summary(before, after) == "no change"


def test_numbers_are_normalised():
    live = {"spec": {"replicas": 1.0, "ratio": 0.5}}
    desired = {"spec": {"replicas": 1, "ratio": 0.5}}
    assert view.comparable({"kind": "X", "metadata": {}, **live}) == view.comparable({"kind": "X", "metadata": {}, **desired})
    assert view.comparable({"kind": "X", "metadata": {}, "spec": {"replicas": 2.0}}) != \
        view.comparable({"kind": "X", "metadata": {}, **desired})


def test_set_like_lists_compare_without_order():
    before = {"kind": "Pod", "spec": {"containers": [{"env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]}]}}
    after = copy.deepcopy(before)
    after["spec"]["containers"][0]["env"].reverse()
    assert view.change_summary(before, after) == "no change"
    after["spec"]["containers"][0]["env"][0]["value"] = "3"
    assert view.change_summary(before, after) != "no change"


def test_change_summary_names_paths():
    before = {"metadata": {"annotations": {"a": "1", "gone": "x"}}, "data": {"k": "v"}}
    after = {"metadata": {"annotations": {"a": "2", "new": "y"}}, "data": {"k": "v"}}
    assert view.change_summary(before, after) == "~metadata.annotations.a +metadata.annotations.new -metadata.annotations.gone"


# --- kubectl conventions ---------------------------------------------------------------------------
def test_external_diff_gets_live_and_desired_trees(run_cli, tmp_path, monkeypatch):
    script = tmp_path / "fake-diff"
    record = tmp_path / "record.json"
    script.write_text(f"""#!/usr/bin/env python3
import json, os, sys
live, merged = sys.argv[-2], sys.argv[-1]
json.dump({{"args": sys.argv[1:-2], "live": sorted(os.listdir(live)), "merged": sorted(os.listdir(merged)),
           "pool": open(os.path.join(merged, "machineconfiguration.openshift.io.v1.MachineConfigPool.worker")).read()}},
          open({str(record)!r}, "w"))
sys.exit(7)
""")
    script.chmod(0o755)
    monkeypatch.setenv("KUBECTL_EXTERNAL_DIFF", f"{script} -u -N --bad;arg")
    code, out, _ = diff(run_cli, F.cluster())
    assert code == 7                                        # the program's exit status is ours
    seen = json.loads(record.read_text())
    assert seen["args"] == ["-u", "-N"]                     # kubectl keeps only ^[a-zA-Z0-9-=]+$
    assert seen["live"] == ["machineconfiguration.openshift.io.v1.MachineConfigPool.worker"]
    assert len(seen["merged"]) == 4 and "ocl-reconciler.io/state: Pending" in seen["pool"]
    monkeypatch.setenv("KUBECTL_EXTERNAL_DIFF", str(tmp_path / "missing-program"))
    code, _, err = diff(run_cli, F.cluster())
    assert code == 3 and "missing-program" in err


def test_color(run_cli):
    items = F.cluster()
    plain = diff(run_cli, items)[1]
    painted = run_cli("diff", "--snapshot", str(run_cli.write(items)), "--color", "always")[1]
    assert "\033[" not in plain and "\033[32m+" in painted and "\033[1m=====" in painted
    assert run_cli("diff", "--snapshot", str(run_cli.write(items)))[1] == plain   # auto: not a tty


def test_output_json_for_scripts(run_cli):
    code, out, _ = diff(run_cli, F.cluster(), "-o", "json")
    assert code == 1
    plan = json.loads(out)
    (pool,) = plan["pools"]
    assert (pool["pool"], pool["stateBefore"], pool["stateAfter"]) == ("worker", None, "Pending")
    assert [(a["verb"], a["kind"]) for a in pool["actions"]] == [
        ("create", "ConfigMap"), ("create", "ConfigMap"), ("create", "Pod"), ("create", "Event"),
        ("patch", "MachineConfigPool")]
    patch = pool["actions"][-1]["patch"]
    assert {"op": "add", "path": "/metadata/annotations/ocl-reconciler.io~1state", "value": "Pending"} in patch
    assert plan["summary"] == "3 to create, 1 to patch, 0 to delete; pools: worker - -> Pending"
    after = run_cli.run(F.cluster())[1]
    code, out, _ = diff(run_cli, after, "-o", "json")
    assert code == 0 and json.loads(out)["pools"][0]["actions"] == []
