"""docs/rollout.md's table of what each kind of change costs (issue 39 item 5), on the real
kube-apiserver with the MCO's own render and node controllers and the real daemon's verdict for
every node update (tests/support/livereal.py). In `make test`: one change kind of each of the table's
kinds of answer, applied one after another on one cluster, with live changes: nothing for the node,
a special action with a drain, an administrator's own policy entry (merged by the MCO's own code), a
build and a reboot, a reboot without a build. `make bench-live` (OCL_LIVE_TABLE=all) measures every
row in both modes the same way and writes the table (OCL_LIVE_TABLE_OUT); tests/realtools/
test_live_table.py holds every row to the imitations' measure."""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

import pytest

from tests.realapi.test_realapi_gate import registry as registry  # noqa: F401 - the fixture
from tests.realapi.test_realapi_rollout import component as component  # noqa: F401 - the module fixture
from tests.realtools.test_live_table import documented
from tests.support import livemeasure, livereal

pytestmark = pytest.mark.realapi
SAMPLE = ["an SSH key", "registries.conf, unsafe", "an administrator's policy entry (restart a service)",
          "a plain /etc file", "kernel arguments"]
ALL = os.environ.get("OCL_LIVE_TABLE") == "all"
KINDS = list(livemeasure.CHANGES) if ALL else SAMPLE
MODES = ["apply", "rebuild"] if ALL else ["apply"]


@pytest.mark.parametrize("live", MODES)
def test_the_real_controllers_give_the_documented_rows(component, real, mco, registry, tmp_path, live):
    rows = livereal.measure(real, mco, registry, live, KINDS, tmp_path)
    if os.environ.get("OCL_LIVE_TABLE_OUT"):
        Path(os.environ["OCL_LIVE_TABLE_OUT"] + f".{live}").write_text(
            json.dumps({k: dataclasses.asdict(r) for k, r in rows.items()}))
    table = documented()
    column = MODES.index(live)
    assert {k: livemeasure.cell(r) for k, r in rows.items()} == {k: table[k][column] for k in KINDS}
    assert all(r.updates == 1 for r in rows.values()), rows
