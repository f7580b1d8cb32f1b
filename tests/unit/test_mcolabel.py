"""Our own opt-in label (issue 28 item 1). The MCO's `machineconfiguration.openshift.io/layering-enabled`
is its switch: `pkg/operator/sync.go` `getLayeredMachineConfigPools` selects pools by it with no feature
gate, and for such a pool the operator's sync fails on 4.16+ (no MachineOSConfig) or starts its own
builder on 4.14/4.15 (../shared/reference/mco-rollout.md section 7). A pool carrying it is reported under
the Blocked rules, built by nobody, and keeps its record, objects and MachineConfig; moving it to our
label rebuilds and rolls out nothing. On snapshots and through the stand-in API, both builders, with the
test-only render controller playing the MCO."""

from __future__ import annotations

import copy
import json

import pytest

from reconcile import preflight
from reconcile.contract import annotations as A
from reconcile.core import mcolabel
from tests.support import factory as F
from tests.support import mcorender
from tests.unit.test_rollout import DIGESTS, ann, build_once, ours, reasons, world, writes

pytestmark = pytest.mark.usefixtures("builder")


def relabel(items, pool="worker", ours_too=False):
    """The pool as an install of the previous release labelled it: the MCO's label (and ours, if asked)."""
    items = copy.deepcopy(items)
    labels = F.the_pool(items, pool)["metadata"]["labels"]
    if not ours_too:
        del labels[A.LAYERING_LABEL]
    labels[A.MCO_LAYERING_LABEL] = ""
    return items


def move(items, pool="worker"):
    """The two `oc label` commands the message gives, in their order."""
    first, second = mcolabel.commands(pool)
    assert first == f"oc label mcp/{pool} {A.LAYERING_LABEL}=" and second == f"oc label mcp/{pool} {A.MCO_LAYERING_LABEL}-"
    items = copy.deepcopy(items)
    labels = F.the_pool(items, pool)["metadata"]["labels"]
    labels[A.LAYERING_LABEL] = ""
    del labels[A.MCO_LAYERING_LABEL]
    return items


def rolled_out(any_cli):
    """worker built, handed to the MCO, re-rendered and recorded: the state of a working install."""
    items = mcorender.sync(build_once(any_cli, world(), DIGESTS[0]), base_image=F.BASE)
    code, items, err = any_cli.run(items)
    assert code == 0 and writes(err) == (0, 1, 0), err
    return items


KEPT = (A.STATE, A.BUILD, A.IMAGE, A.BUILT_CONFIG, A.RENDERED, A.CONTENT, A.IMAGES, A.ARCH, A.TRANSITION)


@pytest.mark.parametrize("ours_too", [False, True], ids=["mco-label", "both-labels"])
def test_a_pool_with_the_mcos_label_is_reported_and_keeps_everything(any_cli, ours_too):
    items = rolled_out(any_cli)
    before = {k: ann(items).get(k) for k in KEPT}
    owned, mc = F.owned(items, "worker"), ours(items)
    code, after, err = any_cli.run(relabel(items, ours_too=ours_too))
    assert code == 2, err                                              # the Blocked rules
    assert writes(err) == (0, 1, 0)                                    # only our record of what was said
    assert {k: ann(after).get(k) for k in KEPT} == before              # nothing recorded is touched
    assert F.owned(after, "worker") == owned and ours(after) == mc     # nothing deleted, no MachineConfig change
    said = ann(after)[A.MCO_LABEL]
    assert "MachineConfigPool worker carries the MCO's label machineconfiguration.openshift.io/layering-enabled" in said
    assert "on 4.16.0 the machine-config operator fails to sync" in said and "upgrades cannot complete" in said
    assert " && ".join(mcolabel.commands("worker")) in said
    assert "pool worker: Succeeded -> Blocked" in err and "MachineConfigPool worker carries the MCO's label" in err
    (event,) = [e for e in F.find(after, "Event") if e["reason"] == mcolabel.REASON]
    assert event["type"] == "Warning" and event["message"] == said
    # said once: the next run writes nothing, and still exits 2
    code, again, err = any_cli.run(after)
    assert code == 2 and writes(err) == (0, 0, 0), err
    assert reasons(again) == reasons(after)
    # status and explain say it, for this release (the full message: -o wide)
    code, out, _ = any_cli.on(again, "status", "-o", "wide")
    (row,) = [r for r in out.splitlines() if r.startswith("worker ")]
    assert "Blocked (recorded Succeeded)" in row and "on 4.16.0 the machine-config operator" in row
    code, out, _ = any_cli.on(again, "explain", "worker", "-o", "json")
    report = json.loads(out)
    assert code == 0 and report["transition"]["row"] == "MCO_LABEL" and report["mcoLabel"]
    assert not report["optedIn"] and report["thisRun"]["actions"] == []
    assert " && ".join(mcolabel.commands("worker")) in report["wouldChange"][0]


