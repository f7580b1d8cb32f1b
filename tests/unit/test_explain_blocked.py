"""`explain` and preflight's `pools` line predict what the run does, a pool the build material blocks
included (issue 29 item 5: with the push Secret deleted, explain printed `decision: START` and "this
run creates ocl-build-worker-... and records Pending" next to `Blocked -> Blocked (Secret ... not
found)`). The run is the reference: whatever it records, explain says and preflight fails on."""

from __future__ import annotations

import json

import pytest

from reconcile.contract import annotations as A
from tests.support import factory as F

pytestmark = pytest.mark.usefixtures("builder")


def without_push_secret():
    return F.cluster(F.pool("worker"), settings=[F.build_config(), F.osimageurl(), F.secret("pull-secret")])


def test_explain_says_blocked_when_the_run_blocks_on_a_missing_secret(any_cli):
    items = without_push_secret()
    code, out, _ = any_cli.on(items, "explain", "worker", "-o", "json")
    assert code == 0
    report = json.loads(out)
    code, after, _ = any_cli.run(items)                      # the reference: what the run records
    assert code == 2 and F.the_pool(after)["metadata"]["annotations"][A.STATE] == A.BLOCKED
    recorded = F.the_pool(after)["metadata"]["annotations"][A.MESSAGE]
    assert "push-secret" in recorded and "not found" in recorded
    assert report["transition"]["row"] == "BLOCKED"
    assert report["transition"]["because"] == recorded
    assert report["thisRun"]["stateAfter"] == A.BLOCKED
    assert not any("creates" in line for line in report["wouldChange"])
    code, text, _ = any_cli.on(items, "explain", "worker")
    assert "decision: BLOCKED" in text and "decision: START" not in text
