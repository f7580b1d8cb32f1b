"""The OS stream a pool builds on is the one the MCO's REAL render controller renders it with
(../shared/reference/mco-render/: openshift/machine-config-operator @ 7ff337a4 run on recorded cases).
For every case with the OSStreams gate on and every pool it rendered, `osstream.of_pool` (product code)
must give the stream's extensions image the rendered config holds, and its base image where no
MachineConfig overrides osImageURL (the render controller then keeps the stream's base). Cases are
read from the files: no case names or counts here."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest

from reconcile.imagebuild.platform import osstream
from tests.support import factory as F

REF = Path(__file__).resolve().parents[2].parent / "shared" / "reference" / "mco-render"
OVERRIDDEN = "machineconfiguration.openshift.io/os-image-url-overridden"


def _load(name: str) -> Any:
    with gzip.open(REF / name, "rt", encoding="utf-8") as fh:
        return json.load(fh)


def _rendered_pools() -> list[Any]:
    if not REF.is_dir():
        return [pytest.param(None, None, marks=pytest.mark.skip(
            reason=f"{REF} is absent (../shared holds the real render controller's results)"))]
    cases = {c["name"]: c for c in _load("cases.json.gz")}
    out = [pytest.param(cases[r["case"]], r, id=f"{r['case']}/{r['pool']}") for r in _load("results.json.gz")
           if r.get("rendered") and cases[r["case"]].get("osStreamsGate") and cases[r["case"]].get("osImageStream")]
    assert out, "no case of the results renders a pool with OS streams on"
    return out


@pytest.mark.parametrize("case, result", _rendered_pools())
def test_the_pools_stream_is_the_one_the_render_controller_renders_it_with(case, result):
    pools = [o for o in case["objects"] if o["kind"] == "MachineConfigPool"]
    pool = next(p for p in pools if p["metadata"]["name"] == result["pool"])
    stream = osstream.of_pool(pool, case["osImageStream"], pools)
    spec = result["rendered"]["spec"]
    assert stream is not None
    assert stream.extensions_image == spec["baseOSExtensionsContainerImage"]
    if result["rendered"]["annotations"].get(OVERRIDDEN) != "true":
        assert stream.os_image == spec["osImageURL"]


def test_a_custom_pool_inherits_workers_stream_and_says_so():
    """GetEffectiveOSImageStreamName (pkg/controller/common/helpers.go, TestGetEffectiveOSImageStreamName):
    "custom pool inherits from worker"; "standard pool (master) uses default"."""
    singleton = F.osimagestream("rhel-9", "rhel-10")
    worker = F.pool("worker")
    worker["spec"]["osImageStream"] = {"name": "rhel-10"}
    infra, master = F.pool("infra"), F.pool("master")
    pools = [worker, infra, master]
    assert osstream.of_pool(infra, singleton, pools).name == "rhel-10"
    assert osstream.of_pool(master, singleton, pools).name == "rhel-9"
    assert osstream.effective(infra, pools) == ("rhel-10", "worker")
    infra["spec"]["osImageStream"] = {"name": "rhel-9"}              # its own wins
    assert osstream.of_pool(infra, singleton, pools).name == "rhel-9"
    del infra["spec"]["osImageStream"]
    worker["spec"]["osImageStream"] = {"name": "rhel-11"}            # worker's, unlisted: named as worker's
    with pytest.raises(osstream.Unlisted, match="inherits worker's OS stream 'rhel-11'"):
        osstream.of_pool(infra, singleton, pools)
