"""What a waiting run waits for (core/waits.py), and what it says of it (output/waiting.py): pure
functions of pools and our objects as read. The expected states follow docs/rollout.md ("One run"):
a build that has not ended, our MachineConfig not in the pool's rendered config, the gate holding a
pool whose rendered config carries its image; never the nodes."""

from __future__ import annotations

from datetime import datetime, timedelta

from reconcile.contract import annotations as A
from reconcile.contract import naming
from reconcile.core import rollout
from reconcile.core import waits as W
from reconcile.core.rollout import hold
from reconcile.output import waiting
from tests.support import factory as F

IMAGE = F.REPO + "@sha256:" + "1" * 64
RENDERED = "rendered-worker-1"


def pool(state=A.SUCCEEDED, sources=(), checked=None, gate=None, paused=False, updated=2, total=2, mco_label=False):
    p = F.pool("worker")
    p["metadata"]["annotations"] = {A.STATE: state, A.IMAGE: IMAGE, A.TRANSITION: "2026-11-29T12:00:00Z"}
    if checked:
        p["metadata"]["annotations"][A.ROLLOUT] = f"{RENDERED}={checked}"
    if gate:
        p["metadata"]["annotations"][A.GATE] = gate
        p["metadata"]["annotations"][A.GATE_SINCE] = "2026-11-29T11:59:00Z"
    if mco_label:
        p["metadata"]["labels"][A.MCO_LAYERING_LABEL] = ""
    p["spec"]["paused"] = paused
    p["spec"]["configuration"] = {"name": RENDERED, "source": [{"kind": "MachineConfig", "name": n} for n in sources]}
    p["status"] = {"machineCount": total, "updatedMachineCount": updated, "configuration": {"name": "rendered-worker-0"}}
    return p


def ours(image=IMAGE):
    return {"apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfig",
            "metadata": {"name": rollout.name("worker"), "labels": rollout.labels("worker")},
            "spec": {"osImageURL": image}}


def build_pod(phase):
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "ocl-build-worker-1", "namespace": F.NS, "creationTimestamp": "2026-11-29T12:00:00Z",
                         "labels": {naming.MANAGED_BY: naming.MANAGER, naming.POOL_LABEL: naming.pool_label("worker")}},
            "spec": {"containers": [{"name": "build"}]}, "status": {"phase": phase}}


def test_a_running_build_is_waited_for_and_an_ended_one_is_not():
    (w,) = W.waits([pool(A.BUILDING)], [build_pod("Running")])
    assert (w.what, w.subject, w.phase) == (W.BUILD, f"Pod/{F.NS}/ocl-build-worker-1", "Running")
    assert W.waits([pool(A.BUILDING)], [build_pod("Failed")]) == []


def test_our_machineconfig_not_yet_rendered_is_waited_for():
    (w,) = W.waits([pool()], [ours()])
    assert (w.what, w.phase) == (W.RENDER, "rendering")
    (w,) = W.waits([pool(sources=[rollout.name("worker")])], [ours()])
    assert (w.what, w.phase) == (W.RENDER, "unchecked")          # rendered; no run checked it yet


def test_a_held_pool_whose_config_carries_its_image_waits_for_its_release_never_for_its_nodes():
    rendered = dict(sources=[rollout.name("worker")], checked=IMAGE)
    (w,) = W.waits([pool(**rendered, gate=hold.HELD, paused=True, updated=0)], [ours()])
    assert w.what == W.RELEASE
    assert W.waits([pool(**rendered, gate=hold.ROLLING, updated=0)], [ours()]) == []     # the nodes: never
    assert W.waits([pool(**rendered, gate=hold.HELD, paused=True)], [ours()]) == []     # rolled out, held again


def test_a_write_that_waits_for_another_pool_and_nothing_for_a_pool_with_the_mcos_label():
    (w,) = W.waits([pool()], [ours(F.REPO + "@sha256:" + "0" * 64)])
    assert w.what == W.WRITE
    assert W.waits([pool(mco_label=True)], [ours()]) == []


def test_lines_and_changes():
    now = datetime(2026, 11, 29, 12, 2, 5, tzinfo=F.NOW.tzinfo)
    running = W.Wait("worker", W.BUILD, "Pod/ns/b", "Running", "2026-11-29T12:00:00Z")
    assert running.line(now) == "worker: build Pod/ns/b Running, 2m05s"
    pending = W.Wait("worker", W.BUILD, "Pod/ns/b", "Pending", "2026-11-29T12:00:00Z")
    render = W.Wait("worker", W.RENDER, "ocl-osimageurl-worker into r", "rendering")
    assert waiting.changes([], [pending]) == ["waiting: worker: build Pod/ns/b Pending"]
    assert waiting.changes([pending], [running]) == ["waiting: worker: build Pod/ns/b Running"]
    assert waiting.changes([running], [running]) == []
    assert waiting.changes([running], [render]) == ["done: worker: build Pod/ns/b Running",
                                                    "waiting: worker: render ocl-osimageurl-worker into r rendering"]
    line = waiting.status_line([running, render], now + timedelta(seconds=1), 61, 60)
    assert line.startswith("waiting 1m01s more: worker: build") and len(line) == 60
