"""`status`: what the pool annotations say, as a table (POOL RENDERED STATE IMAGE AGE MESSAGE)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from reconcile.contract import annotations as A
from reconcile.contract import objects
from reconcile.core import lifecycle

COLUMNS = ("POOL", "RENDERED", "STATE", "IMAGE", "AGE", "MESSAGE")


def age(since: str | None, now: datetime) -> str:
    """kubectl's short ages: 45s, 12m, 5h, 3d."""
    if not since:
        return "<unknown>"
    try:
        then = datetime.strptime(since, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    except ValueError:
        return "<invalid>"
    seconds = max(0, int((now - then).total_seconds()))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size * (2 if unit != "m" else 1):
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def rows(pools: Iterable[Mapping[str, Any]], now: datetime) -> list[tuple[str, ...]]:
    out = []
    for pool in sorted(pools, key=objects.name):
        ann = objects.annotations(pool)
        if not lifecycle.opted_in(pool) and A.STATE not in ann:
            continue
        out.append((objects.name(pool), ann.get(A.RENDERED, "<none>"),
                    ann.get(A.STATE, "<none>") if lifecycle.opted_in(pool) else "OptedOut",
                    ann.get(A.IMAGE, "<none>"), age(ann.get(A.TRANSITION), now),
                    ann.get(A.MESSAGE, "")))
    return out


def table(pools: Iterable[Mapping[str, Any]], now: datetime) -> str:
    body = rows(pools, now)
    widths = [max(len(r[i]) for r in [COLUMNS, *body]) for i in range(len(COLUMNS))]
    lines = ["   ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
             for r in [COLUMNS, *body]]
    return "\n".join(lines) + "\n"
