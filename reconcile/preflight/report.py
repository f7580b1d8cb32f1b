"""A check's result lines and their forms: text (one line a result, then the counts), JSON (a
list of {check, result, message, hint}) and the exit code (0 all ok, 1 a warning, 2 a failure)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass

OK, WARN, FAIL = "ok", "warn", "fail"
EXIT = {OK: 0, WARN: 1, FAIL: 2}
APPLY_BASE = ("re-apply your overlay: kubectl kustomize <your overlay> | oc apply -f - (not kustomize/base "
              "alone: it sets the CronJob's image back to the placeholder ocl-reconciler:latest)")


@dataclass(frozen=True)
class Result:
    check: str
    result: str
    message: str
    hint: str = ""


#: A check's lines before it is named: (result, message) or (result, message, hint).
Line = tuple[str, ...]


def exit_code(results: Iterable[Result]) -> int:
    """0 all ok, 1 a warning, 2 a failure."""
    return max((EXIT[r.result] for r in results), default=0)


def text(results: list[Result]) -> str:
    """One line a result: `RESULT  CHECK  MESSAGE -> what to do`, then the counts."""
    width = max((len(r.check) for r in results), default=0)
    lines = [f"{r.result:<4}  {r.check:<{width}}  {r.message}" + (f" -> {r.hint}" if r.hint else "")
             for r in results]
    counts = {k: sum(r.result == k for r in results) for k in (OK, WARN, FAIL)}
    lines.append(f"preflight: {counts[OK]} ok, {counts[WARN]} warning(s), {counts[FAIL]} failure(s) "
                 "(docs/preflight.md)")
    return "\n".join(lines) + "\n"


def as_json(results: list[Result]) -> str:
    """A list of {check, result, message, hint}."""
    return json.dumps([asdict(r) for r in results], indent=2) + "\n"
