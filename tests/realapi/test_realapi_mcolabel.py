"""The MCO's layering label on the real kube-apiserver (issue 28 item 1), as the reconciler's
ServiceAccount with the rollout Component installed, the real docker-registry, and the test-only render
controller playing the MCO: a pool an earlier release built under the MCO's label (which is the MCO's
own switch: ../shared/reference/mco-rollout.md section 7) is reported and keeps everything; the two
`oc label` commands of docs/admin.md ("Upgrading from the MCO's label"), run with the real kubectl,
move it to our label with one patch and no rebuild, no second image, no rollout. The audit log is
the witness of every write."""

from __future__ import annotations

import pytest

from reconcile.contract import annotations as A
from reconcile.core import mcolabel
from tests.realapi.test_realapi_rollout import build, ours, seed, writes
from tests.realapi.test_realapi_rollout import component as component  # noqa: F401 - the module fixture
from tests.support import factory as F
from tests.support import mcorender

pytestmark = pytest.mark.realapi

KEPT = (A.STATE, A.BUILD, A.IMAGE, A.BUILT_CONFIG, A.RENDERED, A.CONTENT, A.IMAGES, A.ARCH, A.TRANSITION)


def label(real, *changes):
    """`oc label` as the docs write it, with the real kubectl as the administrator."""
    for change in changes:
        real.api.kubectl("label", "mcp/worker", change, kubeconfig=real.admin)


@pytest.mark.parametrize("builder", sorted(F.BUILD_KINDS))
def test_the_mcos_label_is_reported_and_moving_it_changes_nothing_else(component, real, builder, tmp_path):
    from tests.support import realbuild as R
    R.require_registry()
    reg = R.Registry(tmp_path)
    try:
        seed(real, builder, f"{reg.host}/ocl/os-image", reg.host)
        image = build(real, R, reg, "a")
        mcorender.sync_api(real.api, "worker", F.BASE)
        assert real.run()[0] == 0 and real.run()[0] == 0               # recorded, then converged
        before, mc = {k: real.ann().get(k) for k in KEPT}, ours(real)
        owned = sorted(o["metadata"]["name"] for o in real.owned())

        # as an install of the previous release had it: the MCO's label, not ours
        label(real, f"{A.MCO_LAYERING_LABEL}=", f"{A.LAYERING_LABEL}-")
        mark = real.api.audit_mark()
        code, err = real.run()
        assert code == 2, err
        assert writes(real, mark) == [("create", "events"), ("patch", "machineconfigpools")]
        assert {k: real.ann().get(k) for k in KEPT} == before and real.ann()[A.IMAGE] == image
        assert ours(real)["metadata"]["resourceVersion"] == mc["metadata"]["resourceVersion"]
        assert sorted(o["metadata"]["name"] for o in real.owned()) == owned
        assert "the machine-config operator fails to sync" in real.ann()[A.MCO_LABEL]
        assert [e["type"] for e in real.events() if e["reason"] == mcolabel.REASON] == ["Warning"]
        mark = real.api.audit_mark()
        assert real.run()[0] == 2 and writes(real, mark) == []           # said once

        # the two commands the message and docs/admin.md give, in their order
        first, second = mcolabel.commands("worker")
        label(real, first.split()[-1], second.split()[-1])
        mark = real.api.audit_mark()
        code, err = real.run()
        assert code == 0, err
        assert writes(real, mark) == [("patch", "machineconfigpools")]  # only -ocl-reconciler.io/mco-label
        assert A.MCO_LABEL not in real.ann() and {k: real.ann().get(k) for k in KEPT} == before
        assert ours(real)["metadata"]["resourceVersion"] == mc["metadata"]["resourceVersion"]
        mark = real.api.audit_mark()
        assert real.run()[0] == 0 and writes(real, mark) == []
    finally:
        reg.stop()
