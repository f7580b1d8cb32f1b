"""`status -o json|yaml|name` and `status --check`: every pool's full state as a versioned document
(docs/contract.md, "status -o json"), its names as kubectl's `-o name`, and each row's verdict."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from reconcile.contract import annotations as A
from reconcile.contract import objects
from reconcile.output import status

API_VERSION = "ocl-reconciler.io/v1"
KIND = "PoolStatusList"
#: kubectl's `-o name` of a MachineConfigPool (a CRD: `<resource>.<group>/<name>`)
RESOURCE = "machineconfigpool.machineconfiguration.openshift.io"
#: what `--check` makes of each row, and its exit code (the worst row's)
DONE, PROGRESSING, FAILED, IGNORED = "done", "progressing", "failed", "ignored"
EXIT_PROGRESSING, EXIT_FAILED = 5, 4
#: the keys of each item, in the order `-o json` prints them (docs/contract.md lists them)
KEYS = ("name", "rendered", "state", "rollout", "image", "age", "transitionTime", "message",
        "arch", "stream", "builderImage", "verdict")
#: the table's cells that say nothing: null in -o json
_NULL = ("<none>", "<unknown>", "<invalid>", "-", "")
_ROLLOUT_FAILED = ("render failed", "overridden")
_ROLLOUT_DONE = ("rolled out", "merged, unchecked", "-")


def verdict(row: Sequence[str]) -> str:
    """A row's verdict: `failed` (Failed, Blocked, a render that failed, an image overridden),
    `done` (Succeeded, or Inherited, and rolled out, or no rollout to follow), `ignored` (OptedOut),
    else `progressing` (Pending, Building, no state yet, nodes still rolling out, held, rendering)."""
    state, rolled = row[2], row[3].split("; ")[0]
    if state == status.OPTED_OUT:
        return IGNORED
    if state in (A.FAILED, A.INTERRUPTED) or state.startswith(A.BLOCKED) \
            or rolled.startswith(_ROLLOUT_FAILED):
        return FAILED
    if state in (A.SUCCEEDED, status.INHERITED) and rolled in _ROLLOUT_DONE:
        return DONE
    return PROGRESSING


def exit_code(rows: Iterable[Sequence[str]]) -> int:
    """0 every pool done (or none to show), 4 one failed or is blocked, else 5 one is in progress."""
    found = {verdict(r) for r in rows}
    return EXIT_FAILED if FAILED in found else EXIT_PROGRESSING if PROGRESSING in found else 0


def items(pools: Sequence[Mapping[str, Any]], body: list[tuple[str, ...]]) -> list[dict[str, Any]]:
    """One item a row of `-o wide` (of `status.rows(pools, ...)`), every cell in full; null where
    the table shows `<none>`, `<unknown>`, `<invalid>` or `-`."""
    by_name = {objects.name(p): objects.annotations(p) for p in pools}
    wide = status.wide_rows(pools, body)
    out = []
    for r in wide:
        pool, rendered, state, rolled, image, age, arch, stream, builder, message = r
        since = by_name.get(pool, {}).get(A.TRANSITION) if state != status.INHERITED else None
        cells = (pool, rendered, state, rolled, image, age, since, message, arch, stream, builder,
                 verdict((pool, rendered, state, rolled)))
        out.append({k: None if v in _NULL else v for k, v in zip(KEYS, cells, strict=True)})
    return out


def document(pools: Sequence[Mapping[str, Any]], body: list[tuple[str, ...]]) -> dict[str, Any]:
    return {"apiVersion": API_VERSION, "kind": KIND, "items": items(pools, body)}


def as_json(doc: Mapping[str, Any]) -> str:
    return json.dumps(doc, indent=2) + "\n"


def as_yaml(doc: Mapping[str, Any]) -> str:
    from reconcile.contract import yamlio
    return yamlio.dump(doc)


def names(rows: Iterable[Sequence[str]]) -> str:
    return "".join(f"{RESOURCE}/{r[0]}\n" for r in rows)
