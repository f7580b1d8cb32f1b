"""Our rollout MachineConfig has no controller ownerReference (issue 28 item 4): the render controller's
MachineConfig handlers (`addMachineConfig`, `updateMachineConfig`, `deleteMachineConfig`,
openshift/machine-config-operator pkg/controller/render/render_controller.go) enqueue only the owner when
`metav1.GetControllerOf(mc)` finds one (a reference with `controller: true`), else every pool that selects
the MachineConfig: with a controller reference, pools inheriting the image waited for the informer
resync. One written by an earlier version is patched once, guarded by its resourceVersion."""

from __future__ import annotations

import copy

import pytest

from tests.support import factory as F
from tests.unit.test_rollout import DIGESTS, build_once, ours, world, writes

pytestmark = pytest.mark.usefixtures("builder")


def controller_of(mc):
    """metav1.GetControllerOf: the first reference with controller true, else None."""
    return next((r for r in mc["metadata"].get("ownerReferences") or [] if r.get("controller")), None)


def test_our_machineconfig_has_no_controller_reference(any_cli):
    items = build_once(any_cli, world(), DIGESTS[0])
    (mc,) = ours(items)
    assert controller_of(mc) is None
    (ref,) = mc["metadata"]["ownerReferences"]        # the garbage collector's, for a pool deleted unwatched
    assert (ref["kind"], ref["name"], ref["uid"]) == ("MachineConfigPool", "worker", F.the_pool(items)["metadata"]["uid"])


def test_an_earlier_versions_controller_reference_is_patched_once(any_cli):
    items = build_once(any_cli, world(), DIGESTS[0])
    items = copy.deepcopy(items)
    (mc,) = ours(items)
    mc["metadata"]["ownerReferences"][0]["controller"] = True          # as the previous release wrote it
    code, after, err = any_cli.run(items)
    assert code == 0 and writes(err) == (0, 1, 0), err
    (fixed,) = ours(after)
    assert controller_of(fixed) is None and fixed["spec"] == mc["spec"]
    assert "no longer a controller reference" in err
    code, _, err = any_cli.run(after)
    assert code == 0 and writes(err) == (0, 0, 0), err
