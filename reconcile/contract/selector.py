"""Kubernetes label selectors (`metav1.LabelSelector`: `matchLabels` and `matchExpressions`), as a
pool's `spec.machineConfigSelector` holds one, evaluated as kubernetes/apimachinery does
(`pkg/apis/meta/v1/helpers.go`, `LabelSelectorAsSelector`): a missing (null) selector selects
nothing, an empty one everything; every requirement must hold."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


class InvalidSelector(ValueError):
    """A selector the API server would refuse (an unknown operator, values where none belong)."""


def _requirement(expr: Any) -> tuple[str, str, tuple[str, ...]]:
    if not isinstance(expr, Mapping):
        raise InvalidSelector(f"matchExpressions item {expr!r} is not an object")
    key, op, values = expr.get("key"), expr.get("operator"), expr.get("values") or []
    if not isinstance(key, str) or not isinstance(values, list):
        raise InvalidSelector(f"matchExpressions item {dict(expr)!r} needs a key and a list of values")
    if op in ("In", "NotIn") and not values:
        raise InvalidSelector(f"matchExpressions {key}: operator {op} needs values")
    if op in ("Exists", "DoesNotExist") and values:
        raise InvalidSelector(f"matchExpressions {key}: operator {op} takes no values")
    if op not in ("In", "NotIn", "Exists", "DoesNotExist"):
        raise InvalidSelector(f"matchExpressions {key}: unknown operator {op!r}")
    return key, op, tuple(str(v) for v in values)


def selects(selector: Mapping[str, Any] | None, labels: Mapping[str, str]) -> bool:
    """Does `selector` select an object with these labels? Raises InvalidSelector."""
    if selector is None:
        return False
    if not isinstance(selector, Mapping):
        raise InvalidSelector(f"selector {selector!r} is not an object")
    match_labels = selector.get("matchLabels") or {}
    if not isinstance(match_labels, Mapping):
        raise InvalidSelector("matchLabels is not an object")
    if any(labels.get(k) != str(v) for k, v in match_labels.items()):
        return False
    for key, op, values in map(_requirement, selector.get("matchExpressions") or []):
        present = key in labels
        if (op == "In" and not (present and labels[key] in values)) \
                or (op == "NotIn" and present and labels[key] in values) \
                or (op == "Exists" and not present) or (op == "DoesNotExist" and present):
            return False
    return True
