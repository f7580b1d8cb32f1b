"""YAML in and out, with libyaml when present; multi-line strings are written as `|` blocks so
Dockerfiles and scripts read naturally in diffs, renders and snapshots."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import yaml

Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_Base = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


class Dumper(_Base):  # type: ignore[misc, valid-type]
    pass


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
    style = "|" if "\n" in value and len(value) < 1_000_000 else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


Dumper.add_representer(str, _str)


def load(text: str) -> Any:
    return yaml.load(text, Loader=Loader)


def load_all(text: str) -> list[Any]:
    return list(yaml.load_all(text, Loader=Loader))


def dump(obj: Any) -> str:
    return yaml.dump(obj, Dumper=Dumper, sort_keys=False, default_flow_style=False,
                     allow_unicode=True, width=100)


def dump_all(objs: Iterable[Any]) -> str:
    return yaml.dump_all(list(objs), Dumper=Dumper, sort_keys=False, default_flow_style=False,
                         allow_unicode=True, width=100)
