"""An OS stream set on a pool after our MachineConfig exists (issue 29 item 13): the pool is Blocked
and the MachineConfig stays; the message must say that the MCO will not render the pool while both
exist (the render controller: "cannot override MachineConfig osImageURL and set MachineConfigPool
spec.osImageStream.name simultaneously", ../shared/reference/mco-render/, recorded by the real
controller), and what to remove."""

from __future__ import annotations

import copy

import pytest

from reconcile.contract import annotations as A
from reconcile.core import rollout
from tests.support import factory as F
from tests.support import mcorender
from tests.unit.test_rollout import DIGESTS, ann, build_once, ours, world

pytestmark = pytest.mark.usefixtures("builder")


def test_a_stream_set_after_our_machineconfig_says_the_mco_will_not_render_and_what_to_remove(any_cli):
    items = mcorender.sync(build_once(any_cli, world(), DIGESTS[0]), base_image=F.BASE)
    items = copy.deepcopy(any_cli.run(items)[1])
    F.the_pool(items)["spec"]["osImageStream"] = {"name": "rhel-10"}
    items.append(F.osimagestream("rhel-9", "rhel-10"))
    # the render controller's answer to both (the imitation is held to the real one's recorded results)
    synced = mcorender.sync(copy.deepcopy(items), base_image=F.BASE)
    (degraded,) = [c for c in F.the_pool(synced)["status"]["conditions"] if c["type"] == "RenderDegraded"]
    assert degraded["status"] == "True" and "cannot override MachineConfig osImageURL and set " \
        "MachineConfigPool spec.osImageStream.name simultaneously" in degraded["message"]
    code, after, _ = any_cli.run(items)
    assert code == 2 and ann(after)[A.STATE] == A.BLOCKED and ours(after)        # the MachineConfig stays
    said = ann(after)[A.MESSAGE]
    assert f"MachineConfig {rollout.name('worker')} exists" in said
    assert "will not render" in said
    assert "oc patch mcp/worker --type=json -p '[{\"op\": \"remove\", \"path\": \"/spec/osImageStream\"}]'" in said
    assert f"oc delete machineconfig {rollout.name('worker')}" in said

