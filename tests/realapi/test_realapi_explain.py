"""`ocl-reconcile explain` on the real kube-apiserver, as the reconciler's ServiceAccount: the
live path follows the build a run made, and the audit log shows it reads what `diff --pool` reads
and writes nothing (its RBAC is the run's: no verb of its own)."""

from __future__ import annotations

import json

import pytest

from reconcile.contract import annotations as A
from tests.realapi.test_realapi import BUILDERS, cluster
from tests.support import realserver

pytestmark = pytest.mark.realapi


def report(real, pool="worker"):
    code, out, err = real.cli("explain", pool, "-o", "json")
    assert code == 0, err
    return json.loads(out)


@pytest.mark.parametrize("builder", BUILDERS)
def test_explain_follows_a_live_build_and_writes_nothing(real, builder):
    real.seed(cluster(builder))
    assert report(real)["transition"]["row"] == "START"
    assert real.run()[0] == 0
    build = real.build_object()
    real.finish("Running")
    mark = real.api.audit_mark()
    seen = report(real)
    explained = real.api.audit(mark, realserver.RECONCILER)
    assert seen["transition"]["row"] == "PROGRESS"
    assert seen["liveBuild"]["name"] == build["metadata"]["name"]
    assert seen["liveBuild"]["phase"] == "Running"
    assert seen["recorded"]["build"] == real.ann()[A.BUILD]
    assert [e["verb"] for e in explained if e["verb"] not in ("get", "list")] == []
    mark = real.api.audit_mark()
    assert real.cli("diff", "--pool", "worker")[0] == 1          # Pending -> Building
    diffed = real.api.audit(mark, realserver.RECONCILER)

    def reads(audit):
        return sorted((e["verb"], e["objectRef"]["resource"], e["objectRef"].get("namespace", ""),
                       e["objectRef"].get("name", "")) for e in audit)
    assert reads(explained) == reads(diffed)
