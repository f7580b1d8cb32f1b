"""What explain's "because" and "what would change it" say for two rows no test held (issue 29): a
settings change after a handled rebuild token is named as what changed (not the token), and a RETRY
says which attempt this run starts, the one the run then creates."""

from __future__ import annotations

import copy

import pytest

from reconcile.contract import annotations as A
from tests.standin.test_explain import explain
from tests.standin.test_lifecycle_cli import ann, build_pod, finish, started
from tests.support import factory as F

pytestmark = pytest.mark.usefixtures("builder")


def test_a_settings_change_after_a_handled_token_is_named_not_the_token(any_cli):
    items = copy.deepcopy(started(any_cli))
    F.the_pool(items)["metadata"]["annotations"][A.REBUILD] = "t1"
    items = any_cli.run(items)[1]                                   # the token is handled: a new build
    items = any_cli.run(finish(items, "worker", "Succeeded", digest="sha256:" + "1" * 64))[1]
    assert ann(items)[A.REBUILD_HANDLED] == ann(items)[A.REBUILD] == "t1" and ann(items)[A.STATE] == A.SUCCEEDED
    F.find(items, "ConfigMap", "on-cluster-build-config")[0]["data"]["finalImagePullspec"] = \
        "registry.example.com:5000/ocl/other-os-image:latest"
    report = explain(any_cli, items)
    because = report["transition"]["because"]
    assert report["transition"]["row"] == "START"
    assert "rebuild token" not in because and "the settings" in because, because


def test_a_retry_says_which_attempt_it_starts(any_cli):
    items = copy.deepcopy(started(any_cli))
    items = [o for o in items if not (o["kind"] in ("Pod", "Build") and o in F.owned(items, "worker"))]
    report = explain(any_cli, items)
    assert report["transition"]["row"] == "RETRY"
    assert "this run starts attempt 2" in report["wouldChange"][0]
    code, after, _ = any_cli.run(items)
    assert code == 0 and ann(after)[A.ATTEMPT] == "2"
    assert build_pod(after)["metadata"]["name"].startswith("ocl-build2-")