def test_moving_the_pool_to_our_label_rebuilds_and_rolls_out_nothing(any_cli):
    items = rolled_out(any_cli)
    before = {k: ann(items).get(k) for k in KEPT}
    mc = ours(items)
    code, items, err = any_cli.run(relabel(items))
    assert code == 2, err
    code, after, err = any_cli.run(move(items))
    assert code == 0, err
    assert writes(err) == (0, 1, 0)                                    # the one patch: -mco-label
    assert A.MCO_LABEL not in ann(after) and {k: ann(after).get(k) for k in KEPT} == before
    assert ours(after) == mc and not [o for o in F.owned(after) if o["kind"] in ("Pod", "Build")]
    assert [e for e in F.find(after, "Event") if e["reason"] == "ImageRollout"] == \
        [e for e in F.find(items, "Event") if e["reason"] == "ImageRollout"]
    code, again, err = any_cli.run(after)
    assert code == 0 and writes(err) == (0, 0, 0), err


def test_a_new_pool_with_the_mcos_label_is_not_built(any_cli):
    code, items, err = any_cli.run(relabel(world()))
    assert code == 2, err
    assert not F.owned(items, "worker") and A.STATE not in ann(items) and A.MCO_LABEL in ann(items)
    assert not ours(items)


def test_removing_the_mcos_label_alone_is_an_opt_out(any_cli):
    items = rolled_out(any_cli)
    items = any_cli.run(relabel(items))[1]
    items = copy.deepcopy(items)
    del F.the_pool(items)["metadata"]["labels"][A.MCO_LAYERING_LABEL]
    code, after, err = any_cli.run(items)
    assert code == 0, err
    assert not [k for k in ann(after) if A.owned(k)] and not ours(after) and not F.owned(after, "worker")


@pytest.mark.parametrize("release, says", [
    ("4.18.3", "on 4.18.3 the machine-config operator fails to sync"),
    ("4.16.0", "on 4.16.0 the machine-config operator fails to sync"),
    ("4.15.9", "on 4.15.9 the MCO starts its own machine-os-builder"),
    ("4.14.1", "on 4.14.1 the MCO starts its own machine-os-builder"),
    ("", "on 4.16 and later the machine-config operator fails to sync"),
    ("5.0.0", "on 4.14 and 4.15 the MCO starts its own machine-os-builder"),
])
def test_what_the_label_does_depends_on_the_release(release, says):
    """release-4.14/4.15 `syncMachineOSBuilder` vs 4.16+ `ValidateOnClusterBuildConfig` (mco-rollout.md §7)."""
    assert says in mcolabel.problem("worker", release)


def test_preflight_fails_on_a_pool_with_the_mcos_label():
    from tests.unit.test_preflight import good, lines
    infra = F.pool("infra", opted_in=False)
    infra["metadata"]["labels"][A.MCO_LAYERING_LABEL] = ""
    found = [r for r in lines(good(pools=[F.pool(), infra]), "pools") if r.result == preflight.FAIL]
    (line,) = found
    assert "MachineConfigPool infra carries the MCO's label" in line.message
    assert line.hint == " && ".join(mcolabel.commands("infra"))
    only_it = lines(good(pools=[infra]), "pools")          # the only labelled pool: a failure, not "none labelled"
    assert [r.result for r in only_it] == [preflight.FAIL]
