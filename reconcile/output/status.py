"""`status`: what the pool annotations say, as a table (POOL RENDERED STATE ROLLOUT IMAGE AGE MESSAGE).
ROLLOUT is how far the MCO rendered and rolled out the image our MachineConfig hands it
(core/rollout/check.py), and what the rollout gate does to the pool (core/rollout/hold.py: `held`, `paused by
an administrator`, `released (...)`), `-` without either (`rollout: annotation`)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from reconcile.contract import annotations as A
from reconcile.contract import objects
from reconcile.core import decision, mcolabel, rollout
from reconcile.core.rollout import check as rolloutcheck
from reconcile.core.rollout import hold
from reconcile.output.shorten import GAP, fit_message, short_row

COLUMNS = ("POOL", "RENDERED", "STATE", "ROLLOUT", "IMAGE", "AGE", "MESSAGE")
#: `-o wide`: the full RENDERED, IMAGE and MESSAGE, and what the pool's last build was for and ran in
#: (docs/builder-image.md)
WIDE = ("ARCH", "STREAM", "BUILDER")
#: STATE of a pool no longer opted in that keeps our record, and of a pool inheriting our MachineConfig
OPTED_OUT, INHERITED = "OptedOut", "Inherited"


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


def rows(pools: Iterable[Mapping[str, Any]], now: datetime,
         machineconfigs: Iterable[Mapping[str, Any]] = ()) -> list[tuple[str, ...]]:
    """One row per pool we build (or left annotations on); with our rollout MachineConfigs
    (`rollout: machineconfig`), ROLLOUT says how far the MCO rolled the image out, and a pool
    that inherits one gets a row of its own."""
    pools = sorted(pools, key=objects.name)
    v = rollout.view(pools, machineconfigs, [objects.name(p) for p in pools if decision.opted_in(p)])
    out = []
    for pool in pools:
        ann = objects.annotations(pool)
        name = objects.name(pool)
        if mcolabel.carries(pool):      # built by nobody here; what the MCO does with it, and the fix
            recorded = f" (recorded {ann[A.STATE]})" if ann.get(A.STATE) else ""
            out.append((name, ann.get(A.RENDERED, "<none>"), f"{A.BLOCKED}{recorded}", "-",
                        ann.get(A.IMAGE, "<none>"), age(ann.get(A.TRANSITION), now),
                        ann.get(A.MCO_LABEL) or mcolabel.problem(name, "")))
        elif decision.opted_in(pool) or A.STATE in ann:
            state = ann.get(A.STATE, "<none>") if decision.opted_in(pool) else OPTED_OUT
            mc = v.ours.get(name)
            rolled = rolloutcheck.state(pool, mc, ann.get(A.IMAGE)).text if mc is not None else ""
            shown = "; ".join(t for t in (rolled, hold.shown(pool)) if t) or "-"
            message = "; ".join(m for m in (ann.get(A.MESSAGE, ""), ann.get(A.PRUNE_ERROR, "")) if m)
            out.append((name, ann.get(A.RENDERED, "<none>"), state, shown, ann.get(A.IMAGE, "<none>"),
                        age(ann.get(A.TRANSITION), now), message))
    for owner, mc in sorted(v.ours.items()):
        try:
            heirs = [p for p in v.selecting(owner) if objects.name(p) not in v.built
                     and not mcolabel.carries(p)]          # that one has its row: Blocked
        except ValueError:          # an invalid selector: the run blocks the pool saying so
            heirs = []
        out += [(objects.name(p), _rendered(p), INHERITED, inherited_progress(p, mc),
                 rollout.image_of(mc) or "<none>", "-",
                 f"rolls out pool {owner}'s image: it selects MachineConfig {objects.name(mc)}")
                for p in heirs]
    return out


def stray_lines(pools: Iterable[Mapping[str, Any]], machineconfigs: Iterable[Mapping[str, Any]],
           named: Iterable[Mapping[str, Any]], only: Iterable[str] = ()) -> list[str]:
    """The stray MachineConfigs (core/rollout/ `strays`) of these pools (all, and those of no pool,
    without `only`), one line each. status reads no settings, so an image of another repository is
    not seen here: run, diff and preflight say it."""
    chosen = set(only)
    return [s.line() for s in rollout.strays(pools, machineconfigs, None, named)
            if not chosen or s.pool in chosen or s.name[len(rollout.PREFIX):] in chosen]


def _rendered(pool: Mapping[str, Any]) -> str:
    return ((pool.get("spec") or {}).get("configuration") or {}).get("name") or "<none>"


def inherited_progress(pool: Mapping[str, Any], mc: Mapping[str, Any]) -> str:
    """A pool that inherits our MachineConfig: no run reads its rendered config (we record nothing
    on a pool we do not build), so only whether the MCO merged it (`rendering`, `render failed`,
    else `merged, unchecked`: its own MachineConfigs may still win), never node counts."""
    found = rolloutcheck.state(pool, mc)
    return "merged, unchecked" if found.kind == rolloutcheck.UNCHECKED else found.text


def wide_rows(pools: Iterable[Mapping[str, Any]], body: list[tuple[str, ...]]) -> list[tuple[str, ...]]:
    """The rows with ARCH, STREAM and BUILDER before MESSAGE: "-" where the pool records none (a
    pool without nodes, a cluster that lists no OS streams, an OpenShift Build), <none> where
    nothing was built yet."""
    by_name = {objects.name(p): objects.annotations(p) for p in pools}

    def cell(ann: Mapping[str, str], key: str) -> str:
        return "<none>" if A.ARCH not in ann else (ann.get(key) or "-")
    return [(*r[:6], *(cell(by_name.get(r[0], {}), k) for k in (A.ARCH, A.OS_STREAM, A.BUILDER_IMAGE)), r[6])
            for r in body]


def text(pools: Iterable[Mapping[str, Any]], body: list[tuple[str, ...]], wide: bool = False,
         headers: bool = True) -> str:
    """The table of `rows(pools, ...)`: the default one short (`short_row`: within WIDTH columns),
    `-o wide` in full with ARCH, STREAM and BUILDER; `--no-headers` leaves out the header line, as
    kubectl does."""
    if wide:
        columns, body = (*COLUMNS[:6], *WIDE, COLUMNS[6]), wide_rows(pools, body)
    else:
        columns, body = COLUMNS, [short_row(r) for r in body]
        body = fit_message(COLUMNS, body)
    table = [columns, *body] if headers else body
    if not table:
        return ""
    widths = [max(len(r[i]) for r in table) for i in range(len(columns))]
    lines = [(" " * GAP).join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in table]
    return "\n".join(lines) + "\n"
