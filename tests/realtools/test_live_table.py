"""docs/rollout.md's table of what each kind of change costs (issue 39 item 5), held to a fresh
measure (tests/support/livemeasure.py): builds and reboots per node with live changes, as the version
before them, and under the MCO's own layering's rule, the daemon's verdicts the real daemon's
(`ocl-mco-harness`, `make mco`). One test a row, so that workers share them."""

from __future__ import annotations

import re

import pytest

from tests.support import factory as F
from tests.support import livemeasure, mcoreal

DOC = F.ROOT / "docs/rollout.md"


def documented() -> dict[str, list[str]]:
    text = DOC.read_text()
    body = re.search(r"<!-- live-table -->\n(.*?)\n<!-- /live-table -->", text, re.S).group(1)
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in body.splitlines()[2:]]
    return {r[0]: r[1:] for r in rows}


def test_the_table_has_a_row_for_each_change_kind_in_order():
    assert list(documented()) == list(livemeasure.CHANGES)


@pytest.fixture(scope="module")
def binary():
    return mcoreal.harness()


@pytest.mark.parametrize("kind", list(livemeasure.CHANGES))
def test_each_row_is_what_a_measure_gives(binary, kind, monkeypatch):
    monkeypatch.setenv("OCL_RECONCILE_NOW", "2026-11-29T12:00:00Z")
    ours, before, mco = (livemeasure.measure(kind, "apply", binary), livemeasure.measure(kind, "rebuild", binary),
                         livemeasure.mco_layering(kind, binary))
    assert [livemeasure.cell(r) for r in (ours, before, mco)] == documented()[kind]
    assert ours.updates == 1 and ours.reboots <= mco.reboots      # the goal: never more than the MCO's
