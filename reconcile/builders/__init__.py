"""The image builders, one module each, behind the interface in `base` (looked up by type)."""

from __future__ import annotations

from types import ModuleType

from reconcile import settings
from reconcile.builders import pod

BUILDERS: dict[str, ModuleType] = {settings.CUSTOM_POD_BUILDER: pod}


def for_type(builder_type: str) -> ModuleType | None:
    return BUILDERS.get(builder_type)
