"""The default `status` table's short cells, as kubectl and `oc` print them: the image as its
repository's last path element and a short digest (`os-image@sha256:94eb3cdbae45`, 12 hex as
docker's short IDs), the rendered config as its hash when it is named for its own pool
(`rendered-worker-<hash>`: POOL says the rest), the MESSAGE without a leading repeat of the
rendered config's name and cut to what is left of WIDTH columns. `-o wide`, `-o json` and `-o yaml`
keep every cell in full."""

from __future__ import annotations

import re
from collections.abc import Sequence

#: the default table fits this many columns (a pool's name or STATE longer than the example's may not)
WIDTH = 120
#: the MESSAGE keeps at least this many characters, whatever the other columns take
MIN_MESSAGE = 20
#: kubectl's padding between columns
GAP = 3
SHORT_HEX = 12
ELLIPSIS = "..."
_HEX = re.compile(r"[0-9a-f]{16,}")


def image(pullspec: str) -> str:
    """`registry/ns/os-image@sha256:<64 hex>` -> `os-image@sha256:<12 hex>`; a tag stays whole
    (`os-image:v1`); `<none>` stays."""
    if "/" not in pullspec and "@" not in pullspec:
        return pullspec
    name, at, digest = pullspec.partition("@")
    last = name.rsplit("/", 1)[-1]
    if not at:
        return last
    algorithm, colon, hexes = digest.partition(":")
    return f"{last}@{algorithm}{colon}{hexes[:SHORT_HEX]}"


def rendered(pool: str, name: str) -> str:
    """`rendered-<pool>-<hash>` -> the hash's first 12 hex; any other name stays whole."""
    prefix = f"rendered-{pool}-"
    rest = name[len(prefix):]
    return rest[:SHORT_HEX] if name.startswith(prefix) and _HEX.fullmatch(rest) else name


def message(text: str, rendered_name: str) -> str:
    """The message without the rendered config's name it begins with (RENDERED shows it)."""
    if rendered_name and text.startswith(rendered_name + " "):
        return text[len(rendered_name) + 1:]
    return text


def short_row(row: Sequence[str]) -> tuple[str, ...]:
    """A full row (POOL RENDERED STATE ROLLOUT IMAGE AGE MESSAGE) with short cells."""
    pool, name, state, rollout, pullspec, age, text = row
    return (pool, rendered(pool, name), state, rollout, image(pullspec), age, message(text, name))


def fit_message(columns: Sequence[str], body: Sequence[Sequence[str]]) -> list[tuple[str, ...]]:
    """The rows with the last column (MESSAGE) cut to what the others leave of WIDTH."""
    table = [columns, *body]
    used = sum(max(len(r[i]) for r in table) + GAP for i in range(len(columns) - 1))
    room = max(WIDTH - used, MIN_MESSAGE)
    return [(*r[:-1], cut(r[-1], room)) for r in body]


def cut(text: str, room: int) -> str:
    """At most `room` characters, `...` at the end of a cut one (at a word's end when one is near)."""
    if len(text) <= room:
        return text
    kept = text[:room - len(ELLIPSIS)]
    word = kept.rsplit(" ", 1)[0]
    return (word if len(word) >= len(kept) // 2 else kept).rstrip(" :;,") + ELLIPSIS
