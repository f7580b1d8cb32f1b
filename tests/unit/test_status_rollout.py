"""`status` says `rolled out` only for the image the pool's rendered config holds (issue 29 item 3: it
said `rolled out 3/3` for a new image before any rendered config held it, as `progress()` only checked
that our MachineConfig is among the rendered config's sources, which stays true after the first
rollout). The render controller plays the MCO (tests/support/mcorender.py)."""

from __future__ import annotations

import pytest

from reconcile.contract import annotations as A
from tests.support import factory as F
from tests.support import mcorender
from tests.unit.test_rollout import DIGESTS, ann, build_once, ours, source_mc, world

pytestmark = pytest.mark.usefixtures("builder")


def row(any_cli, items, pool="worker"):
    code, out, _ = any_cli.on(items, "status")
    assert code == 0
    return next(r for r in out.splitlines() if r.startswith(f"{pool} "))


def test_a_new_image_is_not_rolled_out_until_a_rendered_config_holds_it(any_cli):
    items = mcorender.sync(build_once(any_cli, world(), DIGESTS[0]), base_image=F.BASE)
    items = any_cli.run(items)[1]
    for pool in F.find(items, "MachineConfigPool"):           # every machine on the rendered config
        pool["status"]["configuration"] = dict(pool["spec"]["configuration"])
        pool["status"]["updatedMachineCount"] = pool["status"]["machineCount"] = 2
    assert "rolled out" in row(any_cli, items)
    # a content change: a new build, and our MachineConfig points at its image; the MCO has not rendered it
    items.append(source_mc("99-worker-motd", "worker", {"/etc/motd": "hello"}))
    items = mcorender.sync(items, base_image=F.BASE)
    items = build_once(any_cli, items, DIGESTS[1])
    (mc,) = ours(items)
    assert mc["spec"]["osImageURL"] == ann(items)[A.IMAGE] == f"{F.REPO}@{DIGESTS[1]}"
    rendered = F.find(items, "MachineConfig", F.the_pool(items)["spec"]["configuration"]["name"])[0]
    assert rendered["spec"]["osImageURL"] != mc["spec"]["osImageURL"]          # still the old image
    shown = row(any_cli, items)
    assert "rolled out" not in shown and "2/2" not in shown, shown
