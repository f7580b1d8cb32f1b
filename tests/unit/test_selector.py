"""contract/selector.py against the semantics of metav1.LabelSelector as Kubernetes documents and
implements them (kubernetes/apimachinery pkg/apis/meta/v1/helpers.go LabelSelectorAsSelector:
nil selects nothing, empty selects everything; pkg/labels/selector.go Requirement.Matches: NotIn and
DoesNotExist match an absent key; the docs' "Labels and Selectors" page: requirements are ANDed)."""

from __future__ import annotations

import pytest

from reconcile.contract import selector

ROLE = "machineconfiguration.openshift.io/role"
WORKER = {ROLE: "worker"}


def expr(key, op, *values):
    return {"matchExpressions": [{"key": key, "operator": op, **({"values": list(values)} if values else {})}]}


@pytest.mark.parametrize("sel, labels, want", [
    (None, WORKER, False),                                   # nil: labels.Nothing()
    ({}, WORKER, True),                                      # empty: labels.Everything()
    ({"matchLabels": {ROLE: "worker"}}, WORKER, True),
    ({"matchLabels": {ROLE: "infra"}}, WORKER, False),
    ({"matchLabels": {ROLE: "worker", "x": "y"}}, WORKER, False),    # ANDed
    (expr(ROLE, "In", "worker", "infra"), WORKER, True),
    (expr(ROLE, "In", "infra"), WORKER, False),
    (expr(ROLE, "In", "infra"), {}, False),
    (expr(ROLE, "NotIn", "worker"), WORKER, False),
    (expr(ROLE, "NotIn", "master"), WORKER, True),
    (expr(ROLE, "NotIn", "master"), {}, True),                # NotIn matches an absent key
    (expr(ROLE, "Exists"), WORKER, True),
    (expr(ROLE, "Exists"), {}, False),
    (expr(ROLE, "DoesNotExist"), WORKER, False),
    (expr(ROLE, "DoesNotExist"), {}, True),
    ({"matchLabels": {ROLE: "worker"}, **expr("x", "Exists")}, WORKER, False),   # both parts ANDed
])
def test_selects_as_apimachinery_does(sel, labels, want):
    assert selector.selects(sel, labels) is want


@pytest.mark.parametrize("sel", [
    expr(ROLE, "In"),                       # In and NotIn need values
    expr(ROLE, "Exists", "worker"),         # Exists and DoesNotExist take none
    expr(ROLE, "Equals", "worker"),         # no such operator
    {"matchExpressions": ["role=worker"]},
    "role=worker",
])
def test_a_selector_the_server_refuses_is_an_error(sel):
    with pytest.raises(selector.InvalidSelector):
        selector.selects(sel, WORKER)
